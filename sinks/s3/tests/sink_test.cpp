// The S3 sink in the kit's fake host (the runtime's option checks, pending writes, flush,
// partition notifications) against the real SeaweedFS 4.48 server of this test process
// (sinks/s3/server.sh, started once; it verifies SigV4), everything read back with boto3. No
// broker: the integration tests run it through Kafka.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"
#include "s3/avro.h"
#include "s3/client.h"
#include "seaweedfs_server.h"

namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;
using picomq::test::S3Object;
using picomq::test::SeaweedfsServer;
using namespace std::chrono_literals;

namespace {

class S3Sink : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &SeaweedfsServer::shared();
    bucket_ = server_->create_bucket("sink");
    host_ = kt::FakeHost::load(S3_SINK_PLUGIN);
  }
  void TearDown() override {
    if (host_ && host_->is_open()) host_->close();
  }
  json base() const {
    return {{"bucket", bucket_},
            {"endpoint", server_->endpoint()},
            {"aws_access_key_id", SeaweedfsServer::kAccessKey},
            {"aws_secret_access_key", SeaweedfsServer::kSecretKey},
            {"retry_timeout", "20s"}};
  }
  void open(json config = json::object(), std::unique_ptr<kt::FakeHost>* host = nullptr) {
    const json defaults = base();
    for (const auto& [k, v] : defaults.items())
      if (!config.contains(k)) config[k] = v;
    (host ? *host : host_)->open(config.dump(), "s3test");
  }
  std::vector<S3Object> objects(const std::string& prefix = "") { return server_->objects(bucket_, prefix); }
  static std::vector<std::string> keys(const std::vector<S3Object>& objects) {
    std::vector<std::string> out;
    out.reserve(objects.size());
    for (const auto& o : objects) out.push_back(o.key);
    return out;
  }

  SeaweedfsServer* server_ = nullptr;
  std::string bucket_;
  std::unique_ptr<kt::FakeHost> host_;
};

TEST_F(S3Sink, JsonLinesObjectsUnderTheDefaultKeysReadBackExactlyWithBoto3) {
  open({{"compression", "gzip"}, {"max_object_records", 3}});
  TestBatch batch(
      "shop.orders", 1,
      {{.offset = 40, .payload = R"({"id":1})", .key = "k1", .headers = {{"h", "v"}}, .timestamp_ms = 1700000000000},
       {.offset = 41, .payload = R"({"id":2})", .timestamp_ms = 1700000000001},
       {.offset = 42, .payload = R"({"id":3})", .timestamp_ms = 1700000000002},
       {.offset = 43, .payload = std::nullopt, .key = "gone", .timestamp_ms = 1700000000003}});
  auto write = host_->start_write(batch);
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(write->completed()) << "offset 43 is in an object that is still open: the batch is not written yet";
  host_->flush();
  EXPECT_EQ(write->wait().status, PMQ_WRITE_OK) << write->wait().error;
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"shop.orders/partition=1/shop.orders+1+00000000000000000040.json.gz",
                                               "shop.orders/partition=1/shop.orders+1+00000000000000000043.json.gz"}));
  EXPECT_EQ(o[0].text,
            "{\"pico_topic\":\"shop.orders\",\"pico_partition\":1,\"pico_offset\":40,\"pico_timestamp\":1700000000000,"
            "\"pico_key\":\"azE=\",\"pico_headers\":{\"h\":\"v\"},\"payload\":{\"id\":1}}\n"
            "{\"pico_topic\":\"shop.orders\",\"pico_partition\":1,\"pico_offset\":41,\"pico_timestamp\":1700000000001,"
            "\"payload\":{\"id\":2}}\n"
            "{\"pico_topic\":\"shop.orders\",\"pico_partition\":1,\"pico_offset\":42,\"pico_timestamp\":1700000000002,"
            "\"payload\":{\"id\":3}}\n");
  EXPECT_EQ(o[1].text,
            "{\"pico_topic\":\"shop.orders\",\"pico_partition\":1,\"pico_offset\":43,\"pico_timestamp\":1700000000003,"
            "\"pico_key\":\"Z29uZQ==\",\"payload\":null}\n");
  EXPECT_EQ(o[0].bytes.substr(0, 2), "\x1f\x8b") << "a gzip file";
  // gzip's XFL byte: 4 = the fastest level, which the sink takes unless compression_level says.
  EXPECT_EQ(static_cast<uint8_t>(o[0].bytes[8]), 4) << "libdeflate's level 1 by default";
  EXPECT_EQ(host_->counter("objects"), 2u);
}

TEST_F(S3Sink, RawPayloadsZstdAndATemplateWithPrefixSinkKeyAndRecordTimeFields) {
  open({{"format", "raw"},
        {"raw_separator", "|"},
        {"compression", "zstd"},
        {"prefix", "landing"},
        {"key_template",
         "{sink_key}/{topic_segment[-1]}/{year}-{month}-{day}/{hour}/{partition}-{start_offset}.{ext}"}});
  const int64_t h22 = 1'700'000'000'000;  // 2023-11-14T22:13:20Z
  TestBatch batch("a.b.events", 0,
                  {{.offset = 0, .payload = "one", .timestamp_ms = h22},
                   {.offset = 1, .payload = "two", .timestamp_ms = h22 + 1000},
                   {.offset = 2, .payload = "three", .timestamp_ms = h22 + 3'600'000}},
                  PMQ_PAYLOAD_RAW, "raw");
  auto write = host_->start_write(batch);
  host_->flush();
  ASSERT_EQ(write->wait().status, PMQ_WRITE_OK) << write->wait().error;
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"landing/s3test/events/2023-11-14/22/0-00000000000000000000.bin.zst",
                                               "landing/s3test/events/2023-11-14/23/0-00000000000000000002.bin.zst"}));
  EXPECT_EQ(o[0].text, "one|two|");
  EXPECT_EQ(o[1].text, "three|");
}

