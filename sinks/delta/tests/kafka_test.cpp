// The Delta sink through a real Kafka broker and the runtime, into Delta tables on the local
// filesystem, read back with an independent reader: the `deltalake` package from PyPI with
// pyarrow (delta_table.py, in tools/venv from scripts/setup.sh). Exactly the produced rows with
// one txn version per topic-partition; replays dropped below the committed version; SIGKILLs
// between the Delta commit and the offset commit leave no duplicate and no gap; a second
// writer's commits are survived; another commit with the sink's app id (a killed run's, landing
// late) raises the floors of every partition it holds; a missing table is a clear fatal error; a
// value the table cannot hold is a rejected record; an S3 store that ignores If-None-Match stops
// the sink unless s3_conditional_commits = false. Its own binary and broker (ctest delta_kafka).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "delta_table.h"
#include "harness.h"
#include "picomq/kit/testing/http_stub.hpp"
#include "picomq/kit/testing/shell.hpp"
#include "seaweedfs_server.h"

namespace picomq::test {
namespace {

namespace fs = std::filesystem;
using delta::table_tool;

std::string quote(const std::string& s) { return kit::testing::shell_quote(s); }

// The table as the deltalake package reads it; txn versions of `app_ids`. `storage`: its
// storage options as " KEY=value" arguments (S3).
nlohmann::json read_table(const std::string& table, const std::vector<std::string>& app_ids,
                          const std::string& storage = "") {
  std::string ids;
  for (const auto& id : app_ids) ids += (ids.empty() ? "" : ",") + id;
  return table_tool("read " + quote(table) + storage, "APP_IDS=" + quote(ids));
}

std::string create_table(const std::string& name) {
  const auto dir = make_temp_dir("delta_" + name) / "table";
  table_tool("create " + quote(dir.string()));
  return dir.string();
}

fs::path log_file(const fs::path& table, int version) {
  char name[32];
  std::snprintf(name, sizeof name, "%020d.json", version);
  return table / "_delta_log" / name;
}

std::string definition(const std::string& key, const std::string& topic, const std::string& table,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_delta_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\n" + block_extra,
                           "table_uri = \"" + table + "\"\n" + plugin_config);
}

// (partition, offset) -> n of the rows of `topic`, failing on a row found twice.
std::map<std::pair<int, int64_t>, int64_t> rows_of(const nlohmann::json& t, const std::string& topic) {
  std::map<std::pair<int, int64_t>, int64_t> out;
  for (const auto& r : t["rows"]) {
    if (r["topic"] != topic) continue;
    const auto id = std::pair{r["partition"].get<int>(), r["offset"].get<int64_t>()};
    EXPECT_FALSE(out.count(id)) << "offset " << id.second << " of partition " << id.first << " twice";
    out[id] = r["n"].is_null() ? INT64_MIN : r["n"].get<int64_t>();
  }
  return out;
}

TEST(DeltaSinkKafka, AppendsExactlyTheProducedRowsWithOneTxnVersionPerPartition) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("rows");
  const auto topic = unique_name("delta.orders");
  kafka.create_topic(topic, 2);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 600; ++i) {
    ProducedRecord r;
    r.partition = i % 2;
    r.value = "{\"n\": " + std::to_string(i) + ", \"s\": \"é-" + std::to_string(i) + "\"}";
    if (i % 3 == 0) r.key = "k" + std::to_string(i);
    records.push_back(r);
  }
  kafka.produce(topic, records);
  const auto produced = kafka.consume(topic, records.size(), 20s);
  ASSERT_EQ(produced.size(), 600u);

  Runtime rt(kafka.bootstrap(), "rows");
  // Batches of 70 and windows of 100 records: commits that do not line up with batches.
  rt.add_definition("s.toml", definition("deltarows", topic, table, "roll_records = 100\napp_id = \"orders\"\n",
                                         "batch_length = 70\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("deltarows"), topic, 2, 300); }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();

  const auto t = read_table(table, {"orders-" + topic + "-0", "orders-" + topic + "-1"});
  const auto rows = rows_of(t, topic);
  ASSERT_EQ(rows.size(), 600u);
  std::map<std::pair<int, int64_t>, const ConsumedRecord*> by_id;
  for (const auto& c : produced) by_id[{c.partition, c.offset}] = &c;
  for (const auto& r : t["rows"]) {
    const auto& c = *by_id.at({r["partition"].get<int>(), r["offset"].get<int64_t>()});
    const auto v = nlohmann::json::parse(*c.value);
    EXPECT_EQ(r["n"], v["n"]);
    EXPECT_EQ(r["s"], v["s"]);
    EXPECT_EQ(r["timestamp_ms"], c.timestamp_ms) << "pico_timestamp: the record's";
    if (c.key) EXPECT_FALSE(r["key"].is_null());
    else EXPECT_TRUE(r["key"].is_null());
  }
  EXPECT_EQ(t["txn"]["orders-" + topic + "-0"], 300) << t["txn"].dump();
  EXPECT_EQ(t["txn"]["orders-" + topic + "-1"], 300) << t["txn"].dump();
  // Windows close at the batch that brings them to 100 records or more (140 here: two batches of
  // 70), the last at shutdown: 4 or 5 commits after the create, not one per batch (9) nor one.
  EXPECT_GE(t["version"].get<int>(), 4);
  EXPECT_LE(t["version"].get<int>(), 6);
}

TEST(DeltaSinkKafka, AReplayedGroupWritesNothingTwice) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("replay");
  const auto topic = unique_name("delta.replay");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 200));
  for (const char* group : {"first", "second"}) {
    // The same app_id under another consumer group: the group starts at 0, the table says 200.
    Runtime rt(kafka.bootstrap(), group);
    rt.add_definition("s.toml", definition(std::string("deltareplay") + group, topic, table, "app_id = \"replay\"\n"));
    rt.start();
    ASSERT_TRUE(
        wait_until([&] { return kafka.committed(group_of(std::string("deltareplay") + group), topic) == 200; }, 60s))
        << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  const auto t = read_table(table, {"replay-" + topic + "-0"});
  EXPECT_EQ(rows_of(t, topic).size(), 200u);
  EXPECT_EQ(t["txn"]["replay-" + topic + "-0"], 200);
}

