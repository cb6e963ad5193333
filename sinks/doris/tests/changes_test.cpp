// The Doris sink's change events (docs/sinks/doris.md, "Change events") in the kit's fake host,
// into the Doris contract server (doris_contract.py: a Unique Key table with the hidden delete
// sign and a sequence column, Stream Load's merge_type / delete / function_column.sequence_col as
// Doris's manual describes them): upserts and deletes by key, a delete of a missing key, a
// tombstone delete, several changes to one key in one batch, a replay by label and one whose
// labels are gone (the sequence column keeps the newer rows), two-phase commit, what Doris refuses
// of a table that cannot take changes, the options refused, and the operations the sink does not
// declare (truncate, patch: the runtime refuses them, naming the remedy).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract_server.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace picomq::test {
namespace {

using kit::testing::FakeHost;
using kit::testing::joined;
using kit::testing::TestBatch;
using kit::testing::TestRecord;
using nlohmann::json;

constexpr const char* kDb = "cdc";
constexpr const char* kDebezium = R"([{"topics": ["shop.customers"], "pattern": null, "changes": "debezium"}])";

// A Unique Key table of customers with the sequence column and the two columns the sink fills.
json customer_columns(bool not_null_name = false) {
  return json::array({{{"name", "id"}, {"type", "BIGINT"}, {"nullable", false}},
                      {{"name", "name"}, {"type", "VARCHAR(64)"}, {"nullable", !not_null_name}},
                      {{"name", "qty"}, {"type", "INT"}, {"nullable", true}},
                      {{"name", "pico_version"}, {"type", "BIGINT"}, {"nullable", true}},
                      {{"name", "pico_deleted"}, {"type", "TINYINT"}, {"nullable", true}}});
}

std::string unique_table(const std::string& name, bool sequence = true, bool not_null_name = false) {
  json t = {{"db", kDb},
            {"table", name},
            {"columns", customer_columns(not_null_name)},
            {"keys", "UNIQUE"},
            {"key_columns", {"id"}}};
  if (sequence) t["sequence_type"] = "BIGINT";
  doris_control("table", t);
  return name;
}

// label_span 16 unless `extra` names one: a first load probes the labels up to its block's end.
std::string config(const std::string& table, const std::string& prefix, const std::string& extra = "") {
  const std::string span = extra.find("label_span") == std::string::npos ? R"(, "label_span": 16)" : "";
  return R"({"url": ")" + doris_contract().base_url() + R"(", "database": ")" + kDb + R"(", "table": ")" + table +
         R"(", "password": "pw", "label_prefix": ")" + prefix +
         R"(", "retry_timeout": "2s", "timeout": "5s", "document": "payload")" + span + extra + "}";
}

std::unique_ptr<FakeHost> open_sink(const std::string& table, const std::string& prefix,
                                    const std::string& extra = "") {
  auto host = FakeHost::load(DORIS_SINK_PLUGIN);
  host->subscriptions(kDebezium);
  host->open(config(table, prefix, extra));
  return host;
}

TestRecord upsert(int64_t offset, int id, const std::string& name, int qty) {
  return {.offset = offset,
          .payload = json{{"id", id}, {"name", name}, {"qty", qty}}.dump(),
          .key = "{\"id\":" + std::to_string(id) + "}",
          .op = PMQ_OP_UPSERT,
          .key_json = "{\"id\":" + std::to_string(id) + "}"};
}

// A delete as the runtime hands it: no payload (a Debezium `d`, or the tombstone after it).
TestRecord remove(int64_t offset, int id) {
  return {.offset = offset,
          .payload = std::nullopt,
          .key = "{\"id\":" + std::to_string(id) + "}",
          .op = PMQ_OP_DELETE,
          .key_json = "{\"id\":" + std::to_string(id) + "}"};
}

TestBatch batch(std::vector<TestRecord> records) { return TestBatch("shop.customers", 0, std::move(records)); }

