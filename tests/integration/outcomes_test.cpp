// Every outcome on every plane, through the real broker: one batch of ten records, the write
// carrying offset 4 fails once in the given way. What a user observes: what the plugin wrote,
// the committed offset read back from the group coordinator, and the sink's state.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <set>

#include "harness.h"

namespace picomq::test {
namespace {

struct Case {
  std::string plugin;   // testkit variant
  std::string outcome;  // fail_status
};

std::string case_name(const testing::TestParamInfo<Case>& info) { return info.param.plugin + "_" + info.param.outcome; }

class PlaneOutcome : public testing::TestWithParam<Case> {};

TEST_P(PlaneOutcome, IsHandledAsTheAbiSays) {
  const Case& c = GetParam();
  const bool rows = c.plugin == "testkit_rows";
  auto& kafka = Kafka::shared();
  const auto key = "o_" + c.plugin + "_" + c.outcome;
  const auto topic = unique_name(key);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  std::string failure = "fail_times = 1\nfail_offset = 4\nfail_status = \"" + c.outcome + "\"";
  if (c.outcome == "reject") failure += "\nreject_offset = 4";
  rt.add_definition("s.toml", "type = \"sink\"\nkey = \"" + key + "\"\npath = \"libpicomq_connector_" + c.plugin +
                                  "_sink\"\n[[topics]]\ntopics = [\"" + topic +
                                  "\"]\nbatch_length = 10\npoll_interval = \"500ms\"\n[plugin_config]\n" +
                                  testkit_config(rt, "records", failure) + "\n");
  rt.start();
  const std::string group = "picomq-connect-sink-" + key;
  auto ids = [&] { return TestkitLog::read(rt.dir() / "records.log").ids; };

  if (c.outcome == "retry" || c.outcome == "partial") {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 10; }, 30s)) << rt.log();
    const auto written = ids();
    EXPECT_EQ(std::set<std::string>(written.begin(), written.end()).size(), 10u) << "every record written";
    EXPECT_EQ(written.size(), 10u) << "and once: the failed attempt wrote nothing the retry repeats";
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    return;
  }
  ASSERT_TRUE(rt.wait_state(key, "error", 30s)) << rt.log();
  const auto message = rt.sink_status(key).value("message", "");
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  const int64_t committed = std::max<int64_t>(kafka.committed(group, topic), 0);  // none yet: 0
  if (c.outcome == "fatal") {
    EXPECT_NE(message.find("failed permanently"), std::string::npos) << message;
    // Rows: records 0..3 were written one by one before offset 4 failed; other planes: the
    // whole batch was one write, and it failed.
    EXPECT_EQ(committed, rows ? 4 : 0);
    EXPECT_EQ(ids().size(), rows ? 4u : 0u);
  } else {  // reject
    EXPECT_NE(message.find("rejected record " + topic + "[0] at offset 4"), std::string::npos) << message;
    EXPECT_EQ(committed, 4) << "only what precedes the rejected record is committed";
    const auto written = ids();
    EXPECT_EQ(std::find(written.begin(), written.end(), topic + ":0:4"), written.end()) << "the rejected record";
    EXPECT_EQ(written.size(), 9u) << "the others count as written (replayed after a restart: not committed)";
  }
}

INSTANTIATE_TEST_SUITE_P(Planes, PlaneOutcome,
                         testing::Values(Case{"testkit_rows", "retry"}, Case{"testkit_rows", "partial"},
                                         Case{"testkit_rows", "fatal"}, Case{"testkit_rows", "reject"},
                                         Case{"testkit", "retry"}, Case{"testkit", "partial"}, Case{"testkit", "fatal"},
                                         Case{"testkit", "reject"}, Case{"testkit_arrow", "retry"},
                                         Case{"testkit_arrow", "partial"}, Case{"testkit_arrow", "fatal"},
                                         Case{"testkit_arrow", "reject"}, Case{"testkit_async", "retry"},
                                         Case{"testkit_async", "partial"}, Case{"testkit_async", "fatal"},
                                         Case{"testkit_async", "reject"}),
                         case_name);

}  // namespace
}  // namespace picomq::test
