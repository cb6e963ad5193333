// Asynchronous sinks: a plugin whose writes return PMQ_WRITE_PENDING (sdk::Pending) has up to
// max_in_flight batches of a block in flight at once; the runtime still takes their outcomes
// in order and commits only offsets whose writes, and every earlier one, completed OK.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <thread>

#include "harness.h"

namespace picomq::test {
namespace {

std::string async_definition(const std::string& key, const std::string& topic, const std::string& plugin_config) {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_testkit_async_sink\"\n[[topics]]\ntopics = [\"" + topic +
         "\"]\nbatch_length = 10\n[plugin_config]\n" + plugin_config + "\n";
}

TEST(Async, SeveralWritesAreInFlightAndEverythingIsCommittedInOrder) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("async");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 60));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", async_definition("async", topic, testkit_config(rt, "records", "delay_ms = 400")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-async", topic) == 60; }, 30s)) << rt.log();
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 6u) << rt.log();
  int64_t first = calls.front().at_ms, last = calls.front().at_ms;
  for (const auto& c : calls) {
    first = std::min(first, c.at_ms);
    last = std::max(last, c.at_ms);
  }
  // One at a time, six 400 ms writes complete over at least 2 s; four in flight, well under.
  EXPECT_LT(last - first, 1500) << "writes did not overlap: " << rt.log();
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 60u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// An instance may lower its window at open() (set_max_in_flight): then one write at a time.
TEST(Async, AnInstanceThatLowersItsWindowToOneWritesOneBatchAtATime) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("async1");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 40));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml", async_definition("async1", topic, testkit_config(rt, "records", "delay_ms = 300\nmax_in_flight = 1")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-async1", topic) == 40; }, 30s)) << rt.log();
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 4u) << rt.log();
  // Each write completes 300 ms after it starts, and starts only once the one before completed.
  for (size_t i = 1; i < calls.size(); ++i)
    EXPECT_GE(calls[i].at_ms - calls[i - 1].at_ms, 280) << "writes " << i - 1 << " and " << i << " overlapped";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// A batch that comes while earlier writes are pending starts at once (it does not wait for the
// oldest to complete): a sink that holds writes open for more (one COPY for many batches) gets
// them.
TEST(Async, ABatchThatComesWhileAWriteIsPendingStartsAtOnce) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("async2");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", async_definition("async2", topic, testkit_config(rt, "records", "delay_ms = 1500")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("async2", 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 10));  // a full batch: written at once
  std::this_thread::sleep_for(400ms);
  kafka.produce_values(topic, json_values(10, 20));
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-async2", topic) == 20; }, 30s)) << rt.log();
  auto calls = read_calls(rt.dir() / "records.calls");
  ASSERT_EQ(calls.size(), 2u) << rt.log();
  // Overlapping, the second completes about 400 ms after the first; waiting, 1500 ms after.
  EXPECT_LT(calls[1].at_ms - calls[0].at_ms, 1100) << "the second batch waited for the first write";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Async, AFailedWriteIsRetriedAndNoLaterOffsetIsCommittedBeforeIt) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("asyncretry");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 60));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml", async_definition("asyncretry", topic,
                                 testkit_config(rt, "records", "delay_ms = 200\nfail_offset = 20\nfail_times = 2")));
  rt.start();
  const std::string group = "picomq-connect-sink-asyncretry";
  const std::string id20 = topic + ":0:20";
  bool past_before_written = false;
  ASSERT_TRUE(wait_until(
      [&] {
        const int64_t committed = kafka.committed(group, topic);
        if (committed > 20) {
          const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
          if (std::find(ids.begin(), ids.end(), id20) == ids.end()) past_before_written = true;
        }
        return committed == 60;
      },
      30s))
      << rt.log();
  EXPECT_FALSE(past_before_written) << "an offset past the failed batch was committed before it was written";
  auto log = TestkitLog::read(rt.dir() / "records.log");
  EXPECT_EQ(log.ids.size(), 60u) << "every record written once";
  EXPECT_EQ(std::set<std::string>(log.ids.begin(), log.ids.end()).size(), 60u);
  auto calls = read_calls(rt.dir() / "records.calls");
  size_t retries = 0;
  for (const auto& c : calls) retries += c.status == "retry";
  EXPECT_EQ(retries, 2u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Async, APermanentFailureCommitsOnlyWhatCameBeforeIt) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("asyncfatal");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 60));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml",
      async_definition(
          "asyncfatal", topic,
          testkit_config(rt, "records", "delay_ms = 200\nfail_offset = 20\nfail_times = 1\nfail_status = \"fatal\"")));
  rt.start();
  ASSERT_TRUE(rt.wait_state("asyncfatal", "error", 30s)) << rt.log();
  EXPECT_NE(rt.sink_status("asyncfatal").value("message", "").find("failed permanently"), std::string::npos);
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  // Read after the runtime's last (synchronous) commit: the stored offsets have all gone out.
  EXPECT_EQ(kafka.committed("picomq-connect-sink-asyncfatal", topic), 20)
      << "batches after the failed one may have been written, but are not committed";
  const auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  EXPECT_EQ(std::find(ids.begin(), ids.end(), topic + ":0:25"), ids.end()) << "the failed batch was not written";
}

}  // namespace
}  // namespace picomq::test
