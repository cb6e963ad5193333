// The Iceberg sink through a real Kafka broker and the runtime, into Iceberg tables of two real
// catalogs — SeaweedFS 4.48's REST catalog with data files on its S3, and a SQL catalog in SQLite
// with data files on the local filesystem — read back with two independent readers: pyiceberg
// through the same catalog and DuckDB's iceberg extension from the table's metadata file (iceberg_table.py, in
// tools/venv from scripts/setup.sh). Exactly the produced rows with the next offset of every partition in the snapshot
// summaries; partitioned tables get one file per partition value; SIGKILLs between the table commit and the offset
// commit leave no duplicate and no gap; a second writer's commits are survived; a missing table is a clear fatal error;
// a value the table cannot hold is a rejected record; schema evolution adds an optional column; a catalog that
// cannot be read is retried within the write and a SIGTERM ends that wait at once. Its own binary and
// broker (ctest iceberg_kafka).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness.h"
#include "iceberg_tool.h"
#include "picomq/kit/testing/http_stub.hpp"
#include "picomq/kit/testing/shell.hpp"
#include "seaweedfs_server.h"

namespace picomq::test {
namespace {

namespace fs = std::filesystem;
std::string quote(const std::string& s) { return kit::testing::shell_quote(s); }

using iceberg::json_lines;

// A test catalog, with the independent readers (iceberg_table.py) and the sink's [plugin_config]
// pointed at it. Two kinds, every test runs on both:
//  - "rest": SeaweedFS's REST catalog over one table bucket (the warehouse), data files on its S3,
//    reached with the server's test credentials (OAuth2 client credentials, SigV4);
//  - "sql": a SQL catalog in a SQLite file (pyiceberg's SqlCatalog creates the tables, the sink
//    uses iceberg-rust's), data files on the local filesystem.
class Lake {
 public:
  explicit Lake(std::string kind) : kind_(std::move(kind)) {
    if (sql()) {
      dir_ = fs::temp_directory_path() / ("picomq-iceberg-sql-" + std::to_string(getpid()));
      fs::remove_all(dir_);
      fs::create_directories(dir_ / "warehouse");
    } else {
      s3_ = &SeaweedfsServer::shared();
      bucket_ = "lake-" + std::to_string(getpid());
      tool("table-bucket", bucket_);
    }
  }
  ~Lake() {
    if (sql()) fs::remove_all(dir_);
  }
  static Lake& shared(const std::string& kind) {
    static std::map<std::string, std::unique_ptr<Lake>> lakes;
    auto& lake = lakes[kind];
    if (!lake) lake = std::make_unique<Lake>(kind);
    return *lake;
  }
  bool sql() const { return kind_ == "sql"; }
  std::string catalog_json() const {
    if (sql())
      return nlohmann::json{
          {"type", "sql"},
          {"uri", "sqlite:///" + (dir_ / "catalog.db").string()},  // SQLAlchemy: 4 slashes for an absolute path
          {"warehouse", "file://" + (dir_ / "warehouse").string()}}
          .dump();
    return nlohmann::json{{"uri", s3_->iceberg_endpoint()},
                          {"warehouse", "s3://" + bucket_},
                          {"credential", std::string(SeaweedfsServer::kAccessKey) + ":" + SeaweedfsServer::kSecretKey},
                          {"s3.endpoint", s3_->endpoint()},
                          {"s3.access-key-id", SeaweedfsServer::kAccessKey},
                          {"s3.secret-access-key", SeaweedfsServer::kSecretKey},
                          {"s3.region", "us-east-1"}}
        .dump();
  }
  std::string tool(const std::string& command, const std::string& name, const std::string& args = "") const {
    return iceberg::table_tool(catalog_json(), command + " " + quote(name) + args);
  }
  // The tests' table: the Arrow plane's metadata columns and two payload fields.
  void create(const std::string& table, const std::string& partition_json = "") const {
    const std::string schema =
        R"([["pico_topic","string",1],["pico_partition","int",1],["pico_offset","long",1],)"
        R"(["pico_timestamp","timestamptz",0],["pico_key","binary",0],["n","long",0],["s","string",0]])";
    tool("create", table, " " + quote(schema) + (partition_json.empty() ? "" : " " + quote(partition_json)));
  }
  std::vector<nlohmann::json> rows(const std::string& table) const { return json_lines(tool("rows", table)); }
  std::vector<nlohmann::json> duckdb_rows(const std::string& table) const {
    return json_lines(tool("duckdb-rows", table));
  }
  std::vector<nlohmann::json> snapshots(const std::string& table) const { return json_lines(tool("snapshots", table)); }
  std::vector<nlohmann::json> files(const std::string& table) const { return json_lines(tool("files", table)); }
  // The next offset of `topic`[p] in the newest snapshot summary of `app_id` that names it.
  int64_t committed(const std::string& table, const std::string& app_id, const std::string& topic, int p) const {
    for (const auto& s : snapshots(table)) {
      const auto& summary = s["summary"];
      const auto key = "picomq." + app_id + ".offsets";
      if (!summary.contains(key)) continue;
      const auto offsets = nlohmann::json::parse(summary[key].get<std::string>());
      if (offsets.contains(topic) && offsets[topic].contains(std::to_string(p)))
        return offsets[topic][std::to_string(p)];
    }
    return -1;
  }
  // [plugin_config] lines reaching the catalog (and S3).
  std::string plugin_config(const std::string& table, const std::string& extra = "") const {
    if (sql())
      return "catalog_type = \"sql\"\ncatalog_uri = \"sqlite://" + (dir_ / "catalog.db").string() +
             "\"\ncatalog_name = \"picomq-test\"\nwarehouse = \"file://" + (dir_ / "warehouse").string() +
             "\"\ntable = \"" + table + "\"\n" + extra;
    return "catalog_uri = \"" + s3_->iceberg_endpoint() + "\"\nwarehouse = \"s3://" + bucket_ +
           "\"\ncatalog_credential = \"" + SeaweedfsServer::kAccessKey + ":" + SeaweedfsServer::kSecretKey +
           "\"\ntable = \"" + table + "\"\ns3_endpoint = \"" + s3_->endpoint() +
           "\"\ns3_region = \"us-east-1\"\ns3_access_key_id = \"" + SeaweedfsServer::kAccessKey +
           "\"\ns3_secret_access_key = \"" + SeaweedfsServer::kSecretKey + "\"\n" + extra;
  }
  // Where the table's data files are: s3:// or file://.
  std::string data_scheme() const { return sql() ? "file://" : "s3://"; }

