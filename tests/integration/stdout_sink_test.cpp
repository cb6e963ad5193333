// The stdout sink: one JSON line per record, metadata fields as the spec names them, keys in
// base64, headers as UTF-8 strings or base64, payload per schema; hostile topic names survive.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.h"

namespace picomq::test {
namespace {

std::string stdout_definition(const std::string& key, const std::string& topic, const std::string& schema,
                              const std::string& plugin_config) {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_stdout_sink\"\n[[topics]]\ntopics = [\"" + topic + "\"]\nschema = \"" +
         schema + "\"\n[plugin_config]\n" + plugin_config + "\n";
}

std::vector<nlohmann::json> stdout_lines(Runtime& rt) {
  std::vector<nlohmann::json> out;
  for (const auto& line : read_lines(rt.dir() / "stdout.log")) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(StdoutSink, OneJsonLinePerRecordWithMetadataKeysHeadersAndTombstones) {
  auto& kafka = Kafka::shared();
  // A 200-byte topic name made of every character class Kafka allows.
  std::string topic = unique_name("Weird_Name-..x");
  topic += std::string(200 - topic.size(), 'z');
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.push_back({"{\n  \"a\": 1,\n  \"s\": \"line\\nbreak\"\n}",
                     std::string("\x00\xff k", 4),
                     {{"trace", "abc-é"}, {"bin", std::string("\xff\xfe", 2)}}});
  records.push_back({"", std::nullopt, {}, -1, /*null_value=*/true});
  records.push_back({"[1,2,3]", std::string("plain"), {}});
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", stdout_definition("out", topic, "json", "include_metadata = true"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 3; }, 30s)) << rt.log();
  auto lines = stdout_lines(rt);
  EXPECT_EQ(lines[0]["pico_topic"], topic);
  EXPECT_EQ(lines[0]["pico_partition"], 0);
  EXPECT_EQ(lines[0]["pico_offset"], 0);
  EXPECT_GT(lines[0]["pico_timestamp"].get<int64_t>(), 1700000000000);
  EXPECT_EQ(lines[0]["pico_key"], "AP8gaw==") << "keys are base64: JSON has no binary type";
  EXPECT_EQ(lines[0]["pico_headers"]["trace"], "abc-é") << "valid UTF-8 headers stay strings";
  EXPECT_EQ(lines[0]["pico_headers"]["bin"], "//4=") << "other headers become base64";
  EXPECT_EQ(lines[0]["payload"], nlohmann::json::parse("{\"a\":1,\"s\":\"line\\nbreak\"}"));
  EXPECT_TRUE(lines[1]["payload"].is_null()) << "a tombstone is null";
  EXPECT_FALSE(lines[1].contains("pico_key")) << "no key, no pico_key";
  EXPECT_EQ(lines[2]["payload"], nlohmann::json::parse("[1,2,3]"));
  EXPECT_EQ(lines[2]["pico_key"], "cGxhaW4=");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// Batches that wait behind others are copied out of librdkafka's messages (kafka/kafka_records.h):
// with batch_length 1 and 90 records read at once, all but the first few are; with 1000, none.
// Keys (empty ones too), headers, tombstones and offsets come out the same either way.
TEST(StdoutSink, BatchesCopiedOutOfLibrdkafkasMessagesPrintTheSameAsTheMessages) {
  auto& kafka = Kafka::shared();
  const std::string topic = unique_name("copied");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 30; ++i) {
    records.push_back({R"({"i":)" + std::to_string(i) + "}",
                       std::string("\x00k", 2) + std::to_string(i),
                       {{"trace", "t" + std::to_string(i)}, {"empty", ""}, {"bin", std::string("\xff", 1)}}});
    records.push_back({"", std::nullopt, {}, -1, /*null_value=*/true});
    records.push_back({"[" + std::to_string(i) + "]", std::string(""), {}});
  }
  kafka.produce(topic, records);
  auto printed = [&](const std::string& key, int batch_length) {
    std::string definition = stdout_definition(key, topic, "json", "include_metadata = true");
    definition.replace(definition.find("[plugin_config]"), 0, "batch_length = " + std::to_string(batch_length) + "\n");
    Runtime rt(kafka.bootstrap());
    rt.add_definition("s.toml", definition);
    rt.start();
    EXPECT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 90; }, 30s)) << rt.log();
    auto lines = stdout_lines(rt);
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    return lines;
  };
  const auto copied = printed("copied", 1);
  const auto messages = printed("messages", 1000);
  ASSERT_EQ(copied.size(), 90u);
  EXPECT_EQ(copied, messages);
  EXPECT_EQ(copied[3]["payload"], (nlohmann::json{{"i", 1}}));
  EXPECT_EQ(copied[3]["pico_headers"]["trace"], "t1");
  EXPECT_TRUE(copied[4]["payload"].is_null()) << "a tombstone stays null";
  EXPECT_EQ(copied[89]["pico_offset"], 89);
}

