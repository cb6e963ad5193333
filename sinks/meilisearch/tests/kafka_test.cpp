// The Meilisearch and Quickwit sinks through a real Kafka broker and the runtime, into their
// contract servers (meilisearch_contract.py, quickwit_contract.py: each server's documented API,
// written from its reference), read back through the servers' own APIs and the broker's
// committed offsets. One broker and one server of each for the binary (both sinks share it to
// save CI time):
//   Meilisearch: records of two partitions land once; a SIGKILL mid-load and a restart leave
//   exactly the produced documents (the replay replaces the same ids); tasks that stay enqueued
//   hold the offsets, tasks that fail later and a 503 outage are retried, nothing lost; a
//   document a task fails on goes through each bad-record policy while the rest is written.
//   Quickwit: records land once; a SIGKILL's replay duplicates exactly the replayed window (no
//   document ids: docs/sinks/quickwit.md) and pico_id tells the copies apart; 429 / 503 are
//   retried with nothing lost or doubled; a document the doc mapping refuses goes through each
//   bad-record policy.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "contract_servers.h"
#include "harness.h"
#include "picomq/kit/record_id.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {
namespace {

using kit::testing::HttpReceiver;
using nlohmann::json;
using namespace std::chrono_literals;

HttpReceiver& meili() { return meilisearch_contract(); }
HttpReceiver& quickwit() { return quickwit_contract(); }
void control(HttpReceiver& server, const json& c) { contract_control(server, c); }
std::vector<json> meili_documents(const std::string& index) { return meilisearch_documents(index); }

std::string meili_definition(const std::string& key, const std::string& topic, const std::string& index,
                             const std::string& config = "", const std::string& block_extra = "") {
  return plugin_definition(
      key, "libpicomq_connector_meilisearch_sink",
      "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
      "url = \"" + meili().base_url() + "\"\nindex = \"" + index + "\"\ntimeout = \"3s\"\n" + config);
}
std::string quickwit_definition(const std::string& key, const std::string& topic, const std::string& index,
                                const std::string& config = "", const std::string& block_extra = "") {
  return plugin_definition(
      key, "libpicomq_connector_quickwit_sink",
      "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
      "url = \"" + quickwit().base_url() + "\"\nindex = \"" + index +
          "\"\ntimeout = \"3s\"\ncommit = \"force\"\n"
          "index_config = { version = \"0.8\", doc_mapping = { mode = \"lenient\", field_mappings = "
          "[{ name = \"n\", type = \"i64\" }] } }\n" +
          config);
}

// (partition, n) pairs once each and the sum of n over them.
std::pair<int64_t, int64_t> distinct_and_sum(const std::vector<json>& docs, const char* n_field = "n") {
  std::set<std::pair<int, int64_t>> pairs;
  int64_t total = 0;
  for (const auto& d : docs)
    if (pairs.emplace(d.at("pico_partition").get<int>(), d.at(n_field).get<int64_t>()).second)
      total += d.at(n_field).get<int64_t>();
  return {static_cast<int64_t>(pairs.size()), total};
}

std::vector<ProducedRecord> two_partitions(int per_partition) {
  std::vector<ProducedRecord> records;
  for (int p = 0; p < 2; ++p)
    for (int n = 0; n < per_partition; ++n)
      records.push_back(
          {"{\"n\": " + std::to_string(n) + ", \"name\": \"order-" + std::to_string(n) + "\"}", std::nullopt, {}, p});
  return records;
}

// A count that stopped moving (what the server finished after a kill).
int64_t settled(const std::function<int64_t()>& count) {
  int64_t last = count();
  for (int stable = 0; stable < 4;) {
    std::this_thread::sleep_for(250ms);
    const int64_t now = count();
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

// Runs until documents appear, SIGKILLs the runtime, then restarts it to the end. Returns the
// documents at the kill and what was committed then.
std::pair<int64_t, int64_t> kill_and_restart(Kafka& kafka, const std::string& key, const std::string& topic,
                                             const std::string& definition, const std::function<int64_t()>& docs,
                                             int64_t total) {
  int64_t at_kill = 0, committed = 0;
  {
    Runtime rt(kafka.bootstrap(), "kill");
    rt.add_definition("c.toml", definition);
    rt.start();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (docs() < total / 4 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    EXPECT_GT(docs(), 0) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    at_kill = settled(docs);
    committed = committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] killed with " << at_kill << " documents, " << committed << " offsets committed\n";
  }
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition);
  rt.start();
  EXPECT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == total; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  return {at_kill, committed};
}

TEST(MeilisearchKafka, RecordsLandOnceAndASigkillReplayReplacesTheSameIds) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("meili.orders");
  const std::string index = "orders-kill";
  kafka.create_topic(topic, 2);
  const int per = 2000;
  kafka.produce(topic, two_partitions(per));
  auto docs = [&] { return static_cast<int64_t>(meili_documents(index).size()); };
  const auto [at_kill, committed] = kill_and_restart(
      kafka, "mkill", topic,
      meili_definition("mkill", topic, index, "", "batch_length = 250\n" + static_member("mkill")), docs, 2 * per);
  EXPECT_LE(committed, at_kill) << "no offset is committed before its task succeeded";
  const auto all = meili_documents(index);
  EXPECT_EQ(all.size(), 2u * per) << "exactly the produced documents: the replay replaced the same ids";
  EXPECT_EQ(distinct_and_sum(all), (std::pair<int64_t, int64_t>{2 * per, 2 * int64_t{per} * (per - 1) / 2}));
  // Every document holds the record at its offset (read back from the broker: the order records
  // were produced in is the producer's business) under the id made from that offset.
  std::map<std::pair<int, int64_t>, json> at;
  for (const auto& r : kafka.consume(topic, 2 * per, 30s))
    at[{r.partition, r.offset}] = json::parse(r.value.value_or("null"));
  ASSERT_EQ(at.size(), 2u * per);
  for (const auto& d : all) {
    const int partition = d.at("pico_partition").get<int>();
    const int64_t offset = d.at("pico_offset").get<int64_t>();
    ASSERT_TRUE(at.count({partition, offset})) << d.dump();
    const json& produced = at[{partition, offset}];
    EXPECT_EQ(d["name"], produced["name"]) << d.dump();
    EXPECT_EQ(d["pico_id"], kit::url_safe(topic) + "-" + std::to_string(partition) + "-" + std::to_string(offset));
  }
}

TEST(MeilisearchKafka, EnqueuedTasksHoldTheOffsetsAndFailedTasksAndAnOutageAreRetried) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("meili.outage");
  const std::string index = "outage";
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 600));
  // The index first (its creation is a task too), then tasks that stay enqueued.
  ASSERT_EQ(meili().call("POST", "/indexes", R"({"uid": "outage", "primaryKey": "pico_id"})").first, 202);
  std::this_thread::sleep_for(300ms);
  control(meili(), {{"paused", true}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml",
                    meili_definition("moutage", topic, index, "retry_timeout = \"2s\"", "batch_length = 100"));
  rt.start();
  std::this_thread::sleep_for(scaled(5s));
  EXPECT_LT(kafka.committed(group_of("moutage"), topic), 0) << "tasks enqueued (202) are no writes: nothing committed";
  EXPECT_TRUE(meili_documents(index).empty());
  // Then: the next tasks fail as internal, the next enqueues answer 503, and processing resumes.
  control(meili(),
          {{"fail_tasks", 3},
           {"fail_requests",
            {{{"method", "POST"}, {"path_prefix", "/indexes/outage/documents"}, {"status", 503}, {"count", 8}}}},
           {"paused", false}});
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("moutage"), topic) == 600; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto all = meili_documents(index);
  EXPECT_EQ(all.size(), 600u);
  std::set<int64_t> offsets;
  for (const auto& d : all) offsets.insert(d["pico_offset"].get<int64_t>());
  EXPECT_EQ(offsets.size(), 600u) << "every record, none lost";
}

class MeilisearchBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(MeilisearchBadRecords, ADocumentATaskFailsOnGoesThroughThePolicyAndTheRestIsWritten) {
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("meili.bad"), dead = unique_name("meili.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  std::vector<std::string> values;
  values.reserve(50);
  for (int i = 0; i < 50; ++i)
    values.push_back("{\"sku\": \"s" + std::to_string(i) + "\", \"n\": " + std::to_string(i) + "}");
  values[17] = R"({"sku": "not a valid id", "n": 17})";
  kafka.produce_values(topic, values);
  const std::string key = "mbad" + policy, index = "bad-" + policy;
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", meili_definition(key, topic, index,
                                               "id = \"field\"\nprimary_key = \"sku\"\ndocument = \"payload\"", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("invalid_document_id"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    const auto all = meili_documents(index);
    EXPECT_EQ(all.size(), 49u);
    for (const auto& d : all) EXPECT_NE(d["n"], 17);
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("invalid_document_id"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, MeilisearchBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

// The pipeline a user runs: Debezium's envelopes (JsonConverter without schemas) on a topic, the
// runtime with changes = "debezium", killed with SIGKILL once documents landed and restarted; when
// everything is committed the index equals the source table the events describe (a model kept
// here), the truncate in the middle included.
TEST(MeilisearchChangesKafka, DebeziumEventsWithASigkillEndEqualToTheSource) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("meili.changes");
  const std::string index = "debezium";
  kafka.create_topic(topic);
  // Under changes the sink awaits each task before the next request: tasks that take 5 ms, not
  // the server's default 50, keep the test short (restored at the end).
  control(meili(), {{"processing_delay", 0.005}});
  std::mt19937 random(7);
  std::map<int, json> source;  // id -> row
  std::vector<ProducedRecord> records;
  auto event = [&](const char* op, const json& before, const json& after, int id) {
    const json value = {{"before", before},
                        {"after", after},
                        {"op", op},
                        {"source", {{"connector", "postgresql"}, {"table", "customers"}}}};
    records.push_back({value.dump(), json{{"id", id}}.dump()});
  };
  const int n = 1200;
  for (int i = 0; i < n; ++i) {
    if (i == n / 2) {  // TRUNCATE customers: Debezium's 't' has no key
      records.push_back({R"({"before":null,"after":null,"op":"t","source":{"table":"customers"}})", std::nullopt});
      source.clear();
      continue;
    }
    const int id = static_cast<int>(random() % 60);
    const auto row = source.find(id);
    if (row != source.end() && random() % 4 == 0) {
      event("d", row->second, nullptr, id);
      records.push_back({"", json{{"id", id}}.dump(), {}, -1, true});  // the tombstone after it
      source.erase(row);
      continue;
    }
    const json after = {{"id", id}, {"name", "n" + std::to_string(i)}, {"visits", i}};
    event(row == source.end() ? "c" : "u", row == source.end() ? json() : row->second, after, id);
    source[id] = after;
  }
  kafka.produce(topic, records);
  const int64_t total = static_cast<int64_t>(records.size());
  const std::string k = "mchanges";
  const std::string definition = plugin_definition(
      k, "libpicomq_connector_meilisearch_sink",
      "topics = [\"" + topic + "\"]\nschema = \"json\"\nchanges = \"debezium\"\npoll_interval = \"50ms\"\n" +
          // A commit per batch (not coalesced): the kill below falls between two of them mid-stream.
          "batch_length = 100\noffset_commit_interval = \"0s\"\n" + static_member(k),
      "url = \"" + meili().base_url() + "\"\nindex = \"" + index +
          "\"\ntimeout = \"3s\"\ndocument = \"payload\"\nmax_request_records = 40\n");
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml", definition);
    rt.start();
    // Killed mid-stream: some batches committed, the ones after them written or on their way.
    ASSERT_TRUE(
        wait_until([&] { return kafka.committed(group_of(k), topic) >= 300 && !meili_documents(index).empty(); }, 60s))
        << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
  }
  const int64_t committed_before = std::max<int64_t>(0, kafka.committed(group_of(k), topic));
  std::cout << "[          ] killed at " << committed_before << " of " << total << " committed\n";
  EXPECT_LT(committed_before, total) << "the kill came before the end";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == total; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::map<std::string, json> documents;
  for (json doc : meili_documents(index)) {
    const std::string id = doc["pico_id"];
    doc.erase("pico_id");
    documents[id] = doc;
  }
  std::map<std::string, json> expected;
  for (const auto& [id, row] : source) expected[std::to_string(id)] = row;
  EXPECT_EQ(documents, expected);
  EXPECT_GT(source.size(), 10u);
  control(meili(), {{"processing_delay", 0.05}});
}

TEST(QuickwitKafka, RecordsLandOnceAndASigkillReplayDuplicatesExactlyTheReplayedWindow) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("qw.orders");
  const std::string index = "orders-kill";
  kafka.create_topic(topic, 2);
  const int per = 2000;
  kafka.produce(topic, two_partitions(per));
  auto docs = [&] { return static_cast<int64_t>(quickwit_documents(index).size()); };
  const auto [at_kill, committed] = kill_and_restart(
      kafka, "qkill", topic,
      quickwit_definition("qkill", topic, index, "", "batch_length = 250\n" + static_member("qkill")), docs, 2 * per);
  const auto all = quickwit_documents(index);
  EXPECT_EQ(static_cast<int64_t>(all.size()), 2 * per + (at_kill - committed))
      << "Quickwit keeps no ids: the replayed window (written, not committed at the kill) is there twice, nothing else";
  std::set<std::string> ids;
  for (const auto& d : all) ids.insert(d["pico_id"].get<std::string>());
  EXPECT_EQ(ids.size(), 2u * per) << "pico_id tells the copies apart: every record once by id";
  EXPECT_EQ(distinct_and_sum(all), (std::pair<int64_t, int64_t>{2 * per, 2 * int64_t{per} * (per - 1) / 2}));
}

TEST(QuickwitKafka, RateLimitingAndUnavailabilityAreRetriedWithNothingLostOrDoubled) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("qw.outage");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 400));
  control(quickwit(), {{"fail_requests",
                        {{{"path_prefix", "/api/v1/outage/ingest"}, {"status", 429}, {"count", 4}, {"retry_after", 1}},
                         {{"path_prefix", "/api/v1/outage/ingest"}, {"status", 503}, {"count", 4}}}}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml",
                    quickwit_definition("qoutage", topic, "outage", "retry_timeout = \"1s\"", "batch_length = 100"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("qoutage"), topic) == 400; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto all = quickwit_documents("outage");
  EXPECT_EQ(all.size(), 400u) << "a 429 / 503 writes nothing: resending doubles nothing";
  const auto stats = json::parse(quickwit().call("GET", "/_control/stats").second);
  EXPECT_GE(stats["requests"]["POST /api/v1/{index}/ingest"].get<int>(), 4 + 8);
}

class QuickwitBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(QuickwitBadRecords, ADocumentTheMappingRefusesGoesThroughThePolicyAndTheRestIsWritten) {
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("qw.bad"), dead = unique_name("qw.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";
  kafka.produce_values(topic, values);
  const std::string key = "qbad" + policy, index = "bad-" + policy;
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", quickwit_definition(key, topic, index, "", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("invalid_schema"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    const auto all = quickwit_documents(index);
    EXPECT_EQ(all.size(), 49u);
    for (const auto& d : all) EXPECT_NE(d["pico_offset"], 17);
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("invalid_schema"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, QuickwitBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

}  // namespace
}  // namespace picomq::test
