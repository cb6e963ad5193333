// The conformance cases, run against every adapter (conformance.h). Each case drives the real
// runtime binary through the shared Kafka broker and checks what a user would see: what the
// destination holds, the offsets committed on the broker, the sink's state.
#include "picomq/kit/testing/conformance.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

namespace picomq::conformance {
namespace {

using namespace std::chrono_literals;
using test::json_values;
using test::Kafka;
using test::ProducedRecord;
using test::unique_name;
using test::wait_until;

constexpr int64_t kNoOffset = -1001;  // RD_KAFKA_OFFSET_INVALID: the group committed nothing

std::string base64(const std::string& bytes) {  // RFC 4648, written here so the suite checks the sink's
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint8_t(bytes[i]) << 16 | uint8_t(bytes[i + 1]) << 8 | uint8_t(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += abc[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16 | uint8_t(bytes[i + 1]) << 8;
    for (int s : {18, 12, 6}) out += abc[(v >> s) & 63];
    out += '=';
  }
  return out;
}

std::string topics_list(const std::vector<std::string>& topics) {
  std::string out = "topics = [";
  for (size_t i = 0; i < topics.size(); ++i) out += (i ? ", \"" : "\"") + topics[i] + "\"";
  return out + "]\n";
}

// Offsets read back per topic, sorted (with repeats, if any).
std::map<std::string, std::vector<int64_t>> offsets_by_topic(const std::vector<WrittenRecord>& written) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& w : written) out[w.topic].push_back(w.offset);
  for (auto& [_, offsets] : out) std::sort(offsets.begin(), offsets.end());
  return out;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

class SinkConformance : public ::testing::TestWithParam<std::shared_ptr<SinkAdapter>> {
 protected:
  SinkAdapter& sink() { return *GetParam(); }
  Capabilities caps() { return GetParam()->capabilities(); }
  std::string test_name() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

  std::string definition(const std::string& key, const std::string& block, const std::string& plugin_config) {
    return test::plugin_definition(key, sink().plugin(), block + "poll_interval = \"200ms\"", plugin_config);
  }
  static std::string group(const std::string& key) { return "picomq-connect-sink-" + key; }
  static bool committed(const std::string& key, const std::vector<std::string>& topics, int64_t offset) {
    for (const auto& t : topics)
      if (Kafka::shared().committed(group(key), t) != offset) return false;
    return true;
  }
  static void stop(Runtime& rt) {
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  // A runtime with a sink in Error exits non-zero.
  static void stop_failed(Runtime& rt) {
    rt.signal(SIGTERM);
    EXPECT_TRUE(rt.wait_exit(30s)) << rt.log();
  }
};

TEST_P(SinkConformance, WritesEveryRecordWithMetadataKeysAndHeadersAsTheSpecSays) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.meta");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 24; ++i) {
    ProducedRecord r;
    r.value = "{\"n\": " + std::to_string(i) + ", \"s\": \"é\\\"'; --\\t\\n " + std::to_string(i) + "\"}";
    if (i % 4 == 1) r.key = "key-" + std::to_string(i);
    if (i % 4 == 2) r.key = std::string("\x00\xff\x80", 3) + char(i);
    if (i % 4 == 3) r.key = std::string();
    if (i % 3 == 0) r.headers = {{"trace", "t-é-" + std::to_string(i)}};
    if (i % 3 == 1) r.headers = {{"bin", std::string("\xff\xfe", 2) + char(i)}, {"plain", "x"}};
    records.push_back(r);
  }
  kafka.produce(topic, records);
  const auto produced = kafka.consume(topic, records.size(), 20s);
  ASSERT_EQ(produced.size(), records.size());

  const auto config = sink().prepare(test_name(), "{topic}");
  Runtime rt(kafka.bootstrap(), "meta");
  rt.add_definition("s.toml", definition("confmeta", topics_list({topic}), config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed("confmeta", {topic}, 24); }, 60s)) << rt.log();
  stop(rt);