// docs/changes.md: an append-only sink prints change events as data — pico_op and pico_row_key
// beside the metadata — and refuses to print them without it (a delete would be a bare null).
TEST(StdoutSink, ChangeEventsArePrintedWithTheirOperationAndRowKey) {
  auto& kafka = Kafka::shared();
  const std::string topic = unique_name("changes_out");
  kafka.create_topic(topic);
  kafka.produce(topic, {{R"({"sku":"A-1","qty":2})", std::string("A-1"), {}},
                        {"", std::string("A-1"), {}, -1, /*null_value=*/true},
                        {R"({"sku":"B-2","qty":1})", std::nullopt, {}}});  // no key: a bad record
  const std::string block = "changes = \"keyed\"\nkey = { schema = \"text\" }\non_bad_record = \"skip\"\n";
  std::string definition = stdout_definition("chg", topic, "json", "include_metadata = true");
  definition.replace(definition.find("[plugin_config]"), 0, block);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", definition);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("chg"), topic) == 3; }, 30s)) << rt.log();
  auto lines = stdout_lines(rt);
  ASSERT_EQ(lines.size(), 2u) << rt.log();
  EXPECT_EQ(lines[0]["pico_op"], "upsert");
  EXPECT_EQ(lines[0]["pico_row_key"], nlohmann::json::parse(R"({"key":"A-1"})"));
  EXPECT_EQ(lines[0]["payload"], nlohmann::json::parse(R"({"sku":"A-1","qty":2})"));
  EXPECT_EQ(lines[1]["pico_op"], "delete");
  EXPECT_EQ(lines[1]["pico_row_key"], nlohmann::json::parse(R"({"key":"A-1"})"));
  EXPECT_TRUE(lines[1]["payload"].is_null());
  EXPECT_NE(rt.log().find("has no key to name its row"), std::string::npos) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);

  Runtime bare(kafka.bootstrap());
  std::string without_metadata = stdout_definition("chg2", topic, "json", "include_metadata = false");
  without_metadata.replace(without_metadata.find("[plugin_config]"), 0, block);
  bare.add_definition("s.toml", without_metadata);
  auto [code, out] = bare.check();
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("plugin_config.include_metadata"), std::string::npos) << out;
  EXPECT_NE(out.find("must stay on for change events"), std::string::npos) << out;
}