TEST(DeltaSinkKafka, SigkillBetweenTheDeltaCommitAndTheOffsetCommitLeavesNoDuplicateAndNoGap) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("kill");
  const auto topic = unique_name("delta.kill");
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 10000, p * 10000 + 1500), p);
  const std::vector<std::string> app_ids = {"kill-" + topic + "-0", "kill-" + topic + "-1"};
  int in_the_window = 0;
  // Static membership: the restarted runtime takes the killed one's partitions at once instead
  // of waiting out its session.
  const std::string kill_block =
      "batch_length = 100\nproperties = { \"group.instance.id\" = \"deltakill\", \"session.timeout.ms\" = \"6000\" }";
  for (int round = 0; round < 3; ++round) {
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(round));
    // The sink's test hook: hold the write open this long after its Delta commit, so the kill
    // lands after the table has the rows and before the runtime committed their offsets.
    rt.env("PICOMQ_DELTA_TEST_PAUSE_AFTER_COMMIT_MS", "2500");
    rt.add_definition("s.toml",
                      definition("deltakill", topic, table, "roll_records = 250\napp_id = \"kill\"\n", kill_block));
    const auto before = read_table(table, app_ids)["version"].get<int>();
    rt.start();
    ASSERT_TRUE(wait_until([&] { return fs::exists(log_file(table, before + 1)); }, 60s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
    const auto t = read_table(table, app_ids);
    for (int p = 0; p < 2; ++p) {
      const auto& v = t["txn"][app_ids[p]];
      const int64_t committed = kafka.committed(group_of("deltakill"), topic, p);
      if (!v.is_null() && v.get<int64_t>() > std::max<int64_t>(committed, 0)) ++in_the_window;
    }
    rows_of(t, topic);  // fails on a duplicate
  }
  EXPECT_GE(in_the_window, 3) << "each kill left the table ahead of the committed offsets";

  Runtime rt(kafka.bootstrap(), "finish");
  rt.add_definition("s.toml",
                    definition("deltakill", topic, table, "roll_records = 250\napp_id = \"kill\"\n", kill_block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("deltakill"), topic, 2, 1500); }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto t = read_table(table, app_ids);
  const auto rows = rows_of(t, topic);
  ASSERT_EQ(rows.size(), 3000u) << "no gap, no duplicate";
  for (int p = 0; p < 2; ++p)
    for (int64_t o = 0; o < 1500; ++o) EXPECT_EQ(rows.at({p, o}), p * 10000 + o);
  EXPECT_EQ(t["txn"][app_ids[0]], 1500);
  EXPECT_EQ(t["txn"][app_ids[1]], 1500);
}

