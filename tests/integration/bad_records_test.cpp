// The bad-record policies through a real Kafka broker: skip and dead_letter for records that
// cannot be decoded, that the sink rejects, and that the Arrow export refuses; a dead-letter
// write that fails. The committed offset is read back from the broker every time, and the
// dead-letter topic is read back record by record. (`fail`, the default, is covered by the
// commit and planes tests.)
#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "harness.h"

namespace picomq::test {
namespace {

// {"n":0} .. {"n":9}, with undecodable payloads at `bad` offsets.
std::vector<std::string> values_with_bad(std::initializer_list<int> bad) {
  auto values = json_values(0, 10);
  for (int i : bad) values[i] = "{\"n\": " + std::to_string(i) + ", broken";
  return values;
}

TEST(BadRecords, SkipStepsOverUndecodableRecordsLogsThemAndCommitsPastThem) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("skip");
  kafka.create_topic(topic);
  kafka.produce_values(topic, values_with_bad({3, 9}));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", testkit_definition("skipper", "topics = [\"" + topic + "\"]\non_bad_record = \"skip\"",
                                                 testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("skipper"), topic) == 10; }, 30s))
      << "the committed offset moves past the skipped records, the last one too\n"
      << rt.log();
  EXPECT_EQ(rt.sink_state("skipper"), "running");
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  ASSERT_EQ(ids.size(), 8u);
  for (const auto& id : ids) EXPECT_TRUE(id != topic + ":0:3" && id != topic + ":0:9") << id;
  ASSERT_TRUE(wait_until([&] { return rt.block_status("skipper").value("skipped_records", 0) == 2; }, 10s))
      << rt.status().dump();
  const auto log = rt.log();
  EXPECT_NE(
      log.find("skipped bad record " + topic + "[0] at offset 3 (decode): schema json: payload is not valid JSON"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("skipped bad record " + topic + "[0] at offset 9 (decode)"), std::string::npos) << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// schema = "json" validates with simdjson, whose default maximum depth (1024, the document
// itself counted) lets 1023 nested arrays or objects through: one more is a bad record
// (docs/decoders.md).
TEST(BadRecords, JsonNestedDeeperThan1023LevelsIsABadRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("deep");
  kafka.create_topic(topic);
  auto nested = [](int depth, bool objects) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
    s += "1";
    for (int i = 0; i < depth; ++i) s += objects ? "}" : "]";
    return s;
  };
  kafka.produce_values(topic, {nested(1023, false), nested(1024, false), nested(1023, true), nested(1024, true)});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", testkit_definition("deep", "topics = [\"" + topic + "\"]\non_bad_record = \"skip\"",
                                                 testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("deep"), topic) == 4; }, 30s)) << rt.log();
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  EXPECT_EQ(ids, (std::vector<std::string>{topic + ":0:0", topic + ":0:2"})) << "1023 levels pass, 1024 do not";
  const auto log = rt.log();
  for (int offset : {1, 3})
    EXPECT_NE(log.find("skipped bad record " + topic + "[0] at offset " + std::to_string(offset) +
                       " (decode): schema json: payload is not valid JSON: The JSON document was too deep"),
              std::string::npos)
        << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(BadRecords, DeadLetterTopicGetsTheOriginalRecordAndWhyWhereAndWhenBeforeTheCommit) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("dlq");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  std::vector<ProducedRecord> records;
  const auto values = values_with_bad({2});
  records.reserve(10);
  for (int i = 0; i < 10; ++i) records.push_back({values[i], std::nullopt, {}});
  records[2].key = std::string("k\x00\xff", 3);
  records[2].headers = {{"trace", "t-2"}, {"bin", std::string("\xff\x01", 2)}};
  records[5].key = std::string("five");
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  // Offset 2 cannot be decoded; the sink refuses offset 5 (and writes the rest of its batch).
  rt.add_definition(
      "s.toml",
      testkit_definition(
          "dlq", "topics = [\"" + topic + "\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"",
          testkit_config(rt, "records",
                         "fail_times = 1000\nfail_offset = 5\nfail_status = "
                         "\"reject\"\nreject_offset = 5")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("dlq"), topic) == 10; }, 30s)) << rt.log();
  EXPECT_EQ(rt.sink_state("dlq"), "running") << rt.log();
  EXPECT_EQ(TestkitLog::read(rt.dir() / "records.log").ids.size(), 8u);

  const auto letters = kafka.consume(dead, 2, 20s);
  ASSERT_EQ(letters.size(), 2u);
  const auto& d = letters[0];
  EXPECT_EQ(d.value, values[2]) << "the original bytes";
  EXPECT_EQ(d.key, std::string("k\x00\xff", 3));
  EXPECT_EQ(d.header("trace"), "t-2") << "the original headers are kept";
  EXPECT_EQ(d.header("bin"), std::string("\xff\x01", 2));
  EXPECT_EQ(d.header("pico_error_stage"), "decode");
  EXPECT_NE(d.header("pico_error_reason").value_or("").find("payload is not valid JSON"), std::string::npos);
  EXPECT_EQ(d.header("pico_error_sink"), "dlq");
  EXPECT_EQ(d.header("pico_error_topic"), topic);
  EXPECT_EQ(d.header("pico_error_partition"), "0");
  EXPECT_EQ(d.header("pico_error_offset"), "2");
  EXPECT_GT(std::stoll(d.header("pico_error_timestamp").value_or("0")), 1700000000000LL);
  EXPECT_EQ(d.header("pico_error_time").value_or("").size(), std::string("2026-11-30T10:00:00.000Z").size());
  const auto& s = letters[1];
  EXPECT_EQ(s.value, values[5]);
  EXPECT_EQ(s.key, "five");
  EXPECT_EQ(s.header("pico_error_stage"), "sink");
  EXPECT_EQ(s.header("pico_error_reason"), "testkit rejects this offset");
  EXPECT_EQ(s.header("pico_error_offset"), "5");
  EXPECT_TRUE(wait_until([&] { return rt.block_status("dlq").value("dead_lettered_records", 0) == 2; }, 10s))
      << rt.status().dump();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// on_write_failure = "dead_letter": a batch whose write still fails after the retries goes to the
