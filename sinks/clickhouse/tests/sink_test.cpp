// The ClickHouse sink in the kit's fake host (the runtime's option checks, outcomes, rejections,
// pending writes, flush) against the real ClickHouse 18.16 server of this test process
// (sinks/clickhouse/server.sh, started once). No broker: tests/integration runs it through Kafka.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "clickhouse_server.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;
using picomq::test::ClickHouseServer;
using namespace std::chrono_literals;

namespace {

class ClickHouseSink : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &ClickHouseServer::shared();
    db_ = server_->create_database("sink");
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
  }
  void TearDown() override {
    if (host_ && host_->is_open()) host_->close();
  }
  json base() const { return {{"url", server_->url()}, {"database", db_}, {"commit_interval", "50ms"}}; }
  void open(json config) {
    const json defaults = base();
    for (const auto& [k, v] : defaults.items())
      if (!config.contains(k)) config[k] = v;
    host_->open(config.dump());
  }
  std::vector<std::vector<std::string>> rows(const std::string& select) { return server_->rows(select); }
  std::string one(const std::string& select) {
    auto r = rows(select);
    return r.empty() || r[0].empty() ? "" : r[0][0];
  }

  ClickHouseServer* server_ = nullptr;
  std::string db_;
  std::unique_ptr<kt::FakeHost> host_;
  const bool current_engine_ = ClickHouseServer::current_engine();  // 26.x renders some values otherwise
};

TEST_F(ClickHouseSink, OptionsAreCheckedBeforeAnythingConnects) {
  EXPECT_FALSE(host_->check(R"({})").empty()) << "url is required";
  const auto bad_url = host_->check(R"({"url": "ftp://x"})");
  ASSERT_FALSE(bad_url.empty());
  EXPECT_NE(bad_url[0].find("must start with http:// or https://"), std::string::npos) << bad_url[0];
  const auto bad_type = host_->check(R"j({"url": "http://x", "columns": [{"name": "d", "type": "Decimal(9, 2)"}]})j");
  ASSERT_FALSE(bad_type.empty());
  EXPECT_NE(bad_type[0].find("'Decimal(9, 2)' is not a type the sink writes"), std::string::npos) << bad_type[0];
  EXPECT_FALSE(host_->check(R"({"url": "http://x", "payload_mode": "string", "columns": {"a": "Int8"}})").empty());
  EXPECT_TRUE(host_->check(R"({"url": "http://127.0.0.1:8123", "password": "p"})").empty());
}

TEST_F(ClickHouseSink, TypedRowsReadBackExactly) {
  // Both insert formats, into the real server: RowBinary, and the Native block made of the same rows.
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    server_->query("CREATE TABLE " + db_ + ".typed_" + format +
                   " (pico_offset Int64, s String, i8 Int8, u64 UInt64, f Float64, "
                   "b UInt8, d Date, ts DateTime, ns Nullable(String), a Array(Int32), u UUID, fs FixedString(3), "
                   "f32 Float32, nested String) ENGINE = MergeTree ORDER BY pico_offset");
    open({{"target_table", "typed_" + format}, {"format", format}, {"auto_create_table", false}});
    EXPECT_EQ(host_->delivery_plane(), format == "Native" ? PMQ_PLANE_ARROW : PMQ_PLANE_BATCHES)
        << "Native inserts of fields are made from the Arrow plane's columns";
    const std::string full =
        R"({"s": "é\t\"x\"", "i8": -128, "u64": 18446744073709551615, "f": 0.1, "b": true, "d": "2026-12-01",
            "ts": "2026-12-01T15:04:05+01:00", "ns": "n", "a": [1, -2, 2147483647],
            "u": "aabbccdd-eeff-0011-2233-445566778899", "fs": "ab", "f32": 1.5, "nested": {"k": [1, {"z": null}]}})";
    const std::string sparse = R"({"s": "only s", "ns": null})";
    auto outcome = host_->write(TestBatch::json("shop.orders", 0, 7, {full, sparse}));
    ASSERT_TRUE(outcome.ok()) << outcome.error;
    EXPECT_TRUE(host_->logged(") FORMAT " + format)) << "the inserts are " << format;
    const auto r = rows("SELECT pico_offset, s, i8, u64, f, b, d, ts, ns, a, u, fs, f32, nested FROM " + db_ +
                        ".typed_" + format + " ORDER BY pico_offset");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0], (std::vector<std::string>{"7", "é\t\"x\"", "-128", "18446744073709551615", "0.1", "1", "2026-12-01",
                                              "2026-12-01 14:04:05", "n", "[1,-2,2147483647]",
                                              "aabbccdd-eeff-0011-2233-445566778899", std::string("ab\0", 3), "1.5",
                                              R"({"k":[1,{"z":null}]})"}));
    EXPECT_EQ(r[1], (std::vector<std::string>{
                        "8", "only s", "0", "0", "0", "0", current_engine_ ? "1970-01-01" : "0000-00-00",
                        current_engine_ ? "1970-01-01 00:00:00" : "0000-00-00 00:00:00", "\\N", "[]",
                        "00000000-0000-0000-0000-000000000000", std::string(3, '\0'), "0", ""}));
  }
}

TEST_F(ClickHouseSink, ARecordThatDoesNotConvertIsRejectedAndTheRestWritten) {
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    open({{"columns", json::array({{{"name", "n"}, {"type", "Int64"}}})},
          {"format", format},
          {"target_table", "t_" + format}});
    auto outcome = host_->write(TestBatch::json("t", 0, 0, {R"({"n": 1})", R"({"n": "two"})", R"({"n": 3})"}));
    EXPECT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
    ASSERT_EQ(outcome.rejected.size(), 1u);
    EXPECT_EQ(outcome.rejected[0].record_index, 1u);
    EXPECT_EQ(outcome.rejected[0].reason, "field 'n': expected Int64, found string");
    EXPECT_EQ(rows("SELECT pico_offset, n FROM " + db_ + ".t_" + format + " ORDER BY pico_offset"),
              (std::vector<std::vector<std::string>>{{"0", "1"}, {"2", "3"}}));
    EXPECT_EQ(host_->counter("rejected_records"), 1u);
  }
}

