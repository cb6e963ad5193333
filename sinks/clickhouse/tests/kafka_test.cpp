// The ClickHouse sink through a real Kafka broker and the runtime, into the real ClickHouse 18.16
// server of the test process (sinks/clickhouse/server.sh, started once): typed rows of a
// 2-partition topic read back exactly; a second consumer group replaying everything into the same
// table adds no row, and a SIGKILL mid-load with a restart leaves every record once, without
// FINAL; a server crash during a load loses nothing and commits nothing before it is back; a
// record that does not convert goes to the dead-letter topic and the rest is written. Compiled
// into tests/integration.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <thread>

#include "clickhouse_server.h"
#include "harness.h"
#include "picomq/kit/testing/inference_cases.hpp"

namespace picomq::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;

std::string definition(const std::string& key, const std::string& topic, const std::string& db,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(
      key, "libpicomq_connector_clickhouse_sink",
      "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
      "url = \"" + ClickHouseServer::shared().url() + "\"\ndatabase = \"" + db + "\"\n" + plugin_config);
}

int64_t counter(Runtime& rt, const std::string& key, const std::string& name) {
  const auto s = rt.sink_status(key);
  if (!s.contains("counters") || !s["counters"].contains(name)) return 0;
  return s["counters"][name].get<int64_t>();
}

std::string one(const std::string& select) {
  auto r = ClickHouseServer::shared().rows(select);
  return r.empty() || r[0].empty() ? "" : r[0][0];
}

const char* kColumns =
    "columns = [{ name = \"id\", type = \"Int64\" }, { name = \"name\", type = \"String\" }, "
    "{ name = \"price\", type = \"Float64\" }, { name = \"tags\", type = \"Array(String)\" }, "
    "{ name = \"at\", type = \"DateTime\" }, { name = \"note\", type = \"Nullable(String)\" }]";