 private:
  std::string kind_;
  SeaweedfsServer* s3_ = nullptr;
  std::string bucket_;
  fs::path dir_;
};

// Every test on both catalogs; sink keys (consumer groups) carry the catalog's kind.
class IcebergSinkKafka : public ::testing::TestWithParam<std::string> {
 protected:
  Lake& lake() { return Lake::shared(GetParam()); }
  std::string key(const std::string& base) { return base + GetParam(); }
};

std::string definition(const std::string& key, const std::string& topic, const std::string& plugin_config,
                       const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_iceberg_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\n" + block_extra, plugin_config);
}

// (partition, offset) -> n of the rows of `topic`, failing on a row found twice.
std::map<std::pair<int, int64_t>, int64_t> rows_of(const std::vector<nlohmann::json>& rows, const std::string& topic) {
  std::map<std::pair<int, int64_t>, int64_t> out;
  for (const auto& r : rows) {
    if (r["pico_topic"] != topic) continue;
    const auto id = std::pair{r["pico_partition"].get<int>(), r["pico_offset"].get<int64_t>()};
    EXPECT_FALSE(out.count(id)) << "offset " << id.second << " of partition " << id.first << " twice";
    out[id] = r["n"].is_null() ? INT64_MIN : r["n"].get<int64_t>();
  }
  return out;
}

TEST_P(IcebergSinkKafka, AppendsExactlyTheProducedRowsWithTheOffsetsInTheSnapshotSummaries) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.orders");
  const std::string table = "picomq.rows";
  lake.create(table);
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
  rt.add_definition("s.toml", definition(key("icerows"), topic,
                                         lake.plugin_config(table, "commit_records = 100\napp_id = \"orders\"\n"),
                                         "batch_length = 70\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of(key("icerows")), topic, 2, 300); }, 90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rt.log().find(SeaweedfsServer::kSecretKey), std::string::npos) << "the secret is never logged";

  const auto rows = lake.rows(table);
  const auto by_offset = rows_of(rows, topic);
  ASSERT_EQ(by_offset.size(), 600u);
  std::map<std::pair<int, int64_t>, const ConsumedRecord*> by_id;
  for (const auto& c : produced) by_id[{c.partition, c.offset}] = &c;
  for (const auto& r : rows) {
    const auto& c = *by_id.at({r["pico_partition"].get<int>(), r["pico_offset"].get<int64_t>()});
    const auto v = nlohmann::json::parse(*c.value);
    EXPECT_EQ(r["n"], v["n"]);
    EXPECT_EQ(r["s"], v["s"]);
    EXPECT_EQ(r["pico_timestamp"].get<int64_t>(), c.timestamp_ms * 1000) << "pico_timestamp: the record's";
    EXPECT_EQ(r["pico_key"].is_null(), !c.key.has_value());
  }
  EXPECT_EQ(lake.duckdb_rows(table), rows) << "DuckDB reads the same rows";
  EXPECT_EQ(lake.committed(table, "orders", topic, 0), 300);
  EXPECT_EQ(lake.committed(table, "orders", topic, 1), 300);
  // Windows close at the batch that brings them to 100 records or more, the last at shutdown:
  // a few commits, not one per batch (9) nor one.
  const auto snapshots = lake.snapshots(table);
  EXPECT_GE(snapshots.size(), 3u);
  EXPECT_LE(snapshots.size(), 6u);
  for (const auto& s : snapshots) {
    EXPECT_EQ(s["operation"], "append");
    EXPECT_TRUE(s["summary"].contains("picomq.orders.commit-id")) << s.dump();
  }
}

TEST_P(IcebergSinkKafka, APartitionedTableGetsOneFilePerPartitionValueInEachCommit) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.parts");
  const std::string table = "picomq.parts";
  lake.create(table,
              R"([["pico_partition","identity"],["n","bucket[4]"],["s","truncate[2]"],["pico_timestamp","hour"]])");
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) {
    std::vector<std::string> values;
    values.reserve(200);
    for (int i = 0; i < 200; ++i)
      values.push_back("{\"n\": " + std::to_string(p * 1000 + i) + ", \"s\": \"" + (i % 2 ? "ab" : "cd") + "-x\"}");
    kafka.produce_values(topic, values, p);
  }
  Runtime rt(kafka.bootstrap(), "parts");
  rt.add_definition("s.toml", definition(key("iceparts"), topic,
                                         lake.plugin_config(table, "commit_records = 100000\napp_id = \"parts\"\n")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of(key("iceparts")), topic, 2, 200); }, 90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto rows = lake.rows(table);
  EXPECT_EQ(rows_of(rows, topic).size(), 400u);
  EXPECT_EQ(lake.duckdb_rows(table), rows);
  // Every file holds one partition value; values of one commit are not split over files.
  std::map<std::string, int> files_per_value;
  int64_t records = 0;
  for (const auto& f : lake.files(table)) {
    ++files_per_value[f["partition"].dump()];
    records += f["records"].get<int64_t>();
    EXPECT_EQ(f["format"], "PARQUET");
    EXPECT_EQ(f["path"].get<std::string>().rfind(lake.data_scheme(), 0), 0u) << f["path"] << ": the catalog's storage";
  }
  EXPECT_EQ(records, 400);
  // 2 Kafka partitions x 4 buckets x 2 truncated prefixes (x 2 hours, should the produce straddle one).
  EXPECT_GE(files_per_value.size(), 16u);
  EXPECT_LE(files_per_value.size(), 32u);
  const size_t commits = lake.snapshots(table).size();
  for (const auto& [value, n] : files_per_value) EXPECT_LE(size_t(n), commits) << value;
}

TEST_P(IcebergSinkKafka, SigkillBetweenTheTableCommitAndTheOffsetCommitLeavesNoDuplicateAndNoGap) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.kill");
  const std::string table = "picomq.kill";
  lake.create(table);
  kafka.create_topic(topic, 2);
  for (int p = 0; p < 2; ++p) kafka.produce_values(topic, json_values(p * 10000, p * 10000 + 1500), p);
  int in_the_window = 0;
  const std::string kill_block = "batch_length = 100\n" + static_member(key("icekill"));
  const auto config = lake.plugin_config(table, "commit_records = 250\napp_id = \"kill\"\n");
  for (int round = 0; round < 3; ++round) {
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(round));
    // The sink's test hook: hold the write open this long after its table commit, so the kill
    // lands after the table has the rows and before the runtime committed their offsets.
    rt.env("PICOMQ_ICEBERG_TEST_PAUSE_AFTER_COMMIT_MS", "4000");
    rt.add_definition("s.toml", definition(key("icekill"), topic, config, kill_block));
    const auto before = lake.snapshots(table).size();
    rt.start();
    ASSERT_TRUE(wait_until([&] { return lake.snapshots(table).size() > before; }, 60s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
    for (int p = 0; p < 2; ++p) {
      const int64_t in_table = lake.committed(table, "kill", topic, p);
      const int64_t committed = kafka.committed(group_of(key("icekill")), topic, p);
      if (in_table > std::max<int64_t>(committed, 0)) ++in_the_window;
    }
    rows_of(lake.rows(table), topic);  // fails on a duplicate
  }
  EXPECT_GE(in_the_window, 3) << "each kill left the table ahead of the committed offsets";

  Runtime rt(kafka.bootstrap(), "finish");
  rt.add_definition("s.toml", definition(key("icekill"), topic, config, kill_block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of(key("icekill")), topic, 2, 1500); }, 90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto all_rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), all_rows) << "DuckDB reads the same rows";
  const auto rows = rows_of(all_rows, topic);
  ASSERT_EQ(rows.size(), 3000u) << "no gap, no duplicate";
  for (int p = 0; p < 2; ++p)
    for (int64_t o = 0; o < 1500; ++o) EXPECT_EQ(rows.at({p, o}), p * 10000 + o);
  EXPECT_EQ(lake.committed(table, "kill", topic, 0), 1500);
  EXPECT_EQ(lake.committed(table, "kill", topic, 1), 1500);
}