// dead-letter topic (stage sink, the last error), and the block goes on with the next ones.
TEST(BadRecords, AWriteFailingPastItsRetriesIsDeadLetteredWithOnWriteFailureAndTheSinkGoesOn) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("wfail");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  // Every call carrying offset 5 fails (retry) for good; batches of 3 records.
  rt.add_definition("s.toml", testkit_definition("wfail",
                                                 "topics = [\"" + topic +
                                                     "\"]\nbatch_length = 3\non_bad_record = \"dead_letter\"\n"
                                                     "dead_letter_topic = \"" +
                                                     dead + "\"\non_write_failure = \"dead_letter\"",
                                                 testkit_config(rt, "records", "fail_times = 1000\nfail_offset = 5")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("wfail"), topic) == 10; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("wfail"), "running") << rt.log();
  const auto written = TestkitLog::read(rt.dir() / "records.log").ids;
  const auto letters = kafka.consume(dead, 3, 20s);
  ASSERT_EQ(letters.size(), 3u) << "the batch holding offset 5 (3 records)";
  std::set<std::string> dead_offsets;
  for (const auto& d : letters) {
    dead_offsets.insert(d.header("pico_error_offset").value_or(""));
    EXPECT_EQ(d.header("pico_error_stage"), "sink");
    EXPECT_NE(d.header("pico_error_reason").value_or("").find("write failed 5 times; last error: retry"),
              std::string::npos)
        << d.header("pico_error_reason").value_or("");
  }
  EXPECT_TRUE(dead_offsets.count("5")) << "the failing record's batch";
  EXPECT_EQ(written.size() + letters.size(), 10u) << "every other record written, none twice";
  EXPECT_NE(rt.log().find("on_write_failure = \"dead_letter\""), std::string::npos) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(BadRecords, OnWriteFailureDeadLetterNeedsTheDeadLetterPolicy) {
  Runtime rt("127.0.0.1:1");
  rt.add_definition("s.toml", testkit_definition("wf", "topics = [\"t\"]\non_write_failure = \"dead_letter\"",
                                                 testkit_config(rt, "records")));
  const auto [code, out] = rt.check();
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("on_write_failure = \"dead_letter\" needs on_bad_record = \"dead_letter\""), std::string::npos)
      << out;
}