TEST(DeltaSinkKafka, ASecondWritersCommitsAreSurvived) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("conflict");
  const auto topic = unique_name("delta.conflict");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap(), "conflict");
  rt.add_definition("s.toml", definition("deltaconflict", topic, table, "roll_records = 50\napp_id = \"c\"\n",
                                         "batch_length = 25\npoll_interval = \"50ms\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("deltaconflict", 60s)) << rt.log();
  // The second writer (write_deltalake) commits between and during the sink's commits: the
  // sink's commit attempts that lose the race re-read the log and commit the next version.
  for (int i = 0; i < 6; ++i) {
    kafka.produce_values(topic, json_values(i * 100, i * 100 + 100));
    table_tool("append " + quote(table) + " 10");
  }
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("deltaconflict"), topic) == 600; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto t = read_table(table, {"c-" + topic + "-0"});
  const auto rows = rows_of(t, topic);
  ASSERT_EQ(rows.size(), 600u);
  for (int64_t o = 0; o < 600; ++o) EXPECT_EQ(rows.at({0, o}), o);
  size_t other = 0;
  for (const auto& r : t["rows"]) other += r["topic"] == "second-writer";
  EXPECT_EQ(other, 60u) << "the other writer's 6 commits of 10 rows are there too";
  EXPECT_EQ(t["txn"]["c-" + topic + "-0"], 600);
}

