// The Redshift sink through a real Kafka broker and the runtime, against PostgreSQL 15 as the
// SQL stand-in (dialect = "postgres_shim": the sink's shim does COPY ... FROM 's3://...' MANIFEST
// as manifest + files from S3 + COPY FROM STDIN; BEGIN, CREATE TEMP TABLE (LIKE), MERGE, the
// offsets row and COMMIT run on PostgreSQL as written) and SeaweedFS as the stage, read back
// with SQL, S3 listings and the broker's committed offsets. One of each server for the binary:
//   - records of two partitions land once; a SIGKILL mid-load and a restart leave exactly the
//     produced rows; the offsets table covers every offset once; no staged file is left;
//   - a second sink loading the same topic into the same table merges to the same rows;
//   - merge_key = "key": one row per key, the latest record's;
//   - a row the database refuses (COPY stops at its line) goes through each bad-record policy;
//   - the database down for a while: retried, nothing lost or doubled;
//   - a database role or S3 credentials refused: fatal, with a clear message and no secret.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>
#include <set>
#include <thread>

#include "harness.h"
#include "picomq/kit/compression.hpp"
#include "picomq/kit/record_id.hpp"
#include "postgres.h"
#include "seaweedfs_server.h"

namespace picomq::test {
namespace {

using namespace std::chrono_literals;

struct Stage {
  std::string bucket;
  std::string config() const { return SeaweedfsServer::shared().plugin_config(bucket); }
};

std::string definition(const std::string& key, const std::string& topic, const std::string& db,
                       const std::string& bucket, const std::string& extra = "", const std::string& block_extra = "") {
  auto& s3 = SeaweedfsServer::shared();
  return plugin_definition(key, "libpicomq_connector_redshift_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
                           "connection_string = \"" + Postgres::shared().conninfo(db) +
                               "\"\ntarget_table = \"public.orders\"\n"
                               "dialect = \"postgres_shim\"\ns3_bucket = \"" +
                               bucket + "\"\ns3_endpoint = \"" + s3.endpoint() + "\"\naws_access_key_id = \"" +
                               SeaweedfsServer::kAccessKey + "\"\naws_secret_access_key = \"" +
                               SeaweedfsServer::kSecretKey + "\"\nretry_timeout = \"3s\"\n" + extra);
}

int64_t count_rows(const std::string& db) {
  auto rows = Postgres::shared().query("SELECT count(*) FROM orders", db);
  return std::stoll(*rows[0][0]);
}
std::pair<int64_t, int64_t> rows_and_distinct(const std::string& db) {
  auto rows =
      Postgres::shared().query("SELECT count(*), count(DISTINCT (pico_partition, pico_offset)) FROM orders", db);
  return {std::stoll(*rows[0][0]), std::stoll(*rows[0][1])};
}

std::vector<ProducedRecord> two_partitions(int per_partition) {
  std::vector<ProducedRecord> records;
  for (int p = 0; p < 2; ++p)
    for (int n = 0; n < per_partition; ++n)
      records.push_back({"{\"n\": " + std::to_string(n) + "}", std::nullopt, {}, p});
  return records;
}

TEST(RedshiftKafka, RecordsLandOnceAndASigkillReplayMergesToTheSameRows) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_kill");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-kill");
  const auto topic = unique_name("rs.orders");
  kafka.create_topic(topic, 2);
  const int per = 1500;
  kafka.produce(topic, two_partitions(per));
  const std::string def = definition("rkill", topic, db, bucket, "", "batch_length = 250\n" + static_member("rkill"));
  {
    Runtime rt(kafka.bootstrap(), "kill");
    rt.add_definition("c.toml", def);
    rt.start();
    ASSERT_TRUE(wait_until(
        [&] {
          try {
            return count_rows(db) > 0;
          } catch (...) {
            return false;
          }
        },
        60s))
        << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    std::cout << "[          ] killed with " << count_rows(db) << " rows, "
              << committed_sum(kafka, group_of("rkill"), topic, 2) << " offsets committed\n";
  }
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", def);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("rkill"), topic, 2) == 2 * per; }, 90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rows_and_distinct(db), (std::pair<int64_t, int64_t>{2 * per, 2 * per})) << "exactly the produced rows";
  auto sum = pg.query("SELECT sum((payload::json->>'n')::bigint) FROM orders", db);
  EXPECT_EQ(std::stoll(*sum[0][0]), 2 * int64_t{per} * (per - 1) / 2);
  // The offsets table: every offset of each partition in exactly one loaded range.
  auto ranges = pg.query(
      "SELECT partition, sum(last_offset - first_offset + 1), min(first_offset), max(last_offset) "
      "FROM picomq_offsets GROUP BY partition ORDER BY partition",
      db);
  ASSERT_EQ(ranges.size(), 2u);
  for (const auto& r : ranges) {
    EXPECT_EQ(*r[1], std::to_string(per)) << "no range loaded twice";
    EXPECT_EQ(*r[2], "0");
    EXPECT_EQ(*r[3], std::to_string(per - 1));
  }
  EXPECT_TRUE(SeaweedfsServer::shared().objects(bucket).empty()) << "staged files are deleted after their commit";
}