std::string order(int i) {
  return "{\"id\": " + std::to_string(i) + ", \"name\": \"order-" + std::to_string(i) +
         "\", \"price\": " + std::to_string(i) + ".25, \"tags\": [\"t" + std::to_string(i % 3) +
         "\"], \"at\": " + std::to_string(1'700'000'000 + i) + (i % 5 == 0 ? ", \"note\": null" : ", \"note\": \"n\"") +
         "}";
}

TEST(ClickHouseSinkKafka, TypedRowsOfEveryPartitionLandAndASecondGroupsReplayAddsNoRow) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chkafka");
  const auto topic = unique_name("ch.orders");
  kafka.create_topic(topic, 2);
  std::vector<ProducedRecord> records;
  const int n = 3000;
  records.reserve(n);
  for (int i = 0; i < n; ++i) records.push_back({order(i), "k" + std::to_string(i), {{"h", "v"}}, i % 2});
  kafka.produce(topic, records);
  const std::string config = std::string("target_table = \"orders\"\n") + kColumns;
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml",
                      definition("chorders", topic, db, config + "\nformat = \"RowBinary\"", "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("chorders"), topic, 2) == n; }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_LT(counter(rt, "chorders", "inserts"), n / 250) << "batches were gathered into fewer inserts";
  }
  EXPECT_EQ(one("SELECT count() FROM " + db + ".orders"), std::to_string(n));
  EXPECT_EQ(
      ch.rows("SELECT pico_partition, pico_offset, pico_key, pico_headers, id, name, price, tags, at, note FROM " + db +
              ".orders WHERE id IN (0, 7) ORDER BY id"),
      (Rows{{"0", "0", "k0", R"({"h":"v"})", "0", "order-0", "0.25", "['t0']", "2023-11-14 22:13:20", "\\N"},
            {"1", "3", "k7", R"({"h":"v"})", "7", "order-7", "7.25", "['t1']", "2023-11-14 22:13:27", "n"}}));
  EXPECT_EQ(one("SELECT sum(id) FROM " + db + ".orders"), std::to_string(int64_t{n} * (n - 1) / 2));

  // Another consumer group reads both partitions from the start into the same table, with Native
  // inserts made from the Arrow plane's columns: every record is found there, none inserted again.
  {
    Runtime rt(kafka.bootstrap(), "replay");
    rt.add_definition("c.toml",
                      definition("chreplay", topic, db, config + "\nformat = \"Native\"", "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("chreplay"), topic, 2) == n; }, 90s)) << rt.log();
    EXPECT_TRUE(wait_until([&] { return counter(rt, "chreplay", "already_written_records") == n; }, 5s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  EXPECT_EQ(one("SELECT count() FROM " + db + ".orders"), std::to_string(n)) << "one row per record, without FINAL";
  EXPECT_EQ(one("SELECT uniqExact(pico_partition, pico_offset) FROM " + db + ".orders"), std::to_string(n));
  // A third group into a table of its own, Native: the same values as the RowBinary rows.
  {
    Runtime rt(kafka.bootstrap(), "native");
    rt.add_definition("c.toml",
                      definition("chnative", topic, db,
                                 "target_table = \"orders_native\"\n" + std::string(kColumns) + "\nformat = \"Native\"",
                                 "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("chnative"), topic, 2) == n; }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  const std::string row_hash =
      "SELECT count(), sum(cityHash64(pico_partition, pico_offset, id, name, price, tags, at, ifNull(note, 'NULL'), "
      "ifNull(pico_key, 'NULL'), pico_headers, pico_timestamp)) FROM " +
      db + ".";
  EXPECT_EQ(one(row_hash + "orders_native"), one(row_hash + "orders"))
      << "every record's RowBinary row and Native row hold the same values";
}

TEST(ClickHouseSinkKafka, SigkillMidLoadThenRestartLeavesEveryRecordOnceWithoutFinal) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chkill");
  const auto topic = unique_name("ch.kill");
  kafka.create_topic(topic, 2);
  const int chunk = 60000;
  int64_t produced = 0;  // per partition
  auto produce_chunk = [&] {
    for (int p = 0; p < 2; ++p)
      kafka.produce_values(topic, json_values(static_cast<int>(produced), static_cast<int>(produced) + chunk), p);
    produced += chunk;
  };
  const std::string key = "chkill";
  const std::string block =
      "batch_length = 500\nproperties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config = "target_table = \"t\"\ncommit_interval = \"300ms\"";
  auto rows = [&]() -> int64_t {  // 0 until the sink created the table
    if (one("EXISTS TABLE " + db + ".t") != "1") return 0;
    return std::stoll(one("SELECT count() FROM " + db + ".t"));
  };
  int64_t window = 0;
  for (int run = 0; run < 5 && window <= 0; ++run) {
    produce_chunk();
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(run));
    rt.add_definition("c.toml", definition(key, topic, db, config, block));
    rt.start();
    // Killed as soon as an insert landed: its offsets are committed only after it, and the sink
    // loads faster than committed offsets can be looked up (two consumer clients).
    const int64_t before = rows();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (rows() <= before && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_GT(rows(), before) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    window = rows() - committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] run " << run << ": killed with " << rows() << " rows, "
              << committed_sum(kafka, group_of(key), topic, 2) << " committed\n";
  }
  ASSERT_GT(window, 0) << "no kill left written rows uncommitted";
  const int64_t committed_before = committed_sum(kafka, group_of(key), topic, 2);
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition(key, topic, db, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == 2 * produced; }, 120s))
      << rt.log();
  // The status file is rewritten once a second.
  EXPECT_TRUE(wait_until([&] { return counter(rt, key, "already_written_records") == window; }, 5s))
      << "the replayed window was found in the table: " << counter(rt, key, "already_written_records") << " of "
      << window << "\n"
      << rt.log();
  EXPECT_EQ(counter(rt, key, "written_records"), 2 * produced - committed_before - window)
      << "the restart inserted what came after the window";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(one("SELECT count() FROM " + db + ".t"), std::to_string(2 * produced)) << "without FINAL";
  EXPECT_EQ(one("SELECT uniqExact(pico_partition, pico_offset) FROM " + db + ".t"), std::to_string(2 * produced));
  // Every produced value once per partition (not n == pico_offset: the test producer is not
  // idempotent, and a retried produce request under load may land out of order).
  EXPECT_EQ(one("SELECT uniqExact(pico_partition, n) FROM " + db + ".t FINAL"), std::to_string(2 * produced));
  EXPECT_EQ(one("SELECT sum(n) FROM " + db + ".t FINAL"), std::to_string(produced * (produced - 1)));
}

TEST(ClickHouseSinkKafka, AServerCrashDuringALoadCommitsNothingUnwrittenAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("choutage");
  const auto topic = unique_name("ch.outage");
  kafka.create_topic(topic);
  const std::string key = "choutage";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, "target_table = \"t\"\nretry_timeout = \"60s\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 500));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 500; }, 60s)) << rt.log();
  ch.kill();  // SIGKILL: connections reset, nothing answers
  kafka.produce_values(topic, json_values(500, 1500));
  std::this_thread::sleep_for(scaled(3s));
  EXPECT_EQ(kafka.committed(group_of(key), topic), 500) << "nothing committed while the server is down";
  EXPECT_EQ(rt.sink_state(key), "running") << rt.log();
  ch.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1500; }, 90s)) << rt.log();
  // The status file is rewritten once a second.
  EXPECT_TRUE(wait_until([&] { return counter(rt, key, "resends") > 0; }, 5s)) << "resent here, not failed\n"
                                                                               << rt.log();
  EXPECT_EQ(rt.log().find("failed (attempt"), std::string::npos) << "no write attempt failed\n" << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(one("SELECT count() FROM " + db + ".t FINAL"), "1500");
  EXPECT_EQ(one("SELECT uniqExact(pico_offset) FROM " + db + ".t"), "1500");
}

TEST(ClickHouseSinkKafka, SigtermDuringAnOutageExitsWithinSecondsAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chterm");
  const auto topic = unique_name("ch.term");
  kafka.create_topic(topic);
  const std::string key = "chterm";
  // The runtime waits for the write in flight when it stops: an insert resent for retry_timeout
  // holds the exit back that long (the sink hears of the stop only in close(), afterwards).
  const std::string config = "target_table = \"t\"\nretry_timeout = \"3s\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, config));
  rt.start();
  kafka.produce_values(topic, json_values(0, 5));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 5; }, 60s)) << rt.log();
  ch.kill();
  kafka.produce_values(topic, json_values(5, 10));
  std::this_thread::sleep_for(scaled(2s));  // an insert of 5..9 is being resent
  const auto signalled = std::chrono::steady_clock::now();
  rt.signal(SIGTERM);
  const auto code = rt.wait_exit(40s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  ch.start();
  std::cout << "[          ] SIGTERM during an outage: exit " << (code ? *code : -1) << " after " << took << " s\n";
  EXPECT_EQ(code, 0) << rt.log();
  EXPECT_LE(took, 3.0 + 3.0 * (scaled(1000ms).count() / 1000.0)) << "at most retry_timeout\n" << rt.log();
  EXPECT_EQ(kafka.committed(group_of(key), topic), 5);
  Runtime again(kafka.bootstrap(), "again");
  again.add_definition("c.toml", definition(key, topic, db, config));
  again.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 10; }, 60s)) << again.log();
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait_exit(30s), 0);
  EXPECT_EQ(one("SELECT count() FROM " + db + ".t FINAL"), "10");
}