  const auto written = sink().read_back({&rt});
  ASSERT_EQ(written.size(), records.size());
  std::map<int64_t, const WrittenRecord*> by_offset;
  for (const auto& w : written) by_offset[w.offset] = &w;
  ASSERT_EQ(by_offset.size(), records.size()) << "each offset once";
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE("offset " + std::to_string(i));
    const auto& w = *by_offset.at(static_cast<int64_t>(i));
    const auto& r = records[i];
    EXPECT_EQ(w.topic, topic);
    EXPECT_EQ(w.partition, 0);
    EXPECT_EQ(w.timestamp_ms, produced[i].timestamp_ms) << "pico_timestamp: the record's, in epoch ms";
    ASSERT_TRUE(w.payload_json);
    EXPECT_EQ(nlohmann::json::parse(*w.payload_json), nlohmann::json::parse(r.value));
    if (!r.key) EXPECT_FALSE(w.key) << "no key, no pico_key";
    else EXPECT_EQ(w.key, caps().binary_keys ? *r.key : base64(*r.key));
    std::map<std::string, std::string> expected_headers;
    for (const auto& [name, value] : r.headers) expected_headers[name] = name == "bin" ? base64(value) : value;
    EXPECT_EQ(w.headers, expected_headers) << "UTF-8 header values as they are, others base64";
    for (const char* field : {"pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key"})
      EXPECT_NE(std::find(w.metadata_fields.begin(), w.metadata_fields.end(), field), w.metadata_fields.end()) << field;
  }
}

TEST_P(SinkConformance, ReplayedRecordsAreWrittenOnceOrDeclaredAtLeastOnce) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.replay");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 40));
  const auto config = sink().prepare(test_name(), "{topic}");
  // The second run is a new consumer group: it replays every record into the same destination.
  Runtime first(kafka.bootstrap(), "first"), second(kafka.bootstrap(), "second");
  first.add_definition("s.toml", definition("confreplay_a", topics_list({topic}), config));
  second.add_definition("s.toml", definition("confreplay_b", topics_list({topic}), config));
  for (const auto& run : {std::pair{&first, "confreplay_a"}, std::pair{&second, "confreplay_b"}}) {
    Runtime* rt = run.first;
    const char* key = run.second;  // not a structured binding: lambdas capture it (clang 14)
    rt->start();
    ASSERT_TRUE(wait_until([&] { return committed(key, {topic}, 40); }, 60s)) << rt->log();
    stop(*rt);
  }
  const auto offsets = offsets_by_topic(sink().read_back({&first, &second}))[topic];
  if (caps().deduplicates_replays) {
    EXPECT_EQ(offsets, range(0, 40)) << "every record exactly once after a full replay";
  } else {
    std::vector<int64_t> twice;
    for (int64_t i = 0; i < 40; ++i) twice.insert(twice.end(), {i, i});
    EXPECT_EQ(offsets, twice) << "a sink that cannot deduplicate writes a replayed record again, and loses none";
  }
}

TEST_P(SinkConformance, ATransientFailureIsRetriedWhileTheOffsetWaits) {
  if (!caps().no_failure_injection.empty()) GTEST_SKIP() << caps().no_failure_injection;
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.retry");
  kafka.create_topic(topic);
  const auto config = sink().prepare(test_name(), "{topic}");
  // A first batch creates the destination and shows the sink works, before the outage.
  kafka.produce_values(topic, json_values(0, 5));
  Runtime rt(kafka.bootstrap(), "retry");
  rt.add_definition("s.toml", definition("confretry", topics_list({topic}), config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed("confretry", {topic}, 5); }, 60s)) << rt.log();

  sink().inject_transient_failure(true);
  kafka.produce_values(topic, json_values(5, 15));
  const bool retried = wait_until([&] { return rt.log().find("(attempt 1/5)") != std::string::npos; }, 30s);
  const int64_t while_failing = kafka.committed(group("confretry"), topic);
  sink().inject_transient_failure(false);
  ASSERT_TRUE(retried) << "the failed write is reported and retried\n" << rt.log();
  EXPECT_EQ(while_failing, 5) << "the offset does not move while the batch fails";
  ASSERT_TRUE(wait_until([&] { return committed("confretry", {topic}, 15); }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("confretry"), "running");
  stop(rt);
  const auto offsets = offsets_by_topic(sink().read_back({&rt}))[topic];
  if (caps().deduplicates_replays) {
    EXPECT_EQ(offsets, range(0, 15));
  } else {
    EXPECT_EQ(std::set<int64_t>(offsets.begin(), offsets.end()).size(), 15u) << "nothing lost";
  }
}