// A crash leaves staged files behind (between a load's COMMIT and their deletion, or before the
// COMMIT): each load stages under keys of its own, so no later load reads them, and the next run
// deletes every staged file of a partition when it first loads it.
TEST(RedshiftKafka, StagedFilesLeftByACrashAfterTheCommitAreDeletedByTheNextRun) {
  auto& kafka = Kafka::shared();
  auto& s3 = SeaweedfsServer::shared();
  const std::string db = Postgres::shared().create_database("rs_leftover");
  const std::string bucket = s3.create_bucket("rs-leftover");
  const auto topic = unique_name("rs.left");
  kafka.create_topic(topic, 1);
  std::vector<ProducedRecord> first;
  first.reserve(50);
  for (int n = 0; n < 50; ++n) first.push_back({"{\"n\": " + std::to_string(n) + "}", std::nullopt, {}, 0});
  kafka.produce(topic, first);
  const std::string def = definition("rleft", topic, db, bucket);
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml", def);
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rleft"), topic) == 50; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  ASSERT_TRUE(s3.objects(bucket).empty());
  // What a crash after the COMMIT of 0..49 leaves, and a file of records not loaded yet (a
  // killed run's, landed late: under keys of its load's own, which no later load's manifest names).
  const std::string prefix = "picomq-staging/rleft/" + kit::url_safe(topic) + "/0/";
  s3.put_object(bucket, prefix + "0-49.0123456789abcdef.csv.gz",
                kit::compress(kit::Compression::Gzip, "loaded already\n"));
  s3.put_object(bucket, prefix + "0-49.0123456789abcdef.manifest", "{}");
  s3.put_object(bucket, prefix + "50-99.fedcba9876543210.csv.gz",
                kit::compress(kit::Compression::Gzip, "not loaded yet\n"));
  std::vector<ProducedRecord> more;
  for (int n = 50; n < 60; ++n) more.push_back({"{\"n\": " + std::to_string(n) + "}", std::nullopt, {}, 0});
  kafka.produce(topic, more);
  Runtime rt(kafka.bootstrap(), "second");
  rt.add_definition("c.toml", def);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rleft"), topic) == 60; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::set<std::string> keys;
  for (const auto& o : s3.objects(bucket)) keys.insert(o.key);
  EXPECT_TRUE(keys.empty())
      << "the loaded range's files went, and the other one too: no later load reads a file staged before it";
  EXPECT_EQ(count_rows(db), 60);
}