// The table's rows as {id: [name, qty]} (the columns the sink fills left out).
std::map<int64_t, std::pair<std::string, int64_t>> rows(const std::string& table) {
  std::map<int64_t, std::pair<std::string, int64_t>> out;
  for (const json& r : doris_rows(kDb, table))
    out[r.at("id").get<int64_t>()] = {r.at("name").is_null() ? "" : r.at("name").get<std::string>(),
                                      r.at("qty").is_null() ? -1 : r.at("qty").get<int64_t>()};
  return out;
}

using Rows = std::map<int64_t, std::pair<std::string, int64_t>>;

std::string fresh(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "_" + std::to_string(++n);
}

TEST(DorisChanges, UpsertsReplaceByKeyAndDeletesRemoveTheKey) {
  const std::string table = unique_table(fresh("upserts"));
  auto host = open_sink(table, fresh("up"));
  auto first = host->write(batch({upsert(0, 1, "ada", 1), upsert(1, 2, "bob", 2), upsert(2, 3, "cy", 3)}));
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(rows(table), (Rows{{1, {"ada", 1}}, {2, {"bob", 2}}, {3, {"cy", 3}}}));
  // An update, a delete, a delete of a key the table never had, the tombstone after a delete.
  auto second =
      host->write(batch({upsert(3, 1, "ada lovelace", 10), remove(4, 2), remove(5, 99), upsert(6, 4, "dee", 4),
                         TestRecord{.offset = 7, .key = "{\"id\":3}", .op = PMQ_OP_DELETE, .key_json = "{\"id\":3}"}}));
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_TRUE(second.rejected.empty());
  EXPECT_EQ(rows(table), (Rows{{1, {"ada lovelace", 10}}, {4, {"dee", 4}}}));
  EXPECT_EQ(host->counter("delete_rows"), 3u) << "the delete of a missing key is a row of the load too";
  // The tombstone Debezium sends after each delete deletes again what is gone: nothing changes.
  ASSERT_TRUE(host->write(batch({remove(8, 2)})).ok());
  EXPECT_EQ(rows(table), (Rows{{1, {"ada lovelace", 10}}, {4, {"dee", 4}}}));
  host->close();
}

TEST(DorisChanges, AnUpsertAndItsDeleteInOneLoadLeaveNoRow) {
  const std::string table = unique_table(fresh("headers"));
  auto host = open_sink(table, fresh("hd"));
  ASSERT_TRUE(host->write(batch({upsert(0, 1, "ada", 1), remove(1, 1)})).ok());
  host->close();
  // What reached the table: both rows of key 1 in one load, the delete with the higher sequence.
  const json labels = doris_labels(kDb);
  bool found = false;
  for (const auto& [label, entry] : labels.items())
    if (label.find("hd_") == 0 && entry.at("state") == "VISIBLE") {
      EXPECT_EQ(entry.at("rows"), 2) << label;
      found = true;
    }
  EXPECT_TRUE(found) << labels.dump();
  EXPECT_TRUE(rows(table).empty());
}

TEST(DorisChanges, SeveralChangesToOneKeyInOneBatchKeepTheLast) {
  const std::string table = unique_table(fresh("several"));
  auto host = open_sink(table, fresh("sv"));
  auto out =
      host->write(batch({upsert(10, 7, "v1", 1), upsert(11, 7, "v2", 2), remove(12, 7), upsert(13, 7, "v3", 3),
                         upsert(14, 8, "w1", 1), remove(15, 8), upsert(16, 9, "x1", 1), upsert(17, 9, "x2", 2)}));
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_EQ(rows(table), (Rows{{7, {"v3", 3}}, {9, {"x2", 2}}}));
  // Across loads too (label_span 4: offsets 20..23 and 24..27 are two loads of one batch).
  host->close();
  auto cut = open_sink(table, fresh("sv"), R"(, "label_span": 4)");
  ASSERT_TRUE(cut->write(batch({upsert(20, 7, "v4", 4), upsert(21, 9, "x3", 3), remove(22, 9), upsert(23, 7, "v5", 5),
                                upsert(24, 9, "x4", 4), upsert(25, 7, "v6", 6), remove(26, 7), upsert(27, 9, "x5", 5)}))
                  .ok());
  EXPECT_EQ(rows(table), (Rows{{9, {"x5", 5}}}));
  cut->close();
}

