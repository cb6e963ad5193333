#include "picomq/kit/units.hpp"

#include <gtest/gtest.h>

namespace picomq::kit {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("100ms", nullptr), 100ms);
  EXPECT_EQ(parse_duration("2s", nullptr), 2000ms);
  EXPECT_EQ(parse_duration("5m", nullptr), 300000ms);
  EXPECT_EQ(parse_duration("1h", nullptr), 3600000ms);
  EXPECT_EQ(parse_duration("0ms", nullptr), 0ms);
}

TEST(ParseDuration, AcceptsFractionsThatAreWholeMilliseconds) {
  EXPECT_EQ(parse_duration("1.5s", nullptr), 1500ms);
  EXPECT_EQ(parse_duration("0.25s", nullptr), 250ms);
  EXPECT_EQ(parse_duration("1.5m", nullptr), 90000ms);
  EXPECT_EQ(parse_duration("2.000ms", nullptr), 2ms);
  std::string error;
  EXPECT_EQ(parse_duration("0.5ms", &error), std::nullopt);
  EXPECT_NE(error.find("whole number of milliseconds"), std::string::npos) << error;
}

TEST(ParseDuration, AllowsSpaceBetweenNumberAndUnit) { EXPECT_EQ(parse_duration("100 ms", nullptr), 100ms); }

TEST(ParseDuration, RejectsMissingUnit) {
  std::string error;
  EXPECT_EQ(parse_duration("100", &error), std::nullopt);
  EXPECT_EQ(error, "invalid duration '100': missing unit (ms, s, m or h, e.g. \"100ms\", \"1.5s\")");
}

TEST(ParseDuration, RejectsWordsSignsAndFinerUnits) {
  for (const char* text : {"fast", "-1s", "+1s", "250us", "", "s", "1.s", ".5s", "1.5.5s", "1 s x", " 1s", "1S"}) {
    std::string error;
    EXPECT_EQ(parse_duration(text, &error), std::nullopt) << text;
    EXPECT_NE(error.find(std::string("'") + text + "'"), std::string::npos) << error;
  }
  std::string error;
  parse_duration("-1s", &error);
  EXPECT_NE(error.find("no sign"), std::string::npos) << error;
  parse_duration("250us", &error);
  EXPECT_NE(error.find("unknown unit 'us'"), std::string::npos) << error;
}

TEST(ParseDuration, RejectsOverflow) {
  std::string error;
  EXPECT_EQ(parse_duration("99999999999999999999h", &error), std::nullopt);
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
  EXPECT_EQ(parse_duration("9999999999999999h", &error), std::nullopt);
}

TEST(ParseByteSize, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("64MiB", nullptr), 64u << 20);
  EXPECT_EQ(parse_byte_size("512KiB", nullptr), 512u << 10);
  EXPECT_EQ(parse_byte_size("1GiB", nullptr), 1u << 30);
  EXPECT_EQ(parse_byte_size("10MB", nullptr), 10'000'000u);
  EXPECT_EQ(parse_byte_size("1kB", nullptr), 1000u);
  EXPECT_EQ(parse_byte_size("100B", nullptr), 100u);
  EXPECT_EQ(parse_byte_size("1.5KiB", nullptr), 1536u);
}

TEST(ParseByteSize, RejectsBadSizes) {
  for (const char* text : {"64", "64mib", "lots", "-1MiB", "1.5B", "64 MiBs"}) {
    std::string error;
    EXPECT_EQ(parse_byte_size(text, &error), std::nullopt) << text;
    EXPECT_NE(error.find("invalid byte size"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace picomq::kit