TEST(BadRecords, AFailedDeadLetterWriteFailsTheBatchAndCommitsNothingFromTheBadRecordOn) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("dlqfail");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead, 1, {{"max.message.bytes", "200"}});  // the bad record does not fit
  auto values = json_values(0, 10);
  values[4] = "{\"n\": 4, \"pad\": \"" + std::string(600, 'x') + "\", broken";
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", testkit_definition("dlqfail",
                                                 "topics = [\"" + topic +
                                                     "\"]\nbatch_length = 100\non_bad_record = "
                                                     "\"dead_letter\"\ndead_letter_topic = \"" +
                                                     dead + "\"",
                                                 testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(rt.wait_state("dlqfail", "error", 60s)) << rt.log();
  const auto message = rt.sink_status("dlqfail").value("message", "");
  EXPECT_NE(message.find("dead-letter write of " + topic + "[0] offset 4 to '" + dead + "' failed"), std::string::npos)
      << message;
  EXPECT_NE(rt.log().find("attempt 4/5"), std::string::npos) << "retried like a batch write\n" << rt.log();
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed(group_of("dlqfail"), topic), 4) << "the records before the bad one only";
  EXPECT_TRUE(kafka.consume(dead, 1, 2s).empty());
}

TEST(BadRecords, ArrowExportRefusalsUnderSkipLeaveEveryOtherRecordWritten) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("arrowskip");
  kafka.create_topic(topic);
  auto values = json_values(0, 10);
  values[6] = R"({"n":"six"})";
  values[2] = R"({"n":null})";
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml",
                    plugin_definition("arrowskip", "libpicomq_connector_testkit_arrow_sink",
                                      "topics = [\"" + topic +
                                          "\"]\nbatch_length = 10\non_bad_record = \"skip\"\n"
                                          "arrow_schema = [ { name = \"n\", type = \"float64\", nullable = false } ]",
                                      testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("arrowskip"), topic) == 10; }, 30s)) << rt.log();
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  std::vector<std::string> expected;
  for (int i : {0, 1, 3, 4, 5, 7, 8, 9}) expected.push_back(topic + ":0:" + std::to_string(i));
  EXPECT_EQ(ids, expected) << "the records after a refused one are written too";
  EXPECT_NE(rt.log().find("at offset 6 (sink): arrow export: field 'n': expected float64, found string"),
            std::string::npos)
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(BadRecords, RowsPlaneRejectionsUnderSkipAreSteppedOver) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("rowsskip");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 6));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", plugin_definition("rowsskip", "libpicomq_connector_testkit_rows_sink",
                                                "topics = [\"" + topic + "\"]\non_bad_record = \"skip\"",
                                                testkit_config(rt, "records",
                                                               "fail_times = 1000\nfail_offset = 4\nfail_status = "
                                                               "\"reject\"\nreject_offset = 4")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rowsskip"), topic) == 6; }, 30s)) << rt.log();
  EXPECT_EQ(TestkitLog::read(rt.dir() / "records.log").ids.size(), 5u);
  EXPECT_NE(rt.log().find("skipped bad record " + topic + "[0] at offset 4 (sink): testkit rejects this offset"),
            std::string::npos)
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

}  // namespace
}  // namespace picomq::test
