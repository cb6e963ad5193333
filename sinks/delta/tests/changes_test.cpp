// Change events (docs/changes.md, docs/sinks/delta.md "Change events") applied by the built Delta
// sink: in the kit's fake host (upserts, deletes, a delete of a missing key, several changes of
// one key in one batch and across the batches of a window, truncates, patches that keep the
// columns they do not name and insert a missing row, composite keys, a replayed window, the
// options refused under changes), and through a real Kafka broker and the runtime (Debezium
// envelopes with SIGKILLs between the Delta commit and the offset commit, `--check`'s refusal).
// Every table is read back with the deltalake package from PyPI (delta_table.py), never the
// sink's code.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "delta_table.h"
#include "harness.h"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {
namespace {

namespace fs = std::filesystem;
using delta::table_tool;
using kit::testing::FakeHost;
using kit::testing::TestBatch;
using kit::testing::TestRecord;

constexpr const char* kTopic = "shop.public.customers";
constexpr const char* kDebezium = R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])";

std::string quote(const std::string& s) { return kit::testing::shell_quote(s); }

TestRecord upsert(int64_t offset, const std::string& key, const std::string& row) {
  return {.offset = offset, .payload = row, .op = PMQ_OP_UPSERT, .key_json = key};
}
TestRecord patch(int64_t offset, const std::string& key, const std::string& columns) {
  return {.offset = offset, .payload = columns, .op = PMQ_OP_PATCH, .key_json = key};
}
TestRecord erase(int64_t offset, const std::string& key) {
  return {.offset = offset, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = key};
}
TestRecord truncate(int64_t offset) { return {.offset = offset, .op = PMQ_OP_TRUNCATE}; }

// A table of customers keyed by id: the metadata it keeps, the key, a name and a body.
std::string customers_table(const std::string& name) {
  const auto dir = make_temp_dir("delta_changes_" + name) / "table";
  table_tool("create-with " + quote(dir.string()) + " " +
             quote(R"([["pico_offset", "int64", true], ["pico_timestamp", "timestamp", true], ["id", "int64", false],)"
                   R"( ["name", "string", true], ["body", "string", true]])"));
  return dir.string();
}

// The rows the deltalake package reads, by the key's text ("1", or "1/2" for two columns), with
// the columns asked for.
std::map<std::string, nlohmann::json> rows_by_key(const std::string& table, const std::vector<std::string>& key,
                                                  const std::vector<std::string>& columns) {
  std::map<std::string, nlohmann::json> out;
  const auto dumped = table_tool("dump " + quote(table));
  for (const auto& r : dumped["rows"]) {
    std::string k;
    for (const auto& c : key) k += (k.empty() ? "" : "/") + r[c].dump();
    EXPECT_FALSE(out.count(k)) << "key " << k << " twice";
    nlohmann::json row = nlohmann::json::object();
    for (const auto& c : columns) row[c] = r[c];
    out[k] = row;
  }
  return out;
}
std::map<std::string, nlohmann::json> customers(const std::string& table) {
  return rows_by_key(table, {"id"}, {"name", "body"});
}
nlohmann::json row(const char* text) { return nlohmann::json::parse(text); }

nlohmann::json txn(const std::string& table, const std::string& app_id) {
  return table_tool("txn " + quote(table), "APP_IDS=" + quote(app_id));
}

class DeltaChanges : public ::testing::Test {
 protected:
  // The sink on a block with changes = "debezium"; roll_records = 1: each write is committed
  // before it returns unless `extra` says otherwise.
  std::unique_ptr<FakeHost> open(const std::string& table, const std::string& extra = "\"roll_records\": 1") {
    auto host = FakeHost::load(DELTA_SINK_PLUGIN);
    host->subscriptions(kDebezium);
    host->open("{\"table_uri\": \"" + table + "\", \"app_id\": \"cdc\"" + (extra.empty() ? "" : ", " + extra) + "}",
               "cdc");
    EXPECT_EQ(host->delivery_plane(), static_cast<uint32_t>(PMQ_PLANE_BATCHES)) << "changes on the batches plane";
    return host;
  }
  static void ok(const kit::testing::WriteOutcome& out) {
    ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  }
};

