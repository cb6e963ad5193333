// The S3 sink through a real Kafka broker and the runtime, into the real SeaweedFS 4.48 server of
// the test process (sinks/s3/server.sh, started once), objects read back with boto3: keys and
// contents exactly with rotation by records over batches that do not line up with objects; an
// outage commits nothing before the objects are written and loses nothing; a SIGKILL mid-load
// and a restart leave the same keys with the same bytes as an undisturbed run, every record once.
// Its own binary and broker (s3_kafka_test, ctest s3_kafka).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "harness.h"
#include "picomq/kit/testing/http_stub.hpp"
#include "s3/avro.h"
#include "schema_registry.h"
#include "seaweedfs_server.h"

namespace picomq::test {
namespace {

std::string definition(const std::string& key, const std::string& topic, const std::string& bucket,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_s3_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\n" + block_extra,
                           SeaweedfsServer::shared().plugin_config(bucket) + plugin_config);
}

// The same definition with the sink's requests going through `store` (the kit's receiver as a
// fault proxy in front of SeaweedFS) instead of straight to SeaweedFS.
std::string proxied_definition(const std::string& key, const std::string& topic, const std::string& bucket,
                               const kit::testing::HttpReceiver& store, const std::string& plugin_config,
                               const std::string& block_extra = "") {
  std::string config = SeaweedfsServer::shared().plugin_config(bucket);
  const std::string endpoint = SeaweedfsServer::shared().endpoint();
  config.replace(config.find(endpoint), endpoint.size(), store.base_url());
  return plugin_definition(key, "libpicomq_connector_s3_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\n" + block_extra, config + plugin_config);
}

// The same for a block of several topics (one `topics` list).
std::string proxied_definition(const std::string& key, const std::vector<std::string>& topics,
                               const std::string& bucket, const kit::testing::HttpReceiver& store,
                               const std::string& plugin_config, const std::string& block_extra = "") {
  std::string list;
  for (const auto& t : topics) list += (list.empty() ? "\"" : ", \"") + t + "\"";
  std::string config = SeaweedfsServer::shared().plugin_config(bucket);
  const std::string endpoint = SeaweedfsServer::shared().endpoint();
  config.replace(config.find(endpoint), endpoint.size(), store.base_url());
  return plugin_definition(key, "libpicomq_connector_s3_sink",
                           "topics = [" + list + "]\nschema = \"json\"\n" + block_extra, config + plugin_config);
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
      EXPECT_FALSE(out.count(id)) << "offset " << id.second << " of partition " << id.first << " twice (" << o.key
                                  << ")";
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
  keys.reserve(objects.size());
  for (const auto& o : objects) keys.push_back(o.key);
  std::vector<std::string> expected;
  for (int p = 0; p < 2; ++p)
    for (const char* start : {"00000000000000000000", "00000000000000000100", "00000000000000000200"})
      expected.push_back(std::string(topic)
                             .append("/partition=")
                             .append(std::to_string(p))
                             .append("/")
                             .append(topic)
                             .append("+")
                             .append(std::to_string(p))
                             .append("+")
                             .append(start)
                             .append(".json.gz"));
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
  rt.add_definition("s.toml",
                    definition("s3outage", topic, bucket, "compression = \"none\"\n", "poll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("s3outage", 30s)) << rt.log();
  s3.kill();
  kafka.produce_values(topic, json_values(0, 50));
  ASSERT_TRUE(wait_until(
      [&] {
        return rt.log().find("not reachable") != std::string::npos ||
               rt.sink_status("s3outage").value("counters", nlohmann::json::object()).value("resends", 0) > 0;
      },
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
  const std::string block =
      "batch_length = 31\npoll_interval = \"2s\"\n"
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
  std::printf(
      "SIGKILL with offset %lld committed (objects of 800 records, batches of 31: never at an object boundary)\n",
      static_cast<long long>(at_kill));
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

// (partition, offset) -> the row of every record in Parquet objects (read by pyarrow), failing on
// a record found twice.
std::map<std::pair<int, int64_t>, nlohmann::json> parquet_rows_of(const std::vector<S3Object>& objects) {
  std::map<std::pair<int, int64_t>, nlohmann::json> out;
  for (const auto& o : objects) {
    if (o.key.find("_picomq/") != std::string::npos) continue;
    const auto file = nlohmann::json::parse(o.text);
    EXPECT_TRUE(file.contains("rows")) << o.key << ": " << o.text.substr(0, 200);
    for (const auto& row : file["rows"]) {
      const auto id = std::pair{row["pico_partition"].get<int>(), row["pico_offset"].get<int64_t>()};
      EXPECT_FALSE(out.count(id)) << "offset " << id.second << " of partition " << id.first << " twice (" << o.key
                                  << ")";
      out[id] = row;
    }
  }
  return out;
}

// Parquet objects through Kafka (two partitions): the rows read back by pyarrow are exactly the
// produced records; a SIGKILL mid-load and a restart leave the same keys with the same bytes as
// an undisturbed run (a file is made from its object's records alone), every record once.
TEST(S3SinkKafka, ParquetObjectsSigkilledMidLoadRestartToTheSameFilesEveryRecordOnce) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto topic = unique_name("s3.parquet");
  kafka.create_topic(topic, 2);
  const int per_partition = 3000;
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 100000, p * 100000 + per_partition, 60), p);
  const std::string config = "format = \"parquet\"\nmax_object_records = 700\nmax_uploads_in_flight = 1\n";
  const std::string block =
      "batch_length = 31\npoll_interval = \"2s\"\n"
      "properties = { \"group.instance.id\" = \"s3parquet\", \"session.timeout.ms\" = \"6000\" }";
  auto done = [&](const std::string& key) { return kafka.all_committed(group_of(key), topic, 2, per_partition); };

  const auto reference = s3.create_bucket("kafka-parquet-ref");
  std::string reference_log, restart_log;  // shown if the buckets come back empty
  {
    Runtime rt(kafka.bootstrap(), "parquet-ref");
    rt.add_definition("s.toml", definition("s3pqref", topic, reference, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return done("s3pqref"); }, 120s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    reference_log = rt.log();
  }
  const auto bucket = s3.create_bucket("kafka-parquet");
  {
    Runtime rt(kafka.bootstrap(), "parquet-crash");
    rt.add_definition("s.toml", definition("s3pq", topic, bucket, config, block));
    rt.start();
    ASSERT_TRUE(wait_until(
        [&] {
          return kafka.committed(group_of("s3pq"), topic, 0) > 0 || kafka.committed(group_of("s3pq"), topic, 1) > 0;
        },
        120s))
        << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
  }
  EXPECT_FALSE(done("s3pq")) << "killed mid-load";
  {
    Runtime rt(kafka.bootstrap(), "parquet-restart");
    rt.add_definition("s.toml", definition("s3pq", topic, bucket, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return done("s3pq"); }, 120s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    restart_log = rt.log();
  }
  const auto expected = s3.objects(reference);
  const auto got = s3.objects(bucket);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].key, expected[i].key);
    EXPECT_TRUE(got[i].bytes == expected[i].bytes) << got[i].key << " differs from the undisturbed run's";
  }
  ASSERT_FALSE(got.empty()) << "reference run:\n" << reference_log << "\nrestart:\n" << restart_log;
  const auto rows = parquet_rows_of(got);
  ASSERT_EQ(rows.size(), size_t{2 * per_partition}) << "every record once";
  for (int p = 0; p < 2; ++p)
    for (int64_t i = 0; i < per_partition; i += 499) {
      const auto& row = rows.at({p, i});
      EXPECT_EQ(row["n"], p * 100000 + i);
      EXPECT_EQ(row["pico_topic"], topic);
      EXPECT_EQ(row["pad"].get<std::string>().size(), 60u);
    }
  EXPECT_NE(got.front().key.find(".parquet"), std::string::npos);
}

// An Avro topic, decoded by the runtime (schema = "avro"), written as Avro object container files
// of the same (declared) schema and read back with fastavro: the records, their order, the
// metadata fields filled from Kafka.
TEST(S3SinkKafka, AnAvroTopicDecodedByTheRuntimeBecomesAvroContainerFilesReadBackByFastavro) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-avro");
  const auto topic = unique_name("s3.avro");
  kafka.create_topic(topic);
  const std::string writer =
      R"({"type":"record","name":"Reading","fields":[{"name":"id","type":"long"},{"name":"site","type":"string"},{"name":"note","type":["null","string"]}]})";
  const std::string declared =
      R"({"type":"record","name":"Reading","fields":[{"name":"id","type":"long"},{"name":"site","type":"string"},{"name":"note","type":["null","string"]},{"name":"pico_offset","type":"long"}]})";
  std::vector<std::string> datums;  // Avro binary, encoded here by hand (Avro 1.11 spec)
  for (int i = 0; i < 300; ++i) {
    std::string d, site = "site-" + std::to_string(i % 7);
    s3::append_avro_long(d, i * 1000);
    s3::append_avro_long(d, static_cast<int64_t>(site.size()));
    d += site;
    if (i % 3 == 0) {
      s3::append_avro_long(d, 1);
      s3::append_avro_long(d, 4);
      d += "warm";
    } else {
      s3::append_avro_long(d, 0);
    }
    datums.push_back(d);
  }
  kafka.produce_values(topic, datums);
  Runtime rt(kafka.bootstrap(), "avro");
  rt.add_definition("s.toml",
                    plugin_definition("s3avro", "libpicomq_connector_s3_sink",
                                      "topics = [\"" + topic + "\"]\nschema = \"avro\"\navro_schema_json = '" + writer +
                                          "'\nbatch_length = 64\npoll_interval = \"100ms\"",
                                      s3.plugin_config(bucket) + "format = \"avro\"\navro_schema = '" + declared +
                                          "'\nmax_object_records = 128\nchunk_size = \"1KiB\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3avro"), topic) == 300; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto objects = s3.objects(bucket);
  ASSERT_EQ(objects.size(), 3u);  // 0-127, 128-255, 256-299
  EXPECT_EQ(objects[2].key, topic + "/partition=0/" + topic + "+0+00000000000000000256.avro");
  std::vector<nlohmann::json> records;
  for (const auto& o : objects) {
    const auto file = nlohmann::json::parse(o.text);
    EXPECT_EQ(file["codec"], "deflate") << o.key;
    for (const auto& r : file["records"]) records.push_back(r);
  }
  ASSERT_EQ(records.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(records[i]["id"], i * 1000);
    EXPECT_EQ(records[i]["site"], "site-" + std::to_string(i % 7));
    EXPECT_EQ(records[i]["note"], i % 3 == 0 ? nlohmann::json("warm") : nlohmann::json(nullptr));
    EXPECT_EQ(records[i]["pico_offset"], i);
  }
}

// A registry-framed Avro topic (confluent-kafka's AvroSerializer; two schema ids) written as
// Avro files without a declared schema: each object is of the writer schema its records were
// decoded by (ABI 2.4), a schema change ends the object, fastavro reads the registry's schema
// back from every file; another run with other batches cuts the same objects with the same bytes.
TEST(S3SinkKafka, AvroFilesTakeTheWriterSchemaOfARegistryFramedTopicAndEndWhereItChanges) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  SchemaRegistry registry;
  registry.start();
  const auto framed = registry.encode();
  const auto ids = nlohmann::json::parse(read_file(framed / "ids.json"));
  const std::string order_schema = registry.schema(ids["order"].get<int>()),
                    ping_schema = registry.schema(ids["ping1"].get<int>());
  ASSERT_NE(order_schema, ping_schema);
  const auto topic = unique_name("s3.registry");
  kafka.create_topic(topic);
  std::vector<std::string> values;
  values.reserve(100);
  for (int i = 0; i < 100; ++i) values.push_back(read_file(framed / "ping1.bin"));
  for (int i = 0; i < 3; ++i) values.push_back(read_file(framed / "order.bin"));
  for (int i = 0; i < 50; ++i) values.push_back(read_file(framed / "ping2.bin"));
  kafka.produce_values(topic, values);