TEST_F(ClickHouseSink, RowsTheServerRefusesAreFoundByBisectingTheInsert) {
  // Both insert formats, into the real server: RowBinary, and the Native block made of the same rows.
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    // The server converts s itself (a MATERIALIZED column): 'x' fails there (code 6), not in the sink.
    server_->query("CREATE TABLE " + db_ + ".conv_" + format +
                   " (pico_offset Int64, s String, v UInt8 MATERIALIZED toUInt8(s)) "
                   "ENGINE = MergeTree ORDER BY pico_offset");
    open({{"target_table", "conv_" + format},
          {"format", format},
          {"auto_create_table", false},
          {"commit_interval", "1m"}});
    std::vector<std::string> payloads;
    payloads.reserve(10);
    for (int i = 0; i < 10; ++i) payloads.push_back(json{{"s", i == 3 || i == 8 ? "x" : std::to_string(i)}}.dump());
    auto a = host_->start_write(TestBatch::json("t", 0, 0, {payloads.begin(), payloads.begin() + 5}));
    auto b = host_->start_write(TestBatch::json("t", 0, 5, {payloads.begin() + 5, payloads.end()}));
    EXPECT_FALSE(a->completed()) << "one insert for both batches, not before it is sent";
    host_->flush();
    const auto oa = a->wait(), ob = b->wait();
    EXPECT_EQ(oa.status, PMQ_WRITE_REJECTED);
    EXPECT_EQ(ob.status, PMQ_WRITE_REJECTED);
    ASSERT_EQ(oa.rejected.size(), 1u);
    ASSERT_EQ(ob.rejected.size(), 1u);
    EXPECT_EQ(oa.rejected[0].record_index, 3u);
    EXPECT_EQ(ob.rejected[0].record_index, 3u);
    EXPECT_NE(oa.rejected[0].reason.find("ClickHouse error 6"), std::string::npos) << oa.rejected[0].reason;
    EXPECT_NE(oa.rejected[0].reason.find("Cannot parse string 'x' as UInt8"), std::string::npos)
        << oa.rejected[0].reason;
    EXPECT_EQ(one("SELECT groupArray(v) FROM (SELECT v FROM " + db_ + ".conv_" + format + " ORDER BY pico_offset)"),
              "[0,1,2,4,5,6,7,9]");
    EXPECT_GT(host_->counter("bisect_inserts"), 0u);
  }
}