TEST_F(S3Sink, CsvObjectsStartWithTheHeaderAndARecordThatIsNoObjectIsRefusedNotDropped) {
  open({{"format", "csv"},
        {"csv_columns", {"pico_offset", "id", "name"}},
        {"compression", "gzip"},
        {"compression_level", 9},
        {"max_object_records", 2}});
  auto w = host_->start_write(TestBatch::json(
      "csv", 0, 0, {R"({"id":1,"name":"a,b"})", R"("just a string")", R"({"id":3})", R"({"id":4,"name":"d"})"}));
  host_->flush();
  const auto outcome = w->wait();
  EXPECT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_EQ(outcome.rejected[0].reason, "csv: the payload is not a JSON object");
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"csv/partition=0/csv+0+00000000000000000000.csv.gz",
                                               "csv/partition=0/csv+0+00000000000000000003.csv.gz"}));
  EXPECT_EQ(o[0].text, "pico_offset,id,name\n0,1,\"a,b\"\n2,3,\n");
  EXPECT_EQ(o[1].text, "pico_offset,id,name\n3,4,d\n");
  EXPECT_EQ(static_cast<uint8_t>(o[0].bytes[8]), 2) << "gzip's XFL: compression_level 9 is a slow level";
}

TEST_F(S3Sink, ARevokedPartitionsOpenObjectIsWrittenAndAReassignmentResumesAfterIt) {
  open({{"compression", "none"}});
  host_->assign(0, {{"rev", 0}, {"rev", 1}});
  auto w0 = host_->start_write(TestBatch::json("rev", 0, 5, {R"({"p":0})"}));
  auto w1 = host_->start_write(TestBatch::json("rev", 1, 9, {R"({"p":1})"}));
  host_->revoke(0, {{"rev", 0}});
  EXPECT_EQ(w0->wait().status, PMQ_WRITE_OK) << w0->wait().error;
  EXPECT_FALSE(w1->completed()) << "partition 1 stays assigned: its object stays open";
  host_->flush();
  EXPECT_EQ(w1->wait().status, PMQ_WRITE_OK) << w1->wait().error;
  // Assigned again (to this instance): it resumes after the object written before.
  host_->assign(0, {{"rev", 0}});
  auto again = host_->start_write(TestBatch::json("rev", 0, 5, {R"({"p":0})", R"({"p":"new"})"}));
  host_->flush();
  EXPECT_EQ(again->wait().status, PMQ_WRITE_OK) << again->wait().error;
  EXPECT_EQ(keys(objects()), (std::vector<std::string>{"rev/partition=0/rev+0+00000000000000000005.json",
                                                       "rev/partition=0/rev+0+00000000000000000006.json",
                                                       "rev/partition=1/rev+1+00000000000000000009.json"}));
}

TEST_F(S3Sink, VirtualHostedAddressingIsSignedForTheBucketsHostName) {
  // <bucket>.localhost: SeaweedFS's -s3.domainName; libcurl resolves *.localhost to loopback.
  open({{"endpoint", "http://localhost:" + std::to_string(server_->port())},
        {"addressing", "virtual"},
        {"compression", "none"}});
  EXPECT_TRUE(host_->logged("(virtual-hosted)"));
  auto w = host_->start_write(TestBatch::json("vhost", 0, 0, {R"({"v":1})"}));
  host_->flush();
  EXPECT_EQ(w->wait().status, PMQ_WRITE_OK) << w->wait().error;
  EXPECT_EQ(keys(objects()), (std::vector<std::string>{"vhost/partition=0/vhost+0+00000000000000000000.json"}));
}