  auto run = [&](const std::string& key, const std::string& bucket, int batch_length) {
    Runtime rt(kafka.bootstrap(), key);
    rt.env("REGISTRY_URL", registry.url());
    rt.add_definition("s.toml",
                      plugin_definition(key, "libpicomq_connector_s3_sink",
                                        "topics = [\"" + topic +
                                            "\"]\nschema = \"avro\"\navro_framing = \"registry\"\n"
                                            "avro_registry_url = \"${REGISTRY_URL}\"\nbatch_length = " +
                                            std::to_string(batch_length) + "\npoll_interval = \"100ms\"",
                                        s3.plugin_config(bucket) + "format = \"avro\"\nmax_object_records = 64\n"));
    rt.start();
    EXPECT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 153; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  };
  const auto bucket = s3.create_bucket("kafka-registry");
  run("s3reg", bucket, 40);
  const auto objects = s3.objects(bucket);
  // ping 0-63 (max_object_records), ping 64-99 (the schema changes), order 100-102, ping 103-152.
  std::vector<std::string> keys;
  keys.reserve(objects.size());
  for (const auto& o : objects) keys.push_back(o.key.substr(o.key.rfind('+') + 1));
  ASSERT_EQ(keys, (std::vector<std::string>{"00000000000000000000.avro", "00000000000000000064.avro",
                                            "00000000000000000100.avro", "00000000000000000103.avro"}));
  const std::vector<std::string> schemas{ping_schema, ping_schema, order_schema, ping_schema};
  const std::vector<size_t> counts{64, 36, 3, 50};
  for (size_t i = 0; i < objects.size(); ++i) {
    const auto file = nlohmann::json::parse(objects[i].text);  // fastavro's reading
    EXPECT_EQ(file["schema"]["name"], nlohmann::json::parse(schemas[i])["namespace"].get<std::string>() + "." +
                                          nlohmann::json::parse(schemas[i])["name"].get<std::string>())
        << objects[i].key;
    EXPECT_EQ(file["schema"]["fields"].size(), nlohmann::json::parse(schemas[i])["fields"].size()) << objects[i].key;
    ASSERT_EQ(file["records"].size(), counts[i]) << objects[i].key;
  }
  const auto pings = nlohmann::json::parse(objects[3].text)["records"];
  EXPECT_EQ(pings[0], nlohmann::json::parse(R"({"n":2,"at":"2024-05-02 00:00:00+00:00","tag":null})"));
  EXPECT_EQ(nlohmann::json::parse(objects[0].text)["records"][0],
            nlohmann::json::parse(R"({"n":1,"at":"2024-05-01 00:00:00+00:00","tag":"x"})"));
  const auto order = nlohmann::json::parse(objects[2].text)["records"][0];
  EXPECT_EQ(order["price"], "-12345678901234567890.1234");
  EXPECT_EQ(order["day"], "2024-01-31");
  EXPECT_EQ(order["uid"], "123e4567-e89b-12d3-a456-426614174000");