TEST_F(ClickHouseSink, CreatesAReplacingMergeTreeAndLeavesAReplayedBatchOutOfTheInsert) {
  // Both planes: the batches plane infers the columns from the payloads, the Arrow plane
  // (format Native) from the exporter's columns; the same table either way.
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string table = "shop.orders-" + format;
    open({{"format", format}, {"target_table", table}});
    std::vector<TestRecord> records;
    records.reserve(5);
    for (int i = 0; i < 5; ++i)
      records.push_back({.offset = i,
                         .payload = json{{"n", i}, {"name", "r" + std::to_string(i)}, {"ok", i % 2 == 0}}.dump(),
                         .key = i % 2 ? std::optional<std::string>(std::string("\0\xff", 2)) : std::nullopt,
                         .headers = {{"h", "v" + std::to_string(i)}}});
    TestBatch batch("shop.orders-eu", 0, records);
    ASSERT_TRUE(host_->write(batch).ok());
    EXPECT_EQ(
        rows("SELECT engine, sorting_key FROM system.tables WHERE database = '" + db_ + "' AND name = '" + table + "'"),
        (std::vector<std::vector<std::string>>{{"ReplacingMergeTree", "pico_topic, pico_partition, pico_offset"}}));
    EXPECT_EQ(rows("SELECT name, type FROM system.columns WHERE database = '" + db_ + "' AND table = '" + table + "'"),
              (std::vector<std::vector<std::string>>{{"pico_topic", "String"},
                                                     {"pico_partition", "Int32"},
                                                     {"pico_offset", "Int64"},
                                                     {"pico_timestamp", "Int64"},
                                                     {"pico_key", "Nullable(String)"},
                                                     {"pico_headers", "String"},
                                                     {"n", "Nullable(Int64)"},
                                                     {"name", "Nullable(String)"},
                                                     {"ok", current_engine_ ? "Nullable(Bool)" : "Nullable(UInt8)"}}));
    // The same records again (a replay: the offsets go back): found in the table, left out.
    ASSERT_TRUE(host_->write(batch).ok());
    EXPECT_EQ(one("SELECT count() FROM " + db_ + ".`" + table + "`"), "5") << "without FINAL";
    EXPECT_EQ(host_->counter("already_written_records"), 5u);
    EXPECT_EQ(rows("SELECT pico_topic, pico_offset, pico_timestamp, hex(pico_key), pico_headers, n, name, ok FROM " +
                   db_ + ".`" + table + "` WHERE pico_offset = 1"),
              (std::vector<std::vector<std::string>>{{"shop.orders-eu", "1", "1700000000000", "00FF", R"({"h":"v1"})",
                                                      "1", "r1", current_engine_ ? "false" : "0"}}));
    // Rows of the same records put there by another writer (no record id check on their side):
    // the engine still folds them by record id, with FINAL or after a merge.
    server_->query("INSERT INTO " + db_ + ".`" + table +
                   "` (pico_topic, pico_partition, pico_offset, pico_headers) SELECT 'shop.orders-eu', 0, number, '{}' "
                   "FROM system.numbers LIMIT 5");
    EXPECT_EQ(one("SELECT count() FROM " + db_ + ".`" + table + "` FINAL"), "5");
    server_->query("OPTIMIZE TABLE " + db_ + ".`" + table + "` FINAL");
    EXPECT_EQ(one("SELECT count() FROM " + db_ + ".`" + table + "`"), "5") << "after the merge, without FINAL too";
  }
}