// Streaming: parts go up while the object is still open; the batch completes only when
// CompleteMultipartUpload has answered, and the object's bytes are those of one PUT.
TEST_F(S3Sink, ALargeObjectStreamsItsPartsWhileOpenAndCompletesItsBatchesOnlyWhenWhole) {
  const json config = {{"compression", "none"},
                       {"part_size", "5MiB"},
                       {"chunk_size", "256KiB"},
                       {"include_metadata", false},
                       {"conditional_create", true}};
  open(config);
  std::vector<std::string> payloads;
  const std::string pad(1000, 'p');
  payloads.reserve(12000);
  for (int i = 0; i < 12000; ++i) payloads.push_back("{\"n\":" + std::to_string(i) + ",\"pad\":\"" + pad + "\"}");
  std::vector<std::shared_ptr<kt::Write>> writes;
  writes.reserve(12);
  for (int b = 0; b < 12; ++b)  // batches of 1000 records (~1 MB)
    writes.push_back(host_->start_write(TestBatch::json(
        "big", 0, b * 1000, std::vector<std::string>(payloads.begin() + b * 1000, payloads.begin() + (b + 1) * 1000))));
  for (int i = 0; i < 600 && host_->counter("parts") < 2; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_GE(host_->counter("parts"), 2u) << "two parts up before the object is sealed";
  EXPECT_EQ(host_->counter("multipart_uploads"), 1u);
  for (const auto& w : writes) EXPECT_FALSE(w->completed()) << "no batch completes before its object does";
  EXPECT_TRUE(objects().empty()) << "the object is not there before CompleteMultipartUpload";
  host_->flush();
  for (const auto& w : writes) ASSERT_EQ(w->wait(120s).status, PMQ_WRITE_OK) << w->wait().error;
  EXPECT_EQ(host_->counter("parts"), 3u);  // ~12 MB in parts of 5 MiB
  const auto o = objects();
  ASSERT_EQ(o.size(), 2u);
  // The marker: a name of this upload's own (a token), so another run's upload of the key has another.
  EXPECT_TRUE(o[0].key.starts_with("big/partition=0/_picomq/big+0+00000000000000000000.json.") &&
              o[0].key.ends_with(".last-offset") &&
              o[0].key.size() ==
                  std::string("big/partition=0/_picomq/big+0+00000000000000000000.json.").size() + 16 + 12)
      << o[0].key;
  EXPECT_EQ(o[1].key, "big/partition=0/big+0+00000000000000000000.json");
  EXPECT_EQ(o[0].text, "11999") << "the marker holds the streamed object's last offset";
  std::string expected;
  for (const auto& p : payloads) expected += p + "\n";
  EXPECT_TRUE(o[1].text == expected) << "the parts make the object's bytes, in order";
  EXPECT_EQ(o[1].etag, picomq::s3::multipart_etag(expected, 5u << 20)) << "parts cut where one PUT's parts would be";

  // The same records again (a restart inside the object): its last offset, from the marker, says
  // they are written: nothing is uploaded again.
  auto again = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(config, &again);
  auto w2 = again->start_write(
      TestBatch::json("big", 0, 3000, std::vector<std::string>(payloads.begin() + 3000, payloads.end())));
  again->flush();
  EXPECT_EQ(w2->wait(120s).status, PMQ_WRITE_OK) << w2->wait().error;
  EXPECT_EQ(again->counter("resumed_inside_object"), 1u);
  EXPECT_EQ(again->counter("multipart_uploads"), 0u);
  again->close();
}

// Memory: a 40 MB object with parts of 5 MiB, at most 2 of them held: what the sink holds of it
// stays about parts_in_flight x part_size (+ a batch and a chunk), not the object, which it no
// longer holds whole (it held it twice before: the records, and the compressed copy). The real
// RSS of 64 MiB objects through Kafka is measured by the benchmark (bench/README.md).
TEST_F(S3Sink, AStreamedObjectsMemoryIsBoundedByThePartsNotTheObject) {
  // The host keeps a copy of each pending batch (the ABI keeps its records valid until it
  // completes): each original goes once copied, so the input weighs the same before and after.
  std::vector<std::unique_ptr<TestBatch>> batches;
  const std::string pad(1000, 'm');
  for (int b = 0; b < 40; ++b) {
    std::vector<std::string> payloads;
    payloads.reserve(1000);
    for (int i = 0; i < 1000; ++i)
      payloads.push_back("{\"n\":" + std::to_string(b * 1000 + i) + ",\"pad\":\"" + pad + "\"}");
    batches.push_back(std::make_unique<TestBatch>(TestBatch::json("mem", 0, b * 1000, payloads)));
  }
  open({{"compression", "none"},
        {"part_size", "5MiB"},
        {"parts_in_flight", 2},
        {"include_metadata", false},
        {"max_object_bytes", 0}});
  auto rss = [](const char* field) {  // kB
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
    return 0L;
  };
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  const long before = rss("VmHWM:");
  std::vector<std::shared_ptr<kt::Write>> writes;
  for (auto& b : batches) {
    writes.push_back(host_->start_write(*b));
    b.reset();
  }
  host_->flush();
  for (const auto& w : writes) ASSERT_EQ(w->wait(120s).status, PMQ_WRITE_OK) << w->wait().error;
  for (const auto& w : writes) {
    EXPECT_TRUE(w->released()) << "each batch is released once encoded (ABI 2.3): the runtime frees its records";
    EXPECT_FALSE(w->misreleased()) << "once, before its completion";
  }
  const long grown_mb = (rss("VmHWM:") - before) / 1024;
  const uint64_t peak = host_->counter("peak_unuploaded_bytes");
  std::printf(
      "40 MB object, parts of 5 MiB, 2 in flight: at most %llu bytes not uploaded, %llu waits for memory; "
      "this test process's peak RSS grew by %ld MB (the host's copies of the pending batches included)\n",
      static_cast<unsigned long long>(peak), static_cast<unsigned long long>(host_->counter("memory_waits")), grown_mb);
  EXPECT_GT(peak, 5u << 20);
  EXPECT_LE(peak, (2u * 5 + 1 + 1) << 20) << "parts_in_flight x part_size, one batch and one chunk";
  EXPECT_EQ(host_->counter("parts"), 8u);
  const auto o = objects("mem/partition=0/mem");
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(std::count(o[0].text.begin(), o[0].text.end(), '\n'), 40000);
}

// Avro object container files of a declared schema, read back with fastavro: fields by name,
// unions, logical types from the strings the runtime's Avro decoder writes, metadata fields, a
// record that does not fit refused; blocks per chunk; the sync marker from the key, so a replay
// writes the same bytes.
TEST_F(S3Sink, AvroContainerFilesOfTheDeclaredSchemaReadBackWithFastavroAndReplayToTheSameBytes) {
  const std::string schema = R"({"type":"record","name":"Order","namespace":"shop","fields":[
    {"name":"id","type":"long"},
    {"name":"name","type":"string"},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
    {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["NEW","PAID"]},"default":"NEW"},
    {"name":"pico_offset","type":"long"},
    {"name":"pico_topic","type":"string"}]})";
  const json config = {{"format", "avro"},
                       {"avro_schema", schema},
                       {"compression", "gzip"},
                       {"chunk_size", "1KiB"},
                       {"max_object_records", 40}};
  std::vector<std::string> payloads;
  payloads.reserve(50);
  for (int i = 0; i < 50; ++i)
    payloads.push_back("{\"id\":" + std::to_string(i) + ",\"name\":\"order " + std::to_string(i) +
                       "\",\"tags\":[\"a\",\"b\"],\"price\":\"" + std::to_string(i) +
                       ".5\",\"at\":\"2026-12-01T21:00:0" + std::to_string(i % 10) + ".123Z\"" +
                       (i % 2 ? ",\"note\":\"odd\",\"kind\":\"PAID\"" : "") + "}");
  payloads[7] = R"({"id":7,"name":"no tags","price":"1.00","at":0})";  // "tags" has no default
  open(config);
  auto w = host_->start_write(TestBatch::json("shop.orders", 0, 0, payloads));
  host_->flush();
  const auto outcome = w->wait();
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 7u);
  EXPECT_EQ(outcome.rejected[0].reason, "avro: field 'tags': missing, and the field has no default");
  host_->close();
  const auto before = objects();
  ASSERT_EQ(keys(before),
            (std::vector<std::string>{"shop.orders/partition=0/shop.orders+0+00000000000000000000.avro",
                                      "shop.orders/partition=0/shop.orders+0+00000000000000000041.avro"}));
  const json first = json::parse(before[0].text);
  EXPECT_EQ(first["codec"], "deflate");
  EXPECT_EQ(first["schema"]["name"], "shop.Order");
  EXPECT_GE(first["blocks"].size(), 2u) << "a block per chunk of 1 KiB";
  std::string sync_hex;
  for (unsigned char c : picomq::s3::AvroEncoder::sync_marker(before[0].key)) {
    sync_hex += "0123456789abcdef"[c >> 4];
    sync_hex += "0123456789abcdef"[c & 15];
  }
  EXPECT_EQ(first["sync_hex"], sync_hex) << "the sync marker comes from the key";
  const json& records = first["records"];
  ASSERT_EQ(records.size(), 40u);  // offsets 0-40 but 7
  EXPECT_EQ(
      records[0],
      json::parse(R"({"id":0,"name":"order 0","tags":["a","b"],"price":"0.50","at":"2026-12-01 21:00:00.123000+00:00",
                                        "note":null,"kind":"NEW","pico_offset":0,"pico_topic":"shop.orders"})"));
  EXPECT_EQ(records[1]["note"], "odd");
  EXPECT_EQ(records[1]["kind"], "PAID");
  EXPECT_EQ(records[7]["pico_offset"], 8) << "offset 7 was refused";
  EXPECT_EQ(json::parse(before[1].text)["records"].size(), 9u);

  // A replay (a new instance, other batches, into another bucket so that nothing is skipped as
  // written): the same keys with the same bytes.
  const std::string replay = server_->create_bucket("replay");
  json rconfig = config;
  rconfig["bucket"] = replay;
  auto again = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(rconfig, &again);
  auto w1 = again->start_write(
      TestBatch::json("shop.orders", 0, 0, std::vector<std::string>(payloads.begin(), payloads.begin() + 13)));
  auto w2 = again->start_write(
      TestBatch::json("shop.orders", 0, 13, std::vector<std::string>(payloads.begin() + 13, payloads.end())));
  again->flush();
  EXPECT_EQ(w1->wait().status, PMQ_WRITE_REJECTED);
  EXPECT_EQ(w2->wait().status, PMQ_WRITE_OK) << w2->wait().error;
  again->close();
  const auto after = server_->objects(replay);
  ASSERT_EQ(keys(after), keys(before));
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].bytes == before[i].bytes) << after[i].key;

  // zstd: the zstandard codec.
  auto z = kt::FakeHost::load(S3_SINK_PLUGIN);
  json zconfig = config;
  zconfig["compression"] = "zstd";
  open(zconfig, &z);
  auto wz = z->start_write(TestBatch::json("z", 0, 0, {payloads[0], payloads[1]}));
  z->flush();
  EXPECT_EQ(wz->wait().status, PMQ_WRITE_OK) << wz->wait().error;
  z->close();
  const auto zo = objects("z/");
  ASSERT_EQ(zo.size(), 1u);
  EXPECT_EQ(json::parse(zo[0].text)["codec"], "zstandard");
  EXPECT_EQ(json::parse(zo[0].text)["records"][1]["id"], 1);
}

