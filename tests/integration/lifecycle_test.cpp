// ABI 2.2 through a real broker: the lifecycle plugin (tests/plugins/lifecycle_sink.cpp) writes
// down every call it gets; an accumulating instance only completes its writes when flushed, so
// the offsets that reach the group prove flush() came after poll_interval of quiet. A plugin
// built against the ABI 2.1 header still loads and writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"

namespace picomq::test {
namespace {

std::string lifecycle_definition(const Runtime& rt, const std::string& key, const std::string& topic,
                                 const std::string& extra = "accumulate = true") {
  return plugin_definition(key, "libpicomq_connector_lifecycle_sink",
                           "topics = [\"" + topic + "\"]\npoll_interval = \"100ms\"",
                           "events_path = \"" + (rt.dir() / "events").string() + "\"\n" + extra);
}

std::vector<std::string> events(const Runtime& rt) { return read_lines(rt.dir() / "events"); }

// The partitions named by the last event starting with `kind` ("assigned 0", "revoked 0").
std::set<std::string> partitions_of_last(const Runtime& rt, const std::string& kind) {
  std::set<std::string> out;
  const auto lines = events(rt);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->rfind(kind + " ", 0) != 0) continue;
    std::istringstream in(it->substr(kind.size()));
    for (std::string tp; in >> tp;) out.insert(tp);
    break;
  }
  return out;
}

size_t count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

TEST(Lifecycle, QuietFlushCompletesAccumulatedWritesRevokeNamesThePartitionsAndShutdownFlushesThenCloses) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("lc");
  kafka.create_topic(topic, 2);
  const std::string group = "picomq-connect-sink-lc";
  const std::set<std::string> both{topic + "[0]", topic + "[1]"};

  Runtime first(kafka.bootstrap(), "first");
  first.add_definition("lc.toml", lifecycle_definition(first, "lc", topic));
  first.start();
  ASSERT_TRUE(first.wait_assigned("lc", 30s)) << first.log();
  ASSERT_TRUE(wait_until([&] { return partitions_of_last(first, "assigned 0") == both; }, 10s)) << first.log();
  EXPECT_EQ(events(first).front(), "open lc") << "the instance knows its sink key";

  kafka.produce_values(topic, json_values(0, 10), 0);
  kafka.produce_values(topic, json_values(10, 20), 1);
  // The writes are held by the sink until flush(): only the quiet flush lets them commit.
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 10); }, 20s)) << first.log();
  EXPECT_GE(count_prefix(events(first), "flush"), 1u);

  // A second runtime joins: the first one hears which partitions it hands away.
  Runtime second(kafka.bootstrap(), "second");
  second.add_definition("lc.toml", lifecycle_definition(second, "lc", topic));
  second.start();
  ASSERT_TRUE(
      wait_until([&] { return second.block_status("lc").value("assigned", nlohmann::json::array()).size() == 1; }, 60s))
      << second.log();
  // An incremental rebalance (KIP-848 on the tests' Kafka; cooperative-sticky under the classic
  // protocol): the first runtime hands over only the partition the second one gets.
  ASSERT_TRUE(wait_until([&] { return partitions_of_last(first, "revoked 0").size() == 1; }, 10s)) << first.log();
  const auto handed = partitions_of_last(first, "revoked 0");
  EXPECT_EQ(partitions_of_last(second, "assigned 0"), handed)
      << "the revoked partition is the one the second runtime got";
  EXPECT_EQ(count_prefix(events(first), "revoked"), 1u) << "the kept partition is never revoked\n" << first.log();
  EXPECT_EQ(first.block_status("lc").value("assigned", nlohmann::json::array()).size(), 1u)
      << "each partition has one owner";

  kafka.produce_values(topic, json_values(20, 30), 0);
  kafka.produce_values(topic, json_values(30, 40), 1);
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 20); }, 30s)) << first.log() << second.log();

  // Counters the sink bumped are in the status.
  ASSERT_TRUE(wait_until([&] { return first.sink_status("lc").contains("counters"); }, 5s));
  const auto counters = first.sink_status("lc")["counters"];
  EXPECT_GE(counters.value("batches", 0), 2);
  EXPECT_GE(counters.value("records", 0), 20);

  first.signal(SIGTERM);
  second.signal(SIGTERM);
  ASSERT_EQ(first.wait_exit(30s), 0) << first.log();
  ASSERT_EQ(second.wait_exit(30s), 0) << second.log();
  const auto lines = events(first);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "close");
  const auto last_write =
      std::find_if(lines.rbegin(), lines.rend(), [](const std::string& l) { return l.rfind("write", 0) == 0; });
  const auto last_flush = std::find(lines.rbegin(), lines.rend(), "flush");
  EXPECT_TRUE(last_flush < last_write) << "shutdown flushes after the last write";
}