  // Other batches, the same objects byte for byte.
  const auto again = s3.create_bucket("kafka-registry-again");
  run("s3reg2", again, 7);
  const auto replay = s3.objects(again);
  ASSERT_EQ(replay.size(), objects.size());
  for (size_t i = 0; i < replay.size(); ++i) {
    EXPECT_EQ(replay[i].key, objects[i].key);
    EXPECT_TRUE(replay[i].bytes == objects[i].bytes) << replay[i].key << " differs between the runs";
  }
}

// A streamed object's marker (`_picomq/<name>.last-offset`), not data.
bool is_marker(const S3Object& o) { return o.key.find("/_picomq/") != std::string::npos; }

// Data objects (not the markers) as (first offset, count of lines).
std::vector<std::pair<int64_t, int64_t>> data_objects(const std::vector<S3Object>& objects) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& o : objects)
    if (!is_marker(o))
      out.emplace_back(std::stoll(o.key.substr(o.key.size() - 25, 20)), std::count(o.text.begin(), o.text.end(), '\n'));
  return out;
}

// n JSON values of ~1 KB: {"n": i, "pad": "xxx..."}.
std::vector<std::string> padded_values(int n) {
  const std::string pad(1000, 'x');
  std::vector<std::string> values;
  values.reserve(n);
  for (int i = 0; i < n; ++i) values.push_back("{\"n\":" + std::to_string(i) + ",\"pad\":\"" + pad + "\"}");
  return values;
}