// Without avro_schema each record is written by the writer schema the runtime decoded it by
// (ABI 2.4): an object holds one schema and ends where it changes; a tombstone has none and is
// refused; a batch that names no schema at all (a json topic) is a configuration error.
TEST_F(S3Sink, AvroWithoutADeclaredSchemaWritesEachRecordByItsWriterSchemaAndAnObjectPerSchemaRun) {
  const std::string v1 = R"({"type":"record","name":"Reading","fields":[{"name":"id","type":"long"}]})";
  const std::string v2 =
      R"({"type":"record","name":"Reading","fields":[{"name":"id","type":"long"},{"name":"unit","type":"string","default":"C"}]})";
  open({{"format", "avro"}, {"compression", "none"}});
  std::vector<kt::TestRecord> records;
  auto add = [&](int64_t offset, std::optional<std::string> payload, std::optional<std::string> schema) {
    records.push_back({.offset = offset, .payload = std::move(payload), .writer_schema = std::move(schema)});
  };
  add(0, R"({"id":0})", v1);
  add(1, R"({"id":1})", v1);
  add(2, R"({"id":2,"unit":"K"})", v2);
  add(3, std::nullopt, std::nullopt);  // a tombstone
  add(4, R"({"id":4,"unit":"F"})", v2);
  add(5, R"({"id":5})", v1);
  auto w = host_->start_write(TestBatch("readings", 0, records, PMQ_PAYLOAD_JSON, "avro"));
  host_->flush();
  const auto outcome = w->wait();
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 3u);
  EXPECT_EQ(outcome.rejected[0].reason, "avro: a tombstone (null payload) has no writer schema to write it by");

  auto json_topic = host_->start_write(TestBatch::json("plain", 0, 0, {R"({"id":9})"}));
  const auto fatal = json_topic->wait();
  EXPECT_EQ(fatal.status, PMQ_WRITE_FATAL);
  EXPECT_NE(fatal.error.find(
                "plain gives none: its [[topics]] block has schema = \"json\", not \"avro\". Declare avro_schema."),
            std::string::npos)
      << fatal.error;
  host_->close();

  const auto got = objects("readings/");
  ASSERT_EQ(keys(got), (std::vector<std::string>{"readings/partition=0/readings+0+00000000000000000000.avro",
                                                 "readings/partition=0/readings+0+00000000000000000002.avro",
                                                 "readings/partition=0/readings+0+00000000000000000005.avro"}));
  const std::vector<std::string> schemas{v1, v2, v1};
  const std::vector<json> expected{json::parse(R"([{"id":0},{"id":1}])"),
                                   json::parse(R"([{"id":2,"unit":"K"},{"id":4,"unit":"F"}])"),
                                   json::parse(R"([{"id":5}])")};
  for (size_t i = 0; i < got.size(); ++i) {
    const json file = json::parse(got[i].text);  // read by fastavro
    EXPECT_EQ(file["schema"]["fields"].size(), json::parse(schemas[i])["fields"].size()) << got[i].key;
    EXPECT_EQ(file["records"], expected[i]) << got[i].key;
  }
}