// A replay is checked record by record: rows of a partition that are in the table (here as if a
// later insert of a killed run landed and an earlier one did not) are left out, the others
// written; another partition and the batches after the replayed window are not held back.
TEST_F(ClickHouseSink, AReplayWritesExactlyTheRecordsTheTableLacks) {
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string table = "gaps_" + format;
    open({{"format", format}, {"target_table", table}});
    auto batch = [](int32_t partition, int first, int n) {
      std::vector<TestRecord> records;
      for (int i = first; i < first + n; ++i) records.push_back({.offset = i, .payload = json{{"n", i}}.dump()});
      return TestBatch("gaps", partition, records);
    };
    ASSERT_TRUE(host_->write(batch(1, 0, 2)).ok());  // the table, made by the sink
    server_->query("INSERT INTO " + db_ + ".`" + table +
                   "` (pico_topic, pico_partition, pico_offset, pico_headers, n) SELECT 'gaps', 0, number, '{}', "
                   "number FROM system.numbers WHERE number IN (0, 1, 2, 5, 6) LIMIT 5");
    host_->assign(0, {{"gaps", 0}, {"gaps", 1}});
    ASSERT_TRUE(host_->write(batch(0, 0, 10)).ok());
    EXPECT_EQ(host_->counter("already_written_records"), 5u);
    EXPECT_EQ(rows("SELECT pico_partition, count(), uniqExact(pico_offset), min(pico_offset), max(pico_offset) FROM " +
                   db_ + ".`" + table + "` GROUP BY pico_partition ORDER BY pico_partition"),
              (std::vector<std::vector<std::string>>{{"0", "10", "10", "0", "9"}, {"1", "2", "2", "0", "1"}}));
    ASSERT_TRUE(host_->write(batch(1, 2, 3)).ok());   // partition 1 after its rows: nothing there yet
    ASSERT_TRUE(host_->write(batch(0, 10, 5)).ok());  // past the replay
    ASSERT_TRUE(host_->write(batch(0, 8, 4)).ok());   // back again: 8..11 are all there
    EXPECT_EQ(host_->counter("already_written_records"), 9u);
    EXPECT_EQ(rows("SELECT pico_partition, count(), uniqExact(pico_offset), max(pico_offset) FROM " + db_ + ".`" +
                   table + "` GROUP BY pico_partition ORDER BY pico_partition"),
              (std::vector<std::vector<std::string>>{{"0", "15", "15", "14"}, {"1", "5", "5", "4"}}));
  }
}

// An insert whose answer is lost (written, the connection closed before the answer) is sent
// again with the same insert_deduplication_token, and the server drops the copy: the current
// engine only (22.2 on; 18.16 has no token, and the copy folds there by the record id with FINAL).
// Streamed (Native) and sent whole (RowBinary).
TEST_F(ClickHouseSink, AnInsertWhoseAnswerIsLostIsSentAgainAndTheServerDropsTheCopy) {
  if (!current_engine_) GTEST_SKIP() << "18.16 has no insert_deduplication_token";
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string table = "lost_" + format;
    open({{"format", format}, {"target_table", table}});
    auto batch = [](int first) {
      std::vector<std::string> payloads;
      for (int i = first; i < first + 5; ++i) payloads.push_back(json{{"n", i}}.dump());
      return TestBatch::json("lost", 0, first, payloads);
    };
    ASSERT_TRUE(host_->write(batch(0)).ok());
    EXPECT_NE(
        one("SELECT create_table_query FROM system.tables WHERE database = '" + db_ + "' AND name = '" + table + "'")
            .find("non_replicated_deduplication_window = 1000"),
        std::string::npos);
    server_->lose_next_insert_answers(1);
    // Sent again by the sink (a failed stream: `resends`) or by libcurl itself (a request whose
    // reused connection closed before the answer); 15 rows without the token (tried).
    ASSERT_TRUE(host_->write(batch(5)).ok());
    EXPECT_EQ(rows("SELECT count(), uniqExact(pico_offset) FROM " + db_ + ".`" + table + "`"),
              (std::vector<std::vector<std::string>>{{"10", "10"}}))
        << "without FINAL";
  }
}