TEST_P(SinkConformance, APermanentErrorPutsTheSinkInErrorAndKeepsTheOffset) {
  if (!caps().no_failure_injection.empty()) GTEST_SKIP() << caps().no_failure_injection;
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.fatal");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5));
  const auto [extra, message] = sink().permanent_failure_config();
  const auto config = sink().prepare(test_name(), "{topic}") + "\n" + extra;
  Runtime rt(kafka.bootstrap(), "fatal");
  rt.add_definition("s.toml", definition("conffatal", topics_list({topic}), config));
  rt.start();
  ASSERT_TRUE(rt.wait_state("conffatal", "error", 60s)) << rt.log();
  EXPECT_NE(rt.sink_status("conffatal").value("message", "").find(message), std::string::npos)
      << rt.sink_status("conffatal").dump();
  stop_failed(rt);
  EXPECT_EQ(kafka.committed(group("conffatal"), topic), kNoOffset) << "nothing was written, nothing committed";
}

TEST_P(SinkConformance, RejectedRecordsGoWhereTheBadRecordPolicySays) {
  if (!caps().no_rejection.empty()) GTEST_SKIP() << caps().no_rejection;
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.reject");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 8);
  values[3] = sink().rejected_payload();
  kafka.produce_values(topic, values);

  // dead_letter: the refused record is in the dead-letter topic, every other one is written.
  const auto config = sink().prepare(test_name(), "{topic}") + "\n" + sink().rejecting_config();
  Runtime rt(kafka.bootstrap(), "dlq");
  rt.add_definition("s.toml", definition("confreject",
                                         topics_list({topic}) + "on_bad_record = \"dead_letter\"\n" +
                                             "dead_letter_topic = \"" + dead + "\"\n",
                                         config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed("confreject", {topic}, 8); }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("confreject"), "running");
  stop(rt);
  EXPECT_EQ(offsets_by_topic(sink().read_back({&rt}))[topic], (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7}));
  const auto letters = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].value, values[3]);
  EXPECT_EQ(letters[0].header("pico_error_stage"), "sink");
  EXPECT_EQ(letters[0].header("pico_error_offset"), "3");

  // fail: the sink stops in Error naming the record; only the records before it are committed.
  const auto fail_config = sink().prepare(test_name() + "_fail", "{topic}") + "\n" + sink().rejecting_config();
  Runtime failing(kafka.bootstrap(), "fail");
  failing.add_definition("s.toml", definition("confrejectfail", topics_list({topic}), fail_config));
  failing.start();
  ASSERT_TRUE(failing.wait_state("confrejectfail", "error", 60s)) << failing.log();
  const auto message = failing.sink_status("confrejectfail").value("message", "");
  EXPECT_NE(message.find(topic + "[0] at offset 3"), std::string::npos) << message;
  stop_failed(failing);
  EXPECT_EQ(kafka.committed(group("confrejectfail"), topic), 3);
}

TEST_P(SinkConformance, EachTopicGetsItsOwnDestinationCreatedOnItsFirstBatch) {
  if (!caps().destinations_per_topic) GTEST_SKIP() << sink().name() << " writes every topic to one stream";
  auto& kafka = Kafka::shared();
  const auto base = unique_name("conf.route");
  const std::vector<std::string> topics = {base + ".eu", base + ".us"};
  for (const auto& t : topics) kafka.create_topic(t);
  kafka.produce_values(topics[0], json_values(0, 3));
  const auto config = sink().prepare(test_name(), "orders_{topic_segment[-1]}");
  Runtime rt(kafka.bootstrap(), "route");
  rt.add_definition("s.toml", definition("confroute", topics_list(topics), config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed("confroute", {topics[0]}, 3); }, 60s)) << rt.log();
  // The second topic's destination appears with its first batch, while the sink runs.
  kafka.produce_values(topics[1], json_values(0, 4));
  ASSERT_TRUE(wait_until([&] { return committed("confroute", {topics[1]}, 4); }, 60s)) << rt.log();
  stop(rt);
  std::map<std::string, std::set<std::string>> topics_by_destination;
  std::map<std::string, size_t> count;
  for (const auto& w : sink().read_back({&rt})) {
    topics_by_destination[w.destination].insert(w.topic);
    ++count[w.destination];
  }
  EXPECT_EQ(topics_by_destination,
            (std::map<std::string, std::set<std::string>>{{"orders_eu", {topics[0]}}, {"orders_us", {topics[1]}}}));
  EXPECT_EQ(count["orders_eu"], 3u);
  EXPECT_EQ(count["orders_us"], 4u);
}