TEST_F(S3Sink, RotationByBytesAndByRecordTimeWindow) {
  open({{"compression", "none"},
        {"include_metadata", false},
        {"max_object_bytes", 20},
        {"rotate_interval", "1m"},
        {"key_template", "{partition}/{start_offset}"}});
  std::vector<TestRecord> records;  // each line {"n":N}\n is 8 bytes
  const std::vector<std::pair<std::string, int64_t>> in = {
      {R"({"n":1})", 0},      {R"({"n":2})", 1000},   {R"({"n":3})", 2000},  // 8 bytes each: 2 fit in 20
      {R"({"n":4})", 59'999}, {R"({"n":5})", 60'000}, {R"({"n":6})", 61'000}};
  for (size_t i = 0; i < in.size(); ++i)
    records.push_back({.offset = static_cast<int64_t>(i), .payload = in[i].first, .timestamp_ms = in[i].second});
  auto write = host_->start_write(TestBatch("t", 0, records));
  host_->flush();
  ASSERT_EQ(write->wait().status, PMQ_WRITE_OK) << write->wait().error;
  const auto o = objects();
  ASSERT_EQ(keys(o),
            (std::vector<std::string>{"0/00000000000000000000", "0/00000000000000000002", "0/00000000000000000004"}));
  EXPECT_EQ(o[0].text, "{\"n\":1}\n{\"n\":2}\n") << "max_object_bytes 20: a third line would pass it";
  EXPECT_EQ(o[1].text, "{\"n\":3}\n{\"n\":4}\n") << "59.999 s is still in the first minute";
  EXPECT_EQ(o[2].text, "{\"n\":5}\n{\"n\":6}\n") << "60 s starts the next record-time window";
}

TEST_F(S3Sink, AReplayFromTheFirstOffsetRewritesTheSameKeysWithTheSameBytes) {
  const json config = {{"max_object_records", 4}};
  std::vector<std::string> payloads;
  payloads.reserve(10);
  for (int i = 0; i < 10; ++i) payloads.push_back("{\"n\":" + std::to_string(i) + "}");
  open(config);
  for (int first : {0, 3, 6}) {  // batches of 3, 3, 4 records
    const int n = first == 6 ? 4 : 3;
    auto w = host_->start_write(TestBatch::json(
        "replay", 0, 100 + first, std::vector<std::string>(payloads.begin() + first, payloads.begin() + first + n)));
    if (first == 6) {
      host_->flush();
      EXPECT_EQ(w->wait().status, PMQ_WRITE_OK) << w->wait().error;
    }
  }
  host_->close();
  const auto before = objects();
  ASSERT_EQ(before.size(), 3u);  // 100-103, 104-107, 108-109

  // A new instance (a restart after a crash) gets everything again in other batches.
  auto again = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(config, &again);
  auto w1 = again->start_write(
      TestBatch::json("replay", 0, 100, std::vector<std::string>(payloads.begin(), payloads.begin() + 7)));
  auto w2 = again->start_write(
      TestBatch::json("replay", 0, 107, std::vector<std::string>(payloads.begin() + 7, payloads.end())));
  again->flush();
  EXPECT_EQ(w1->wait().status, PMQ_WRITE_OK);
  EXPECT_EQ(w2->wait().status, PMQ_WRITE_OK);
  again->close();
  const auto after = objects();
  ASSERT_EQ(keys(after), keys(before)) << "no new key: the replay found the objects there (same keys, same bytes)";
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].bytes, before[i].bytes) << after[i].key;
    EXPECT_EQ(after[i].etag, before[i].etag);
  }
}

TEST_F(S3Sink, ConditionalCreateTakesItsOwnObjectAsWrittenAndARestartSkipsTheObjectsThere) {
  const json config = {{"compression", "none"}, {"max_object_records", 3}};  // conditional_create: the default
  auto write = [&](std::unique_ptr<kt::FakeHost>& h, int64_t first, std::vector<std::string> payloads) {
    auto w = h->start_write(TestBatch::json("cond", 0, first, std::move(payloads)));
    h->flush();
    return w->wait();
  };
  open(config);
  EXPECT_EQ(write(host_, 0, {"{\"a\":0}", "{\"a\":1}", "{\"a\":2}", "{\"a\":3}", "{\"a\":4}", "{\"a\":5}"}).status,
            PMQ_WRITE_OK);
  host_->close();
  ASSERT_EQ(objects().size(), 2u);  // 0-2, 3-5

  // A restart from offset 1 (inside the first object): it is skipped, and so is the second,
  // found there by its key (HEAD) before any upload.
  auto again = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(config, &again);
  EXPECT_EQ(write(again, 1, {"{\"a\":1}", "{\"a\":2}", "{\"a\":3}", "{\"a\":4}", "{\"a\":5}"}).status, PMQ_WRITE_OK);
  EXPECT_EQ(again->counter("resumed_inside_object"), 1u);
  EXPECT_EQ(again->counter("objects_found_ahead"), 1u);
  EXPECT_EQ(again->counter("objects"), 0u) << "nothing uploaded again";
  again->close();

  const auto o = objects();
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(std::count(o[1].text.begin(), o[1].text.end(), '\n'), 3);
  EXPECT_NE(o[1].text.find("\"pico_offset\":5,"), std::string::npos) << o[1].text;
}

// The first upload of a key wins: an object that takes the key between the sink's look and its
// upload (a killed run's upload landing late, played here by the kit's receiver holding the
// sink's PUT while another object is written there) refuses ours with 412. Its records (up to
// its last offset, from its metadata) are not written again: the batch comes again (retry), they
// are skipped, and the next object starts after them. An object without picomq's metadata there
// stops the sink: what it holds is unknown.
TEST_F(S3Sink, AKeyTakenByAnotherCutOfTheRecordsIsLeftToItAndTheRecordsAfterItGoOn) {
  kt::HttpReceiver store;
  store.forward_to(server_->endpoint());
  store.script(
      {{"method", "PUT"}, {"path_contains", "taken%2B0%2B00000000000000000000"}, {"action", "hold"}, {"count", 1}});
  open({{"endpoint", store.base_url()},
        {"compression", "none"},
        {"max_object_records", 3},
        {"include_metadata", false}});
  std::vector<std::string> payloads;
  payloads.reserve(6);
  for (int i = 0; i < 6; ++i) payloads.push_back("{\"a\":" + std::to_string(i) + "}");
  auto w = host_->start_write(TestBatch::json("taken", 0, 0, payloads));
  for (int i = 0; i < 100 && store.held().empty(); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(store.held().size(), 1u) << "the upload of [0, 2] is held";
  const std::string key = "taken/partition=0/taken+0+00000000000000000000.json";
  server_->put_object(bucket_, key, "{\"a\":0}\n{\"a\":1}\n", {{"x-amz-meta-picomq-last-offset", "1"}});
  EXPECT_EQ(store.release().begin()->second, 412) << "the key is taken: ours is refused";
  const auto taken = w->wait();
  EXPECT_EQ(taken.status, PMQ_WRITE_RETRY) << taken.error;
  EXPECT_NE(taken.error.find("was taken by an object with other content"), std::string::npos) << taken.error;
  EXPECT_NE(taken.error.find("holding the records up to offset 1"), std::string::npos) << taken.error;
  EXPECT_EQ(host_->counter("keys_taken"), 1u);
  // The records again, as the runtime reads them again: 0 and 1 are there already. (The request's
  // path has the key percent-encoded: '+' as %2B.)
  auto again = host_->start_write(TestBatch::json("taken", 0, 0, payloads));
  host_->flush();
  EXPECT_EQ(again->wait().status, PMQ_WRITE_OK) << again->wait().error;
  host_->close();
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{key, "taken/partition=0/taken+0+00000000000000000002.json",
                                               "taken/partition=0/taken+0+00000000000000000005.json"}));
  EXPECT_EQ(o[0].text + o[1].text + o[2].text, "{\"a\":0}\n{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n{\"a\":5}\n")
      << "every record once";

  // Without picomq's metadata the object's records are unknown: the sink stops, naming it.
  server_->put_object(bucket_, "foreign/partition=0/foreign+0+00000000000000000000.json", "something else\n");
  auto other = kt::FakeHost::load(S3_SINK_PLUGIN);
  open({{"compression", "none"}}, &other);
  auto f = other->start_write(TestBatch::json("foreign", 0, 0, {R"({"a":0})"}));
  other->flush();
  EXPECT_EQ(f->wait().status, PMQ_WRITE_FATAL);
  EXPECT_NE(f->wait().error.find("without picomq's last-offset metadata"), std::string::npos) << f->wait().error;
  other->close();
}

