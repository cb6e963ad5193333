// The transform chain inside the runtime, through a real Kafka broker: records are rewritten
// before the plugin sees them, filtered records still move the committed offset (the last one
// of a batch too), and a record a transform fails on follows the block's bad-record policy.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.h"

namespace picomq::test {
namespace {

const char* kChain = R"(
[[transforms]]
type = "filter"
drop_when = { field = "status", equals = "test" }

[[transforms]]
type = "rename_fields"
fields = [ { from = "ccy", to = "currency" } ]

[[transforms]]
type = "cast"
fields = [ { path = "amount", to = "float" } ]

[[transforms]]
type = "add_fields"
fields = [ { path = "meta.topic", compute = "topic" }, { path = "meta.offset", compute = "offset" } ]
)";

std::vector<std::string> order_values() {
  return {
      R"({"n":0,"status":"ok","ccy":"EUR","amount":"12.50"})",
      R"({"n":1,"status":"test","ccy":"EUR"})",
      R"({"n":2,"status":"ok","amount":"abc"})",
      R"({"n":3,"status":"ok","ccy":"USD","amount":7})",
      R"({"n":4,"status":"test"})",
  };
}

std::string definition(const std::string& key, const std::string& topic, const std::string& policy,
                       const std::string& plugin_config) {
  return testkit_definition(key, "topics = [\"" + topic + "\"]\non_bad_record = \"" + policy + "\"", plugin_config) +
         kChain;
}

TEST(Transforms, RewriteRecordsFilteredOnesStillMoveTheOffsetAndFailuresAreBadRecords) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("tx");
  kafka.create_topic(topic);
  kafka.produce_values(topic, order_values());
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", definition("tx", topic, "skip", testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-tx", topic) == 5; }, 30s))
      << "past the filtered last record too\n"
      << rt.log();
  EXPECT_EQ(rt.sink_state("tx"), "running");
  const auto log = TestkitLog::read(rt.dir() / "records.log");
  ASSERT_EQ(log.payloads.size(), 2u) << "offsets 1 and 4 filtered, 2 a bad record";
  EXPECT_EQ(nlohmann::json::parse(log.payloads[0]),
            nlohmann::json::parse(R"({"n":0,"status":"ok","currency":"EUR","amount":12.50,"meta":{"topic":")" + topic +
                                  R"(","offset":0}})"));
  EXPECT_EQ(nlohmann::json::parse(log.payloads[1])["currency"], "USD");
  EXPECT_EQ(log.ids, (std::vector<std::string>{topic + ":0:0", topic + ":0:3"}));
  EXPECT_NE(rt.log().find("skipped bad record " + topic + "[0] at offset 2 (transform): transforms[2] (cast)"),
            std::string::npos)
      << rt.log();
  EXPECT_TRUE(wait_until(
      [&] {
        auto b = rt.block_status("tx");
        return b.value("filtered_records", 0) == 2 && b.value("skipped_records", 0) == 1;
      },
      10s))
      << rt.status().dump();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Transforms, UnderFailATransformFailureStopsTheSinkAtThatRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("txfail");
  kafka.create_topic(topic);
  kafka.produce_values(topic, order_values());
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", definition("txfail", topic, "fail", testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(rt.wait_state("txfail", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("txfail").value("message", "");
  EXPECT_NE(message.find("transform failed on record " + topic + "[0] at offset 2: transforms[2] (cast)"),
            std::string::npos)
      << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed("picomq-connect-sink-txfail", topic), 2) << "written 0, filtered 1, stopped at 2";
  EXPECT_EQ(TestkitLog::read(rt.dir() / "records.log").ids, (std::vector<std::string>{topic + ":0:0"}));
}

}  // namespace
}  // namespace picomq::test