// A commit with the sink's app id that the sink did not make — a killed run's, landing late —
// holding partitions besides (or instead of) those of the sink's next commit. Its records are in
// the table, and its txn versions say so: the sink must read them for every partition it holds,
// not only for the one that made it look, or it writes their records a second time.
TEST(DeltaSinkKafka, AnotherCommitWithTheAppIdRaisesTheFloorOfEveryPartitionItHolds) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("late");
  const auto topic = unique_name("delta.late");
  kafka.create_topic(topic, 2);
  const std::vector<std::string> app_ids = {"late-" + topic + "-0", "late-" + topic + "-1"};
  // Record o of partition p is {"n": p * 1000 + o}, as commit-as writes the rows it holds.
  auto produce = [&](int p, int from, int to) {
    kafka.produce_values(topic, json_values(p * 1000 + from, p * 1000 + to), p);
  };
  const auto group = group_of("deltalate");
  auto committed = [&](int p, int64_t offset) {
    return wait_until([&] { return kafka.committed(group, topic, p) == offset; }, 60s);
  };
  produce(0, 0, 100);
  produce(1, 0, 100);
  Runtime rt(kafka.bootstrap(), "late");
  rt.add_definition("s.toml", definition("deltalate", topic, table, "app_id = \"late\"\ncommit_interval = \"200ms\"\n",
                                         "batch_length = 50\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 100); }, 90s)) << rt.log();

  // 1. It holds partition 1 alone: the sink's next commit (partition 0's records) does not
  // conflict with it and is made on top of it; partition 1's floor must come from the new state.
  table_tool("commit-as " + quote(table) + " late " + quote(topic) + " 1:100:150");
  produce(0, 100, 110);
  ASSERT_TRUE(committed(0, 110)) << rt.log();
  produce(1, 100, 200);
  ASSERT_TRUE(committed(1, 200)) << rt.log();

  // 2. It holds both: the sink's next commit of partition 0 conflicts with it (the same txn
  // appId: ConcurrentTransaction), fails, and the table is read again for partition 0; partition
  // 1's floor must be read with it.
  table_tool("commit-as " + quote(table) + " late " + quote(topic) + " 0:110:120 1:200:250");
  produce(0, 110, 130);
  ASSERT_TRUE(committed(0, 130)) << rt.log();
  produce(1, 200, 300);
  ASSERT_TRUE(committed(1, 300)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();

  const auto t = read_table(table, app_ids);
  const auto rows = rows_of(t, topic);  // fails on a row found twice
  EXPECT_EQ(rows.size(), 130u + 300u) << "no duplicate, no gap";
  for (int p = 0; p < 2; ++p)
    for (int64_t o = 0; o < (p == 0 ? 130 : 300); ++o) {
      const auto it = rows.find({p, o});
      ASSERT_NE(it, rows.end()) << "offset " << o << " of partition " << p << " missing";
      EXPECT_EQ(it->second, p * 1000 + o);
    }
  size_t late = 0;
  for (const auto& r : t["rows"]) late += r["s"] == "late";
  EXPECT_EQ(late, 50u + 10u + 50u) << "the other commits' rows are the ones kept";
  EXPECT_EQ(t["txn"][app_ids[0]], 130) << t["txn"].dump();
  EXPECT_EQ(t["txn"][app_ids[1]], 300) << t["txn"].dump();
  const auto log = rt.log();
  EXPECT_NE(log.find("the table holds records up to offset 150, beyond the 100 read before"), std::string::npos) << log;
  EXPECT_NE(log.find("the table holds records up to offset 250, beyond the 200 read before"), std::string::npos) << log;
}

TEST(DeltaSinkKafka, AValueTheTableCannotHoldIsARejectedRecord) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("reject");
  const auto topic = unique_name("delta.reject");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 10);
  values[4] = "{\"n\": \"four\"}";  // n is a long column
  values[7] = "{\"extra\": 1}";     // not a column of the table
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap(), "reject");
  rt.add_definition("s.toml", definition("deltareject", topic, table, "",
                                         "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("deltareject"), topic) == 10; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto rows = rows_of(read_table(table, {}), topic);
  std::set<int64_t> offsets;
  for (const auto& [id, n] : rows) offsets.insert(id.second);
  EXPECT_EQ(offsets, (std::set<int64_t>{0, 1, 2, 3, 5, 6, 8, 9}));
  const auto letters = kafka.consume(dead, 2, 20s);
  ASSERT_EQ(letters.size(), 2u);
  EXPECT_EQ(letters[0].header("pico_error_offset"), "4");
  EXPECT_NE(letters[0].header("pico_error_reason").value_or("").find("field 'n'"), std::string::npos)
      << letters[0].header("pico_error_reason").value_or("");
  EXPECT_EQ(letters[1].header("pico_error_offset"), "7");
  EXPECT_NE(letters[1].header("pico_error_reason").value_or("").find("'extra' is not a column of the table"),
            std::string::npos)
      << letters[1].header("pico_error_reason").value_or("");
}

TEST(DeltaSinkKafka, SchemaEvolutionAddsANewFieldAsANullableColumn) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("evolve");
  const auto topic = unique_name("delta.evolve");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {"{\"n\": 1}", "{\"n\": 2, \"color\": \"red\"}", "{\"n\": 3}"});
  Runtime rt(kafka.bootstrap(), "evolve");
  rt.add_definition("s.toml", definition("deltaevolve", topic, table, "schema_evolution = true\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("deltaevolve"), topic) == 3; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto t = read_table(table, {});
  std::map<int64_t, std::string> color;
  for (const auto& r : t["rows"]) color[r["n"].get<int64_t>()] = r["extra"].value("color", "absent");
  EXPECT_EQ(color, (std::map<int64_t, std::string>{{1, "None"}, {2, "red"}, {3, "None"}}));
}

TEST(DeltaSinkKafka, AMissingTableIsAClearFatalError) {
  auto& kafka = Kafka::shared();
  const auto nowhere = (make_temp_dir("delta_missing") / "no_table").string();
  const auto topic = unique_name("delta.missing");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 3));
  Runtime rt(kafka.bootstrap(), "missing");
  rt.add_definition("s.toml", definition("deltamissing", topic, nowhere, ""));
  rt.start();
  ASSERT_TRUE(rt.wait_state("deltamissing", "error", 60s)) << rt.log();
  const auto message = rt.sink_status("deltamissing").value("message", "");
  EXPECT_NE(message.find("there is no Delta table at " + nowhere), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed(group_of("deltamissing"), topic), -1001) << "nothing committed";
}