// Two definitions sharing bucket, prefix and a template without {topic} (each of one topic, so
// that validate() cannot see it): the object of topic a under a key topic b's object would have
// is never taken for b's records. Every object carries its topic-partition in its metadata; b's
// upload refused by a's object, and b's restart from inside a's object, stop the sink naming
// both, and nothing of b is committed (or skipped).
TEST_F(S3Sink, AnObjectOfAnotherTopicUnderTheSameKeyIsNeverTakenForThisTopicsRecords) {
  const json config = {{"compression", "none"}, {"key_template", "p{partition}/{start_offset}.{ext}"}};
  open(config);
  std::vector<std::string> payloads;
  payloads.reserve(10);
  for (int i = 0; i < 10; ++i) payloads.push_back("{\"a\":" + std::to_string(i) + "}");
  auto a = host_->start_write(TestBatch::json("orders.a", 0, 0, payloads));
  host_->flush();
  ASSERT_EQ(a->wait().status, PMQ_WRITE_OK) << a->wait().error;
  host_->close();

  auto b = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(config, &b);
  auto refused = b->start_write(TestBatch::json("orders.b", 0, 0, payloads));
  b->flush();
  EXPECT_EQ(refused->wait().status, PMQ_WRITE_FATAL);
  EXPECT_NE(refused->wait().error.find("holds records of topic 'orders.a' partition 0 (its picomq metadata), not of "
                                       "'orders.b' partition 0"),
            std::string::npos)
      << refused->wait().error;
  b->close();

  auto restarted = kt::FakeHost::load(S3_SINK_PLUGIN);
  open(config, &restarted);
  auto inside = restarted->start_write(TestBatch::json("orders.b", 0, 5, {R"({"b":5})"}));
  restarted->flush();
  EXPECT_EQ(inside->wait().status, PMQ_WRITE_FATAL) << "a's object [0, 9] is not where b resumes";
  EXPECT_NE(inside->wait().error.find("holds records of topic 'orders.a'"), std::string::npos) << inside->wait().error;
  restarted->close();
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"p0/00000000000000000000.json"}));
  EXPECT_EQ(std::count(o[0].text.begin(), o[0].text.end(), '\n'), 10) << "a's object as a wrote it";
}

// What validate() sees of the definition's [[topics]] blocks (ABI 2.7): a template that cannot
// tell their topics apart is refused, saying why.
TEST_F(S3Sink, AKeyTemplateThatCannotTellTheBlocksTopicsApartIsRefused) {
  json config = base();
  config["key_template"] = "p{partition}/{start_offset}.{ext}";
  EXPECT_TRUE(host_->check(config.dump()).empty()) << "without the blocks (an older host) nothing to compare";
  host_->subscriptions(R"([{"topics": ["orders.a"], "pattern": null}])");
  EXPECT_TRUE(host_->check(config.dump()).empty()) << "one topic";
  host_->subscriptions(R"([{"topics": ["orders.a"], "pattern": null}, {"topics": ["orders.b"], "pattern": null}])");
  auto problems = host_->check(config.dump());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("key_template: holds no {topic}, and topics 'orders.a' and 'orders.b'"), std::string::npos)
      << problems[0];
  host_->subscriptions(R"([{"topics": [], "pattern": "^orders\\..*"}])");
  problems = host_->check(config.dump());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("subscribes by pattern '^orders\\..*'"), std::string::npos) << problems[0];
  config["key_template"] = "{topic}/{hour}/{partition}/{start_offset}.{ext}";
  EXPECT_TRUE(host_->check(config.dump()).empty());
  config["key_template"] = "{topic}/{start_offset}-{partition}.{ext}";
  problems = host_->check(config.dump());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("{partition} comes after {start_offset}"), std::string::npos) << problems[0];
  config["key_template"] = "{topic}/p{partition}/{start_offset}-{hour}.{ext}";
  EXPECT_EQ(host_->check(config.dump()).size(), 1u) << "a time field after {start_offset}";
}

// A store that ignores If-None-Match (played by the kit's receiver in front of SeaweedFS, which
// answers the probe's second conditional PUT itself) would let a late upload replace an object:
// the sink says so and stops, unless conditional_create = false accepts that.
TEST_F(S3Sink, AStoreThatIgnoresIfNoneMatchStopsTheSinkUnlessConditionalCreateIsOff) {
  kt::HttpReceiver store;
  store.forward_to(server_->endpoint());
  store.script(
      {{"method", "PUT"}, {"path_contains", "_picomq/conditional-write-probe"}, {"status", 200}, {"count", 0}});
  open({{"endpoint", store.base_url()}, {"compression", "none"}});
  auto w = host_->start_write(TestBatch::json("probe", 0, 0, {R"({"v":1})"}));
  host_->flush();
  EXPECT_EQ(w->wait().status, PMQ_WRITE_FATAL);
  EXPECT_NE(w->wait().error.find("ignores If-None-Match: * on PUT"), std::string::npos) << w->wait().error;
  EXPECT_NE(w->wait().error.find("conditional_create = false"), std::string::npos) << w->wait().error;
  host_->close();
  EXPECT_TRUE(objects().empty());

  auto unprotected = kt::FakeHost::load(S3_SINK_PLUGIN);
  open({{"endpoint", store.base_url()}, {"compression", "none"}, {"conditional_create", false}}, &unprotected);
  auto w2 = unprotected->start_write(TestBatch::json("probe", 0, 0, {R"({"v":1})"}));
  unprotected->flush();
  EXPECT_EQ(w2->wait().status, PMQ_WRITE_OK) << w2->wait().error;
  unprotected->close();
  EXPECT_EQ(keys(objects()), (std::vector<std::string>{"probe/partition=0/probe+0+00000000000000000000.json"}));
}