// A large object through Kafka: it goes up in parts of 5 MiB (streamed multipart; that they go up
// while the object is open is shown in sink_test.cpp), no offset is committed before
// CompleteMultipartUpload, and the object reads back whole.
TEST(S3SinkKafka, ALargeObjectStreamsItsPartsAndIsCommittedOnlyWhenComplete) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-large");
  const auto topic = unique_name("s3.large");
  kafka.create_topic(topic);
  const auto values = padded_values(12000);
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap(), "large");
  rt.add_definition("s.toml", definition("s3large", topic, bucket,
                                         "compression = \"none\"\ninclude_metadata = false\npart_size = \"5MiB\"\n"
                                         "chunk_size = \"256KiB\"\nmax_object_records = 12000\n",
                                         "batch_length = 500\npoll_interval = \"5s\""));
  rt.start();
  // A batch completes only when the object holding its records is complete, so every offset the
  // group commits has its last record (c - 1) inside an object that is there when the commit is
  // seen. All 24 batches of the one object complete together and the runtime stores their offsets
  // in order, so a commit may go out between two stores (500, then 12000): that is fine, record
  // 499 is in the complete object. Objects are read back as [first, end) ranges when each
  // committed offset is first seen: a replay after a rebalance may later overwrite an object
  // with a longer one of the same key (the S3 sink's replay rule).
  auto object_ranges = [&] {
    auto ranges = data_objects(s3.objects(bucket));
    for (auto& [first, count] : ranges) count += first;  // [first, end)
    return ranges;
  };
  std::set<int64_t> seen;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> ranges_when_seen;
  ASSERT_TRUE(wait_until(
      [&] {
        const int64_t c = kafka.committed(group_of("s3large"), topic);
        if (seen.insert(c).second && c > 0) ranges_when_seen[c] = object_ranges();
        return c == 12000;
      },
      60s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto objects = s3.objects(bucket);
  std::map<std::string, std::string> markers;  // object name -> last offset
  std::set<int64_t> ends{-1001};
  std::string all;
  uint64_t multipart = 0;
  for (const auto& o : objects) {
    const size_t slash = o.key.rfind('/');
    if (is_marker(o)) {
      // <name>.<16 hex digits: the upload's token>.last-offset
      markers[o.key.substr(slash + 1, o.key.size() - slash - 1 - std::string(".0123456789abcdef.last-offset").size())] =
          o.text;
      continue;
    }
    all += o.text;
    ends.insert(std::stoll(o.key.substr(o.key.size() - 25, 20)) + std::count(o.text.begin(), o.text.end(), '\n'));
    if (o.bytes.size() > (5u << 20)) {
      ++multipart;
      EXPECT_NE(o.etag.find('-'), std::string::npos) << o.key << " is larger than a part: a multipart ETag";
      EXPECT_EQ(markers[o.key.substr(slash + 1)], std::to_string(*ends.rbegin() - 1))
          << "its marker holds its last offset";
    }
  }
  EXPECT_GE(multipart, 1u) << rt.log();
  for (const auto& seen : ranges_when_seen) {
    const auto c = seen.first;
    const auto& ranges = seen.second;
    EXPECT_TRUE(
        std::any_of(ranges.begin(), ranges.end(), [c](const auto& r) { return r.first <= c - 1 && c - 1 < r.second; }))
        << "offset " << c << " committed while record " << c - 1 << " was in no complete object\n"
        << rt.log();
  }
  std::string expected;
  for (const auto& v : values) expected += v + "\n";
  EXPECT_TRUE(all == expected) << "the objects, in key order, hold every record once, in order";
  std::printf("objects: %zu (%llu multipart), committed offsets seen:", objects.size() - markers.size(),
              static_cast<unsigned long long>(multipart));
  for (int64_t c : seen) std::printf(" %lld", static_cast<long long>(c));
  std::printf("\n");
}

// The sink releases each batch once its records are encoded (ABI 2.3): the runtime frees them,
// so an object many times the runtime's buffer limit is written whole, and what the process
// holds is the object's parts in flight, not its records. Without the release the buffer fills,
// the consumer pauses and the idle flush cuts the object at the buffer's size.
TEST(S3SinkKafka, AnObjectManyTimesTheRuntimesBufferIsWrittenWholeWithoutHoldingItsRecords) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-released");
  const auto topic = unique_name("s3.released");
  kafka.create_topic(topic);
  constexpr int kRecords = 100000;  // ~100 MB of JSON
  const auto values = padded_values(kRecords);
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap(), "released");
  rt.runtime_settings("max_buffered_bytes = \"8MiB\"\n");
  rt.add_definition("s.toml", definition("s3released", topic, bucket,
                                         "compression = \"none\"\ninclude_metadata = false\npart_size = \"5MiB\"\n"
                                         "parts_in_flight = 2\nchunk_size = \"1MiB\"\nmax_object_records = 100000\n"
                                         "max_object_bytes = \"1GiB\"\n",
                                         "batch_length = 500\npoll_interval = \"3s\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3released"), topic) == kRecords; }, 120s)) << rt.log();
  const long peak_kb = rt.peak_rss_kb();
  const auto counters = rt.sink_status("s3released").value("counters", nlohmann::json::object());
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto objects = s3.objects(bucket);
  EXPECT_EQ(data_objects(objects), (std::vector<std::pair<int64_t, int64_t>>{{0, kRecords}}))
      << "one object of every record: nothing sealed it early\n"
      << rt.log();
  std::string expected;
  for (const auto& v : values) expected += v + "\n";
  for (const auto& o : objects)
    if (!is_marker(o)) EXPECT_TRUE(o.text == expected) << "every record once, in order";
  std::printf("peak RSS %ld kB for a %zu-byte object; sink counters %s\n", peak_kb, expected.size(),
              counters.dump().c_str());
  EXPECT_LT(peak_kb * 1024, static_cast<long>(expected.size()))
      << "the process held less than the object (it holds parts, not records)";
  EXPECT_LE(counters.value("peak_unuploaded_bytes", uint64_t{0}), uint64_t{2 * 5 + 1} << 20)
      << "the sink's own bytes stay within parts_in_flight x part_size (+ one chunk)";
}