// A run killed mid-window leaves data files that no snapshot references (the files the window
// rolled, never committed). The next run removes them at its first commit, and nothing else: not
// the files the snapshots reference, not another app id's, not another writer's.
TEST_P(IcebergSinkKafka, OrphanedDataFilesOfThisAppIdAreRemovedAtTheNextRunsFirstCommit) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.orphans");
  const std::string table = "picomq.orphans";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 100));
  const std::string uuid = "6f1c2a3b-0000-4000-8000-00000000abcd";
  const std::set<std::string> foreign = {"picomq-orphansother-" + uuid + "-00000.parquet",
                                         "00000-0-" + uuid + ".parquet"};
  for (const auto& f : foreign) lake.tool("put-file", table, " " + quote(f));
  auto stored = [&] {
    std::set<std::string> names;
    for (const auto& f : json_lines(lake.tool("data-files", table))) names.insert(f["name"].get<std::string>());
    return names;
  };
  auto referenced = [&] {
    std::set<std::string> names;
    for (const auto& f : lake.files(table)) {
      const auto path = f["path"].get<std::string>();
      names.insert(path.substr(path.rfind('/') + 1));
    }
    return names;
  };
  const std::string block = "batch_length = 20\npoll_interval = \"50ms\"";
  const std::string ours = "app_id = \"orphans\"\n";
  {
    Runtime rt(kafka.bootstrap(), "orphans-clean");
    rt.add_definition("s.toml", definition(key("iceorphans"), topic,
                                           lake.plugin_config(table, ours + "commit_records = 50\n"), block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key("iceorphans")), topic) == 100; }, 60s))
        << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  const auto before = referenced();
  ASSERT_FALSE(before.empty());
  const auto commits = lake.snapshots(table).size();
  kafka.produce_values(topic, json_values(100, 300));
  {
    // A window that is never committed (no idle flush), its files rolled after every batch.
    Runtime rt(kafka.bootstrap(), "orphans-killed");
    rt.add_definition("s.toml",
                      definition(key("iceorphans"), topic,
                                 lake.plugin_config(table, ours + "commit_records = 100000\ncommit_interval = \"1h\"\n"
                                                                  "target_file_size = 1\n"),
                                 "batch_length = 20\npoll_interval = \"60s\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return stored().size() >= before.size() + foreign.size() + 5; }, 60s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(10s);
  }
  const auto kept = referenced();
  std::set<std::string> orphans;
  for (const auto& n : stored())
    if (!kept.count(n) && n.rfind("picomq-orphans-", 0) == 0) orphans.insert(n);
  ASSERT_GE(orphans.size(), 4u);
  ASSERT_EQ(lake.snapshots(table).size(), commits) << "the killed run committed nothing";

  Runtime rt(kafka.bootstrap(), "orphans-next");
  rt.add_definition(
      "s.toml", definition(key("iceorphans"), topic,
                           lake.plugin_config(table, ours + "commit_records = 50\norphan_file_age = \"0s\"\n"), block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key("iceorphans")), topic) == 300; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_NE(rt.log().find("removed " + std::to_string(orphans.size()) + " orphaned data files of app id orphans"),
            std::string::npos)
      << rt.log();
  const auto now = stored();
  const auto live = referenced();
  for (const auto& o : orphans) EXPECT_FALSE(now.count(o)) << o << ": an orphan";
  for (const auto& k : kept) EXPECT_TRUE(now.count(k)) << k << ": referenced";
  for (const auto& f : foreign) EXPECT_TRUE(now.count(f)) << f << ": not this app id's";
  for (const auto& n : now) {
    if (n.rfind("picomq-orphans-", 0) == 0) {
      EXPECT_TRUE(live.count(n)) << n << ": of this app id, unreferenced";
    }
  }
  const auto all_rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), all_rows) << "DuckDB reads the same rows";
  const auto rows = rows_of(all_rows, topic);
  ASSERT_EQ(rows.size(), 300u);
  for (int64_t o = 0; o < 300; ++o) EXPECT_EQ(rows.at({0, o}), o);
}