TEST(DorisChanges, AReplayChangesNothing) {
  const std::string table = unique_table(fresh("replay"));
  const std::string prefix = fresh("rp");
  const TestBatch older = batch({upsert(0, 1, "ada", 1), upsert(1, 2, "bob", 2), upsert(2, 3, "cy", 3)});
  const TestBatch newer = batch({upsert(3, 1, "ada 2", 10), remove(4, 2), upsert(5, 4, "dee", 4)});
  {
    auto host = open_sink(table, prefix);
    ASSERT_TRUE(host->write(older).ok());
    ASSERT_TRUE(host->write(newer).ok());
    host->close();
  }
  const Rows expected{{1, {"ada 2", 10}}, {3, {"cy", 3}}, {4, {"dee", 4}}};
  ASSERT_EQ(rows(table), expected);
  {
    // A restart replays from offset 0: its labels are found, nothing is loaded again.
    auto host = open_sink(table, prefix);
    ASSERT_TRUE(host->write(older).ok());
    ASSERT_TRUE(host->write(newer).ok());
    EXPECT_GE(host->counter("already_written_loads"), 2u);
    host->close();
    EXPECT_EQ(rows(table), expected);
  }
  {
    // Labels Doris has forgotten (label_keep_max_second) or another prefix: the loads run again,
    // and the sequence column keeps what the newer changes wrote: the older batch changes nothing,
    // the newer one writes the same rows (same sequence).
    const std::string other = fresh("rp_other");
    auto host = open_sink(table, other);
    ASSERT_TRUE(host->write(older).ok());
    EXPECT_EQ(rows(table), expected) << "an older change never overwrites a newer one";
    ASSERT_TRUE(host->write(newer).ok());
    EXPECT_EQ(rows(table), expected);
    EXPECT_EQ(host->counter("already_written_loads"), 0u) << "the replay was loaded, not skipped";
    host->close();
  }
  {
    // The older batch alone, replayed after everything (a consumer rewound): the deleted key 2 is
    // not brought back, key 1 keeps its newer row.
    auto host = open_sink(table, fresh("rp_rewound"));
    ASSERT_TRUE(host->write(batch({upsert(0, 1, "ada", 1), upsert(1, 2, "bob", 2)})).ok());
    EXPECT_EQ(rows(table), expected);
    host->close();
  }
}

TEST(DorisChanges, TwoPhaseCommitMakesABatchOfChangesVisibleAtOnce) {
  const std::string table = unique_table(fresh("twopc"));
  auto host = open_sink(table, fresh("tp"), R"(, "two_phase_commit": true, "label_span": 2)");
  ASSERT_TRUE(
      host->write(batch({upsert(0, 1, "a", 1), upsert(1, 2, "b", 2), remove(2, 1), upsert(3, 3, "c", 3)})).ok());
  EXPECT_EQ(rows(table), (Rows{{2, {"b", 2}}, {3, {"c", 3}}}));
  EXPECT_GE(host->counter("commits"), 2u);
  host->close();
}