TEST_F(ClickHouseSink, ANativeInsertGoesUpWithItsFirstBatchAndCommitsOnlyWhenItEnds) {
  // stream_inserts (the default): while batches keep coming (each within the sink's 50 ms idle
  // rule), the server is already running their INSERT while their writes are pending; they
  // complete when the body ends and the server answered. Off: one body per insert at commit.
  // (18.16 starts an HTTP query once it has max_query_size, 256 KiB, of the request or all of it:
  // the batches here are ~300 KB.)
  if (current_engine_) GTEST_SKIP() << "the chDB front reads a body whole before it runs the insert (18.16 shows this)";
  for (const bool streamed : {true, false}) {
    SCOPED_TRACE(streamed ? "stream_inserts" : "one body at commit");
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string table = streamed ? "streamed" : "whole";
    open({{"target_table", table}, {"format", "Native"}, {"stream_inserts", streamed}, {"commit_interval", "1m"}});
    std::vector<std::shared_ptr<kt::Write>> writes;
    bool seen_running = false;
    int64_t offset = 0;
    for (int batch = 0; batch < 100 && !(streamed && seen_running && batch >= 10); ++batch) {
      std::vector<std::string> payloads;
      for (int i = 0; i < 10; ++i, ++offset)
        payloads.push_back(json{{"n", offset}, {"s", std::string(30000, 'a' + i)}}.dump());
      writes.push_back(host_->start_write(TestBatch::json("t", 0, offset - 10, payloads)));
      const auto running =
          rows("SELECT count() FROM system.processes WHERE query LIKE 'INSERT INTO `" + db_ + "`.`" + table + "`%'");
      if (streamed && running[0][0] == "1" && !writes.back()->completed()) seen_running = true;
      std::this_thread::sleep_for(10ms);
    }
    if (streamed) EXPECT_TRUE(seen_running) << "the server never ran the insert before it committed";
    host_->flush();
    for (auto& w : writes) EXPECT_TRUE(w->wait().ok());
    const auto n = static_cast<int64_t>(writes.size()) * 10;
    EXPECT_EQ(rows("SELECT count(), sum(n), uniqExact(pico_offset) FROM " + db_ + ".`" + table + "`"),
              (std::vector<std::vector<std::string>>{
                  {std::to_string(n), std::to_string(n * (n - 1) / 2), std::to_string(n)}}));
    EXPECT_GE(host_->counter("inserts"), 1u);
    EXPECT_EQ(host_->counter("streamed_inserts"), streamed ? host_->counter("inserts") : 0u);
  }
}

TEST_F(ClickHouseSink, ManyTablesAtOnceNeverWaitForAConnectionAStreamHolds) {
  // Six tables through two open inserts and one committer: streamed inserts hold their
  // connections until they commit, so no more start than have a connection of their own at once
  // (max_open_tables + max_concurrent_inserts); the others are sent whole. Every write completes.
  open({{"format", "Native"},
        {"target_table", "many_{topic}"},
        {"max_open_tables", 2},
        {"max_concurrent_inserts", 1},
        {"commit_interval", "1m"}});
  std::vector<std::shared_ptr<kt::Write>> writes;
  std::map<std::string, int64_t> next;
  for (int round = 0; round < 20; ++round)
    for (int t = 0; t < 6; ++t) {
      const std::string topic = "t" + std::to_string((t * 7 + round) % 6);
      std::vector<std::string> payloads;
      payloads.reserve(50);
      for (int i = 0; i < 50; ++i)
        payloads.push_back(json{{"n", next[topic] + i}, {"s", std::string(2000, 'x')}}.dump());
      writes.push_back(host_->start_write(TestBatch::json(topic, 0, next[topic], payloads)));
      next[topic] += 50;
    }
  host_->flush();
  for (auto& w : writes) EXPECT_TRUE(w->wait().ok());
  for (const auto& [topic, n] : next)
    EXPECT_EQ(rows("SELECT count(), uniqExact(pico_offset) FROM " + db_ + ".many_" + topic),
              (std::vector<std::vector<std::string>>{{std::to_string(n), std::to_string(n)}}))
        << topic;
  EXPECT_GT(host_->counter("streamed_inserts"), 0u);
  EXPECT_EQ(host_->counter("streamed_inserts") + host_->counter("inserts_not_streamed"), host_->counter("inserts"));
}

TEST_F(ClickHouseSink, StringModeKeepsThePayloadAsItIs) {
  open({{"payload_mode", "string"}});
  TestBatch batch("logs", 0, {{.offset = 0, .payload = "a line\twith tab"}, {.offset = 1, .payload = std::nullopt}},
                  PMQ_PAYLOAD_TEXT, "text");
  ASSERT_TRUE(host_->write(batch).ok());
  EXPECT_EQ(rows("SELECT pico_offset, payload FROM " + db_ + ".logs ORDER BY pico_offset"),
            (std::vector<std::vector<std::string>>{{"0", "a line\twith tab"}, {"1", "\\N"}}));
}

TEST_F(ClickHouseSink, AMissingTableWithoutAutoCreateStopsTheSinkNamingIt) {
  open({{"auto_create_table", false}, {"target_table", "nowhere"}});
  auto outcome = host_->write(TestBatch::json("t", 0, 0, {R"({"n": 1})"}));
  EXPECT_EQ(outcome.status, PMQ_WRITE_FATAL);
  EXPECT_NE(outcome.error.find("table " + db_ + ".nowhere does not exist and auto_create_table is off"),
            std::string::npos)
      << outcome.error;
}