// Writes held open by the sink when a second runtime joins: the revoke flushes them (long
// before poll_interval's quiet flush could), commits, and only then hands the partitions over.
TEST(Lifecycle, ARevokeFlushesTheWritesTheSinkHoldsBeforeThePartitionsGo) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("lcr");
  kafka.create_topic(topic, 2);
  const std::string group = "picomq-connect-sink-lcr";
  auto definition = [&](const Runtime& rt) {
    return plugin_definition("lcr", "libpicomq_connector_lifecycle_sink",
                             "topics = [\"" + topic + "\"]\nbatch_length = 10\npoll_interval = \"60s\"",
                             "events_path = \"" + (rt.dir() / "events").string() + "\"\naccumulate = true");
  };
  Runtime first(kafka.bootstrap(), "first");
  first.add_definition("lcr.toml", definition(first));
  first.start();
  ASSERT_TRUE(first.wait_assigned("lcr", 30s)) << first.log();
  kafka.produce_values(topic, json_values(0, 10), 0);
  kafka.produce_values(topic, json_values(10, 20), 1);
  ASSERT_TRUE(wait_until([&] { return count_prefix(events(first), "write") == 2; }, 20s)) << first.log();
  std::this_thread::sleep_for(scaled(1s));
  EXPECT_EQ(kafka.committed(group, topic, 0), -1001) << "held by the sink: nothing is committed yet";
  EXPECT_EQ(count_prefix(events(first), "flush"), 0u) << "poll_interval (60 s) has not passed";

  Runtime second(kafka.bootstrap(), "second");
  second.add_definition("lcr.toml", definition(second));
  const auto t0 = std::chrono::steady_clock::now();
  second.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 10); }, 30s)) << first.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, scaled(30s)) << "committed by the revoke, not by a quiet flush";
  const auto lines = events(first);
  const auto flush = std::find(lines.begin(), lines.end(), "flush");
  const auto revoked =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("revoked", 0) == 0; });
  ASSERT_NE(flush, lines.end()) << first.log();
  ASSERT_NE(revoked, lines.end());
  EXPECT_LT(flush, revoked) << "flushed before the sink hears the partitions go";
  first.signal(SIGTERM);
  second.signal(SIGTERM);
  EXPECT_EQ(first.wait_exit(30s), 0) << first.log();
  EXPECT_EQ(second.wait_exit(30s), 0) << second.log();
}

TEST(Lifecycle, AValidateRefusalKeepsTheSinkFromOpeningAndNamesTheKey) {
  const auto topic = unique_name("lcv");
  Runtime rt(Kafka::shared().bootstrap());
  rt.add_definition("v.toml", lifecycle_definition(rt, "lcv", topic, "max_held = 3"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("lcv", "error", 20s)) << rt.log();
  EXPECT_NE(rt.sink_status("lcv").value("message", "").find("max_held: needs accumulate = true"), std::string::npos)
      << rt.sink_status("lcv");
  EXPECT_NE(rt.sink_status("lcv").value("message", "").find("v.toml:"), std::string::npos) << "with its position";
  EXPECT_FALSE(std::filesystem::exists(rt.dir() / "events")) << "open() was not called";
}

// A stop while the consumer is still fetching (small fetches, so the topic takes seconds to come
// in): librdkafka keeps filling its queue while the loop flushes what it buffered, and leaving
// the group serves that queue (it aborted the process on a fetched record once). Every run exits
// 0 and commits exactly what it wrote, from offset 0 on without a gap.
TEST(Lifecycle, AStopWhileRecordsAreStillBeingFetchedExitsCleanlyAndCommitsWhatWasWritten) {
  auto& kafka = Kafka::shared();
  constexpr int kRecords = 40000;
  for (int run = 0; run < 3; ++run) {
    const auto topic = unique_name("fetching");
    kafka.create_topic(topic);
    kafka.produce_values(topic, json_values(0, kRecords, 200));
    Runtime rt(kafka.bootstrap(), "fetching-" + std::to_string(run));
    const std::string key = "fetching" + std::to_string(run);
    rt.add_definition("s.toml", testkit_definition(key,
                                                   "topics = [\"" + topic +
                                                       "\"]\nbatch_length = 500\n"
                                                       "properties = { \"max.partition.fetch.bytes\" = \"16384\" }",
                                                   testkit_config(rt, "records", "delay_ms = 2")));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-" + key, topic) > 0; }, 30s)) << rt.log();
    rt.signal(SIGTERM);
    ASSERT_EQ(rt.wait_exit(90s), 0) << "run " << run << ":\n" << rt.log();
    const int64_t committed = kafka.committed("picomq-connect-sink-" + key, topic);
    const std::set<std::string> written = [&] {
      const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
      return std::set<std::string>(ids.begin(), ids.end());
    }();
    ASSERT_GT(committed, 0);
    EXPECT_EQ(static_cast<size_t>(committed), written.size()) << "run " << run;
    for (int64_t offset = 0; offset < committed; ++offset)
      ASSERT_TRUE(written.count(topic + ":0:" + std::to_string(offset)))
          << "offset " << offset << " committed, never written";
  }
}

TEST(Lifecycle, APluginBuiltAgainstAbi21LoadsAndWrites) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("abi21");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("a.toml",
                    plugin_definition("abi21", "libpicomq_connector_abi21_sink", "topics = [\"" + topic + "\"]",
                                      "log_path = \"" + (rt.dir() / "abi21.log").string() + "\""));
  rt.start();
  kafka.produce_values(topic, json_values(0, 25));
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-abi21", topic) == 25; }, 30s)) << rt.log();
  const auto lines = read_lines(rt.dir() / "abi21.log");
  ASSERT_EQ(lines.size(), 25u);
  EXPECT_EQ(lines.front(), topic + ":0:0");
  EXPECT_EQ(lines.back(), topic + ":0:24");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

}  // namespace
}  // namespace picomq::test