TEST_F(DeltaChanges, UpsertsReplaceDeletesRemoveAndAMissingKeyIsNoError) {
  const auto table = customers_table("upsert");
  auto host = open(table);
  ok(host->write(TestBatch(
      kTopic, 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","body":"a"})"),
       upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob"})"), upsert(2, R"({"id":3})", R"({"id":3,"name":"Cy"})")})));
  ok(host->write(TestBatch(
      kTopic, 0,
      {upsert(3, R"({"id":1})", R"({"id":1,"name":"Anne"})"), erase(4, R"({"id":2})"), erase(5, R"({"id":99})")})));
  EXPECT_EQ(customers(table), (std::map<std::string, nlohmann::json>{{"1", row(R"({"name":"Anne","body":null})")},
                                                                     {"3", row(R"({"name":"Cy","body":null})")}}))
      << "an upsert replaces the whole row; the delete of a key never written is no error";
  EXPECT_EQ(host->counter("deleted_rows"), 1u);
  const auto t = txn(table, "cdc-" + std::string(kTopic) + "-0");
  EXPECT_EQ(t["txn"]["cdc-" + std::string(kTopic) + "-0"], 6);
  EXPECT_EQ(t["version"], 2) << "one commit per window";
  EXPECT_EQ(t["files"], 1) << "the second commit rewrote the first's file";
  const auto dumped = table_tool("dump " + quote(table));
  for (const auto& r : dumped["rows"])
    if (r["id"] == 1) EXPECT_EQ(r["pico_offset"], 3) << "the metadata of the row's last change";
}

TEST_F(DeltaChanges, SeveralChangesOfOneKeyInOneWindowApplyInOrder) {
  const auto table = customers_table("order");
  auto host = open(table, "\"roll_records\": 1000");
  // Two batches of one window (committed at the flush), the last change of each key deciding.
  auto first = host->start_write(TestBatch(
      kTopic, 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"first"})"), erase(1, R"({"id":1})"),
       upsert(2, R"({"id":1})", R"({"id":1,"name":"again","body":"b"})"), upsert(3, R"({"id":2})", R"({"id":2})")}));
  auto second = host->start_write(
      TestBatch(kTopic, 0,
                {patch(4, R"({"id":1})", R"({"name":"patched"})"), erase(5, R"({"id":2})"),
                 upsert(6, R"({"id":3})", R"({"id":3})"), erase(7, R"({"id":3})"),
                 patch(8, R"({"id":4})", R"({"name":"x"})"), patch(9, R"({"id":4})", R"({"body":"y"})")}));
  host->flush();
  ok(first->wait());
  ok(second->wait());
  EXPECT_EQ(customers(table), (std::map<std::string, nlohmann::json>{{"1", row(R"({"name":"patched","body":"b"})")},
                                                                     {"4", row(R"({"name":"x","body":"y"})")}}))
      << "patches chain onto the row before them; a key's delete after its upsert leaves nothing";
  EXPECT_EQ(txn(table, "x")["version"], 1) << "one commit for the window";
}

TEST_F(DeltaChanges, ATruncateEmptiesTheTableBetweenTheRowsBeforeAndAfterIt) {
  const auto table = customers_table("truncate");
  auto host = open(table);
  ok(host->write(
      TestBatch(kTopic, 0, {upsert(0, R"({"id":9})", R"({"id":9})"), upsert(1, R"({"id":8})", R"({"id":8})")})));
  ok(host->write(TestBatch(
      kTopic, 0,
      {upsert(2, R"({"id":1})", R"({"id":1,"name":"old"})"), upsert(3, R"({"id":2})", R"({"id":2})"), truncate(4),
       upsert(5, R"({"id":3})", R"({"id":3})"), upsert(6, R"({"id":1})", R"({"id":1,"name":"new"})"),
       patch(7, R"({"id":8})", R"({"name":"back"})")})));
  EXPECT_EQ(customers(table), (std::map<std::string, nlohmann::json>{{"1", row(R"({"name":"new","body":null})")},
                                                                     {"3", row(R"({"name":null,"body":null})")},
                                                                     {"8", row(R"({"name":"back","body":null})")}}))
      << "the rows before the truncate are gone; a patch after it inserts what it names";
  EXPECT_EQ(host->counter("truncates"), 1u);
  // A truncate that ends its batch.
  ok(host->write(TestBatch(kTopic, 0, {upsert(8, R"({"id":4})", R"({"id":4})"), truncate(9)})));
  EXPECT_TRUE(customers(table).empty());
  EXPECT_EQ(txn(table, "x")["files"], 0);
}