TEST_P(IcebergSinkKafka, AReplayedGroupWritesNothingTwiceAndASecondWritersCommitsAreSurvived) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.replay");
  const std::string table = "picomq.replay";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 200));
  const auto config = lake.plugin_config(table, "commit_records = 50\napp_id = \"replay\"\n");
  for (const char* group : {"first", "second"}) {
    // The same app_id under another consumer group: the group starts at 0, the table says 200.
    Runtime rt(kafka.bootstrap(), group);
    rt.add_definition("s.toml", definition(key(std::string("icereplay") + group), topic, config,
                                           "batch_length = 25\npoll_interval = \"50ms\""));
    rt.start();
    if (std::string(group) == "first") {
      // A second writer (pyiceberg) appends between and during the sink's commits.
      for (int i = 0; i < 4; ++i)
        lake.tool("append", table,
                  " " + quote(R"([{"pico_topic":"second-writer","pico_partition":0,"pico_offset":)" +
                              std::to_string(i) + R"(,"pico_timestamp":null,"pico_key":null,"n":-1,"s":"other"}])"));
    }
    ASSERT_TRUE(
        wait_until([&] { return kafka.committed(group_of(key(std::string("icereplay") + group)), topic) == 200; }, 60s))
        << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  const auto rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), rows) << "DuckDB reads the same rows";
  const auto mine = rows_of(rows, topic);
  ASSERT_EQ(mine.size(), 200u);
  for (int64_t o = 0; o < 200; ++o) EXPECT_EQ(mine.at({0, o}), o);
  EXPECT_EQ(rows_of(rows, "second-writer").size(), 4u) << "the other writer's 4 commits are there too";
  EXPECT_EQ(lake.committed(table, "replay", topic, 0), 200);
}

