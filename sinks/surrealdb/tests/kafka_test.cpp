// The SurrealDB sink through a real Kafka broker and the runtime, into the real SurrealDB 3.3.5
// server of the test process (sinks/surrealdb/server.sh, surrealkv storage, started once), read
// back with SELECT through POST /sql and the broker's committed offsets: the records of a
// 2-partition topic exactly once and exactly as produced; a second consumer group's replay, and a
// SIGKILL mid-load with a restart, leave exactly the produced records; a record the server refuses
// through each bad-record policy while the rest is written; hostile topic names and
// SurrealQL-looking content stay data; the server killed and restarted during a load: resent, no
// loss. One broker and one server for the binary.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <random>
#include <thread>

#include "harness.h"
#include "surreal_server.h"

namespace picomq::test {
namespace {

std::string definition(const std::string& key, const std::string& topic, const std::string& ns,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_surrealdb_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
                           "url = \"" + SurrealServer::shared()->url() + "\"\nnamespace = \"" + ns +
                               "\"\ndatabase = \"db\"\npassword = \"root\"\n" + plugin_config);
}

// 0 while the namespace or the table does not exist yet (NotFound).
int64_t rows(const std::string& ns, const std::string& table, const std::string& where = "") {
  const auto all =
      SurrealServer::shared()->sql(ns, "db", "SELECT count() AS n FROM `" + table + "` " + where + " GROUP ALL");
  const auto& st = all.back();
  if (st.value("status", "") != "OK") {
    if (st.value("kind", "") == "NotFound") return 0;
    throw std::runtime_error("test: count of " + table + ": " + st.dump());
  }
  return st["result"].empty() ? 0 : st["result"][0]["n"].get<int64_t>();
}

// Distinct (partition, n) pairs and the sum of n: every produced value once.
std::pair<int64_t, int64_t> distinct_and_sum(const std::string& ns, const std::string& table) {
  const auto r =
      SurrealServer::shared()->result(ns, "db",
                                      "SELECT count() AS c, math::sum(n) AS s FROM (SELECT pico_partition, n FROM `" +
                                          table + "` GROUP BY pico_partition, n) GROUP ALL");
  if (r.empty()) return {0, 0};
  return {r[0]["c"].get<int64_t>(), r[0]["s"].get<int64_t>()};
}

TEST(SurrealSinkKafka, RecordsOfEveryPartitionLandOnceExactlyAndASecondGroupsReplayAddsNothing) {
  SURREAL_OR_SKIP();
  auto& kafka = Kafka::shared();
  auto& server = *SurrealServer::shared();
  const auto ns = server.fresh_namespace("skafka");
  const auto topic = unique_name("surreal.orders");
  kafka.create_topic(topic, 2);
  std::vector<ProducedRecord> records;
  const int n = 3000;
  records.reserve(n);
  for (int i = 0; i < n; ++i)
    records.push_back({"{\"n\": " + std::to_string(i) + ", \"name\": \"order-" + std::to_string(i) + "\"}",
                       "k" + std::to_string(i),
                       {{"h", "v"}},
                       i % 2});
  kafka.produce(topic, records);
  const std::string config = "table = \"orders\"";
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml", definition("sorders", topic, ns, config, "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("sorders"), topic, 2) == n; }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  EXPECT_EQ(rows(ns, "orders"), n);
  const auto d = server.result(ns, "db", "SELECT * FROM orders WHERE n = 7");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["id"], "orders:['" + topic + "', 1, 3]");
  EXPECT_EQ(d[0]["name"], "order-7");
  EXPECT_EQ(d[0]["pico_key"], "azc=");  // "k7"
  EXPECT_EQ(d[0]["pico_headers"], nlohmann::json::parse(R"({"h": "v"})"));
  EXPECT_EQ(distinct_and_sum(ns, "orders"), (std::pair<int64_t, int64_t>{n, int64_t{n} * (n - 1) / 2}));
  {
    Runtime rt(kafka.bootstrap(), "replay");
    rt.add_definition("c.toml", definition("sreplay", topic, ns, config, "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("sreplay"), topic, 2) == n; }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  EXPECT_EQ(rows(ns, "orders"), n) << "no duplicates";
}

TEST(SurrealSinkKafka, SigkillMidLoadThenRestartLeavesExactlyTheProducedRecords) {
  SURREAL_OR_SKIP();
  auto& kafka = Kafka::shared();
  const auto ns = SurrealServer::shared()->fresh_namespace("skill");
  const auto topic = unique_name("surreal.kill");
  kafka.create_topic(topic, 2);
  const int chunk = 5000;
  int64_t produced = 0;
  auto produce_chunk = [&] {
    std::vector<ProducedRecord> records;
    for (int p = 0; p < 2; ++p)
      for (int64_t n = produced; n < produced + chunk; ++n)
        records.push_back({"{\"n\": " + std::to_string(n) + "}", "", {}, p});
    kafka.produce(topic, records);
    produced += chunk;
  };
  const std::string key = "skill";
  const std::string block =
      "batch_length = 500\nproperties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config = "table = \"t\"";
  auto count = [&] { return rows(ns, "t"); };
  auto settled = [&] {
    int64_t last = count();
    for (int stable = 0; stable < 4;) {
      std::this_thread::sleep_for(250ms);
      const int64_t now = count();
      stable = now == last ? stable + 1 : 0;
      last = now;
    }
    return last;
  };
  int64_t window = 0;
  // Each try kills as soon as rows land; on a loaded machine the commit can follow them at once,
  // so it takes some tries to kill inside the window (6 were not always enough under CI load).
  for (int run = 0; run < 12 && window <= 0; ++run) {
    produce_chunk();
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(run));
    rt.add_definition("c.toml", definition(key, topic, ns, config, block));
    rt.start();
    const int64_t before = count();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (count() <= before && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    ASSERT_GT(count(), before) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    window = settled() - committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] run " << run << ": killed with " << count() << " records, "
              << committed_sum(kafka, group_of(key), topic, 2) << " committed\n";
  }
  ASSERT_GT(window, 0) << "no kill left written records uncommitted";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition(key, topic, ns, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == 2 * produced; }, 120s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(count(), 2 * produced) << "exactly the produced records, no duplicates (window replayed: " << window << ")";
  EXPECT_EQ(distinct_and_sum(ns, "t"), (std::pair<int64_t, int64_t>{2 * produced, produced * (produced - 1)}));
}

// A record the server refuses (a string where the SCHEMAFULL table wants an int), per policy.
class SurrealBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(SurrealBadRecords, ARefusedRecordGoesThroughThePolicyAndTheRestIsWritten) {
  SURREAL_OR_SKIP();
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  auto& server = *SurrealServer::shared();
  const auto ns = server.fresh_namespace("sbad");
  server.create(ns, "db");
  server.result(ns, "db",
                "DEFINE TABLE t SCHEMAFULL; DEFINE FIELD n ON t TYPE int; DEFINE FIELD pico_topic ON t TYPE string;"
                "DEFINE FIELD pico_partition ON t TYPE int; DEFINE FIELD pico_offset ON t TYPE int;"
                "DEFINE FIELD pico_timestamp ON t TYPE int; DEFINE FIELD pico_key ON t TYPE any;");
  const auto topic = unique_name("surreal.bad"), dead = unique_name("surreal.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";
  kafka.produce_values(topic, values);
  const std::string key = "sbad" + policy;
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, ns, "table = \"t\"", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("Expected `int`"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
    EXPECT_EQ(rows(ns, "t", "WHERE pico_offset = 17"), 0);
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    EXPECT_EQ(rows(ns, "t"), 49);
    EXPECT_EQ(rows(ns, "t", "WHERE pico_offset = 17"), 0);
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("Expected `int`"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, SurrealBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

TEST(SurrealSinkKafka, HostileTopicNamesAndSurrealQlLookingContentStayData) {
  SURREAL_OR_SKIP();
  auto& kafka = Kafka::shared();
  auto& server = *SurrealServer::shared();
  const auto ns = server.fresh_namespace("shostile");
  // Kafka topic names allow [a-zA-Z0-9._-]: the ones SurrealQL would read as operators.
  const auto topic = unique_name("x-1.DELETE-y_z");
  kafka.create_topic(topic);
  const std::vector<std::string> values = {
      R"({"ref": "person:tobie", "id": "t:0:1", "q": "'; REMOVE TABLE x; --", "when": "2024-01-01T00:00:00Z"})",
      R"({"sql": "DELETE type::table($tb); RETURN 1", "b": "⟩`}])x"})"};
  kafka.produce_values(topic, values);
  const std::string key = "shostile";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, ns, ""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 2; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  // The one table of the namespace: the topic's name sanitised (and, this long, cut with a hash).
  const auto tables = server.result(ns, "db", "INFO FOR DB;")["tables"];
  ASSERT_EQ(tables.size(), 1u) << tables.dump();
  const std::string table = tables.begin().key();
  EXPECT_EQ(table.rfind("x_1_DELETE_y_z_", 0), 0u) << table;
  const auto r =
      server.result(ns, "db",
                    "SELECT *, type::is_string(ref) AS ref_s, type::is_string(pico_payload_id) AS id_s FROM `" + table +
                        "` ORDER BY pico_offset");
  ASSERT_EQ(r.size(), 2u) << r.dump();
  EXPECT_EQ(r[0]["ref"], "person:tobie");
  EXPECT_EQ(r[0]["ref_s"], true);
  EXPECT_EQ(r[0]["pico_payload_id"], "t:0:1");
  EXPECT_EQ(r[0]["id_s"], true);
  EXPECT_EQ(r[0]["q"], "'; REMOVE TABLE x; --");
  EXPECT_EQ(r[1]["sql"], "DELETE type::table($tb); RETURN 1");
  EXPECT_EQ(r[1]["b"], "⟩`}])x");
  EXPECT_EQ(r[0]["pico_topic"], topic);
}

TEST(SurrealSinkKafka, TheServerKilledAndRestartedDuringALoadLosesNothing) {
  SURREAL_OR_SKIP();
  auto& kafka = Kafka::shared();
  auto& server = *SurrealServer::shared();
  const auto ns = server.fresh_namespace("soutage");
  const auto topic = unique_name("surreal.outage");
  kafka.create_topic(topic);
  const std::string key = "soutage";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, ns, "table = \"t\"\nretry_timeout = \"60s\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 500));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 500; }, 60s)) << rt.log();
  server.kill();
  kafka.produce_values(topic, json_values(500, 1500));
  std::this_thread::sleep_for(scaled(3s));
  const int64_t during = kafka.committed(group_of(key), topic);
  server.start();  // surrealkv: the same data
  EXPECT_EQ(during, 500) << "nothing committed while the server is down";
  EXPECT_EQ(rt.sink_state(key), "running") << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1500; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(rows(ns, "t"), 1500);
  EXPECT_EQ(distinct_and_sum(ns, "t"), (std::pair<int64_t, int64_t>{1500, 1500 * 1499 / 2}));
}

// The pipeline a user runs: Debezium's envelopes (JsonConverter without schemas) on a topic, the
// runtime with changes = "debezium", killed with SIGKILL once rows landed and restarted; when
// everything is committed the table equals the source table the events describe (a model kept
// here), the truncate in the middle included.
TEST(SurrealSinkKafka, DebeziumChangesWithASigkillEndEqualToTheSource) {
  SURREAL_OR_SKIP();
  auto& kafka = Kafka::shared();
  auto& server = *SurrealServer::shared();
  const auto ns = server.fresh_namespace("schanges");
  const auto topic = unique_name("surreal.changes");
  kafka.create_topic(topic);
  std::mt19937 random(7);
  std::map<int, nlohmann::json> source;  // id -> row
  std::vector<ProducedRecord> records;
  auto event = [&](const char* op, const nlohmann::json& before, const nlohmann::json& after, int id) {
    const nlohmann::json value = {{"before", before},
                                  {"after", after},
                                  {"op", op},
                                  {"source", {{"connector", "postgresql"}, {"table", "customers"}}}};
    records.push_back({value.dump(), nlohmann::json{{"id", id}}.dump()});
  };
  const int n = 3000;
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
      records.push_back({"", nlohmann::json{{"id", id}}.dump(), {}, -1, true});  // the tombstone after it
      source.erase(row);
      continue;
    }
    const nlohmann::json after = {{"id", id}, {"name", "n" + std::to_string(i)}, {"visits", i}};
    event(row == source.end() ? "c" : "u", row == source.end() ? nlohmann::json() : row->second, after, id);
    source[id] = after;
  }
  kafka.produce(topic, records);
  const int64_t total = static_cast<int64_t>(records.size());
  const std::string key = "schanges";
  const std::string def =
      definition(key, topic, ns, "table = \"customers\"\nmax_request_records = 40",
                 // A commit per batch (not coalesced): the kill below falls
                 // between two of them mid-stream.
                 "changes = \"debezium\"\nbatch_length = 100\noffset_commit_interval = \"0s\"\n" + static_member(key));
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml", def);
    rt.start();
    // Killed mid-stream: some batches committed, the ones after them written or on their way.
    ASSERT_TRUE(
        wait_until([&] { return kafka.committed(group_of(key), topic) >= 500 && rows(ns, "customers") > 0; }, 60s))
        << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
  }
  const int64_t committed_before = std::max<int64_t>(0, kafka.committed(group_of(key), topic));
  std::cout << "[          ] killed at " << committed_before << " of " << total << " committed\n";
  EXPECT_LT(committed_before, total) << "the kill came before the end";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", def);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == total; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  // The table as the source: each row under the record id of its key, its `id` column kept as
  // pico_payload_id.
  nlohmann::json expected = nlohmann::json::array();
  for (const auto& [id, row] : source)
    expected.push_back({{"k", id}, {"name", row["name"]}, {"pico_payload_id", id}, {"visits", row["visits"]}});
  EXPECT_EQ(
      server.result(ns, "db", "SELECT record::id(id) AS k, name, pico_payload_id, visits FROM customers ORDER BY k"),
      expected);
  EXPECT_GT(source.size(), 10u);
}

}  // namespace
}  // namespace picomq::test