TEST_F(S3Sink, AWrongSecretIsRefusedBySeaweedfsAndReportedWithoutTheSecret) {
  json config = base();
  config["aws_secret_access_key"] = "wrong-secret-value";
  try {
    host_->open(config.dump());
    FAIL() << "open() should fail: the server refuses the signature";
  } catch (const std::exception& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("S3 refused the credentials for bucket '" + bucket_ + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("403"), std::string::npos) << m;
    EXPECT_NE(m.find("aws_secret_access_key"), std::string::npos) << m;
    EXPECT_EQ(m.find("wrong-secret-value"), std::string::npos) << m;
  }
}

TEST_F(S3Sink, AMissingBucketIsFatalAndNamed) {
  json config = base();
  config["bucket"] = "no-such-bucket-" + bucket_;
  try {
    host_->open(config.dump());
    FAIL() << "open() should fail";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the bucket does not exist: bucket 'no-such-bucket-"), std::string::npos)
        << e.what();
  }
}

TEST_F(S3Sink, HostileTopicNamesStayInsideThePrefix) {
  open({{"prefix", "safe"}, {"compression", "none"}, {"key_template", "{topic}/{partition}-{start_offset}"}});
  for (const std::string topic : {"../../etc", "a/b", "spaced out"}) {
    auto w = host_->start_write(TestBatch::json(topic, 0, 0, {"{}"}));
    host_->flush();
    ASSERT_EQ(w->wait().status, PMQ_WRITE_OK) << topic << ": " << w->wait().error;
  }
  const auto k = keys(objects());
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[1], "safe/a%2Fb/0-00000000000000000000");
  EXPECT_EQ(k[2], "safe/spaced%20out/0-00000000000000000000");
  for (const auto& k : keys(objects())) {
    EXPECT_EQ(k.rfind("safe/", 0), 0u) << k;
    EXPECT_EQ(k.find("/../"), std::string::npos) << k;
    EXPECT_EQ(std::count(k.begin(), k.end(), '/'), 2) << k;
  }
}

// One outage (a SIGKILL of the server and a restart), two sinks: one resends until the server is
// back (retry_timeout 60s); the other gives up at once (500ms), so its batches fail and come
// again alone, as the runtime retries them, without a flush.
TEST_F(S3Sink, AnOutageIsResentOrRetriedAndNothingIsLostAcknowledgedEarlyOrDoubled) {
  const std::string patient = server_->create_bucket("patient");
  open({{"bucket", patient}, {"compression", "none"}, {"retry_timeout", "60s"}});
  auto quick = kt::FakeHost::load(S3_SINK_PLUGIN);
  open({{"compression", "none"},
        {"retry_timeout", "500ms"},
        {"key_template", "{topic}/{partition}/{start_offset}.{ext}"}},
       &quick);
  auto p0 = host_->start_write(TestBatch::json("outage", 0, 0, {R"({"x":0})"}));
  auto q0 = quick->start_write(TestBatch::json("again", 0, 0, {R"({"x":0})"}));
  host_->flush();
  quick->flush();
  ASSERT_EQ(p0->wait().status, PMQ_WRITE_OK) << p0->wait().error;
  ASSERT_EQ(q0->wait().status, PMQ_WRITE_OK) << q0->wait().error;
  server_->kill();

  auto p1 = host_->start_write(TestBatch::json("outage", 0, 1, {R"({"x":1})", R"({"x":2})"}));
  host_->flush();
  // quick: partition 0 fails at the upload, partition 1 (new) at the look-up of where it resumes.
  auto q1 = quick->start_write(TestBatch::json("again", 0, 1, {R"({"x":1})", R"({"x":2})"}));
  quick->flush();
  const auto put_failed = q1->wait(30s);
  EXPECT_EQ(put_failed.status, PMQ_WRITE_RETRY) << put_failed.error;
  EXPECT_NE(put_failed.error.find("again/0/00000000000000000001.json"), std::string::npos) << put_failed.error;
  auto q2 = quick->start_write(TestBatch::json("again", 1, 0, {R"({"y":0})"}));
  const auto list_failed = q2->wait(30s);
  EXPECT_EQ(list_failed.status, PMQ_WRITE_RETRY) << list_failed.error;
  EXPECT_FALSE(p1->completed()) << "not written while the server is down";

  server_->start();
  const auto resent = p1->wait(60s);
  EXPECT_EQ(resent.status, PMQ_WRITE_OK) << resent.error;
  EXPECT_GE(host_->counter("resends"), 1u);
  auto q1again = quick->start_write(TestBatch::json("again", 0, 1, {R"({"x":1})", R"({"x":2})"}));
  EXPECT_EQ(q1again->wait(60s).status, PMQ_WRITE_OK) << q1again->wait().error;
  auto q2again = quick->start_write(TestBatch::json("again", 1, 0, {R"({"y":0})"}));
  EXPECT_EQ(q2again->wait(60s).status, PMQ_WRITE_OK) << q2again->wait().error;
  quick->close();

  const auto p = server_->objects(patient);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].key, "outage/partition=0/outage+0+00000000000000000001.json");
  EXPECT_EQ(std::count(p[1].text.begin(), p[1].text.end(), '\n'), 2) << p[1].text;
  const auto q = objects();
  ASSERT_EQ(keys(q), (std::vector<std::string>{"again/0/00000000000000000000.json", "again/0/00000000000000000001.json",
                                               "again/1/00000000000000000000.json"}));
  EXPECT_EQ(std::count(q[1].text.begin(), q[1].text.end(), '\n'), 2) << q[1].text;
}