TEST_F(ClickHouseSink, AWrongPasswordStopsTheSinkAtOpenWithoutShowingIt) {
  try {
    open({{"user", "writer"}, {"password", "not-the-password-123"}});
    FAIL() << "open() succeeded with a wrong password";
  } catch (const std::exception& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("authentication failed"), std::string::npos) << m;
    EXPECT_EQ(m.find("not-the-password-123"), std::string::npos) << m;
  }
}

TEST_F(ClickHouseSink, TheRightPasswordWrites) {
  open({{"user", "writer"}, {"password", "picomq-test-password"}, {"compression", "gzip"}});
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"n": 1})"})).ok());
  EXPECT_EQ(one("SELECT count() FROM " + db_ + ".t"), "1");
}

TEST_F(ClickHouseSink, AReadOnlyUserCannotCreateTheTableAndTheSinkSaysSo) {
  open({{"user", "readonly"}, {"retry_timeout", "0s"}});
  auto outcome = host_->write(TestBatch::json("t", 0, 0, {R"({"n": 1})"}));
  EXPECT_NE(outcome.status, PMQ_WRITE_OK);
  EXPECT_NE(outcome.error.find("ClickHouse error 164"), std::string::npos) << outcome.error;
}

}  // namespace

namespace {

TEST_F(ClickHouseSink, AutoAddColumnsAddsAFieldFirstSeenInALaterBatch) {
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string grow = "grow_" + format;
    server_->query("CREATE TABLE " + db_ + "." + grow +
                   " (pico_offset Int64, a Int64, m UInt8 MATERIALIZED 7) "
                   "ENGINE = MergeTree ORDER BY pico_offset");
    open({{"target_table", grow}, {"format", format}, {"auto_add_columns", true}, {"commit_interval", "1m"}});
    auto first = host_->start_write(TestBatch::json("t", 0, 0, {R"({"a": 1, "m": 1})"}));
    auto second = host_->start_write(TestBatch::json("t", 0, 1, {R"({"a": 2, "b": "x", "c": 2.5, "m": 2})"}));
    host_->flush();
    EXPECT_TRUE(first->wait().ok());
    EXPECT_TRUE(second->wait().ok());
    EXPECT_EQ(rows("SELECT name, type FROM system.columns WHERE database = '" + db_ + "' AND table = '" + grow +
                   "' ORDER BY name"),
              (std::vector<std::vector<std::string>>{{"a", "Int64"},
                                                     {"b", "Nullable(String)"},
                                                     {"c", "Nullable(Float64)"},
                                                     {"m", "UInt8"},
                                                     {"pico_offset", "Int64"}}))
        << "m is there already (MATERIALIZED): not added again";
    EXPECT_EQ(rows("SELECT pico_offset, a, b, c, m FROM " + db_ + "." + grow + " ORDER BY pico_offset"),
              (std::vector<std::vector<std::string>>{{"0", "1", "\\N", "\\N", "7"}, {"1", "2", "x", "2.5", "7"}}));
    EXPECT_EQ(host_->counter("added_columns"), 2u);
    EXPECT_TRUE(host_->logged("added columns b Nullable(String), c Nullable(Float64)"));
    // A third batch with the same fields adds nothing.
    ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 2, {R"({"a": 3, "b": "y"})"})).ok());
    EXPECT_EQ(host_->counter("added_columns"), 2u);
  }
}

TEST_F(ClickHouseSink, AutoAddColumnsIsRefusedWithDeclaredColumns) {
  const auto problems = host_->check(R"j({"url": "http://x", "auto_add_columns": true, "columns": {"a": "Int8"}})j");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("cannot be combined with declared columns"), std::string::npos) << problems[0];
}

// ---------------------------------------------------------------- change events (docs/changes.md)

constexpr const char* kChanges = R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])";

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