// A released batch cannot be resent: when its object fails, the runtime reads the records again
// from the broker (after the retry policy's back-off), and the object is made again from its
// first offset under the same key. Nothing is lost or doubled.
TEST(S3SinkKafka, AnOutageMidObjectReadsTheReleasedRecordsAgainFromTheBrokerAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("kafka-rewind");
  const auto topic = unique_name("s3.rewind");
  kafka.create_topic(topic);
  constexpr int kRecords = 30000;
  const auto values = padded_values(kRecords);
  // A third first: the object (30000 records) stays open, two of its parts up, until the rest.
  kafka.produce_values(topic, std::vector<std::string>(values.begin(), values.begin() + 10000));
  Runtime rt(kafka.bootstrap(), "rewind");
  rt.add_definition("s.toml", definition("s3rewind", topic, bucket,
                                         "compression = \"none\"\ninclude_metadata = true\npart_size = \"5MiB\"\n"
                                         "parts_in_flight = 1\nchunk_size = \"1MiB\"\nmax_object_records = 30000\n"
                                         "max_object_bytes = \"1GiB\"\nretry_timeout = \"1s\"\n",
                                         "batch_length = 500\npoll_interval = \"60s\""));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] { return rt.sink_status("s3rewind").value("counters", nlohmann::json::object()).value("parts", 0) >= 2; },
      60s))
      << "two parts of the object are up\n"
      << rt.log();
  s3.kill();
  kafka.produce_values(topic, std::vector<std::string>(values.begin() + 10000, values.end()));
  ASSERT_TRUE(wait_until([&] { return rt.log().find("are read again from offset") != std::string::npos; }, 30s))
      << rt.log();
  EXPECT_EQ(kafka.committed(group_of("s3rewind"), topic), -1001) << "nothing committed before the object is written";
  s3.start();
  // Commits go on once the re-read records are in objects again. The last object (its start
  // moved by the recovery, so it does not reach max_object_records) is sealed by the shutdown's
  // flush, once every record has been read.
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("s3rewind"), topic) > 0; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("s3rewind"), "running");
  EXPECT_NE(rt.log().find("reading " + topic + "[0] again from offset 0"), std::string::npos) << rt.log();
  // Every record read, and the reading settled: under load the store may still refuse the first
  // requests after its restart, and each such failure reads the records again from the failed
  // object's first offset (the objects already up are found and skipped). The status file is
  // rewritten once a second, so a position seen less than that after the last re-read may be
  // from before it: read it again until no re-read came in between.
  const auto reads_again = [&] {
    const std::string log = rt.log();
    size_t n = 0;
    for (size_t at = log.find("again from offset"); at != std::string::npos; at = log.find("again from offset", at + 1))
      ++n;
    return n;
  };
  ASSERT_TRUE(wait_until(
      [&] {
        const size_t before = reads_again();
        std::this_thread::sleep_for(2500ms);  // the status rewritten at least twice since `before`
        const auto lag = rt.block_status("s3rewind").value("lag", nlohmann::json::array());
        const bool all_read = !lag.empty() && lag[0].value("position", int64_t{-1}) == kRecords;
        return all_read && reads_again() == before;
      },
      90s))
      << rt.block_status("s3rewind").dump() << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(kafka.committed(group_of("s3rewind"), topic), kRecords) << rt.log();
  std::vector<S3Object> objects;
  for (auto& o : s3.objects(bucket))
    if (!is_marker(o)) objects.push_back(std::move(o));
  const auto records = records_of(objects);  // fails on a record found twice
  ASSERT_EQ(records.size(), static_cast<size_t>(kRecords));
  EXPECT_EQ(records.begin()->first, (std::pair<int, int64_t>{0, 0}));
  EXPECT_EQ(records.rbegin()->first, (std::pair<int, int64_t>{0, kRecords - 1}));
  std::printf("%zu objects after the outage\n", objects.size());
}

// Late uploads (docs/sinks/s3.md, "Behaviour under replay and crashes"): a store can apply a killed run's upload
// after a newer run's (a restarted server holding requests, a slow node, a resend inside a proxy).
// The kit's receiver stands in front of SeaweedFS and holds chosen uploads, read whole, until the
// test releases them: after the run that sent them was SIGKILLed, after or before a newer run's
// upload of the same key. Each object of a killed run is cut by a flush at another offset than
// the newer run's, so the two are different contents under one key. The first upload of a key
// wins (If-None-Match: *), and a run refused a key continues after the records the object there
// holds: every record once, and the runtime keeps running.
namespace late {

const std::string kFirstKey = "+00000000000000000000.json";
const std::string kFirstKeyInPath = "%2B00000000000000000000.json";  // as the request's path has it

std::vector<S3Object> data(std::vector<S3Object> objects) {
  std::erase_if(objects, is_marker);
  return objects;
}

// One partition's topic and a bucket behind the store (the kit's receiver forwarding to
// SeaweedFS), and the runs of one sink definition `key` against them.
struct Setup {
  Setup(const std::string& key, const std::string& plugin_config, const std::string& block)
      : kafka(Kafka::shared()),
        s3(SeaweedfsServer::shared()),
        key(key),
        config(plugin_config),
        block(block + static_member(key)) {
    store.forward_to(s3.endpoint());
    bucket = s3.create_bucket(key);
    topic = unique_name("s3." + key);
    kafka.create_topic(topic);
  }
  std::unique_ptr<Runtime> run(const std::string& name) const {
    auto rt = std::make_unique<Runtime>(kafka.bootstrap(), key + "-" + name);
    rt->add_definition("s.toml", proxied_definition(key, topic, bucket, store, config, block));
    rt->start();
    return rt;
  }
  // A run SIGKILLed once the store holds `held` requests (its own among them).
  void killed_run(size_t held) const {
    auto rt = run("killed");
    ASSERT_TRUE(wait_until([&] { return store.held().size() >= held; }, 60s)) << rt->log();
    rt->kill_hard();
    rt->wait_exit(10s);
  }
  bool committed(int64_t offset) const {
    return wait_until([&] { return kafka.committed(group_of(key), topic) == offset; }, 60s);
  }
  int64_t counter(Runtime& rt, const char* name) const {
    return rt.sink_status(key).value("counters", nlohmann::json::object()).value(name, int64_t{0});
  }
  // Stops the run (SIGTERM, exit 0 expected); the bucket's records, each once.
  std::map<std::pair<int, int64_t>, std::string> stop_and_read(Runtime& rt) const {
    EXPECT_EQ(rt.sink_state(key), "running");
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    return records_of(data(s3.objects(bucket)));  // fails on a record found twice
  }

  Kafka& kafka;
  SeaweedfsServer& s3;
  kit::testing::HttpReceiver store;
  std::string key, config, block, bucket, topic;
};

}  // namespace late

