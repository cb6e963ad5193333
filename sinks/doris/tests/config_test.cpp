// The Doris sink's options in the kit's fake host, without a server: what a bad [plugin_config]
// is told, naming the option.
#include <gtest/gtest.h>

#include "picomq/kit/testing/fake_host.hpp"

namespace {

using picomq::kit::testing::FakeHost;
using picomq::kit::testing::joined;

TEST(DorisConfig, BadOptionsAreRefusedNamingTheOption) {
  auto host = FakeHost::load(DORIS_SINK_PLUGIN);
  EXPECT_TRUE(host->check(R"({"url": "http://fe:8030", "database": "db", "table": "t"})").empty());
  const auto missing = joined(host->check(R"({"url": "http://fe:8030"})"));
  EXPECT_NE(missing.find("database"), std::string::npos) << missing;
  EXPECT_NE(missing.find("table"), std::string::npos) << missing;
  const auto url = joined(host->check(R"({"url": "fe:8030", "database": "db", "table": "t"})"));
  EXPECT_NE(url.find("url: must start with http:// or https://"), std::string::npos) << url;
  const auto creds = joined(host->check(R"({"url": "http://root:pw@fe:8030", "database": "db", "table": "t"})"));
  EXPECT_NE(creds.find("must not hold credentials"), std::string::npos) << creds;
  const auto name = joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t; DROP"})"));
  EXPECT_NE(name.find("table: must be a Doris name"), std::string::npos) << name;
  const auto prefix =
      joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t", "label_prefix": "a b"})"));
  EXPECT_NE(prefix.find("label_prefix: must hold only [-_A-Za-z0-9:]"), std::string::npos) << prefix;
  const auto paths = joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t", "jsonpaths": "$.a"})"));
  EXPECT_NE(paths.find("jsonpaths: must be a JSON array"), std::string::npos) << paths;
  const auto ratio =
      joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t", "max_filter_ratio": 2.0})"));
  EXPECT_NE(ratio.find("max_filter_ratio: must be between 0 and 1"), std::string::npos) << ratio;
  const auto gzip =
      joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t", "compression": "gzip"})"));
  EXPECT_NE(gzip.find("compression"), std::string::npos) << gzip;
  const auto span = joined(host->check(R"({"url": "http://fe", "database": "db", "table": "t", "label_span": 0})"));
  EXPECT_NE(span.find("label_span"), std::string::npos) << span;
}

}  // namespace