TEST_P(IcebergSinkKafka, AValueTheTableCannotHoldIsARejectedRecord) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.reject");
  const auto dead = topic + ".dead";
  const std::string table = "picomq.reject";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 10);
  values[4] = "{\"n\": \"four\"}";  // n is a long column
  values[7] = "{\"extra\": 1}";     // not a column of the table
  kafka.produce_values(topic, values);
  Runtime rt(kafka.bootstrap(), "reject");
  rt.add_definition("s.toml", definition(key("icereject"), topic, lake.plugin_config(table),
                                         "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key("icereject")), topic) == 10; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::set<int64_t> offsets;
  const auto rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), rows) << "DuckDB reads the same rows";
  for (const auto& [id, n] : rows_of(rows, topic)) offsets.insert(id.second);
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

TEST_P(IcebergSinkKafka, SchemaEvolutionAddsANewFieldAsAnOptionalColumn) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.evolve");
  const std::string table = "picomq.evolve";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, {"{\"n\": 1}", "{\"n\": 2, \"color\": \"red\"}", "{\"n\": 3}"});
  Runtime rt(kafka.bootstrap(), "evolve");
  rt.add_definition("s.toml",
                    definition(key("iceevolve"), topic, lake.plugin_config(table, "schema_evolution = true\n")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key("iceevolve")), topic) == 3; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::map<int64_t, std::string> color;
  const auto rows = lake.rows(table);
  for (const auto& r : rows)
    color[r["n"].get<int64_t>()] = r.value("color", nlohmann::json("absent")).is_null()
                                       ? "null"
                                       : r.value("color", nlohmann::json("absent")).get<std::string>();
  EXPECT_EQ(color, (std::map<int64_t, std::string>{{1, "null"}, {2, "red"}, {3, "null"}}));
  EXPECT_EQ(lake.duckdb_rows(table), rows);
}