TEST(RedshiftKafka, AnotherSinkLoadingTheSameRecordsMergesToTheSameRows) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_merge");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-merge");
  const auto topic = unique_name("rs.merge");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 300));
  for (const std::string key : {"rmerge1", "rmerge2"}) {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("c.toml", definition(key, topic, db, bucket, "", "batch_length = 70"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 300; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_EQ(rows_and_distinct(db), (std::pair<int64_t, int64_t>{300, 300})) << key << ": the same 300 rows, merged";
  }
  auto sinks =
      pg.query("SELECT sink, sum(last_offset - first_offset + 1) FROM picomq_offsets GROUP BY sink ORDER BY sink", db);
  ASSERT_EQ(sinks.size(), 2u);
  EXPECT_EQ(*sinks[0][1], "300");
  EXPECT_EQ(*sinks[1][1], "300");
}

TEST(RedshiftKafka, MergeOnTheKeyKeepsTheLatestRecordOfEachKey) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_key");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-key");
  const auto topic = unique_name("rs.key");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 10; ++k)
      records.push_back({"{\"k\": " + std::to_string(k) + ", \"round\": " + std::to_string(round) + "}",
                         "key-" + std::to_string(k),
                         {},
                         0});
  kafka.produce(topic, records);
  Runtime rt(kafka.bootstrap());
  // A password with a quote, a backslash and a space: given to libpq as a parameter, it needs no
  // quoting (the test server trusts every login, so any password connects).
  rt.add_definition(
      "c.toml", definition("rkey", topic, db, bucket, "merge_key = \"key\"\npassword = \"it's a \\\\ \\\"pass\\\"\"",
                           "batch_length = 7"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rkey"), topic) == 30; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  auto rows = pg.query(
      "SELECT count(*), count(DISTINCT pico_id), min((payload::json->>'round')::int), max(pico_offset) - "
      "min(pico_offset) FROM orders",
      db);
  EXPECT_EQ(*rows[0][0], "10") << "one row per key";
  EXPECT_EQ(*rows[0][1], "10");
  EXPECT_EQ(*rows[0][2], "2") << "each key holds its latest record (batches of 7 cut the rounds anywhere)";
  EXPECT_EQ(*rows[0][3], "9") << "offsets 20..29";
}

class RedshiftBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(RedshiftBadRecords, ARowTheDatabaseRefusesGoesThroughThePolicyAndTheRestIsLoaded) {
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_bad");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-bad");
  // The table made by the user, its payload column narrower than the sink's default.
  pg.exec(
      "CREATE TABLE orders (pico_id VARCHAR(1024) PRIMARY KEY, pico_topic VARCHAR(512) NOT NULL, pico_partition "
      "INTEGER NOT NULL, "
      "pico_offset BIGINT NOT NULL, pico_timestamp BIGINT, pico_key VARCHAR(65535), pico_headers VARCHAR(65535), "
      "payload VARCHAR(40))",
      db);
  const auto topic = unique_name("rs.bad"), dead = unique_name("rs.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": 17, "note": "far too long for a forty-byte payload column"})";
  kafka.produce_values(topic, values);
  const std::string key = "rbad" + policy;
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, bucket, "", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("too long"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17);
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    EXPECT_EQ(rows_and_distinct(db), (std::pair<int64_t, int64_t>{49, 49}));
    EXPECT_TRUE(pg.query("SELECT 1 FROM orders WHERE pico_offset = 17", db).empty());
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]);
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("too long"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, RedshiftBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

TEST(RedshiftKafka, RefusedCredentialsAreFatalWithAClearMessageAndCommitNothing) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_auth");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-auth");
  const auto topic = unique_name("rs.auth");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  // A database role that does not exist: fatal at open, the server's reason in the Error.
  std::string def = definition("rauthdb", topic, db, bucket);
  const std::string user = "user=postgres";
  def.replace(def.find(user), user.size(), "user=no_such_role");
  {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("c.toml", def);
    rt.start();
    ASSERT_TRUE(rt.wait_state("rauthdb", "error", 60s)) << rt.log();
    const std::string message = rt.sink_status("rauthdb").value("message", "");
    EXPECT_NE(message.find("no_such_role"), std::string::npos) << message;
  }
  // S3 refusing the staging credentials: fatal, naming what to check; the secret never shown.
  def = definition("raut3", topic, db, bucket);
  const std::string secret = std::string("aws_secret_access_key = \"") + SeaweedfsServer::kSecretKey + "\"";
  def.replace(def.find(secret), secret.size(), "aws_secret_access_key = \"wrong-secret-value\"");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", def);
  rt.start();
  ASSERT_TRUE(rt.wait_state("raut3", "error", 60s)) << rt.log();
  const std::string message = rt.sink_status("raut3").value("message", "");
  EXPECT_NE(message.find("check aws_access_key_id / aws_secret_access_key"), std::string::npos) << message;
  EXPECT_EQ(rt.log().find("wrong-secret-value"), std::string::npos) << "secrets are never logged";
  EXPECT_LT(kafka.committed(group_of("raut3"), topic), 0);
  EXPECT_EQ(count_rows(db), 0);
}