TEST_F(DeltaChanges, APatchKeepsTheColumnsItDoesNotNameAndInsertsAMissingRow) {
  const auto table = customers_table("patch");
  auto host = open(table);
  const std::string body(8000, 'b');
  ok(host->write(TestBatch(kTopic, 0,
                           {upsert(0, R"({"id":1})", R"({"id":1,"name":"draft","body":")" + body + R"("})"),
                            upsert(1, R"({"id":5})", R"({"id":5,"name":"other","body":"o"})")})));
  // Debezium's unchanged TOAST value: the runtime took `body` out of the row.
  ok(host->write(TestBatch(
      kTopic, 0,
      {patch(2, R"({"id":1})", R"({"id":1,"name":"final"})"), patch(3, R"({"id":2})", R"({"name":"new"})")})));
  const auto rows = customers(table);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows.at("1")["name"], "final");
  EXPECT_EQ(rows.at("1")["body"], body) << "the column the patch does not name keeps its value";
  EXPECT_EQ(rows.at("2"), row(R"({"name":"new","body":null})")) << "a patch of a missing row inserts what it names";
  EXPECT_EQ(rows.at("5"), row(R"({"name":"other","body":"o"})"));
}

TEST_F(DeltaChanges, CompositeKeysNameRowsByEveryField) {
  const auto dir = make_temp_dir("delta_changes_composite") / "table";
  table_tool("create-with " + quote(dir.string()) + " " +
             quote(R"([["order_id", "int64", false], ["line", "int32", false], ["qty", "int64", true]])"));
  auto host = open(dir.string());
  ok(host->write(TestBatch(kTopic, 0,
                           {upsert(0, R"({"line":2,"order_id":1})", R"({"order_id":1,"line":2,"qty":5})"),
                            upsert(1, R"({"line":3,"order_id":1})", R"({"order_id":1,"line":3,"qty":1})"),
                            upsert(2, R"({"line":2,"order_id":2})", R"({"order_id":2,"line":2,"qty":7})")})));
  ok(host->write(TestBatch(
      kTopic, 0, {erase(3, R"({"line":3,"order_id":1})"), patch(4, R"({"line":2,"order_id":2})", R"({"qty":8})")})));
  EXPECT_EQ(rows_by_key(dir.string(), {"order_id", "line"}, {"qty"}),
            (std::map<std::string, nlohmann::json>{{"1/2", row(R"({"qty":5})")}, {"2/2", row(R"({"qty":8})")}}));
}

TEST_F(DeltaChanges, AReplayOfACommittedWindowChangesNothing) {
  const auto table = customers_table("replay");
  const TestBatch a(
      kTopic, 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"one"})"), upsert(1, R"({"id":2})", R"({"id":2,"name":"two"})")});
  const TestBatch b(kTopic, 0, {erase(2, R"({"id":1})"), upsert(3, R"({"id":2})", R"({"id":2,"name":"zwei"})")});
  {
    auto host = open(table);
    ok(host->write(a));
    ok(host->write(b));
    host->close();
  }
  const auto after = customers(table);
  const auto before = txn(table, "cdc-" + std::string(kTopic) + "-0");
  // A restart that replays both batches (the offsets were not committed): the table holds both.
  auto host = open(table);
  host->assign(0, {{kTopic, 0}});
  ok(host->write(a));
  ok(host->write(b));
  EXPECT_EQ(customers(table), after);
  EXPECT_EQ(after, (std::map<std::string, nlohmann::json>{{"2", row(R"({"name":"zwei","body":null})")}}));
  EXPECT_EQ(txn(table, "x")["version"], before["version"]) << "no commit for what the table has";
  EXPECT_EQ(host->counter("already_written_records"), 4u);
  // A batch straddling the version: only the records past it are applied.
  ok(host->write(TestBatch(kTopic, 0, {erase(3, R"({"id":2})"), upsert(4, R"({"id":7})", R"({"id":7})")})));
  EXPECT_EQ(customers(table), (std::map<std::string, nlohmann::json>{{"2", row(R"({"name":"zwei","body":null})")},
                                                                     {"7", row(R"({"name":null,"body":null})")}}));
}