TEST_P(IcebergSinkKafka, AMissingTableIsAClearFatalError) {
  auto& kafka = Kafka::shared();
  auto& lake = this->lake();
  const auto topic = unique_name("ice.missing");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 3));
  Runtime rt(kafka.bootstrap(), "missing");
  rt.add_definition("s.toml", definition(key("icemissing"), topic, lake.plugin_config("picomq.no_such_table")));
  rt.start();
  ASSERT_TRUE(rt.wait_state(key("icemissing"), "error", 60s)) << rt.log();
  const auto message = rt.sink_status(key("icemissing")).value("message", "");
  EXPECT_NE(message.find("table picomq.no_such_table does not exist"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed(group_of(key("icemissing")), topic), -1001) << "nothing committed";
}

// The REST catalog behind the kit's recording proxy (http_receiver.py): the first commit reaches
// the catalog and its answer is replaced by a 502 (iceberg-rust: "the commit state is unknown"),
// the second is answered 502 without reaching it. The sink finds the first in the table by its
// commit id (not appended twice) and re-sends the second (not lost).
TEST(IcebergSinkRestCatalog, ACommitWhoseAnswerIsLostIsFoundByItsCommitIdAndOneThatFailedIsMadeAgain) {
  auto& kafka = Kafka::shared();
  auto& lake = Lake::shared("rest");
  auto& s3 = SeaweedfsServer::shared();
  kit::testing::HttpReceiver proxy;
  proxy.forward_to(s3.iceberg_endpoint());
  const std::string commit = "\"add-snapshot\"";  // in a commit's updates only
  proxy.script(
      nlohmann::json::array({{{"method", "POST"}, {"when_body_contains", commit}, {"forward", true}, {"status", 502}},
                             {{"method", "POST"}, {"when_body_contains", commit}, {"status", 502}}}));
  const auto topic = unique_name("ice.lost");
  const std::string table = "picomq.lost";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 300));
  auto config = lake.plugin_config(table, "commit_records = 100\napp_id = \"lost\"\n");
  const std::string direct = "catalog_uri = \"" + s3.iceberg_endpoint() + "\"";
  ASSERT_NE(config.find(direct), std::string::npos);
  config.replace(config.find(direct), direct.size(), "catalog_uri = \"" + proxy.base_url() + "\"");
  Runtime rt(kafka.bootstrap(), "lost");
  rt.add_definition("s.toml", definition("icelost", topic, config, "batch_length = 50\npoll_interval = \"100ms\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("icelost"), topic) == 300; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();

  std::vector<std::string> answers;
  for (const auto& r : proxy.requests())
    if (r.method == "POST" && r.body.find(commit) != std::string::npos) answers.push_back(r.answer.dump());
  ASSERT_GE(answers.size(), 3u) << "the two 502s and at least one commit after them";
  EXPECT_EQ(answers[0], "502");
  EXPECT_EQ(answers[1], "502");
  EXPECT_EQ(answers[2], "200");
  EXPECT_NE(rt.log().find("the commit whose answer was lost"), std::string::npos) << rt.log();
  const auto all_rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), all_rows) << "DuckDB reads the same rows";
  const auto rows = rows_of(all_rows, topic);  // fails on a duplicate
  ASSERT_EQ(rows.size(), 300u) << "no gap\n" << rt.log();
  for (int64_t o = 0; o < 300; ++o) EXPECT_EQ(rows.at({0, o}), o);
  EXPECT_EQ(lake.committed(table, "lost", topic, 0), 300);
  // The 502-without-commit made no snapshot: as many snapshots as commits that got through.
  EXPECT_EQ(lake.snapshots(table).size(), answers.size() - 1)
      << "the lost answer's commit is one snapshot, the refused one none";
}