TEST(RedshiftKafka, TheDatabaseDownForAWhileIsRetriedWithNothingLostOrDoubled) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_outage");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-outage");
  const auto topic = unique_name("rs.outage");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 200));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("routage", topic, db, bucket, "", "batch_length = 50"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("routage"), topic) == 200; }, 60s)) << rt.log();
  pg.stop();
  kafka.produce_values(topic, json_values(200, 400));
  std::this_thread::sleep_for(scaled(3s));
  EXPECT_EQ(kafka.committed(group_of("routage"), topic), 200) << "nothing committed while the database is down";
  pg.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("routage"), topic) == 400; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rows_and_distinct(db), (std::pair<int64_t, int64_t>{400, 400}));
}

// Change events (docs/changes.md): Debezium envelopes keyed by the row's key; pico_id is the key,
// upserts merge, a delete (and its tombstone) removes the row, a truncate empties the topic's rows
// in the load's transaction; merge_key other than "key" is refused at --check.
TEST(RedshiftKafka, DebeziumChangesUpsertDeleteAndTruncateByTheRowsKey) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("rs_changes");
  const std::string bucket = SeaweedfsServer::shared().create_bucket("rs-changes");
  const auto topic = unique_name("rs.changes");
  kafka.create_topic(topic);
  auto change = [](int id, const std::string& op, const std::string& name) -> ProducedRecord {
    const std::string row = "{\"id\": " + std::to_string(id) + ", \"name\": \"" + name + "\"}";
    const bool erase = op == "d";
    return {"{\"before\": " + (erase ? row : std::string("null")) + ", \"after\": " + (erase ? "null" : row) +
                ", \"op\": \"" + op + "\"}",
            "{\"id\": " + std::to_string(id) + "}",
            {},
            0};
  };
  ProducedRecord tombstone{"", "{\"id\": 2}", {}, 0, true};
  kafka.produce(topic, {change(1, "c", "a"), change(2, "c", "b"), change(3, "c", "c"), change(1, "u", "a2"),
                        change(2, "d", ""), tombstone, change(5, "d", "")});
  const std::string block = "changes = \"debezium\"\nbatch_length = 3\n";
  {
    Runtime refused(kafka.bootstrap());
    refused.add_definition("c.toml", definition("rchg0", topic, db, bucket, "", block));
    auto [code, out] = refused.check();
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("set merge_key = \"key\""), std::string::npos) << out;
  }
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("rchg", topic, db, bucket, "merge_key = \"key\"", block));
  rt.start();
  auto rows = [&] {
    std::string out;
    for (const auto& r : pg.query("SELECT pico_id, payload::json->>'name' FROM orders ORDER BY pico_id", db))
      out += *r[0] + "=" + r[1].value_or("NULL") + ";";
    return out;
  };
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rchg"), topic) == 7; }, 60s)) << rt.log();
  EXPECT_EQ(rows(), R"({"id":1}=a2;{"id":3}=c;)") << "1 updated, 2 deleted (then its tombstone), 5 never there";
  // A truncate between changes: what came before it goes, what comes after stays.
  kafka.produce(topic, {change(4, "c", "d"),
                        {"{\"before\": null, \"after\": null, \"op\": \"t\"}", std::nullopt, {}, 0},
                        change(3, "u", "c2"),
                        change(6, "c", "f")});
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("rchg"), topic) == 11; }, 60s)) << rt.log();
  EXPECT_EQ(rows(), R"({"id":3}=c2;{"id":6}=f;)");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

}  // namespace
}  // namespace picomq::test
