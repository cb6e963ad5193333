// Data planes through the real broker: a batch reaches a plugin on its best native plane; a
// rows-only plugin gets one call per record, and a failed record fails the batch while the
// records written before it are committed. plugin_config is checked against the plugin's
// option table before the sink starts.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.h"

namespace picomq::test {
namespace {

std::string rows_definition(const std::string& key, const std::string& topic, const std::string& plugin_config) {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_testkit_rows_sink\"\n[[topics]]\ntopics = [\"" + topic +
         "\"]\nbatch_length = 10\n[plugin_config]\n" + plugin_config + "\n";
}

TEST(Planes, RowsOnlyPluginGetsOneCallPerRecordAndEverythingIsCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("rows");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 25));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", rows_definition("rows", topic, testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-rows", topic) == 25; }, 30s)) << rt.log();
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 25u) << rt.log();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].first, int64_t(i));
    EXPECT_EQ(calls[i].last, int64_t(i)) << "one record per call";
  }
  EXPECT_EQ(TestkitLog::read(rt.dir() / "records.log").ids.size(), 25u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Planes, RowsFailureMidBatchCommitsTheWrittenPrefixAndRetriesFromTheFailedRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("rowsfail");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml", rows_definition("rowsfail", topic, testkit_config(rt, "records", "fail_offset = 5\nfail_times = 2")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-rowsfail", topic) == 10; }, 30s))
      << rt.log();
  auto log = TestkitLog::read(rt.dir() / "records.log");
  EXPECT_EQ(log.ids.size(), 10u) << "every record written exactly once: the prefix is not written again";
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 12u) << rt.log();
  EXPECT_EQ(calls[5].first, 5);
  EXPECT_EQ(calls[5].status, "retry");
  EXPECT_EQ(calls[6].first, 5) << "the retry starts at the failed record";
  EXPECT_EQ(calls[7].first, 5);
  EXPECT_EQ(calls[7].status, "ok");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Planes, RowsPermanentFailureStopsInErrorWithThePrefixCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("rowsfatal");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml",
      rows_definition("rowsfatal", topic,
                      testkit_config(rt, "records", "fail_offset = 3\nfail_times = 1\nfail_status = \"fatal\"")));
  rt.start();
  ASSERT_TRUE(rt.wait_state("rowsfatal", "error", 30s)) << rt.log();
  EXPECT_NE(rt.sink_status("rowsfatal").dump().find("failed permanently"), std::string::npos)
      << rt.sink_status("rowsfatal");
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed("picomq-connect-sink-rowsfatal", topic), 3) << "records 0..2 were written";
}

std::string arrow_definition(const std::string& key, const std::string& topic, const std::string& plugin_config,
                             const std::string& block_extra = "") {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_testkit_arrow_sink\"\n[[topics]]\ntopics = [\"" + topic +
         "\"]\nbatch_length = 10\n" + block_extra + "[plugin_config]\n" + plugin_config + "\n";
}

TEST(Planes, ArrowPluginReceivesArrowBatchesWithInferredColumnsAndEverythingIsCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("arrow");
  kafka.create_topic(topic);
  std::vector<std::string> values = json_values(0, 24);
  values.emplace_back(R"({"n":24,"label":"last"})");
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", arrow_definition("arrow", topic, testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-arrow", topic) == 25; }, 30s)) << rt.log();
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 3u) << "batches of 10, 10, 5 on the arrow plane: " << rt.log();
  EXPECT_EQ(calls[2].first, 20);
  EXPECT_EQ(calls[2].last, 24);
  const auto lines = read_lines(rt.dir() / "records.log");
  ASSERT_EQ(lines.size(), 25u);
  EXPECT_EQ(lines[3], topic + ":0:3\tn=3") << "an inferred int64 column 'n'";
  EXPECT_EQ(lines[21], topic + ":0:21\tn=21 label=null") << "a field absent from a record is null";
  EXPECT_EQ(lines[24], topic + ":0:24\tn=24 label=last");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Planes, ArrowDeclaredColumnsRejectWhatTheyCannotHoldNamingTheRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("arrowdecl");
  kafka.create_topic(topic);
  std::vector<std::string> values = json_values(0, 10);
  values[6] = R"({"n":"six"})";
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml",
                    arrow_definition("arrowdecl", topic, testkit_config(rt),
                                     "arrow_schema = [ { name = \"n\", type = \"float64\", nullable = false } ]\n"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("arrowdecl", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("arrowdecl").value("message", "");
  EXPECT_NE(message.find("offset 6"), std::string::npos) << message;
  EXPECT_NE(message.find("field 'n': expected float64, found string"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  ASSERT_EQ(ids.size(), 6u) << "the records before the refused one are written, on the arrow plane too";
  EXPECT_EQ(ids.back(), topic + ":0:5");
  EXPECT_EQ(kafka.committed("picomq-connect-sink-arrowdecl", topic), 6) << "and only those are committed";
}

TEST(Planes, PluginConfigIsCheckedAgainstTheOptionTableBeforeTheSinkStarts) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("opts");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("bad.toml",
                    rows_definition("badopts", topic, testkit_config(rt) + "\nfail_tmies = 3\ndelay_ms = \"soon\""));
  rt.add_definition("good.toml", rows_definition("goodopts", topic, testkit_config(rt, "good")));
  kafka.produce_values(topic, json_values(0, 3));
  rt.start();
  ASSERT_TRUE(rt.wait_state("badopts", "error", 30s)) << rt.log();
  const auto status = rt.sink_status("badopts").dump();
  EXPECT_NE(status.find("fail_tmies: unknown option for the testkit sink; did you mean 'fail_times'?"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("delay_ms: must be an integer, not a string"), std::string::npos) << status;
  EXPECT_NE(status.find("bad.toml:"), std::string::npos)
      << "each problem says where in the definition file: " << status;
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-goodopts", topic) == 3; }, 30s))
      << "the other sink runs: " << rt.log();
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

TEST(Planes, ASinkOnTheArrowPlaneIsNotHandedChangeEvents) {
  // testkit_arrow claims the change operations; the Arrow plane would lose them: refused at start.
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("arrow_changes");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", arrow_definition("arrowchg", topic, testkit_config(rt), "changes = \"keyed\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.sink_state("arrowchg") == "error"; }, 30s)) << rt.log();
  EXPECT_NE(rt.sink_status("arrowchg").dump().find("carries neither a change's operation nor its key"),
            std::string::npos)
      << rt.sink_status("arrowchg");
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

}  // namespace
}  // namespace picomq::test