// create_table: the first batch creates the table with its columns, partitioned by a column the
// sink fills from each record's timestamp (never the wall clock); a later run appends to it.
TEST(DeltaSinkKafka, CreateTableMakesATablePartitionedByRecordTimeAndTheNextRunAppendsToIt) {
  auto& kafka = Kafka::shared();
  const auto table = (make_temp_dir("delta_create") / "lake" / "orders").string();  // no folder yet
  const auto topic = unique_name("delta.create");
  kafka.create_topic(topic, 2);
  constexpr int64_t kDec1 = 1764547200000;  // 2025-12-01T00:00:00Z
  constexpr int64_t kDay = 86400000;
  // Record i is stamped on day i % 3 (Dec 1, 2, 3), at 23:59:59.999 for the first two: a day
  // boundary in UTC, whatever the machine's zone.
  auto produce = [&](int from, int to) {
    std::vector<ProducedRecord> records;
    for (int i = from; i < to; ++i) {
      ProducedRecord r;
      r.partition = i % 2;
      r.value = "{\"n\": " + std::to_string(i) + ", \"s\": \"o-" + std::to_string(i) + "\"}";
      r.timestamp_ms = kDec1 + (i % 3) * kDay + (i % 3 < 2 ? kDay - 1 : 0);
      records.push_back(r);
    }
    kafka.produce(topic, records);
  };
  const std::string config =
      "create_table = true\npartition_by = [\"day\"]\ntime_column = \"day\"\napp_id = \"created\"\n";
  produce(0, 300);
  {
    Runtime rt(kafka.bootstrap(), "create");
    rt.add_definition("s.toml",
                      definition("deltacreate", topic, table, config, "batch_length = 100\npoll_interval = \"100ms\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("deltacreate"), topic, 2, 150); }, 90s))
        << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_NE(rt.log().find("created the Delta table"), std::string::npos) << rt.log();
  }
  auto check = [&](size_t expected) -> nlohmann::json {
    auto t = read_table(table, {"created-" + topic + "-0", "created-" + topic + "-1"});
    EXPECT_EQ(t["partition_columns"], nlohmann::json::array({"day"})) << t.dump().substr(0, 2000);
    EXPECT_EQ(t["schema"].value("n", ""), "int64");
    EXPECT_EQ(t["schema"].value("day", ""), "string");
    const auto rows = rows_of(t, topic);
    EXPECT_EQ(rows.size(), expected);
    const char* days[] = {"2025-12-01", "2025-12-02", "2025-12-03"};
    for (const auto& r : t["rows"]) {
      const int64_t n = r["n"].get<int64_t>();
      EXPECT_EQ(r["extra"].value("day", ""), days[n % 3]) << "row " << n << ": the record's day (UTC)";
      EXPECT_EQ(r["timestamp_ms"], kDec1 + (n % 3) * kDay + (n % 3 < 2 ? kDay - 1 : 0));
      EXPECT_EQ(r["s"], "o-" + std::to_string(n));
    }
    std::set<std::string> folders;
    for (const auto& uri : t["file_uris"]) {
      const std::string u = uri.get<std::string>();
      const auto at = u.find("/day=");
      EXPECT_NE(at, std::string::npos) << u;
      if (at == std::string::npos) continue;
      folders.insert(u.substr(at + 1, u.find('/', at + 1) - at - 1));
    }
    EXPECT_EQ(folders, (std::set<std::string>{"day=2025-12-01", "day=2025-12-02", "day=2025-12-03"}));
    return t;
  };
  check(300);
  // A second run: the table exists now, and the sink appends to it.
  produce(300, 400);
  Runtime rt(kafka.bootstrap(), "create2");
  rt.add_definition("s.toml",
                    definition("deltacreate", topic, table, config, "batch_length = 100\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("deltacreate"), topic, 2, 200); }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rt.log().find("created the Delta table"), std::string::npos) << "created once";
  const auto t = check(400);
  EXPECT_EQ(t["txn"]["created-" + topic + "-0"], 200) << t["txn"].dump();
  EXPECT_EQ(t["txn"]["created-" + topic + "-1"], 200) << t["txn"].dump();
}

TEST(DeltaSinkKafka, PartitionByWithoutCreateTableIsAConfigurationError) {
  auto& kafka = Kafka::shared();
  const auto table = create_table("partition_by");
  const auto topic = unique_name("delta.partby");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap(), "partby");
  rt.add_definition("s.toml", definition("deltapartby", topic, table, "partition_by = [\"day\"]\n"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("deltapartby", "error", 60s)) << rt.log();
  const auto message = rt.sink_status("deltapartby").value("message", "");
  EXPECT_NE(message.find("partition_by: only used with create_table = true"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// The deltalake package's storage options for the tests' SeaweedFS (conditional PUT for its commits).
std::string seaweedfs_storage() {
  return " AWS_ENDPOINT_URL=" + SeaweedfsServer::shared().endpoint() +
         " AWS_ACCESS_KEY_ID=" + SeaweedfsServer::kAccessKey + " AWS_SECRET_ACCESS_KEY=" + SeaweedfsServer::kSecretKey +
         " AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true aws_conditional_put=etag";
}

// The sink's options for the tests' SeaweedFS credentials, its requests going to `endpoint`.
std::string s3_config(const std::string& endpoint) {
  return "s3_endpoint = \"" + endpoint + "\"\ns3_allow_http = true\ns3_access_key_id = \"" +
         SeaweedfsServer::kAccessKey + "\"\ns3_secret_access_key = \"" + SeaweedfsServer::kSecretKey + "\"\n";
}

TEST(DeltaSinkKafka, AnS3TableOnSeaweedfsGetsExactlyTheProducedRows) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("delta");
  const auto table = "s3://" + bucket + "/lake/orders";
  const auto storage = seaweedfs_storage();
  table_tool("create " + quote(table) + storage);
  const auto topic = unique_name("delta.s3");
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 1000, p * 1000 + 300), p);
  Runtime rt(kafka.bootstrap(), "s3");
  rt.add_definition(
      "s.toml", definition("deltas3", topic, table, "roll_records = 200\napp_id = \"s3\"\n" + s3_config(s3.endpoint()),
                           "batch_length = 90"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("deltas3"), topic, 2, 300); }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rt.log().find(SeaweedfsServer::kSecretKey), std::string::npos) << "the secret is never logged";
  const std::vector<std::string> app_ids = {"s3-" + topic + "-0", "s3-" + topic + "-1"};
  const auto t = read_table(table, app_ids, storage);
  const auto rows = rows_of(t, topic);
  ASSERT_EQ(rows.size(), 600u);
  for (int p = 0; p < 2; ++p)
    for (int64_t o = 0; o < 300; ++o) EXPECT_EQ(rows.at({p, o}), p * 1000 + o);
  EXPECT_EQ(t["txn"][app_ids[0]], 300);
  EXPECT_EQ(t["txn"][app_ids[1]], 300);
  EXPECT_FALSE(s3.objects(bucket, "lake/orders/_delta_log/").empty()) << "the log is in the bucket";
  EXPECT_NE(rt.log().find("refuses a second If-None-Match: * PUT of one key"), std::string::npos)
      << "SeaweedFS passes the check: " << rt.log();
}

// The kit's receiver in front of SeaweedFS plays a store that ignores If-None-Match: * — it
// answers every PUT of the sink's probe object with 200 and an ETag (as a store that wrote it
// would) without forwarding it — and forwards everything else. The sink stops in Error before it writes anything,
// naming the store, the risk and the opt-out; with s3_conditional_commits = false it writes, through the same receiver.
TEST(DeltaSinkKafka, AStoreThatIgnoresIfNoneMatchStopsTheSinkUnlessConditionalCommitsIsOff) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const auto bucket = s3.create_bucket("deltainm");
  const auto table = "s3://" + bucket + "/lake/orders";
  const auto storage = seaweedfs_storage();
  table_tool("create " + quote(table) + storage);
  kit::testing::HttpReceiver store;
  store.forward_to(s3.endpoint());
  const nlohmann::json ignores_if_none_match = {{"method", "PUT"},
                                                {"path_contains", "_picomq/conditional-write-probe"},
                                                {"status", 200},
                                                {"headers", {{"ETag", "\"5d41402abc4b2a76b9719d911017c592\""}}},
                                                {"count", 0}};
  store.script(ignores_if_none_match);
  const auto topic = unique_name("delta.inm");
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 1000, p * 1000 + 100), p);
  const std::string config = "app_id = \"inm\"\n" + s3_config(store.base_url());
  const auto group = group_of("deltainm");
  {
    Runtime rt(kafka.bootstrap(), "inm");
    rt.add_definition("s.toml", definition("deltainm", topic, table, config));
    rt.start();
    ASSERT_TRUE(rt.wait_state("deltainm", "error", 60s)) << rt.log();
    const auto message = rt.sink_status("deltainm").value("message", "");
    EXPECT_NE(message.find("ignores If-None-Match: * on PUT"), std::string::npos) << message;
    EXPECT_NE(message.find(table + " at " + store.base_url()), std::string::npos) << "names the store: " << message;
    EXPECT_NE(message.find("a killed run's commit that lands late would replace"), std::string::npos) << message;
    EXPECT_NE(message.find("set s3_conditional_commits = false"), std::string::npos) << message;
    rt.signal(SIGTERM);
    rt.wait_exit(30s);
  }
  for (int p = 0; p < 2; ++p) EXPECT_EQ(kafka.committed(group, topic, p), -1001) << "nothing committed";
  // Nothing written: the log holds the create alone, no data file (the probe went no further
  // than the receiver).
  std::vector<std::string> keys;
  for (const auto& o : s3.objects(bucket, "lake/orders/")) keys.push_back(o.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"lake/orders/_delta_log/00000000000000000000.json"}));
  std::vector<std::string> puts;
  for (const auto& r : store.requests())
    if (r.method == "PUT" || r.method == "POST") puts.push_back(r.method + " " + r.path);
  const std::string probe = "PUT /" + bucket + "/lake/orders/_picomq/conditional-write-probe";
  EXPECT_EQ(puts, (std::vector<std::string>{probe, probe})) << "the probe twice, then nothing";
  for (const auto& r : store.requests())
    if (r.method == "PUT") EXPECT_EQ(r.headers.get("If-None-Match").value_or(""), "*") << r.path;

  // The opt-out: not checked, a warning; the commits still carry If-None-Match: * (SeaweedFS
  // honours it behind the receiver).
  store.reset();
  store.forward_to(s3.endpoint());
  store.script(ignores_if_none_match);
  {
    Runtime rt(kafka.bootstrap(), "inm2");
    rt.add_definition("s.toml", definition("deltainm", topic, table, config + "s3_conditional_commits = false\n"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 100); }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_NE(rt.log().find("s3_conditional_commits = false: the store (" + table + " at " + store.base_url() +
                            ") is not checked"),
              std::string::npos)
        << rt.log();
  }
  size_t commits = 0;
  for (const auto& r : store.requests()) {
    EXPECT_EQ(r.path.find("_picomq/"), std::string::npos) << "no probe: " << r.path;
    if (r.method == "PUT" && r.path.find("/_delta_log/") != std::string::npos && r.path.ends_with(".json")) {
      ++commits;
      EXPECT_EQ(r.headers.get("If-None-Match").value_or(""), "*") << r.path;
    }
  }
  EXPECT_GE(commits, 1u);
  const std::vector<std::string> app_ids = {"inm-" + topic + "-0", "inm-" + topic + "-1"};
  const auto t = read_table(table, app_ids, storage);
  const auto rows = rows_of(t, topic);
  ASSERT_EQ(rows.size(), 200u);
  for (int p = 0; p < 2; ++p)
    for (int64_t o = 0; o < 100; ++o) EXPECT_EQ(rows.at({p, o}), p * 1000 + o);
  EXPECT_EQ(t["txn"][app_ids[0]], 100);
  EXPECT_EQ(t["txn"][app_ids[1]], 100);
}

}  // namespace
}  // namespace picomq::test