TEST_P(SinkConformance, HostileTopicNamesReachLegalDestinationsIntact) {
  auto& kafka = Kafka::shared();
  std::string longest = unique_name("Hostile.Name-_x");
  longest += std::string(249 - longest.size(), 'Z');  // the longest name Kafka takes
  const std::vector<std::string> topics = {longest, "-_" + unique_name(".."), unique_name("UPPER.Case-x")};
  for (const auto& t : topics) kafka.create_topic(t);
  for (const auto& t : topics) kafka.produce_values(t, {R"({"q": "'; DROP TABLE x; --", "u": "東京"})"});
  const auto config = sink().prepare(test_name(), "{topic}");
  Runtime rt(kafka.bootstrap(), "hostile");
  rt.add_definition("s.toml", definition("confhostile", topics_list(topics), config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed("confhostile", topics, 1); }, 60s)) << rt.log();
  stop(rt);
  const auto written = sink().read_back({&rt});
  std::map<std::string, std::string> destination_of;
  for (const auto& w : written) {
    EXPECT_TRUE(sink().legal_destination(w.destination)) << w.destination;
    destination_of[w.topic] = w.destination;
    ASSERT_TRUE(w.payload_json);
    EXPECT_EQ(nlohmann::json::parse(*w.payload_json)["q"], "'; DROP TABLE x; --");
  }
  ASSERT_EQ(written.size(), topics.size());
  for (const auto& t : topics) EXPECT_TRUE(destination_of.count(t)) << "the topic name is kept exactly: " << t;
  if (caps().destinations_per_topic) {
    std::set<std::string> distinct;
    for (const auto& [_, d] : destination_of) distinct.insert(d);
    EXPECT_EQ(distinct.size(), topics.size()) << "distinct topics, distinct destinations";
  }
}

TEST_P(SinkConformance, ShutdownFlushesWhatIsBuffered) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("conf.flush");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 7));
  const auto config = sink().prepare(test_name(), "{topic}");
  Runtime rt(kafka.bootstrap(), "flush");
  // Neither flush rule fires by itself: a long poll_interval and a batch the topic never fills.
  rt.add_definition(
      "s.toml", test::plugin_definition("confflush", sink().plugin(),
                                        topics_list({topic}) + "batch_length = 1000\npoll_interval = \"10m\"", config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.block_status("confflush").value("buffered_records", 0) == 7; }, 60s))
      << rt.status().dump();
  EXPECT_EQ(kafka.committed(group("confflush"), topic), kNoOffset);
  stop(rt);
  EXPECT_EQ(kafka.committed(group("confflush"), topic), 7) << "flushed through the sink, then committed";
  EXPECT_EQ(offsets_by_topic(sink().read_back({&rt}))[topic], range(0, 7));
}

}  // namespace

namespace {
std::vector<AdapterFactory>& registered_adapters() {
  static std::vector<AdapterFactory> factories;  // function-local: adapters register during static init
  return factories;
}
}  // namespace

AdapterRegistration::AdapterRegistration(AdapterFactory factory) { registered_adapters().push_back(factory); }

