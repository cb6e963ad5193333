// The loop: per-partition buckets, the two flush rules, batches carrying what the spec says.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "harness.h"

namespace picomq::test {
namespace {

TEST(Loop, BusyTopicMovesInFullBatchesAndEverythingIsCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("busy");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 2300));

  Runtime rt(kafka.bootstrap());
  const auto key = "busy";
  rt.add_definition("busy.toml",
                    testkit_definition(key, "topics = [\"" + topic + "\"]\nbatch_length = 500",
                                       "log_path = \"" + (rt.dir() / "records.log").string() + "\"\ncalls_path = \"" +
                                           (rt.dir() / "calls.log").string() + "\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "records.log").ids.size() >= 2300; }, 30s))
      << rt.log();
  const std::string group = "picomq-connect-sink-busy";
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 2300; }, 10s))
      << "committed " << kafka.committed(group, topic);

  auto log = TestkitLog::read(rt.dir() / "records.log");
  ASSERT_EQ(log.ids.size(), 2300u);
  for (int i = 0; i < 2300; ++i) EXPECT_EQ(log.ids[i], topic + ":0:" + std::to_string(i));
  EXPECT_EQ(log.payloads[7], "{\"n\":7}");
  auto calls = read_calls(rt.dir() / "calls.log");
  ASSERT_EQ(calls.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(calls[i].count, 500u) << "call " << i;
  EXPECT_EQ(calls[4].count, 300u);

  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

TEST(Loop, QuietTopicIsFlushedAfterPollInterval) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("quiet");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("quiet.toml",
                    testkit_definition("quiet", "topics = [\"" + topic + "\"]\npoll_interval = \"700ms\"",
                                       "log_path = \"" + (rt.dir() / "records.log").string() + "\"\ncalls_path = \"" +
                                           (rt.dir() / "calls.log").string() + "\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("quiet", 30s)) << rt.log();
  const auto produced_at = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
  kafka.produce_values(topic, json_values(0, 3));
  ASSERT_TRUE(wait_until([&] { return read_calls(rt.dir() / "calls.log").size() >= 1; }, 15s)) << rt.log();
  auto calls = read_calls(rt.dir() / "calls.log");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].count, 3u) << "3 records well under batch_length arrive as one batch";
  const auto waited = calls[0].at_ms - produced_at.count();
  EXPECT_GE(waited, 650) << "flushed before poll_interval passed without new records";
  EXPECT_LE(waited, scaled(700ms + 2500ms).count()) << "a quiet topic must not be held back";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Loop, MultiPartitionTopicIsBatchedPerPartitionAndCommittedPerPartition) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("multi");
  kafka.create_topic(topic, 3);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 300; ++i) records.push_back({"{\"i\":" + std::to_string(i) + "}", std::nullopt, {}, i % 3});
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("multi.toml",
                    testkit_definition("multi", "topics = [\"" + topic + "\"]\nbatch_length = 40",
                                       "log_path = \"" + (rt.dir() / "records.log").string() + "\"\ncalls_path = \"" +
                                           (rt.dir() / "calls.log").string() + "\""));
  rt.start();
  const std::string group = "picomq-connect-sink-multi";
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 3, 100); }, 30s)) << rt.log();
  auto log = TestkitLog::read(rt.dir() / "records.log");
  EXPECT_EQ(log.ids.size(), 300u);
  std::set<std::string> unique(log.ids.begin(), log.ids.end());
  EXPECT_EQ(unique.size(), 300u);
  for (const auto& c : read_calls(rt.dir() / "calls.log")) {
    EXPECT_LE(c.count, 40u);
    EXPECT_EQ(c.last - c.first + 1, int64_t(c.count)) << "a batch holds one partition's consecutive offsets";
  }
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// Each record carries its headers, unless the sink declared at open() that it never reads them
// (the runtime then skips parsing them); a transform chain that reads headers still gets them.
TEST(Loop, RecordsCarryTheirHeadersUnlessTheSinkDeclaresItNeverReadsThem) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("headers");
  kafka.create_topic(topic);
  kafka.produce(topic, {{"{\"n\":0}", std::nullopt, {{"trace", "a"}, {"tenant", "eu"}}, 0, false},
                        {"{\"n\":1}", std::nullopt, {}, 0, false},
                        {"{\"n\":2}", std::nullopt, {{"trace", "c"}, {"drop", "yes"}}, 0, false}});

  Runtime rt(kafka.bootstrap());
  const std::string block = "topics = [\"" + topic + "\"]";
  auto config = [&](const std::string& name, bool unread) {
    return "log_path = \"" + (rt.dir() / (name + ".log")).string() +
           "\"\nlog_headers = true\nunread_headers = " + (unread ? "true" : "false");
  };
  rt.add_definition("reader.toml", testkit_definition("reader", block, config("reader", false)));
  rt.add_definition("skipper.toml", testkit_definition("skipper", block, config("skipper", true)));
  // Declares headers unread, but its filter reads one.
  rt.add_definition("filtering.toml", testkit_definition("filtering", block, config("filtering", true)) +
                                          "\n[[transforms]]\ntype = \"filter\"\n"
                                          "drop_when = { header = \"drop\", exists = true }\n");
  rt.start();
  for (const auto* key : {"reader", "skipper", "filtering"})
    ASSERT_TRUE(wait_until([&] { return kafka.committed(std::string("picomq-connect-sink-") + key, topic) == 3; }, 30s))
        << key << "\n"
        << rt.log();

  EXPECT_EQ(read_lines(rt.dir() / "reader.log"),
            (std::vector<std::string>{topic + ":0:0\t{\"n\":0}\theaders=2", topic + ":0:1\t{\"n\":1}\theaders=0",
                                      topic + ":0:2\t{\"n\":2}\theaders=2"}));
  EXPECT_EQ(read_lines(rt.dir() / "skipper.log"),
            (std::vector<std::string>{topic + ":0:0\t{\"n\":0}\theaders=0", topic + ":0:1\t{\"n\":1}\theaders=0",
                                      topic + ":0:2\t{\"n\":2}\theaders=0"}));
  const auto filtered = read_lines(rt.dir() / "filtering.log");
  ASSERT_EQ(filtered.size(), 2u) << "the record with a `drop` header is filtered out";
  EXPECT_EQ(filtered[0].substr(0, filtered[0].find('\t')), topic + ":0:0");
  EXPECT_EQ(filtered[1].substr(0, filtered[1].find('\t')), topic + ":0:1");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

}  // namespace
}  // namespace picomq::test