// format = "parquet": a Parquet file per object, read back with pyarrow. Inferred columns from
// the object's records (metadata columns first), a tombstone a row of nulls, headers a map, a
// nested value a JSON column; rotation by records; the same records cut into other batches
// (a replay) write the same keys with the same bytes.
TEST_F(S3Sink, ParquetObjectsOfInferredColumnsReadBackWithPyarrowAndReplayToTheSameBytes) {
  std::vector<TestRecord> records;
  records.reserve(50);
  for (int i = 0; i < 50; ++i)
    records.push_back({.offset = 100 + i,
                       .payload = i == 5 ? std::optional<std::string>()
                                         : "{\"id\":" + std::to_string(i) + ",\"name\":\"n" + std::to_string(i % 4) +
                                               "\",\"amount\":" + std::to_string(i) + ".25,\"tags\":[\"a\"," +
                                               std::to_string(i) + "]}",
                       .key = i % 2 ? std::optional<std::string>("k" + std::to_string(i)) : std::nullopt,
                       .headers = i == 1 ? std::vector<kt::TestHeader>{{"trace", "t1"}} : std::vector<kt::TestHeader>{},
                       .timestamp_ms = 1'700'000'000'000 + i});
  const json config = {{"format", "parquet"}, {"max_object_records", 30}, {"parquet_row_group_records", 20}};
  auto write_all = [&](std::unique_ptr<kt::FakeHost>& host, const std::vector<size_t>& cuts) {
    open(config, &host);
    std::vector<std::shared_ptr<kt::Write>> writes;
    size_t from = 0;
    for (size_t to : cuts) {
      writes.push_back(host->start_write(TestBatch(
          "parq", 2, std::vector<TestRecord>(records.begin() + from, records.begin() + to), PMQ_PAYLOAD_JSON, "json")));
      from = to;
    }
    host->flush();
    for (auto& w : writes) ASSERT_EQ(w->wait().status, PMQ_WRITE_OK) << w->wait().error;
    host->close();
  };
  write_all(host_, {50});
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"parq/partition=2/parq+2+00000000000000000100.parquet",
                                               "parq/partition=2/parq+2+00000000000000000130.parquet"}));
  EXPECT_EQ(o[0].bytes.substr(0, 4), "PAR1");
  const json first = json::parse(o[0].text);
  EXPECT_EQ(first["schema"], json::parse(R"([["pico_topic","string",false,""],["pico_partition","int32",false,""],
    ["pico_offset","int64",false,""],["pico_timestamp","timestamp[ms, tz=UTC]",true,""],["pico_key","binary",true,""],
    ["pico_headers","map<string, binary ('pico_headers')>",false,""],["id","int64",true,""],["name","string",true,""],
    ["amount","double",true,""],["tags","extension<arrow.json>",true,"arrow.json"]])"))
      << first["schema"].dump();
  EXPECT_EQ(first["row_groups"], json::parse("[20,10]"));
  EXPECT_EQ(first["codecs"], json::parse(R"(["ZSTD"])"));
  EXPECT_TRUE(first["dictionary"]);
  EXPECT_TRUE(first["statistics"]);
  EXPECT_EQ(first["created_by"], "picomq-connect");
  const json& rows = first["rows"];
  ASSERT_EQ(rows.size(), 30u);
  EXPECT_EQ(rows[1],
            json::parse(R"({"pico_topic":"parq","pico_partition":2,"pico_offset":101,"pico_timestamp":1700000000001,
    "pico_key":"azE=","pico_headers":[["trace","dDE="]],"id":1,"name":"n1","amount":1.25,"tags":"[\"a\",1]"})"))
      << rows[1].dump();
  EXPECT_EQ(rows[5],
            json::parse(R"({"pico_topic":"parq","pico_partition":2,"pico_offset":105,"pico_timestamp":1700000000005,
    "pico_key":"azU=","pico_headers":[],"id":null,"name":null,"amount":null,"tags":null})"))
      << "a tombstone: a row of nulls";
  EXPECT_EQ(json::parse(o[1].text)["rows"].size(), 20u);
  EXPECT_EQ(json::parse(o[1].text)["rows"][0]["pico_offset"], 130);

  // The same records in other batches (a replay), into another bucket: the same keys, the same bytes.
  bucket_ = server_->create_bucket("sink");
  std::unique_ptr<kt::FakeHost> again = kt::FakeHost::load(S3_SINK_PLUGIN);
  write_all(again, {7, 8, 29, 31, 50});
  const auto replayed = objects();
  ASSERT_EQ(keys(replayed), keys(o));
  for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(replayed[i].bytes, o[i].bytes) << o[i].key;
}

// Declared parquet_columns: exactly those columns, strict conversions (a record that does not
// convert is refused through the bad-record policy and is not in the file), no metadata columns,
// snappy without dictionaries, row groups of the declared size.
TEST_F(S3Sink, ParquetDeclaredColumnsRefuseWhatDoesNotConvertAndTakeTheWriterSettings) {
  open({{"format", "parquet"},
        {"include_metadata", false},
        {"parquet_columns", json::parse(R"([{"name":"id","type":"int64"},{"name":"at","type":"timestamp_ms"},
                                            {"name":"note","type":"utf8"},{"name":"extra","type":"json"}])")},
        {"parquet_compression", "snappy"},
        {"parquet_dictionary", false},
        {"parquet_row_group_records", 4}});
  std::vector<std::string> payloads;
  payloads.reserve(10);
  for (int i = 0; i < 10; ++i)
    payloads.push_back("{\"id\":" + std::to_string(i) + ",\"at\":" + std::to_string(1796158800500 + i) +
                       ",\"note\":\"x" + std::to_string(i) + "\",\"extra\":{\"i\":" + std::to_string(i) +
                       "},\"dropped\":true}");
  payloads[3] = R"({"id":"three","at":0})";  // at: epoch milliseconds
  auto w = host_->start_write(TestBatch::json("decl", 0, 0, payloads));
  host_->flush();
  const auto outcome = w->wait();
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u) << outcome.rejected[0].reason;
  EXPECT_EQ(outcome.rejected[0].record_index, 3u);
  EXPECT_NE(outcome.rejected[0].reason.find("parquet: "), std::string::npos) << outcome.rejected[0].reason;
  EXPECT_NE(outcome.rejected[0].reason.find("'id'"), std::string::npos) << outcome.rejected[0].reason;
  host_->close();
  const auto o = objects();
  ASSERT_EQ(keys(o), (std::vector<std::string>{"decl/partition=0/decl+0+00000000000000000000.parquet"}));
  const json file = json::parse(o[0].text);
  EXPECT_EQ(file["schema"], json::parse(R"([["id","int64",true,""],["at","timestamp[ms, tz=UTC]",true,""],
    ["note","string",true,""],["extra","extension<arrow.json>",true,"arrow.json"]])"))
      << file["schema"].dump();
  EXPECT_EQ(file["row_groups"], json::parse("[4,4,1]"));
  EXPECT_EQ(file["codecs"], json::parse(R"(["SNAPPY"])"));
  EXPECT_FALSE(file["dictionary"]);
  ASSERT_EQ(file["rows"].size(), 9u);
  EXPECT_EQ(file["rows"][0], json::parse(R"({"id":0,"at":1796158800500,"note":"x0","extra":"{\"i\":0}"})"))
      << file["rows"][0].dump();
  EXPECT_EQ(file["rows"][3]["id"], 4) << "offset 3 was refused";
}

}  // namespace