TEST(ClickHouseSinkKafka, ARecordThatDoesNotConvertGoesToTheDeadLetterTopicAndTheRestIsWritten) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chdlq");
  const auto topic = unique_name("ch.bad"), dead = unique_name("ch.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";
  kafka.produce_values(topic, values);
  const std::string key = "chdlq";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml",
                    definition(key, topic, db, "target_table = \"t\"\ncolumns = [{ name = \"n\", type = \"Int64\" }]",
                               "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
  const auto dlq = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
  EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
  EXPECT_EQ(dlq[0].header("pico_error_reason").value_or(""), "field 'n': expected Int64, found string");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(ch.rows("SELECT count(), countIf(pico_offset = 17), sum(n) FROM " + db + ".t"),
            (Rows{{"49", "0", std::to_string(49 * 50 / 2 - 17)}}));
}

// Rows only the server refuses (its own conversion, a MATERIALIZED column) in inserts of batches
// the sink had released: the bisection finds them, the runtime reads their batches again (a
// released batch cannot be resent), and on their second coming the sink rejects them before the
// insert: they go to the dead-letter topic, every other record is in the table, the offsets reach
// the end. Both planes.
TEST(ClickHouseSinkKafka, RowsTheServerRefusesInReleasedBatchesGoToTheDeadLetterTopicAfterOneRereading) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  for (const std::string format : {"RowBinary", "Native"}) {
    SCOPED_TRACE(format);
    const auto db = ch.create_database("chrefuse");
    const auto topic = unique_name("ch.refuse"), dead = unique_name("ch.refdead");
    kafka.create_topic(topic, 2);
    kafka.create_topic(dead);
    ch.query("CREATE TABLE " + db +
             ".t (pico_partition Int32, pico_offset Int64, s String, v UInt8 MATERIALIZED "
             "toUInt8(s)) ENGINE = ReplacingMergeTree ORDER BY (pico_partition, pico_offset)");
    std::vector<ProducedRecord> records;
    const int n = 2000;
    std::set<int> refused = {3, 777, 1500, 1999};
    records.reserve(n);
    for (int i = 0; i < n; ++i)
      records.push_back({"{\"s\": \"" + (refused.count(i) ? std::string("x") : std::to_string(i % 200)) + "\"}",
                         "k" + std::to_string(i),
                         {},
                         i % 2});
    kafka.produce(topic, records);
    const std::string key = "chrefuse" + format;
    Runtime rt(kafka.bootstrap());
    rt.add_definition(
        "c.toml",
        definition(key, topic, db, "target_table = \"t\"\nauto_create_table = false\nformat = \"" + format + "\"",
                   "batch_length = 100\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == n; }, 90s)) << rt.log();
    const auto dlq = kafka.consume(dead, refused.size(), 30s);
    ASSERT_EQ(dlq.size(), refused.size()) << rt.log();
    for (const auto& m : dlq) {
      EXPECT_NE(m.header("pico_error_reason").value_or("").find("ClickHouse refused the row"), std::string::npos);
      EXPECT_NE(m.value.value_or("").find("\"x\""), std::string::npos) << m.value.value_or("");
    }
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_GT(counter(rt, key, "bisect_inserts"), 0);
    EXPECT_EQ(one("SELECT count() FROM " + db + ".t FINAL"), std::to_string(n - refused.size()));
    EXPECT_EQ(one("SELECT countIf(s = 'x') FROM " + db + ".t"), "0");
  }
}

TEST(ClickHouseSinkKafka, AutoCreatedFromTheFirstBatchThenAutoAddColumnsForFieldsThatComeLater) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chgrow");
  const auto topic = unique_name("ch.grow");
  kafka.create_topic(topic);
  std::vector<std::string> values;
  for (int i = 0; i < 30; ++i) {
    std::string v = "{\"id\": " + std::to_string(i);
    if (i >= 10) v += ", \"city\": \"c" + std::to_string(i) + "\"";
    if (i >= 20)
      v += ", \"vip\": " + std::string(i % 2 ? "true" : "false") + ", \"score\": " + std::to_string(i) + ".5";
    values.push_back(v + "}");
  }
  const std::string key = "chgrow";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml",
                    definition(key, topic, db, "target_table = \"t\"\nauto_add_columns = true", "batch_length = 10"));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
  for (int from : {0, 10, 20}) {  // one batch each: the fields come later
    kafka.produce_values(topic, {values.begin() + from, values.begin() + from + 10});
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == from + 10; }, 30s)) << rt.log();
  }
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(ch.rows("SELECT name, type FROM system.columns WHERE database = '" + db +
                    "' AND table = 't' AND name NOT LIKE 'pico_%'"),
            (Rows{{"id", "Nullable(Int64)"},
                  {"city", "Nullable(String)"},
                  {"vip", ClickHouseServer::current_engine() ? "Nullable(Bool)" : "Nullable(UInt8)"},
                  {"score", "Nullable(Float64)"}}));
  EXPECT_EQ(ch.rows("SELECT id, city, vip, score FROM " + db + ".t FINAL WHERE id IN (5, 15, 25) ORDER BY id"),
            (Rows{{"5", "\\N", "\\N", "\\N"},
                  {"15", "c15", "\\N", "\\N"},
                  {"25", "c25", ClickHouseServer::current_engine() ? "true" : "1", "25.5"}}));
  EXPECT_EQ(one("SELECT count() FROM " + db + ".t FINAL"), "30");
}