// Kafka allows a header name more than once (kcat -H a=1 -H a=2); JSON objects must not repeat
// a key, so a repeated name is rendered as an array of its values (docs/destinations.md).
TEST(StdoutSink, RepeatedHeaderNamesBecomeAnArrayOfTheirValues) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("dupheaders");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.push_back({"{\"n\":1}", std::nullopt, {{"a", "1"}, {"b", "x"}, {"a", "2"}}});
  records.push_back({"{\"n\":2}", std::nullopt, {{"a", "1"}, {"a", std::string("\xff", 1)}, {"a", "3"}}});
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", stdout_definition("dup", topic, "json", "include_metadata = true"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 2; }, 30s)) << rt.log();
  const auto raw = read_lines(rt.dir() / "stdout.log");
  EXPECT_NE(raw[0].find(R"("pico_headers":{"a":["1","2"],"b":"x"})"), std::string::npos) << raw[0];
  const auto lines = stdout_lines(rt);
  EXPECT_EQ(lines[0]["pico_headers"]["a"], nlohmann::json::parse(R"(["1","2"])")) << raw[0];
  EXPECT_EQ(lines[0]["pico_headers"]["b"], "x");
  EXPECT_EQ(lines[1]["pico_headers"], nlohmann::json::parse(R"({"a":["1","/w==","3"]})")) << raw[1];
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// Without metadata, JSON payloads are printed byte for byte as produced (the zero-copy path),
// except that line breaks in a payload's whitespace become spaces and a tombstone is null.
TEST(StdoutSink, PayloadOnlyJsonLinesAreThePayloadsAsProduced) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("lines");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.resize(2500);  // several batches
  for (size_t i = 0; i < records.size(); ++i) records[i].value = "{\"i\": " + std::to_string(i) + ", \"s\":\"x\\ny\"}";
  records[7].value = "{\r\n  \"multi\": [1,\n 2]\n}";
  records[8].null_value = true;
  records[9].value = "  \"spaced string\"  ";
  kafka.produce(topic, records);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("s.toml", stdout_definition("lines", topic, "json", "include_metadata = false"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == records.size(); }, 30s))
      << rt.log();
  const auto lines = read_lines(rt.dir() / "stdout.log");
  for (size_t i = 0; i < records.size(); ++i) {
    if (i == 7) EXPECT_EQ(lines[i], "{    \"multi\": [1,  2] }");
    else if (i == 8) EXPECT_EQ(lines[i], "null");
    else EXPECT_EQ(lines[i], records[i].value) << "line " << i;
  }
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(StdoutSink, PayloadOnlyRendersTextAsStringsAndRawAsBase64) {
  auto& kafka = Kafka::shared();
  const auto text_topic = unique_name("text"), raw_topic = unique_name("raw");
  kafka.create_topic(text_topic);
  kafka.create_topic(raw_topic);
  kafka.produce_values(text_topic, {"héllo \"quoted\"\ttab"});
  ProducedRecord raw;
  raw.value = std::string("\x01\x02\xff", 3);
  kafka.produce(raw_topic, {raw});
  {
    Runtime rt(kafka.bootstrap(), "text");
    rt.add_definition("t.toml", stdout_definition("text", text_topic, "text", "include_metadata = false"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 1; }, 30s)) << rt.log();
    EXPECT_EQ(stdout_lines(rt)[0], "héllo \"quoted\"\ttab");
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
  }
  Runtime rt(kafka.bootstrap(), "raw");
  rt.add_definition("r.toml", stdout_definition("raw", raw_topic, "raw", "include_metadata = false"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return read_lines(rt.dir() / "stdout.log").size() == 1; }, 30s)) << rt.log();
  EXPECT_EQ(stdout_lines(rt)[0], "AQL/");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(StdoutSink, InvalidUtf8UnderTextSchemaIsABadRecordNotPassedThrough) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("badtext");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {"ok", std::string("bad \xc3\x28", 6), "after"});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("t.toml", stdout_definition("badtext", topic, "text", "include_metadata = false"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("badtext", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("badtext").value("message", "");
  EXPECT_NE(message.find("offset 1"), std::string::npos) << message;
  EXPECT_NE(message.find("not valid UTF-8"), std::string::npos) << message;
  EXPECT_EQ(read_lines(rt.dir() / "stdout.log").size(), 1u);
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-badtext", topic) == 1; }, 10s));
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

}  // namespace
}  // namespace picomq::test