class ClickHouseChanges : public ClickHouseSink {
 protected:
  void open_changes(json config) {
    host_->subscriptions(kChanges);
    open(std::move(config));
  }
  TestBatch changes(int64_t, std::vector<TestRecord> records) {
    return TestBatch("shop.public.customers", 0, std::move(records));
  }
  // What a reader of the replica sees: each key's latest row, deleted keys left out.
  std::vector<std::vector<std::string>> current(const std::string& table, const std::string& columns) {
    return rows("SELECT " + columns + " FROM (SELECT * FROM " + db_ + ".`" + table +
                "` FINAL) WHERE pico_deleted = 0 ORDER BY " + columns);
  }
};

TEST_F(ClickHouseChanges, UpsertsReplaceByKeyAndDeletesHideTheKeyInATableOrderedByIt) {
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
    const std::string table = "customers_" + format;
    open_changes({{"format", format}, {"target_table", table}, {"include_metadata", false}});
    EXPECT_EQ(host_->delivery_plane(), PMQ_PLANE_BATCHES) << "change events come as records";
    auto first = host_->write(changes(0, {upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","email":"a@x"})"),
                                          upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob","email":null})"),
                                          upsert(2, R"({"id":3})", R"({"id":3,"name":"Cy","email":"c@x"})")}));
    ASSERT_TRUE(first.ok()) << first.error;
    EXPECT_EQ(
        rows("SELECT engine, sorting_key FROM system.tables WHERE database = '" + db_ + "' AND name = '" + table + "'"),
        (std::vector<std::vector<std::string>>{{"ReplacingMergeTree", current_engine_ ? "(id)" : "id"}}));
    EXPECT_EQ(rows("SELECT name, type FROM system.columns WHERE database = '" + db_ + "' AND table = '" + table + "'"),
              (std::vector<std::vector<std::string>>{{"id", "Int64"},
                                                     {"name", "Nullable(String)"},
                                                     {"email", "Nullable(String)"},
                                                     {"pico_version", "UInt64"},
                                                     {"pico_deleted", "UInt8"},
                                                     {"pico_topic", "String"},
                                                     {"pico_partition", "Int32"},
                                                     {"pico_offset", "Int64"}}));
    // An update, a delete, the delete of a key never written, and three changes of one key.
    auto second = host_->write(
        changes(3, {upsert(3, R"({"id":1})", R"({"id":1,"name":"Anne","email":null})"), erase(4, R"({"id":2})"),
                    erase(5, R"({"id":99})"), upsert(6, R"({"id":3})", R"({"id":3,"name":"C1","email":"c@x"})"),
                    erase(7, R"({"id":3})"), upsert(8, R"({"id":3})", R"({"id":3,"name":"C3","email":"c3@x"})")}));
    ASSERT_TRUE(second.ok()) << second.error;
    EXPECT_TRUE(second.rejected.empty());
    const std::vector<std::vector<std::string>> want{{"1", "Anne", "\\N"}, {"3", "C3", "c3@x"}};
    EXPECT_EQ(current(table, "id, name, email"), want);
    // A replay of both batches (a restart from an older committed offset) changes nothing: each
    // key keeps the row of its highest offset.
    ASSERT_TRUE(host_
                    ->write(changes(0, {upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","email":"a@x"})"),
                                        upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob","email":null})")}))
                    .ok());
    EXPECT_EQ(current(table, "id, name, email"), want);
    server_->query("OPTIMIZE TABLE " + db_ + ".`" + table + "` FINAL");
    EXPECT_EQ(current(table, "id, name, email"), want) << "after the merge too";
  }
}

TEST_F(ClickHouseChanges, ACompositeKeyFromTheRecordKeyFillsWhatTheRowLacks) {
  open_changes({{"target_table", "lines"}, {"include_metadata", false}});
  ASSERT_TRUE(host_
                  ->write(changes(0, {upsert(0, R"({"order_id":1,"line":1})", R"({"sku":"A","qty":2})"),
                                      upsert(1, R"({"order_id":1,"line":2})", R"({"sku":"B","qty":1})"),
                                      upsert(2, R"({"order_id":2,"line":1})", R"({"sku":"C","qty":5})")}))
                  .ok());
  ASSERT_TRUE(host_
                  ->write(changes(3, {erase(3, R"({"order_id":1,"line":2})"),
                                      upsert(4, R"({"order_id":2,"line":1})", R"({"sku":"C","qty":6})")}))
                  .ok());
  EXPECT_EQ(one("SELECT sorting_key FROM system.tables WHERE database = '" + db_ + "' AND name = 'lines'"),
            "order_id, line");
  EXPECT_EQ(current("lines", "order_id, line, sku, qty"),
            (std::vector<std::vector<std::string>>{{"1", "1", "A", "2"}, {"2", "1", "C", "6"}}));
}

