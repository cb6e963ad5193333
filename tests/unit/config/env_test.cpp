#include "config/env.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "test_support.h"

namespace picomq::config {
namespace {

using testing::fake_env;

TEST(InterpolateEnv, ReplacesVariables) {
  auto env = fake_env({{"HOST", "db"}, {"PORT", "5432"}, {"EMPTY", ""}});
  EXPECT_EQ(interpolate_env("postgres://${HOST}:${PORT}/app", env, nullptr), "postgres://db:5432/app");
  EXPECT_EQ(interpolate_env("[${EMPTY}]", env, nullptr), "[]");
  EXPECT_EQ(interpolate_env("no variables", env, nullptr), "no variables");
}

TEST(InterpolateEnv, DoubleDollarIsALiteral) {
  auto env = fake_env({{"A", "x"}});
  EXPECT_EQ(interpolate_env("$${A}", env, nullptr), "${A}");
  EXPECT_EQ(interpolate_env("$${A} ${A}", env, nullptr), "${A} x");
}

TEST(InterpolateEnv, LoneDollarIsKept) {
  auto env = fake_env();
  EXPECT_EQ(interpolate_env("price $5 and orders\\..*$", env, nullptr), "price $5 and orders\\..*$");
}

TEST(InterpolateEnv, ValuesAreNotScannedAgain) {
  auto env = fake_env({{"A", "${B}"}, {"B", "no"}});
  EXPECT_EQ(interpolate_env("${A}", env, nullptr), "${B}");
}

TEST(InterpolateEnv, UnsetVariableIsAnErrorNamingIt) {
  std::string error;
  EXPECT_EQ(interpolate_env("x ${DB_PASSWORD} y", fake_env(), &error), std::nullopt);
  EXPECT_EQ(error, "environment variable 'DB_PASSWORD' is not set");
}

TEST(InterpolateEnv, MalformedReferencesAreErrors) {
  std::string error;
  EXPECT_EQ(interpolate_env("${OPEN", fake_env(), &error), std::nullopt);
  EXPECT_NE(error.find("unterminated"), std::string::npos) << error;
  EXPECT_EQ(interpolate_env("${}", fake_env(), &error), std::nullopt);
  EXPECT_NE(error.find("invalid environment variable name"), std::string::npos) << error;
  EXPECT_EQ(interpolate_env("${A-B}", fake_env(), &error), std::nullopt);
  EXPECT_EQ(interpolate_env("${1A}", fake_env(), &error), std::nullopt);
}

TEST(ProcessEnv, ReadsTheRealEnvironment) {
  ::setenv("PICOMQ_CONFIG_TEST_VAR", "hello", 1);
  ::unsetenv("PICOMQ_CONFIG_TEST_UNSET");
  auto env = process_env();
  EXPECT_EQ(env("PICOMQ_CONFIG_TEST_VAR"), "hello");
  EXPECT_EQ(env("PICOMQ_CONFIG_TEST_UNSET"), std::nullopt);
}

}  // namespace
}  // namespace picomq::config