// The kit's one inference lattice through the broker, on both planes (Native: the Arrow
// plane's columns; RowBinary: the batches plane's payloads): the same table, and every record of
// the shared cases written, a column of conflicting kinds holding each value's JSON text.
TEST(ClickHouseSinkKafka, BothPlanesCreateTheSameTableFromTheSharedInferenceCasesAndWriteEveryRecord) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  std::vector<Rows> tables;
  for (const std::string format : {"Native", "RowBinary"}) {
    const auto db = ch.create_database("chinfer");
    const auto topic = unique_name("ch.infer");
    kafka.create_topic(topic);
    kafka.produce_values(topic, kit::testing::inference_payloads());
    const std::string key = "chinfer" + format;
    Runtime rt(kafka.bootstrap());
    rt.add_definition("c.toml", definition(key, topic, db, "target_table = \"t\"\nformat = \"" + format + "\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 3; }, 60s)) << format << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    tables.push_back(ch.rows("SELECT name, type FROM system.columns WHERE database = '" + db +
                             "' AND table = 't' AND name NOT LIKE 'pico_%'"));
    EXPECT_EQ(ch.rows("SELECT `i`, `if`, `u`, `bi`, `is`, `so` FROM " + db + ".t FINAL ORDER BY pico_offset"),
              (Rows{{"1", "1", "18446744073709551615", "true", "1", "x"},
                    {"-9223372036854775808", "2.5", "1", "2", "2", "[1]"},
                    {"9223372036854775807", "\\N", "\\N", "\\N", "\\N", "\\N"}}))
        << format;
  }
  // kit::testing::inference_fields() (booleans are UInt8 before 21.12, so on 18.16).
  const Rows want = {{"b", ClickHouseServer::current_engine() ? "Nullable(Bool)" : "Nullable(UInt8)"},
                     {"i", "Nullable(Int64)"},
                     {"f", "Nullable(Float64)"},
                     {"if", "Nullable(Float64)"},
                     {"s", "Nullable(String)"},
                     {"o", "Nullable(String)"},
                     {"a", "Nullable(String)"},
                     {"u", "Nullable(String)"},
                     {"bi", "Nullable(String)"},
                     {"bs", "Nullable(String)"},
                     {"is", "Nullable(String)"},
                     {"so", "Nullable(String)"},
                     {"sn", "Nullable(String)"},
                     {"n", "Nullable(String)"},
                     {"late", "Nullable(Int64)"}};
  ASSERT_EQ(want.size(), kit::testing::inference_fields().size());
  EXPECT_EQ(tables[0], want) << "Native (the Arrow plane)";
  EXPECT_EQ(tables[1], want) << "RowBinary (the batches plane)";
}

TEST(ClickHouseSinkKafka, AWrongPasswordPutsTheSinkInErrorAtStartSayingWhy) {
  auto& kafka = Kafka::shared();
  auto& ch = ClickHouseServer::shared();
  const auto db = ch.create_database("chauth");
  const auto topic = unique_name("ch.auth");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("chauth", topic, db, "user = \"writer\"\npassword = \"wrong-secret-42\""));
  rt.start();
  ASSERT_TRUE(rt.wait_state("chauth", "error", 30s)) << rt.log();
  const std::string error = rt.sink_status("chauth").value("message", "");
  EXPECT_NE(error.find("authentication failed: check user and password"), std::string::npos) << error;
  EXPECT_EQ(rt.log().find("wrong-secret-42"), std::string::npos) << "the password is never shown";
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

}  // namespace
}  // namespace picomq::test