TEST_F(DeltaChanges, ARowTheTableCannotHoldIsARejectedRecord) {
  const auto table = customers_table("reject");
  auto host = open(table);
  const auto out = host->write(TestBatch(
      kTopic, 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"ok"})"), upsert(1, R"({"id":2})", R"({"id":2,"colour":"red"})"),
       upsert(2, R"({"id":"x"})", R"({"id":"x"})"), upsert(3, R"({"sku":4})", R"({"sku":4})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 3u);
  EXPECT_NE(out.rejected[0].reason.find("'colour' is not a column"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(out.rejected[1].record_index, 2u) << out.rejected[1].reason;
  EXPECT_NE(out.rejected[2].reason.find("key field 'sku' is not a column"), std::string::npos)
      << out.rejected[2].reason;
  EXPECT_EQ(customers(table), (std::map<std::string, nlohmann::json>{{"1", row(R"({"name":"ok","body":null})")}}));
}

TEST_F(DeltaChanges, OptionsTheMergeDoesNotHonourAreRefusedUnderChanges) {
  auto host = FakeHost::load(DELTA_SINK_PLUGIN);
  const std::string base = R"({"table_uri": "/tmp/t")";
  host->subscriptions(kDebezium);
  EXPECT_TRUE(host->check(base + "}").empty()) << kit::testing::joined(host->check(base + "}"));
  const auto refused = [&](const std::string& extra, const std::string& fragment) {
    const auto problems = kit::testing::joined(host->check(base + ", " + extra + "}"));
    EXPECT_NE(problems.find(fragment), std::string::npos) << extra << ": " << problems;
  };
  refused(R"("schema_evolution": true)", "schema_evolution: not applied under changes");
  refused(R"("create_table": true)", "create_table: not applied under changes");
  refused(R"("create_table": true, "partition_by": ["day"])", "partition_by: not applied under changes");
  refused(R"("time_column": "day")", "time_column: not applied under changes");
  host->subscriptions(
      R"([{"topics": ["a"], "pattern": null, "changes": "debezium"}, {"topics": ["b"], "pattern": null, "changes": "none"}])");
  refused("\"dictionary\": true", "changes: every [[topics]] block");
  // Without changes the same options pass.
  host->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(host->check(base + R"(, "schema_evolution": true, "time_column": "day"})").empty());
}

// ---- through Kafka and the runtime ----

fs::path log_file(const fs::path& table, int version) {
  char name[32];
  std::snprintf(name, sizeof name, "%020d.json", version);
  return table / "_delta_log" / name;
}

std::string changes_definition(const std::string& key, const std::string& topic, const std::string& table,
                               const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_delta_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\nchanges = \"debezium\"\n" + block_extra,
                           "table_uri = \"" + table + "\"\n" + plugin_config);
}

// Debezium's PostgreSQL connector without schemas: inserts, updates (some leaving the TOASTed body
// alone: its placeholder, a patch), deletes followed by their tombstones, over 40 rows in two
// partitions (a row's changes in one, as Debezium keys them); the runtime killed with SIGKILL
// twice after a Delta commit and before its offsets were committed, then run to the end: the
// table equals the source.
TEST(DeltaChangesKafka, DebeziumChangesThroughSigkillsEndEqualToTheSource) {
  auto& kafka = Kafka::shared();
  const auto table = customers_table("kafka_kill");
  const auto topic = unique_name("delta.cdc");
  kafka.create_topic(topic, 2);
  std::map<int, nlohmann::json> source;  // id -> {"name", "body"}
  std::mt19937 random(7);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 800; ++i) {
    const int id = static_cast<int>(random() % 40);
    ProducedRecord r;
    r.partition = id % 2;
    r.key = "{\"id\":" + std::to_string(id) + "}";
    const auto it = source.find(id);
    const int dice = static_cast<int>(random() % 10);
    if (it == source.end()) {
      const nlohmann::json after = {
          {"id", id}, {"name", "n" + std::to_string(i)}, {"body", "body-" + std::to_string(i)}};
      r.value = nlohmann::json{{"op", "c"}, {"before", nullptr}, {"after", after}}.dump();
      source[id] = {{"name", after["name"]}, {"body", after["body"]}};
    } else if (dice < 2) {
      r.value = nlohmann::json{{"op", "d"}, {"before", {{"id", id}}}, {"after", nullptr}}.dump();
      source.erase(it);
      records.push_back(r);
      ProducedRecord tombstone = r;  // what Debezium sends after a delete, for compaction
      tombstone.value.clear();
      tombstone.null_value = true;
      r = tombstone;
    } else if (dice < 5) {
      // The body is TOASTed and unchanged: Debezium writes its placeholder (a patch).
      const nlohmann::json after = {
          {"id", id}, {"name", "p" + std::to_string(i)}, {"body", "__debezium_unavailable_value"}};
      r.value = nlohmann::json{{"op", "u"}, {"before", nullptr}, {"after", after}}.dump();
      it->second["name"] = after["name"];
    } else {
      const nlohmann::json after = {{"id", id}, {"name", "u" + std::to_string(i)}, {"body", "b" + std::to_string(i)}};
      r.value = nlohmann::json{{"op", "u"}, {"before", nullptr}, {"after", after}}.dump();
      source[id] = {{"name", after["name"]}, {"body", after["body"]}};
    }
    records.push_back(r);
  }
  kafka.produce(topic, records);
  int64_t per_partition[2] = {0, 0};
  for (const auto& r : records) ++per_partition[r.partition];

  const std::vector<std::string> app_ids = {"cdc-" + topic + "-0", "cdc-" + topic + "-1"};
  const std::string kill_block =
      "batch_length = 60\nproperties = { \"group.instance.id\" = \"deltacdc\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config = "roll_records = 150\napp_id = \"cdc\"\n";
  int ahead = 0;
  for (int round = 0; round < 2; ++round) {
    Runtime rt(kafka.bootstrap(), "cdc" + std::to_string(round));
    rt.env("PICOMQ_DELTA_TEST_PAUSE_AFTER_COMMIT_MS", "2500");
    rt.add_definition("s.toml", changes_definition("deltacdc", topic, table, config, kill_block));
    const auto before = txn(table, "x")["version"].get<int>();
    rt.start();
    ASSERT_TRUE(wait_until([&] { return fs::exists(log_file(table, before + 1)); }, 60s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
    const auto t = table_tool("txn " + quote(table), "APP_IDS=" + quote(app_ids[0] + "," + app_ids[1]));
    for (int p = 0; p < 2; ++p) {
      const auto& v = t["txn"][app_ids[p]];
      if (!v.is_null() && v.get<int64_t>() > std::max<int64_t>(kafka.committed(group_of("deltacdc"), topic, p), 0))
        ++ahead;
    }
    customers(table);  // fails on a key twice
  }
  EXPECT_GE(ahead, 2) << "each kill left the table ahead of the committed offsets";

  Runtime rt(kafka.bootstrap(), "cdcfinish");
  rt.add_definition("s.toml", changes_definition("deltacdc", topic, table, config, kill_block));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        return kafka.committed(group_of("deltacdc"), topic, 0) == per_partition[0] &&
               kafka.committed(group_of("deltacdc"), topic, 1) == per_partition[1];
      },
      90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::map<std::string, nlohmann::json> expected;
  for (const auto& [id, r] : source) expected[std::to_string(id)] = r;
  EXPECT_EQ(customers(table), expected);
  const auto t = table_tool("txn " + quote(table), "APP_IDS=" + quote(app_ids[0] + "," + app_ids[1]));
  EXPECT_EQ(t["txn"][app_ids[0]], per_partition[0]);
  EXPECT_EQ(t["txn"][app_ids[1]], per_partition[1]);
}

TEST(DeltaChangesKafka, CheckRefusesWhatTheMergeDoesNotHonour) {
  auto& kafka = Kafka::shared();
  const auto table = customers_table("check");
  {
    Runtime rt(kafka.bootstrap(), "cdccheck");
    rt.add_definition("s.toml", changes_definition("deltacheck", "shop.public.customers", table, ""));
    const auto [code, out] = rt.check();
    EXPECT_EQ(code, 0) << "the sink applies change events: " << out;
  }
  Runtime rt(kafka.bootstrap(), "cdccheck2");
  rt.add_definition("s.toml",
                    changes_definition("deltacheck", "shop.public.customers", table, "schema_evolution = true\n"));
  const auto [code, out] = rt.check();
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("key 'plugin_config.schema_evolution': not applied under changes"), std::string::npos) << out;
}

}  // namespace
}  // namespace picomq::test