TEST(S3SinkKafka, AKilledRunsUploadLandingAfterTheLiveRunsCommitIsRefusedAndLosesNothing) {
  late::Setup t("s3latelast", "compression = \"none\"\n", "batch_length = 100\npoll_interval = \"300ms\"\n");
  t.store.script({{"method", "PUT"}, {"path_contains", late::kFirstKeyInPath}, {"action", "hold"}, {"count", 1}});
  t.kafka.produce_values(t.topic, json_values(0, 300));
  t.killed_run(1);
  EXPECT_EQ(t.kafka.committed(group_of(t.key), t.topic), -1001);
  t.kafka.produce_values(t.topic, json_values(300, 600));
  auto live = t.run("live");
  ASSERT_TRUE(t.committed(600)) << live->log();
  // The killed run's object of the first records lands now, under the key the live run wrote.
  const auto released = t.store.release();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released.begin()->second, 412) << "the first upload of the key won";
  EXPECT_EQ(t.store.stats().applied_late, 1u) << "its sender was gone";
  const auto records = t.stop_and_read(*live);
  ASSERT_EQ(records.size(), 600u) << live->log();
  for (int64_t i : {0, 299, 300, 599}) EXPECT_EQ(records.at({0, i}), "{\"n\":" + std::to_string(i) + "}");
}

TEST(S3SinkKafka, AKilledRunsUploadLandingBeforeTheLiveRunsTakesTheKeyAndTheLiveRunGoesOnAfterIt) {
  late::Setup t("s3latefirst", "compression = \"none\"\n", "batch_length = 100\npoll_interval = \"300ms\"\n");
  // The killed run's upload of the first key, then the live run's.
  t.store.script({{"method", "PUT"}, {"path_contains", late::kFirstKeyInPath}, {"action", "hold"}, {"count", 2}});
  t.kafka.produce_values(t.topic, json_values(0, 300));
  t.killed_run(1);
  t.kafka.produce_values(t.topic, json_values(300, 600));
  auto live = t.run("live");
  ASSERT_TRUE(wait_until([&] { return t.store.held().size() == 2; }, 60s)) << live->log();
  const auto held = t.store.held();
  EXPECT_TRUE(held[0].client_gone && !held[1].client_gone);
  EXPECT_EQ(t.store.release({held[0].id}).at(held[0].id), 200) << "the killed run's object lands first";
  EXPECT_EQ(t.store.release({held[1].id}).at(held[1].id), 412) << "the live run's upload of the key is refused";
  ASSERT_TRUE(t.committed(600)) << live->log();
  EXPECT_NE(live->log().find("was taken by an object with other content"), std::string::npos) << live->log();
  EXPECT_EQ(t.counter(*live, "keys_taken"), 1);
  const auto records = t.stop_and_read(*live);
  ASSERT_EQ(records.size(), 600u) << live->log();
  const auto objects = late::data(t.s3.objects(t.bucket));
  ASSERT_GE(objects.size(), 2u);
  EXPECT_TRUE(objects[0].key.ends_with(late::kFirstKey)) << "the killed run's object, as it cut it";
  EXPECT_LT(std::count(objects[0].text.begin(), objects[0].text.end(), '\n'), 600);
}

TEST(S3SinkKafka, AKilledRunsUploadLandingBetweenThePartsOfTheLiveRunsMultipartUploadWinsTheKeyAndNothingIsLost) {
  late::Setup t("s3lateparts", "compression = \"none\"\npart_size = \"5MiB\"\nchunk_size = \"256KiB\"\n",
                "batch_length = 500\npoll_interval = \"1s\"\n");
  const auto values = padded_values(8000);  // ~9 MB with the metadata: two parts of 5 MiB
  t.store.script({{"method", "PUT"}, {"path_contains", late::kFirstKeyInPath}, {"action", "hold"}, {"count", 1}});
  t.kafka.produce_values(t.topic, std::vector<std::string>(values.begin(), values.begin() + 1000));
  t.killed_run(1);  // its PUT of [0, 999]
  t.kafka.produce_values(t.topic, std::vector<std::string>(values.begin() + 1000, values.end()));
  // The live run's object [0, 7999]: part 1 goes up as it grows, part 2 at the seal is held.
  t.store.script({{"method", "PUT"}, {"path_contains", "partNumber=2&"}, {"action", "hold"}, {"count", 1}});
  auto live = t.run("live");
  ASSERT_TRUE(wait_until([&] { return t.store.held().size() == 2; }, 60s)) << live->log();
  const auto held = t.store.held();
  EXPECT_EQ(t.store.release({held[0].id}).at(held[0].id), 200) << "the killed run's object lands between the parts";
  EXPECT_EQ(t.store.release({held[1].id}).at(held[1].id), 200);
  ASSERT_TRUE(t.committed(8000)) << live->log();
  EXPECT_EQ(t.counter(*live, "keys_taken"), 1);
  EXPECT_GE(t.counter(*live, "multipart_aborted"), 1) << "the refused upload is aborted";
  const auto records = t.stop_and_read(*live);
  ASSERT_EQ(records.size(), 8000u) << live->log();
  const auto all = t.s3.objects(t.bucket);
  const auto objects = late::data(all);
  ASSERT_GE(objects.size(), 2u);
  EXPECT_TRUE(objects[0].key.ends_with(late::kFirstKey));
  EXPECT_EQ(std::count(objects[0].text.begin(), objects[0].text.end(), '\n'), 1000) << "the killed run's object, whole";
  // The records come again from the broker, each retried batch ending its object (the rewind's rule).
  EXPECT_TRUE(objects[1].key.ends_with("+00000000000000001000.json"))
      << "the live run went on after the killed run's last record";
  const auto multipart = std::count_if(objects.begin(), objects.end(),
                                       [](const S3Object& o) { return o.etag.find('-') != std::string::npos; });
  EXPECT_EQ(all.size() - objects.size(), static_cast<size_t>(multipart))
      << "a marker per multipart object: the refused upload's was removed";
}

