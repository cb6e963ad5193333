// proto / flatbuffer / avro through the real broker: payloads from independent encoders
// (python-protobuf, flatc, fastavro, confluent-kafka's AvroSerializer against a schema registry;
// tests/decoders_data/make_payloads.py) are produced to topics, the runtime decodes them and a
// sink writes what it got; the JSON is checked field by field.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness.h"
#include "schema_registry.h"

namespace picomq::test {
namespace {

const std::string kData = PICOMQ_DECODERS_DATA;

// Test payloads, generated once per run with tools/venv.
const std::filesystem::path& payload_dir() {
  static const std::filesystem::path dir = [] {
    auto d = make_temp_dir("picomq-decoder-payloads");
    const std::string cmd = std::string(PICOMQ_VENV_PYTHON) + " " + kData + "/make_payloads.py " + d.string() + " > " +
                            (d / "make.log").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("make_payloads.py failed: " + read_file(d / "make.log"));
    return d;
  }();
  return dir;
}

std::string payload(const std::string& format, const std::string& name) {
  return read_file(payload_dir() / format / (name + ".bin"));
}

std::string stdout_definition(const std::string& key, const std::string& topic, const std::string& schema_keys) {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_stdout_sink\"\n[[topics]]\ntopics = [\"" + topic + "\"]\n" + schema_keys +
         "\n[plugin_config]\ninclude_metadata = false\n";
}

std::vector<nlohmann::json> lines(Runtime& rt) {
  std::vector<nlohmann::json> out;
  for (const auto& line : read_lines(rt.dir() / "stdout.log")) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Decoders, ProtoPayloadsArriveAsJsonFieldByField) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("proto");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records(4);
  records[0].value = payload("proto", "order_full");
  records[1].value = payload("proto", "order_empty");
  records[2].null_value = true;
  records[3].value = payload("proto", "order_special");
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("p.toml", stdout_definition("proto", topic,
                                                "schema = \"proto\"\nproto_files = \"" + kData +
                                                    "/all_types.proto\"\nproto_message = \"picomq.test.Order\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 4; }, 30s)) << rt.log();
  auto v = lines(rt);
  EXPECT_EQ(v[0]["order_id"], "o-1");
  EXPECT_EQ(v[0]["scalars"]["f_int64"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(v[0]["scalars"]["f_uint64"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(v[0]["scalars"]["f_color"], "MINUS_ONE");
  EXPECT_EQ(v[0]["scalars"]["f_bytes"], "AP/+");
  EXPECT_EQ(v[0]["scalars"]["f_string"], "h\u00e9llo \"w\u00f6rld\"\n\U0001F600");
  EXPECT_EQ(v[0]["counters"], nlohmann::json::parse(R"({"x":-7,"y":9007199254740993})"));
  EXPECT_EQ(v[0]["voucher"]["sku"], "v");
  EXPECT_FALSE(v[0].contains("card"));
  EXPECT_EQ(v[0]["created_at"], "2024-01-31T12:34:56.789Z");
  EXPECT_EQ(v[0]["ttl"], "-1.500s");
  EXPECT_EQ(v[0]["maybe_ratio"], "NaN");
  EXPECT_EQ(v[0]["attributes"], nlohmann::json::parse(R"({"a":1,"b":[true,null,"x"],"c":{"d":-1.5}})"));
  EXPECT_EQ(v[0]["detail"]["@type"], "type.googleapis.com/picomq.test.Line");
  EXPECT_EQ(v[0]["detail"]["sku"], "in-any");
  EXPECT_EQ(v[0]["ship_to"]["city"], "Z\u00fcrich");
  EXPECT_EQ(v[1]["order_id"], "");
  EXPECT_TRUE(v[1]["scalars"].is_null());
  EXPECT_TRUE(v[2].is_null()) << "a tombstone stays null";
  EXPECT_EQ(v[3]["scalars"]["f_double"], "Infinity");
  EXPECT_EQ(v[3]["scalars"]["f_color"], 42);
  EXPECT_EQ(v[3]["points"], 5);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(kafka.committed("picomq-connect-sink-proto", topic), 4);
}

TEST(Decoders, AvroPlainPayloadsFromFastavro) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("avro");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {payload("avro", "order_full"), payload("avro", "order_nulls")});
  Runtime rt(kafka.bootstrap());
  // The schema file next to the definition, named relative to it.
  std::filesystem::copy_file(payload_dir() / "order.avsc", rt.dir() / "sinks.d" / "order.avsc");
  rt.add_definition(
      "a.toml",
      testkit_definition("avro", "topics = [\"" + topic + "\"]\nschema = \"avro\"\navro_schema_path = \"order.avsc\"",
                         testkit_config(rt)));
  rt.start();
  const auto log_path = rt.dir() / "records.log";
  ASSERT_TRUE(wait_until([&] { return read_lines(log_path).size() == 2; }, 30s)) << rt.log();
  auto log = TestkitLog::read(log_path);
  auto full = nlohmann::json::parse(log.payloads[0]);
  EXPECT_EQ(full["id"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(full["price"], "-12345678901234567890.1234");
  EXPECT_EQ(full["fixed_price"], "0.05");
  EXPECT_EQ(full["note"], "hello");
  EXPECT_EQ(full["status"], "SHIPPED");
  EXPECT_EQ(full["lines"][1]["qty"], -2);
  EXPECT_EQ(full["address"]["next"]["city"], "Basel");
  EXPECT_EQ(full["at_ms"], "2024-01-31T12:34:56.789Z");
  EXPECT_EQ(full["uid"], "123e4567-e89b-12d3-a456-426614174000");
  auto nulls = nlohmann::json::parse(log.payloads[1]);
  EXPECT_TRUE(nulls["note"].is_null());
  EXPECT_TRUE(nulls["address"].is_null());
  EXPECT_EQ(nulls["score"], "NaN");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Decoders, FlatbufferPayloadsFromFlatcAndACorruptedOneStopsTheSink) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("fb");
  kafka.create_topic(topic);
  std::string corrupted = payload("flatbuffer", "item_full");
  corrupted[0] = '\xf0', corrupted[1] = '\xff';
  kafka.produce_values(topic, {payload("flatbuffer", "item_full"), payload("flatbuffer", "item_defaults"), corrupted});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("f.toml", stdout_definition("fb", topic,
                                                "schema = \"flatbuffer\"\nflatbuffer_schema = \"" + kData +
                                                    "/inventory.fbs\"\nbatch_length = 1\n"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("fb", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("fb").value("message", "");
  EXPECT_NE(message.find("offset 2"), std::string::npos) << message;
  EXPECT_NE(message.find("flatbuffer: verification failed"), std::string::npos) << message;
  auto v = lines(rt);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0]["id"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(v[0]["equipped_type"], "Weapon");
  EXPECT_EQ(v[0]["equipped"]["name"], "axe");
  EXPECT_EQ(v[0]["loot"][0]["defense"], 5);
  EXPECT_EQ(v[1]["count"], 7) << "defaults are present";
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-fb", topic) == 2; }, 10s));
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

TEST(Decoders, ABadSchemaFileIsAConfigErrorNamingIt) {
  auto& kafka = Kafka::shared();
  Runtime rt(kafka.bootstrap());
  rt.add_definition("b.toml", stdout_definition("bad", "t",
                                                "schema = \"proto\"\nproto_files = \"" + kData +
                                                    "/broken.proto\"\nproto_message = \"picomq.broken.Broken\"\n"));
  rt.start();
  ASSERT_TRUE(
      wait_until([&] { return rt.sink_status("b.toml").value("state", "") == "invalid" || !rt.running(); }, 30s))
      << rt.log();
  const auto message = rt.sink_status("b.toml").value("message", "");
  EXPECT_NE(message.find("b.toml:7:"), std::string::npos) << message;
  EXPECT_NE(message.find("topics[0].proto_files"), std::string::npos) << message;
  EXPECT_NE(message.find("broken.proto:5:3: Expected \";\"."), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// ------------------------------------------------------------------ schema registry

using Registry = SchemaRegistry;

std::string registry_block(const std::string& topic, const std::string& url) {
  return "topics = [\"" + topic + "\"]\nschema = \"avro\"\navro_framing = \"registry\"\navro_registry_url = \"" + url +
         "\"";
}

TEST(Decoders, RegistryFramedAvroFromConfluentSerializerWithACachedSchema) {
  Registry registry;
  registry.start();
  const auto framed = registry.encode();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("registry");
  kafka.create_topic(topic);
  std::vector<std::string> values{read_file(framed / "order.bin")};
  for (int i = 0; i < 200; ++i) values.push_back(read_file(framed / (i % 2 ? "ping2.bin" : "ping1.bin")));
  kafka.produce_values(topic, values);

  Runtime rt(kafka.bootstrap());
  rt.env("REGISTRY_URL", registry.url());
  rt.add_definition(
      "r.toml",
      testkit_definition("reg", registry_block(topic, "${REGISTRY_URL}") + "\nbatch_length = 50", testkit_config(rt)));
  rt.start();
  const auto log_path = rt.dir() / "records.log";
  ASSERT_TRUE(wait_until([&] { return read_lines(log_path).size() == values.size(); }, 30s)) << rt.log();
  auto log = TestkitLog::read(log_path);
  auto order = nlohmann::json::parse(log.payloads[0]);
  EXPECT_EQ(order["price"], "-12345678901234567890.1234");
  EXPECT_EQ(order["day"], "2024-01-31");
  auto ping1 = nlohmann::json::parse(log.payloads[1]), ping2 = nlohmann::json::parse(log.payloads[2]);
  EXPECT_EQ(ping1, nlohmann::json::parse(R"({"n":1,"at":"2024-05-01T00:00:00.000Z","tag":"x"})"));
  EXPECT_EQ(ping2, nlohmann::json::parse(R"({"n":2,"at":"2024-05-02T00:00:00.000Z","tag":null})"));
  // Two schema ids; each fetched once per block (twice at most if both threads missed at once).
  EXPECT_GE(registry.id_lookups(), 2u);
  EXPECT_LE(registry.id_lookups(), 4u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Decoders, AnUnknownSchemaIdIsABadRecord) {
  Registry registry;
  registry.start();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("unknown-id");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {std::string("\0\0\0\x03\xe7\x02", 6)});  // schema id 999
  Runtime rt(kafka.bootstrap());
  rt.add_definition("u.toml", testkit_definition("uid", registry_block(topic, registry.url()), testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(rt.wait_state("uid", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("uid").value("message", "");
  EXPECT_NE(message.find("(schema id 999): no such schema (HTTP 404)"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

TEST(Decoders, RegistryCredentialsNeverReachTheLogOrStatus) {
  Registry registry;
  registry.start();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("creds");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {std::string("\0\0\0\x03\xe7\x02", 6)});
  Runtime rt(kafka.bootstrap());
  rt.env("REG_PASSWORD", "hunter2-secret");
  rt.add_definition(
      "c.toml", testkit_definition(
                    "creds", registry_block(topic, "http://svc:${REG_PASSWORD}@127.0.0.1:" + registry.url().substr(17)),
                    testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(rt.wait_state("creds", "error", 30s)) << rt.log();
  EXPECT_EQ(rt.log().find("hunter2-secret"), std::string::npos) << rt.log();
  EXPECT_EQ(read_file(rt.dir() / "status.json").find("hunter2-secret"), std::string::npos);
  EXPECT_NE(rt.sink_status("creds").value("message", "").find("http://***@127.0.0.1:"), std::string::npos);
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// An unreachable registry is not the record's fault: the batch waits (DecodeStatus::retry) and
// goes through once the registry is back; nothing is skipped or marked bad.
TEST(Decoders, RegistryDownAtStartIsRetriedThenRecovers) {
  Registry registry;
  registry.start();
  const auto framed = registry.encode();
  registry.stop();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("outage");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {read_file(framed / "ping1.bin"), read_file(framed / "ping2.bin")});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("o.toml", testkit_definition("outage", registry_block(topic, registry.url()), testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.log().find("unreachable") != std::string::npos; }, 30s)) << rt.log();
  std::this_thread::sleep_for(scaled(2s));
  EXPECT_EQ(rt.sink_state("outage"), "running") << rt.sink_status("outage").dump();
  EXPECT_TRUE(read_lines(rt.dir() / "records.log").empty());
  registry.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "records.log").size() == 2; }, 60s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-outage", topic) == 2; }, 10s));
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

}  // namespace
}  // namespace picomq::test
