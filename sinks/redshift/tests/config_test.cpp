// The Redshift sink's options in the kit's fake host, without a server: what a bad
// [plugin_config] is told, naming the option.
#include <gtest/gtest.h>

#include "picomq/kit/testing/fake_host.hpp"

namespace {

using picomq::kit::testing::FakeHost;
using picomq::kit::testing::joined;

TEST(RedshiftConfig, BadOptionsAreRefusedNamingTheOption) {
  auto host = FakeHost::load(REDSHIFT_SINK_PLUGIN);
  const std::string ok =
      R"("connection_string": "host=x dbname=dev user=u", "target_table": "public.orders", "s3_bucket": "b")";
  EXPECT_TRUE(host->check("{" + ok + R"(, "aws_access_key_id": "k", "aws_secret_access_key": "s"})").empty());
  const auto keys = joined(host->check("{" + ok + "}"));
  EXPECT_NE(keys.find("aws_access_key_id"), std::string::npos) << keys;
  const auto half = joined(host->check("{" + ok + R"(, "aws_access_key_id": "k"})"));
  EXPECT_NE(half.find("go together"), std::string::npos) << half;
  const auto table = joined(host->check(
      R"({"connection_string": "host=x", "target_table": "a.b.c", "s3_bucket": "b", "aws_access_key_id": "k", "aws_secret_access_key": "s"})"));
  EXPECT_NE(table.find("target_table: must be table or schema.table"), std::string::npos) << table;
  const auto dialect = joined(
      host->check("{" + ok + R"(, "aws_access_key_id": "k", "aws_secret_access_key": "s", "dialect": "mysql"})"));
  EXPECT_NE(dialect.find("dialect"), std::string::npos) << dialect;
}

}  // namespace