// A lost answer to the sink's own CompleteMultipartUpload (issue 52): the store applies it, the
// connection is reset before the answer, the resend is refused (412) by the object that upload
// made. The object names this upload's marker, so it is taken as written and the marker stays;
// a replay from inside the object (an offset reset, or a crash between two offset stores of
// one object) then skips the records the object holds, and one from after it writes on.
TEST(S3SinkKafka, ALostAnswerToItsOwnCompleteKeepsTheMarkerAndReplaysFromInsideOrAfterTheObjectDoubleNothing) {
  late::Setup t("s3lostcomplete", "compression = \"none\"\npart_size = \"5MiB\"\nchunk_size = \"256KiB\"\n",
                "batch_length = 500\npoll_interval = \"1s\"\n");
  const auto values = padded_values(10500);  // ~1.2 KB a record with the metadata: [0, 7999] is two parts
  t.store.script({{"method", "POST"},
                  {"path_contains", t.topic},
                  {"when_body_contains", "<CompleteMultipartUpload>"},
                  {"forward", true},
                  {"action", "reset"},
                  {"count", 1}});
  t.kafka.produce_values(t.topic, std::vector<std::string>(values.begin(), values.begin() + 8000));
  {
    auto first = t.run("first");
    ASSERT_TRUE(t.committed(8000)) << first->log();
    // (The status file follows the counters within a second.)
    EXPECT_TRUE(wait_until([&] { return t.counter(*first, "already_written_objects") == 1; }, 10s))
        << "the resend found the object its first send made";
    EXPECT_EQ(t.counter(*first, "multipart_abort_failed"), 0) << "a completed upload is not aborted";
    (void)t.stop_and_read(*first);
  }
  const auto all = t.s3.objects(t.bucket);
  const auto objects = late::data(all);
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_NE(objects[0].etag.find('-'), std::string::npos) << "one multipart object";
  EXPECT_EQ(all.size(), 2u) << "its marker is still there";

  // From inside the object: the group set back to offset 3000, 2000 records more.
  t.kafka.commit(group_of(t.key), t.topic, 0, 3000);
  t.kafka.produce_values(t.topic, std::vector<std::string>(values.begin() + 8000, values.begin() + 10000));
  {
    auto replay = t.run("inside");
    ASSERT_TRUE(t.committed(10000)) << replay->log();
    EXPECT_NE(replay->log().find("resumes at offset 3000, inside an object written up to offset 7999"),
              std::string::npos)
        << replay->log();
    const auto records = t.stop_and_read(*replay);  // fails on a record found twice
    ASSERT_EQ(records.size(), 10000u) << replay->log();
  }
  // From after it: the group set back to 8000, the start of the next object.
  t.kafka.commit(group_of(t.key), t.topic, 0, 8000);
  t.kafka.produce_values(t.topic, std::vector<std::string>(values.begin() + 10000, values.end()));
  auto after = t.run("after");
  ASSERT_TRUE(t.committed(10500)) << after->log();
  const auto records = t.stop_and_read(*after);
  ASSERT_EQ(records.size(), 10500u) << after->log();
  for (int64_t i : {0, 2999, 3000, 7999, 8000, 9999, 10000, 10499})
    EXPECT_NE(records.at({0, i}).find("\"n\":" + std::to_string(i) + ","), std::string::npos) << i;
}

// Key templates that cannot tell two topic-partitions apart for what the block can see are
// refused before the sink starts (`--check`), with why; a block with a pattern needs {topic}.
TEST(S3SinkKafka, KeyTemplatesThatCannotTellTopicPartitionsApartAreRefusedAtCheck) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("templates");
  auto check = [&](const std::string& block, const std::string& key_template) {
    Runtime rt(kafka.bootstrap(), "check");
    rt.add_definition("s.toml",
                      plugin_definition("s3check", "libpicomq_connector_s3_sink", block + "\nschema = \"json\"\n",
                                        s3.plugin_config(bucket) + "key_template = \"" + key_template + "\"\n"));
    return rt.check();
  };
  {
    const auto [code, out] = check("topics = [\"a.eu\", \"b.eu\"]", "p{partition}/{start_offset}.{ext}");
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("key_template"), std::string::npos) << out;
    EXPECT_NE(out.find("topics 'a.eu' and 'b.eu' of the [[topics]] blocks resolve to the same keys"), std::string::npos)
        << out;
  }
  {
    const auto [code, out] = check("pattern = 'orders\\..*'", "{topic_segment[-1]}/p{partition}/{start_offset}.{ext}");
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("subscribes by pattern"), std::string::npos) << out;
  }
  {
    const auto [code, out] =
        check("topics = [\"a.eu\", \"b.eu\"]", "{topic_segment[-1]}/p{partition}/{start_offset}.{ext}");
    EXPECT_NE(code, 0) << out;
  }
  {
    const auto [code, out] = check("topics = [\"a.eu\"]", "{topic}/{start_offset}-{partition}.{ext}");
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("{partition} comes after {start_offset}"), std::string::npos) << out;
  }
  {
    const auto [code, out] =
        check("topics = [\"a.eu\", \"a.us\"]", "{topic_segment[-1]}/p{partition}/{start_offset}.{ext}");
    EXPECT_EQ(code, 0) << "the segments tell the two topics apart: " << out;
  }
  {
    const auto [code, out] = check("pattern = 'orders\\..*'", "{topic}/{partition}/{hour}/{start_offset}.{ext}");
    EXPECT_EQ(code, 0) << out;
  }
}