TEST_F(ClickHouseChanges, ATruncateEmptiesTheTableAndTheChangesAfterItStay) {
  open_changes({{"target_table", "trunc"}, {"include_metadata", false}, {"commit_interval", "1m"}});
  // The first batch waits in its insert (commit_interval 1m) when the truncate comes: it is
  // written first, then the table truncated.
  auto pending = host_->start_write(changes(
      0, {upsert(0, R"({"id":1})", R"({"id":1,"name":"a"})"), upsert(1, R"({"id":2})", R"({"id":2,"name":"b"})")}));
  auto after = host_->start_write(changes(2, {upsert(2, R"({"id":3})", R"({"id":3,"name":"c"})"), truncate(3),
                                              upsert(4, R"({"id":4})", R"({"id":4,"name":"d"})")}));
  host_->flush();
  ASSERT_TRUE(pending->wait().ok());
  const auto outcome = after->wait();
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(current("trunc", "id, name"), (std::vector<std::vector<std::string>>{{"4", "d"}}));
  EXPECT_EQ(host_->counter("truncates"), 1u);
  // A truncate of a table that does not exist yet creates nothing.
  auto quiet = host_->write(TestBatch("shop.public.never", 0, {truncate(0), erase(1, R"({"id":1})")}));
  ASSERT_TRUE(quiet.ok()) << quiet.error;
  EXPECT_EQ(one("SELECT count() FROM system.tables WHERE database = '" + db_ + "' AND name = 'shop.public.never'"),
            "0");
}

TEST_F(ClickHouseChanges, APatchKeepsTheColumnsItDoesNotNameFromTheTableOrTheBatch) {
  open_changes({{"target_table", "docs"}, {"include_metadata", false}});
  const std::string body(5000, 'x');
  ASSERT_TRUE(host_
                  ->write(changes(0, {upsert(0, R"({"id":1})", json{{"id", 1}, {"title", "t1"}, {"body", body}}.dump()),
                                      upsert(1, R"({"id":2})", R"({"id":2,"title":"t2","body":"b2"})")}))
                  .ok());
  // Patches of rows written before (read back), a patch after a patch of one key in the same batch,
  // a patch of a deleted key and of a key never written (inserted with what it names).
  auto outcome = host_->write(changes(
      2, {patch(2, R"({"id":1})", R"({"id":1,"title":"t1b"})"), patch(3, R"({"id":1})", R"({"id":1,"title":"t1c"})"),
          erase(4, R"({"id":2})"), patch(5, R"({"id":2})", R"({"id":2,"title":"t2b"})"),
          patch(6, R"({"id":7})", R"({"id":7,"title":"t7"})")}));
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(current("docs", "id, title, length(body)"),
            (std::vector<std::vector<std::string>>{{"1", "t1c", "5000"}, {"2", "t2b", "\\N"}, {"7", "t7", "\\N"}}));
  EXPECT_EQ(host_->counter("patch_lookups"), 1u) << "one query for the batch's patches";
}

TEST_F(ClickHouseChanges, ATableWithoutTheChangeColumnsAndStringModeAreRefusedSayingWhy) {
  server_->query("CREATE TABLE " + db_ + ".plain (id Int64, name String) ENGINE = MergeTree ORDER BY id");
  open_changes({{"target_table", "plain"}, {"auto_create_table", false}});
  auto outcome = host_->write(changes(0, {upsert(0, R"({"id":1})", R"({"id":1,"name":"a"})")}));
  EXPECT_EQ(outcome.status, PMQ_WRITE_FATAL);
  EXPECT_NE(outcome.error.find("pico_version UInt64 and pico_deleted UInt8"), std::string::npos) << outcome.error;
  host_->close();
  host_ = kt::FakeHost::load(CLICKHOUSE_SINK_PLUGIN);
  host_->subscriptions(kChanges);
  const auto problems = host_->check(R"({"url": "http://x", "payload_mode": "string"})");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("payload_mode 'columns'"), std::string::npos) << problems[0];
}

}  // namespace