// A killed run's commit that the catalog applies late, between the live run's read of the offsets
// and its commit: the proxy holds both commit requests, then forwards the killed run's (its client
// gone: applied late) and the live run's. The live commit asserted the snapshot it read its
// offsets from, so it is refused rather than appended on the late one, the offsets are read again,
// and the part of its window the late commit holds is not written twice. Windows of 100 records
// in the killed run and 150 in the live one: they overlap in part.
TEST(IcebergSinkRestCatalog, AKilledRunsCommitLandingBetweenTheLiveRunsReadAndCommitIsNotAppendedOn) {
  auto& kafka = Kafka::shared();
  auto& lake = Lake::shared("rest");
  auto& s3 = SeaweedfsServer::shared();
  kit::testing::HttpReceiver proxy;
  proxy.forward_to(s3.iceberg_endpoint());
  proxy.script(
      nlohmann::json{{"method", "POST"}, {"when_body_contains", "\"add-snapshot\""}, {"action", "hold"}, {"count", 2}});
  const auto topic = unique_name("ice.late");
  const std::string table = "picomq.late";
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 300));
  auto through_proxy = [&](const std::string& extra) {
    auto config = lake.plugin_config(table, extra + "app_id = \"late\"\n");
    const std::string direct = "catalog_uri = \"" + s3.iceberg_endpoint() + "\"";
    config.replace(config.find(direct), direct.size(), "catalog_uri = \"" + proxy.base_url() + "\"");
    return definition("icelate", topic, config, "batch_length = 50\npoll_interval = \"100ms\"");
  };
  {
    Runtime killed(kafka.bootstrap(), "late-killed");
    killed.add_definition("s.toml", through_proxy("commit_records = 100\n"));
    killed.start();
    ASSERT_TRUE(wait_until([&] { return proxy.held().size() == 1; }, 60s)) << killed.log();
    killed.kill_hard();
    killed.wait_exit(10s);
  }
  ASSERT_TRUE(lake.snapshots(table).empty()) << "the killed run's commit has not reached the catalog";

  Runtime rt(kafka.bootstrap(), "late-live");
  rt.add_definition("s.toml", through_proxy("commit_records = 150\n"));
  rt.start();
  // The live run read the offsets (none) and sent its first commit: the proxy holds it.
  ASSERT_TRUE(wait_until([&] { return proxy.held().size() == 2; }, 60s)) << rt.log();
  const auto held = proxy.held();
  EXPECT_TRUE(held[0].client_gone) << "the killed run's request";
  EXPECT_EQ(proxy.release({held[0].id}).at(held[0].id), 200) << "the killed run's commit lands late";
  EXPECT_EQ(lake.committed(table, "late", topic, 0), 100);
  EXPECT_EQ(proxy.release({held[1].id}).at(held[1].id), 409) << "the live commit asserted the snapshot it read";
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("icelate"), topic) == 300; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();

  EXPECT_NE(rt.log().find("another commit of app id late"), std::string::npos) << rt.log();
  EXPECT_NE(rt.log().find("are in picomq.late already"), std::string::npos) << "the skipped replay is logged\n"
                                                                            << rt.log();
  const auto all_rows = lake.rows(table);
  EXPECT_EQ(lake.duckdb_rows(table), all_rows) << "DuckDB reads the same rows";
  EXPECT_EQ(all_rows.size(), 300u) << "nothing doubled";
  const auto rows = rows_of(all_rows, topic);  // fails on a duplicate
  ASSERT_EQ(rows.size(), 300u) << "nothing lost\n" << rt.log();
  for (int64_t o = 0; o < 300; ++o) EXPECT_EQ(rows.at({0, o}), o);
  EXPECT_EQ(lake.committed(table, "late", topic, 0), 300);
  EXPECT_EQ(kafka.committed(group_of("icelate"), topic), 300);
}