// The kill loop: 8 SIGKILLs under load (PICOMQ_S3_KILL_ROUNDS for more), one block of two
// topics of 2 partitions each, records produced in bursts so that objects end at flushes (at
// offsets that differ from run to run), the default options, and the store in front of SeaweedFS
// holding a random 30% of the uploads (PUT, CompleteMultipartUpload) for 0.2-4 s, forwarded
// whether their sender is alive or not, and applying 5% of the others without the answer
// reaching the sink (the connection reset after the store has the object). At the end: every
// record once, read with boto3; the figures printed.
TEST(S3SinkKafka, EightSigkillsUnderLoadWithUploadsLandingLateLoseAndDoubleNothing) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  kit::testing::HttpReceiver store;
  store.forward_to(s3.endpoint());
  const auto bucket = s3.create_bucket("late-kills");
  const std::vector<std::string> topics{unique_name("s3.late.kills.a"), unique_name("s3.late.kills.b")};
  constexpr int kPartitions = 2, kBursts = 10, kBurst = 250;  // per topic-partition: 2500 a round
  const char* rounds_env = std::getenv("PICOMQ_S3_KILL_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 8;
  for (const auto& topic : topics) kafka.create_topic(topic, kPartitions);
  const std::string block = "batch_length = 200\npoll_interval = \"200ms\"\n" + static_member("s3latekills");
  // The objects' requests (their keys hold the topic), not the start's probe of the store.
  for (const auto& topic : topics) {
    for (const char* method : {"PUT", "POST"})
      store.script({{"method", method},
                    {"path_contains", topic},
                    {"action", "hold"},
                    {"share", 0.3},
                    {"release_after", {0.2, 4.0}},
                    {"count", 0}});
    store.script({{"method", "PUT"},
                  {"path_contains", topic},
                  {"forward", true},
                  {"action", "reset"},
                  {"share", 0.05},
                  {"count", 0}});
  }
  const unsigned seed = std::random_device{}();
  std::mt19937 random(seed);
  std::printf("kill loop: seed %u, %d rounds\n", seed, rounds);
  int produced = 0;  // per topic-partition
  auto burst = [&] {
    for (size_t t = 0; t < topics.size(); ++t)
      for (int p = 0; p < kPartitions; ++p) {
        const int base = static_cast<int>(t) * 10000000 + p * 1000000 + produced;
        kafka.produce_values(topics[t], json_values(base, base + kBurst), p);
      }
    produced += kBurst;
  };
  const auto definition = proxied_definition("s3latekills", topics, bucket, store, "", block);
  for (int round = 0; round < rounds; ++round) {
    Runtime rt(kafka.bootstrap(), "late-kills-" + std::to_string(round));
    rt.add_definition("s.toml", definition);
    if (std::getenv("PICOMQ_S3_KILL_LOGS")) rt.log_level("debug");
    rt.start();
    // Killed under load: once it reads (a run killed before it joined the group proves nothing).
    ASSERT_TRUE(rt.wait_assigned("s3latekills", 60s)) << rt.log();
    const int kill_after = std::uniform_int_distribution<int>(3, kBursts)(random);
    for (int b = 0; b < kBursts; ++b) {
      burst();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(250, 400)(random)));
      if (b + 1 == kill_after) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(random)));
        rt.kill_hard();
        rt.wait_exit(10s);
      }
    }
    if (rt.running()) {
      rt.kill_hard();
      rt.wait_exit(10s);
    }
    if (std::getenv("PICOMQ_S3_KILL_LOGS")) std::printf("%s\n", rt.log().c_str());
    int64_t committed = 0;
    for (const auto& topic : topics) committed += committed_sum(kafka, group_of("s3latekills"), topic, kPartitions);
    std::printf("round %d: killed after burst %d, committed %lld of %d\n", round, kill_after,
                static_cast<long long>(committed), produced * kPartitions * static_cast<int>(topics.size()));
  }
  Runtime last(kafka.bootstrap(), "late-kills-last");
  last.add_definition("s.toml", definition);
  last.start();
  ASSERT_TRUE(wait_until(
      [&] {
        return std::all_of(topics.begin(), topics.end(), [&](const std::string& topic) {
          return kafka.all_committed(group_of("s3latekills"), topic, kPartitions, produced);
        });
      },
      120s))
      << last.log();
  EXPECT_EQ(last.sink_state("s3latekills"), "running");
  const auto counters = last.sink_status("s3latekills").value("counters", nlohmann::json::object());
  last.signal(SIGTERM);
  EXPECT_EQ(last.wait_exit(30s), 0) << last.log();
  // Every held upload lands (late ones of killed runs included) before the bucket is read.
  ASSERT_TRUE(wait_until([&] { return store.stats().held_now == 0; }, 30s));
  const auto stats = store.stats();
  const auto objects = late::data(s3.objects(bucket));
  std::map<std::tuple<std::string, int, int64_t>, int> seen;
  for (const auto& o : objects) {
    for (size_t start = 0; start < o.text.size();) {
      const size_t end = o.text.find('\n', start);
      const auto j = nlohmann::json::parse(o.text.substr(start, end - start));
      start = end + 1;
      ++seen[{j["pico_topic"].get<std::string>(), j["pico_partition"].get<int>(), j["pico_offset"].get<int64_t>()}];
      EXPECT_NE(o.key.find(j["pico_topic"].get<std::string>()), std::string::npos)
          << "a record under another topic's key";
    }
  }
  int64_t lost = 0, doubled = 0;
  for (const auto& topic : topics)
    for (int p = 0; p < kPartitions; ++p)
      for (int64_t i = 0; i < produced; ++i) {
        const auto it = seen.find({topic, p, i});
        if (it == seen.end()) ++lost;
        else if (it->second > 1) doubled += it->second - 1;
      }
  std::string late;
  for (const auto& [status, n] : stats.late_answers) late += " " + status + ":" + std::to_string(n);
  const int records = produced * kPartitions * static_cast<int>(topics.size());
  std::printf(
      "kill loop: %d records, %zu objects, lost %lld, doubled %lld; uploads held %zu, applied after their "
      "run was killed %zu (answers%s); last run's counters %s\n",
      records, objects.size(), static_cast<long long>(lost), static_cast<long long>(doubled), stats.held,
      stats.applied_late, late.c_str(), counters.dump().c_str());
  ::testing::Test::RecordProperty("records", records);
  ::testing::Test::RecordProperty("held", static_cast<int>(stats.held));
  ::testing::Test::RecordProperty("applied_late", static_cast<int>(stats.applied_late));
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(doubled, 0);
  EXPECT_EQ(seen.size(), static_cast<size_t>(records));
  EXPECT_GT(stats.held, 0u);
}
}  // namespace
}  // namespace picomq::test
