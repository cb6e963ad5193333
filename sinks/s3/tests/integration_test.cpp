// The S3 sink through a real Kafka broker and the runtime, into the real SeaweedFS 4.53 server of
// the test process (sinks/s3/server.sh, started once), objects read back with boto3: keys and
// contents exactly with rotation by records over batches that do not line up with objects; an
// outage commits nothing before the objects are written and loses nothing; a SIGKILL mid-load
// and a restart leave the same keys with the same bytes as an undisturbed run, every record once.
// Its own binary and broker (s3_integration_test, ctest s3_integration).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "seaweedfs_server.h"

namespace picomq::test {
namespace {

std::string group_of(const std::string& key) { return "picomq-connect-sink-" + key; }

std::string definition(const std::string& key, const std::string& topic, const std::string& bucket,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_s3_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\n" + block_extra,
                           SeaweedfsServer::shared().plugin_config(bucket) + plugin_config);
}

// offset -> payload of every record in the objects, failing on a record found twice.
std::map<std::pair<int, int64_t>, std::string> records_of(const std::vector<S3Object>& objects) {
  std::map<std::pair<int, int64_t>, std::string> out;
  for (const auto& o : objects) {
    size_t start = 0;
    while (start < o.text.size()) {
      const size_t end = o.text.find('\n', start);
      const auto j = nlohmann::json::parse(o.text.substr(start, end - start));
      start = end + 1;
      const auto id = std::pair{j["pico_partition"].get<int>(), j["pico_offset"].get<int64_t>()};
      EXPECT_FALSE(out.count(id)) << "offset " << id.second << " of partition " << id.first << " twice (" << o.key << ")";
      out[id] = j["payload"].dump();
    }
  }
  return out;
}

TEST(S3SinkKafka, KeysAndContentsExactlyWithRotationByRecordsOverBatchesThatDoNotLineUp) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-keys");
  const auto topic = unique_name("s3.orders");
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 1000, p * 1000 + 250), p);
  Runtime rt(kafka.bootstrap(), "keys");
  rt.add_definition("s.toml", definition("s3keys", topic, bucket, "max_object_records = 100\n",
                                         "batch_length = 30\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("s3keys"), topic, 2, 250); }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();

  const auto objects = s3.objects(bucket);
  std::vector<std::string> keys;
  for (const auto& o : objects) keys.push_back(o.key);
  std::vector<std::string> expected;
  for (int p = 0; p < 2; ++p)
    for (const char* start : {"00000000000000000000", "00000000000000000100", "00000000000000000200"})
      expected.push_back(topic + "/partition=" + std::to_string(p) + "/" + topic + "+" + std::to_string(p) + "+" + start + ".json.gz");
  EXPECT_EQ(keys, expected);
  const auto records = records_of(objects);
  ASSERT_EQ(records.size(), 500u);
  for (int p = 0; p < 2; ++p)
    for (int64_t i = 0; i < 250; ++i) EXPECT_EQ(records.at({p, i}), "{\"n\":" + std::to_string(p * 1000 + i) + "}");
}

TEST(S3SinkKafka, AnOutageCommitsNothingBeforeTheObjectIsWrittenAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-outage");
  const auto topic = unique_name("s3.outage");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap(), "outage");
  rt.add_definition("s.toml", definition("s3outage", topic, bucket, "compression = \"none\"\n", "poll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("s3outage", 30s)) << rt.log();
  s3.kill();
  kafka.produce_values(topic, json_values(0, 50));
  ASSERT_TRUE(wait_until([&] { return rt.log().find("not reachable") != std::string::npos ||
                                      rt.sink_status("s3outage").value("counters", nlohmann::json::object()).value("resends", 0) > 0; },
                         20s))
      << rt.log();
  EXPECT_EQ(kafka.committed(group_of("s3outage"), topic), -1001) << "no offset before the object is written";
  s3.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3outage"), topic) == 50; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("s3outage"), "running");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto records = records_of(s3.objects(bucket));
  ASSERT_EQ(records.size(), 50u);
  EXPECT_EQ(records.at({0, 49}), "{\"n\":49}");
}

TEST(S3SinkKafka, SigkillMidLoadThenRestartLeavesTheSameKeysAndBytesAsAnUndisturbedRun) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto topic = unique_name("s3.kill");
  kafka.create_topic(topic);
  const int n = 16000;
  kafka.produce_values(topic, json_values(0, n, 100));
  // No template field of the sink key: both runs resolve the same keys.
  const std::string config = "max_object_records = 800\nmax_uploads_in_flight = 1\n";
  // Static membership: the restarted runtime takes the killed one's place at once (no wait for
  // its session to time out).
  const std::string block = "batch_length = 31\npoll_interval = \"2s\"\n"
                            "properties = { \"group.instance.id\" = \"s3kill\", \"session.timeout.ms\" = \"6000\" }";

  const auto reference = s3.create_bucket("kafka-ref");
  {
    Runtime rt(kafka.bootstrap(), "reference");
    rt.add_definition("s.toml", definition("s3ref", topic, reference, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3ref"), topic) == n; }, 120s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }

  const auto bucket = s3.create_bucket("kafka-kill");
  int64_t at_kill = 0;
  {
    Runtime rt(kafka.bootstrap(), "crash");
    rt.add_definition("s.toml", definition("s3kill", topic, bucket, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3kill"), topic) > 0; }, 120s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
    at_kill = kafka.committed(group_of("s3kill"), topic);
  }
  EXPECT_LT(at_kill, n) << "killed mid-load";
  ::testing::Test::RecordProperty("committed_at_kill", std::to_string(at_kill));
  std::printf("SIGKILL with offset %lld committed (objects of 800 records, batches of 31: never at an object boundary)\n", static_cast<long long>(at_kill));
  {
    Runtime rt(kafka.bootstrap(), "restart");
    rt.add_definition("s.toml", definition("s3kill", topic, bucket, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3kill"), topic) == n; }, 120s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    if (at_kill % 800 != 0)
      EXPECT_NE(rt.log().find("resumes at offset " + std::to_string(at_kill)), std::string::npos) << rt.log();
  }
  const auto expected = s3.objects(reference);
  const auto got = s3.objects(bucket);
  ASSERT_EQ(expected.size(), size_t{n / 800});
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].key, expected[i].key);
    EXPECT_TRUE(got[i].bytes == expected[i].bytes) << got[i].key << " differs from the undisturbed run's";
  }
  EXPECT_EQ(records_of(got).size(), size_t{n}) << "every record once";
}

}  // namespace
}  // namespace picomq::test