WrittenRecord from_table_row(const nlohmann::json& row, std::string destination) {
  WrittenRecord w;
  w.destination = std::move(destination);
  w.topic = row.at("pico_topic").get<std::string>();
  w.partition = row.at("pico_partition").get<int32_t>();
  w.offset = row.at("pico_offset").get<int64_t>();
  if (row.contains("pico_timestamp") && !row["pico_timestamp"].is_null())
    w.timestamp_ms = row["pico_timestamp"].get<int64_t>();
  if (row.contains("pico_key") && !row["pico_key"].is_null()) w.key = decode_base64(row["pico_key"].get<std::string>());
  if (row.contains("pico_headers") && row["pico_headers"].is_object())
    for (const auto& [name, value] : row["pico_headers"].items())
      if (!value.is_null()) w.headers[name] = header_as_rendered(decode_base64(value.get<std::string>()));
  nlohmann::json payload = nlohmann::json::object();
  for (const auto& [column, value] : row.items()) {
    if (column.rfind("pico_", 0) == 0) w.metadata_fields.push_back(column);
    else if (!value.is_null()) payload[column] = value;
  }
  w.payload_json = payload.dump();
  return w;
}

std::string decode_base64(std::string_view text) {
  static const std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const size_t v = kAlphabet.find(c);
    if (v == std::string_view::npos) break;  // '=' padding, or the end
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if ((count += 6) >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  return out;
}

std::string header_as_rendered(const std::string& bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool valid = n != 0 && i + n <= bytes.size();
    for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(bytes[i + k]) >> 6) == 0x2;
    if (!valid) return base64(bytes);
    i += n;
  }
  return bytes;
}

WrittenRecord from_envelope(const nlohmann::json& j, std::string destination) {
  WrittenRecord w;
  w.destination = std::move(destination);
  w.topic = j.at("pico_topic").get<std::string>();
  w.partition = j.at("pico_partition").get<int32_t>();
  w.offset = j.at("pico_offset").get<int64_t>();
  if (j.contains("pico_timestamp")) w.timestamp_ms = j["pico_timestamp"].get<int64_t>();
  if (j.contains("pico_key")) w.key = j["pico_key"].get<std::string>();
  if (j.contains("pico_headers"))
    for (const auto& [name, value] : j["pico_headers"].items())
      w.headers[name] = value.is_string() ? value.get<std::string>() : value.dump();
  if (j.contains("payload") && !j["payload"].is_null()) w.payload_json = j["payload"].dump();
  for (const auto& [name, _] : j.items())
    if (name.rfind("pico_", 0) == 0) w.metadata_fields.push_back(name);
  // pico_key is left out for a record without a key; it is still a field of the format.
  if (!j.contains("pico_key")) w.metadata_fields.emplace_back("pico_key");
  return w;
}

std::vector<std::shared_ptr<SinkAdapter>> all_adapters() {
  std::vector<std::shared_ptr<SinkAdapter>> out;
  for (AdapterFactory f : registered_adapters()) out.push_back(f());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return out;
}

int run(int argc, char** argv, const test::Locations& built_in) {
  test::use_locations(built_in);
  // A plugin the runtime cannot find would fail every case after its timeouts: say so at once.
  std::string missing;
  for (const auto& adapter : all_adapters()) {
    bool found = false;
    for (const auto& dir : test::locations().plugin_dirs)
      found = found || std::filesystem::exists(dir / (adapter->plugin() + ".so"));
    if (!found) missing += adapter->plugin() + ".so (" + adapter->name() + ") ";
  }
  if (!missing.empty()) {
    std::string dirs;
    for (const auto& dir : test::locations().plugin_dirs) dirs += " '" + dir.string() + "'";
    std::cerr << "conformance: " << missing << "is in none of the plugin folders"
              << (dirs.empty() ? " (none given)" : dirs) << ": set PICOMQ_PLUGIN_PATH (':'-separated)\n";
    return 1;
  }
  const char* bootstrap = std::getenv("PICOMQ_CONFORMANCE_BOOTSTRAP");
  if (bootstrap && *bootstrap) return test::run_tests_with_broker(argc, argv, built_in, bootstrap);
  return test::run_tests_with_kafka(argc, argv, built_in);
}

namespace {

INSTANTIATE_TEST_SUITE_P(Sinks, SinkConformance, ::testing::ValuesIn(all_adapters()),
                         [](const auto& info) { return info.param->name(); });

}  // namespace
}  // namespace picomq::conformance