// The REST catalog behind the recording proxy, its table reads answered 503: a table read is sent
// again within the write (a catalog restarting is ridden out, ~10 s), and a SIGTERM during that
// wait ends it at once (ABI 2.6 stop() through the Rust SDK's Stop): the runtime exits in about a
// second, nothing committed, no Error; with the catalog back, the next start writes every row once.
// A catalog that refuses three reads costs no failed attempt.
TEST(IcebergSinkRestCatalog, ACatalogThatCannotBeReadIsRetriedWithinTheWriteAndASigtermEndsTheWait) {
  auto& kafka = Kafka::shared();
  auto& lake = Lake::shared("rest");
  auto& s3 = SeaweedfsServer::shared();
  kit::testing::HttpReceiver proxy;
  proxy.forward_to(s3.iceberg_endpoint());
  const std::string table = "picomq.unreadable";
  const std::string table_path = "/tables/unreadable";
  proxy.script(nlohmann::json::array(
      {{{"method", "GET"}, {"path_contains", table_path}, {"status", 503}, {"count", 0}}}));  // count 0: always
  const auto topic = unique_name("ice.unreadable");
  lake.create(table);
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 20));
  auto config = lake.plugin_config(table, "app_id = \"unreadable\"\n");
  const std::string direct = "catalog_uri = \"" + s3.iceberg_endpoint() + "\"";
  ASSERT_NE(config.find(direct), std::string::npos);
  config.replace(config.find(direct), direct.size(), "catalog_uri = \"" + proxy.base_url() + "\"");
  auto table_reads = [&] {
    size_t n = 0;
    for (const auto& r : proxy.requests())
      if (r.method == "GET" && r.path.find(table_path) != std::string::npos) ++n;
    return n;
  };
  {
    Runtime rt(kafka.bootstrap(), "unreadable");
    rt.add_definition("s.toml", definition("iceunreadable", topic, config));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return table_reads() >= 3; }, 60s)) << rt.log();
    EXPECT_EQ(rt.log().find("(attempt 1/5)"), std::string::npos) << "still inside the first attempt\n" << rt.log();
    const auto stopping = std::chrono::steady_clock::now();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    const auto took = std::chrono::steady_clock::now() - stopping;
    EXPECT_LT(took, 4s) << "the catalog wait ended at the stop (it had ~8 s left)\n" << rt.log();
    EXPECT_EQ(kafka.committed(group_of("iceunreadable"), topic), -1001) << "nothing committed";
  }
  // Three more refusals, then the catalog answers: one attempt, every row once.
  proxy.reset();  // the rules and the requests recorded
  proxy.forward_to(s3.iceberg_endpoint());
  proxy.script(
      nlohmann::json::array({{{"method", "GET"}, {"path_contains", table_path}, {"status", 503}, {"count", 3}}}));
  Runtime rt(kafka.bootstrap(), "readable");
  rt.add_definition("s.toml", definition("iceunreadable", topic, config));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("iceunreadable"), topic) == 20; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_GE(table_reads(), 4u) << "three refused reads and the one answered";
  EXPECT_EQ(rt.log().find("(attempt 1/5)"), std::string::npos) << "no failed attempt\n" << rt.log();
  const auto rows = rows_of(lake.rows(table), topic);
  ASSERT_EQ(rows.size(), 20u) << rt.log();
  for (int64_t o = 0; o < 20; ++o) EXPECT_EQ(rows.at({0, o}), o);
}

INSTANTIATE_TEST_SUITE_P(Catalogs, IcebergSinkKafka, ::testing::Values("rest", "sql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace picomq::test