TEST(DorisChanges, ADeleteNeedsTheOtherColumnsNullable) {
  // A delete carries only its key's fields: Doris filters it when a value column is NOT NULL
  // without a default, and the sink rejects it through the bad-record policy (naming the column).
  const std::string table = unique_table(fresh("notnull"), true, true);
  auto host = open_sink(table, fresh("nn"));
  ASSERT_TRUE(host->write(batch({upsert(0, 1, "ada", 1)})).ok());
  auto out = host->write(batch({remove(1, 1), upsert(2, 2, "bob", 2)}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 0u);
  EXPECT_NE(out.rejected[0].reason.find("column(name) values is null"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(rows(table), (Rows{{1, {"ada", 1}}, {2, {"bob", 2}}}));
  host->close();
}

TEST(DorisChanges, ATableThatCannotTakeChangesStopsTheSinkWithDorissMessage) {
  // A Duplicate Key table: no delete sign.
  const std::string dup = fresh("duplicate");
  doris_create_table(kDb, dup, customer_columns());
  auto host = open_sink(dup, fresh("dp"));
  auto out = host->write(batch({upsert(0, 1, "ada", 1)}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL) << out.error;
  EXPECT_NE(out.error.find("load by MERGE or DELETE is only supported in unique tables"), std::string::npos)
      << out.error;
  host->close();
  // A Unique table without a sequence column: replays could overwrite newer rows.
  const std::string noseq = unique_table(fresh("noseq"), false);
  auto second = open_sink(noseq, fresh("ns"));
  out = second->write(batch({upsert(0, 1, "ada", 1)}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL) << out.error;
  EXPECT_NE(out.error.find("There is no sequence column in the table"), std::string::npos) << out.error;
  second->close();
  // A sequence column but no pico_version column to take it from.
  const std::string noversion = fresh("noversion");
  doris_control("table", {{"db", kDb},
                          {"table", noversion},
                          {"columns", json::array({{{"name", "id"}, {"type", "BIGINT"}, {"nullable", false}},
                                                   {{"name", "pico_deleted"}, {"type", "TINYINT"}}})},
                          {"keys", "UNIQUE"},
                          {"key_columns", {"id"}},
                          {"sequence_type", "BIGINT"}});
  auto third = open_sink(noversion, fresh("nv"));
  out = third->write(batch({upsert(0, 1, "ada", 1)}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL) << out.error;
  EXPECT_NE(out.error.find("There is no sequence column pico_version"), std::string::npos) << out.error;
  third->close();
}

TEST(DorisChanges, OptionsThatCannotCarryChangesAreRefused) {
  auto host = FakeHost::load(DORIS_SINK_PLUGIN);
  const std::string base = R"({"url": "http://fe:8030", "database": "db", "table": "t")";
  host->subscriptions(kDebezium);
  EXPECT_TRUE(host->check(base + "}").empty()) << joined(host->check(base + "}"));
  EXPECT_TRUE(host->check(base + R"(, "document": "payload", "two_phase_commit": true})").empty());
  const auto envelope = joined(host->check(base + R"(, "document": "envelope"})"));
  EXPECT_NE(envelope.find("document: change events"), std::string::npos) << envelope;
  const auto columns = joined(host->check(base + R"(, "columns": "id,name"})"));
  EXPECT_NE(columns.find("columns: under `changes`"), std::string::npos) << columns;
  const auto paths = joined(host->check(base + R"(, "jsonpaths": "[\"$.id\"]"})"));
  EXPECT_NE(paths.find("jsonpaths: under `changes`"), std::string::npos) << paths;
  // Without changes the same options are fine.
  host->subscriptions(R"([{"topics": ["shop.customers"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(host->check(base + R"(, "document": "envelope", "columns": "id,name"})").empty());
}

TEST(DorisChanges, TruncatesAndPatchesAreNotDeclaredSoTheRuntimeRefusesThem) {
  // The runtime hands a sink only the operations of its change_ops: a truncate or a patch becomes
  // a bad record of the sink's stage naming the remedy (docs/changes.md).
  void* so = dlopen(DORIS_SINK_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = const pmq_sink_plugin* (*)(uint32_t);
  auto entry = reinterpret_cast<Entry>(dlsym(so, "picomq_sink_plugin_entry"));
  ASSERT_NE(entry, nullptr);
  const pmq_sink_plugin* plugin = entry(PMQ_SINK_ABI_VERSION);
  EXPECT_EQ(plugin->change_ops & PMQ_CHANGE_OPS_KEYED, PMQ_CHANGE_OPS_KEYED);
  EXPECT_EQ(plugin->change_ops & PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE), 0u);
  EXPECT_EQ(plugin->change_ops & PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH), 0u);
  dlclose(so);
}

}  // namespace
}  // namespace picomq::test
