// The PostgreSQL sink through a real Kafka broker and a real PostgreSQL 15 server: what lands in
// the table per mode, replays, hostile names and values, a missing table, a server outage, upsert,
// columns mode (declared, inferred, auto_add_columns, type conflicts), SIGKILL replays.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <random>
#include <regex>
#include <thread>

#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

using Rows = std::vector<Postgres::Row>;

// postgres_definition (postgres.h) with this file's block: `schema`, a 200 ms poll, block_extra.
std::string pg_definition(const std::string& key, const std::string& topics, const std::string& db,
                          const std::string& plugin_config, const std::string& schema = "json",
                          const std::string& block_extra = "") {
  return postgres_definition(key, topics, db, "schema = \"" + schema + "\"\npoll_interval = \"200ms\"\n" + block_extra,
                             plugin_config);
}

// Runs a runtime with one postgres definition until `group` has committed `count` on `topic`.
void run_until_committed(const std::string& key, const std::string& topic, const std::string& db,
                         const std::string& config, int64_t count, const std::string& block_extra = "") {
  auto& kafka = Kafka::shared();
  Runtime rt(kafka.bootstrap(), key);
  rt.add_definition("pg.toml", pg_definition(key, "\"" + topic + "\"", db, config, "json", block_extra));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == count; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state(key), "running") << rt.log();
  EXPECT_EQ(rt.log().find("dbname"), std::string::npos) << "the connection string is never logged";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(PostgresSink, JsonbInsertWithMetadataIntoATemplatedAutoCreatedTable) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgsink");
  const auto topic = unique_name("x") + ".orders.eu";
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.push_back({R"({"id": 1, "amount": 2.5})", std::string("k1"), {{"trace", "abc-é"}}});
  records.push_back({R"({"id": 2, "tags": ["a", "b"]})", std::nullopt, {}});
  records.push_back({R"([1, 2, 3])", std::string("\x00\xff", 2), {{"bin", std::string("\xff\xfe", 2)}}});
  records.push_back({"", std::string("gone"), {}, -1, /*null_value=*/true});
  records.push_back({R"("just a string")", std::nullopt, {}});
  kafka.produce(topic, records);

  run_until_committed("pgjsonb", topic, db, "target_table = \"orders_{topic_segment[-1]}\"", 5);

  EXPECT_EQ(pg.query("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                     "WHERE table_schema = 'public' AND table_name = 'orders_eu' ORDER BY ordinal_position",
                     db),
            (Rows{{"pico_id", "text", "NO"},
                  {"pico_topic", "text", "NO"},
                  {"pico_partition", "integer", "NO"},
                  {"pico_offset", "bigint", "NO"},
                  {"pico_timestamp", "timestamp with time zone", "YES"},
                  {"pico_key", "bytea", "YES"},
                  {"pico_headers", "jsonb", "NO"},
                  {"payload", "jsonb", "YES"}}));
  const auto rows = pg.query(
      "SELECT pico_id, pico_topic, pico_partition::text, pico_offset::text, "
      "(extract(epoch FROM pico_timestamp) > 1700000000)::text, encode(pico_key, 'hex'), pico_headers::text, "
      "payload::text FROM orders_eu ORDER BY pico_offset",
      db);
  ASSERT_EQ(rows.size(), 5u);
  const Rows expected = {
      {topic + ":0:0", topic, "0", "0", "true", "6b31", R"({"trace": "abc-é"})", R"({"id": 1, "amount": 2.5})"},
      {topic + ":0:1", topic, "0", "1", "true", std::nullopt, "{}", R"({"id": 2, "tags": ["a", "b"]})"},
      {topic + ":0:2", topic, "0", "2", "true", "00ff", R"({"bin": "//4="})", "[1, 2, 3]"},
      {topic + ":0:3", topic, "0", "3", "true", "676f6e65", "{}", std::nullopt},
      {topic + ":0:4", topic, "0", "4", "true", std::nullopt, "{}", R"("just a string")"},
  };
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(pg.query("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                     "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'orders_eu'::regclass AND i.indisprimary",
                     db),
            (Rows{{"pico_id"}}));
}

// A header name that occurs more than once keeps all its values: pico_headers->'a' is an array
// (a jsonb object with a repeated key would keep only the last value).
TEST(PostgresSink, RepeatedHeaderNamesLandAsAnArrayInPicoHeaders) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgdupheaders");
  const auto topic = unique_name("dupheaders");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.push_back({R"({"id": 1})", std::nullopt, {{"a", "1"}, {"b", "x"}, {"a", "2"}}});
  records.push_back({R"({"id": 2})", std::nullopt, {{"a", "only"}}});
  kafka.produce(topic, records);

  run_until_committed("pgdupheaders", topic, db, "target_table = \"t\"", 2);
  EXPECT_EQ(pg.query("SELECT pico_headers->'a' = '[\"1\", \"2\"]'::jsonb, pico_headers->>'b', "
                     "jsonb_typeof(pico_headers->'a') FROM t WHERE pico_offset = 0",
                     db),
            (Rows{{"t", "x", "array"}}));
  EXPECT_EQ(pg.query("SELECT pico_headers::text FROM t WHERE pico_offset = 1", db), (Rows{{R"({"a": "only"})"}}));
}

TEST(PostgresSink, ReplayInInsertModeWritesNothingTwiceAppendWritesAgain) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto topic = unique_name("replay");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 300));

  const auto insert_db = pg.create_database("pgins");
  run_until_committed("pgins_a", topic, insert_db, "target_table = \"events\"", 300);
  run_until_committed("pgins_b", topic, insert_db, "target_table = \"events\"", 300);  // new group: all again
  EXPECT_EQ(
      pg.query("SELECT count(*), count(DISTINCT pico_id), min(pico_offset), max(pico_offset) FROM events", insert_db),
      (Rows{{"300", "300", "0", "299"}}));

  const auto append_db = pg.create_database("pgapp");
  const std::string append = "target_table = \"events\"\nwrite_mode = \"append\"\ninclude_metadata = false";
  run_until_committed("pgapp_a", topic, append_db, append, 300);
  run_until_committed("pgapp_b", topic, append_db, append, 300);
  EXPECT_EQ(pg.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'events' "
                     "ORDER BY ordinal_position",
                     append_db),
            (Rows{{"payload"}}))
      << "append without metadata: the payload column alone, no key";
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT payload) FROM events", append_db), (Rows{{"600", "300"}}));
}

// Insert and append modes write consecutive batches into a table as one COPY in one transaction
// (commit_interval); rows written by one transaction share its xmin. 0: a transaction per batch.
TEST(PostgresSink, ConsecutiveBatchesShareATransactionUnlessCommitIntervalIsZero) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto topic = unique_name("stream");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5000));
  const auto streamed = pg.create_database("pgstream");
  run_until_committed("pgstream", topic, streamed, "target_table = \"events\"\ncommit_interval = \"30s\"", 5000,
                      "batch_length = 500");
  const auto rows =
      pg.query("SELECT count(*), count(DISTINCT pico_id), count(DISTINCT xmin::text) FROM events", streamed);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "5000");
  EXPECT_EQ(rows[0][1], "5000");
  EXPECT_LE(std::stoi(*rows[0][2]), 5) << "10 batches of 500 read at once should share one or a few transactions";

  const auto per_batch = pg.create_database("pgperbatch");
  run_until_committed("pgperbatch", topic, per_batch,
                      "target_table = \"events\"\ncommit_interval = \"0s\"\nwrite_mode = \"append\"", 5000,
                      "batch_length = 500");
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT xmin::text) FROM events", per_batch), (Rows{{"5000", "10"}}));
}

// A COPY with no new batch for 10 ms is committed: a quiet topic's records are not held for
// commit_interval.
TEST(PostgresSink, AQuietTopicIsWrittenAtOnceEvenWithALongCommitInterval) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgquiet");
  const auto topic = unique_name("quietpg");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap(), "pgquiet");
  rt.add_definition("pg.toml", pg_definition("pgquiet", "\"" + topic + "\"", db,
                                             "target_table = \"events\"\ncommit_interval = \"120s\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("pgquiet", 30s)) << rt.log();
  const auto produced = std::chrono::steady_clock::now();
  kafka.produce_values(topic, json_values(0, 3));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pgquiet"), topic) == 3; }, 30s)) << rt.log();
  const auto waited = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - produced);
  EXPECT_LE(waited.count(), scaled(5000ms).count()) << "held back towards commit_interval";
  EXPECT_EQ(pg.query("SELECT count(*) FROM events", db), (Rows{{"3"}}));
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

TEST(PostgresSink, HostileTopicNamesAndValuesLandSanitisedAndByteExact) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pghostile");
  std::string long_topic = unique_name("Hostile_Name-..x");
  long_topic += std::string(249 - long_topic.size(), 'z');  // the longest topic Kafka takes
  const auto short_topic = unique_name("a.b-c_d").substr(0, 40);
  kafka.create_topic(long_topic);
  kafka.create_topic(short_topic);
  const std::vector<std::string> values = {
      R"({"s": "x\"; DROP TABLE y; --", "q": "it's", "u": "Zürich – 東京 🚀", "e": "\\\n\t"})",
      R"({"s": "'); DELETE FROM events; --", "u": "\u00e9\ud83d\ude80"})",
  };
  kafka.produce_values(long_topic, values);
  kafka.produce_values(short_topic, values);

  Runtime rt(kafka.bootstrap(), "hostile");
  rt.add_definition("pg.toml", pg_definition("pghostile", "\"" + long_topic + "\", \"" + short_topic + "\"", db, ""));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        return kafka.committed(group_of("pghostile"), long_topic) == 2 &&
               kafka.committed(group_of("pghostile"), short_topic) == 2;
      },
      60s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);

  const auto tables =
      pg.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY length(tablename)", db);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0][0], short_topic) << "a short legal name is kept as it is";
  const std::string long_table = *tables[1][0];
  EXPECT_EQ(long_table.size(), 63u);
  EXPECT_EQ(long_table.substr(0, 54), long_topic.substr(0, 54));
  EXPECT_TRUE(std::regex_match(long_table.substr(54), std::regex("_[0-9a-f]{8}"))) << long_table;

  for (const auto& table : {short_topic, long_table}) {
    const std::string quoted = "\"" + table + "\"";
    const auto rows = pg.query("SELECT payload->>'s', payload->>'q', payload->>'u', payload->>'e', pico_topic FROM " +
                                   quoted + " ORDER BY pico_offset",
                               db);
    const std::string topic = table == short_topic ? short_topic : long_topic;
    EXPECT_EQ(rows, (Rows{{"x\"; DROP TABLE y; --", "it's", "Zürich – 東京 🚀", "\\\n\t", topic},
                          {"'); DELETE FROM events; --", std::nullopt, "é🚀", std::nullopt, topic}}))
        << table;
    // The stored documents equal the produced ones (jsonb compares values, not whitespace).
    const std::string literal = std::regex_replace(values[0], std::regex("'"), "''");  // the test's SQL, not the sink's
    std::string count_equal = "SELECT count(*) FROM " + quoted;
    count_equal += " WHERE payload = '" + literal + "'::jsonb";
    EXPECT_EQ(pg.query(count_equal, db), (Rows{{"1"}}));
  }
}

TEST(PostgresSink, MissingTableWithoutAutoCreateStopsInErrorNamingIt) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgmissing");
  const auto topic = unique_name("missing");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml",
                    pg_definition("pgmissing", "\"" + topic + "\"", db,
                                  "auto_create_table = false\ntarget_table = \"nowhere_{topic_segment[0]}\""));
  rt.start();
  ASSERT_TRUE(rt.wait_state("pgmissing", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("pgmissing").value("message", "");
  EXPECT_NE(message.find("table public.nowhere_missing does not exist"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed(group_of("pgmissing"), topic), -1001) << "nothing committed";
  EXPECT_TRUE(pg.query("SELECT 1 FROM pg_tables WHERE schemaname = 'public'", db).empty()) << "nothing created";
}

// A malformed value in the connection string is a configuration error: the sink stops in Error
// at once (not after five retries of reconnect_timeout each, as for a server that is down),
// naming the option, and the password appears nowhere.
TEST(PostgresSink, MalformedConnectionStringValuesStopTheSinkAtOnceNamingTheOption) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgbadconn");
  const auto topic = unique_name("badconn");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 3));
  const std::string real = "host=" + pg.host() + " port=" + std::to_string(pg.port()) + " user=postgres dbname=" + db;
  struct Case {
    std::string connection_string, expected;
  };
  for (const Case& c : std::vector<Case>{
           // libpq's parser accepts these; libpq itself only says so when it connects.
           {"postgres://u:s3cretpw@127.0.0.1:notaport/db", R"(option "port": "notaport" is not a port number)"},
           {real + " password=s3cretpw connect_timeout=10s", R"(option "connect_timeout": "10s" is not an integer)"},
           // refused by libpq's parser (PQconninfoParse) in open()
           {"postgres://u:s3cretpw@127.0.0.1:5432/db?foo=bar", R"(invalid URI query parameter: "foo")"},
           // passes open(); libpq refuses it at the first connection: permanent, not retried
           {real + " password=s3cretpw sslmode=bogus", R"(invalid sslmode value: "bogus")"}}) {
    SCOPED_TRACE(c.expected);
    Runtime rt(kafka.bootstrap());
    rt.add_definition("pg.toml",
                      "type = \"sink\"\nkey = \"pgbadconn\"\npath = \"libpicomq_connector_postgres_sink\"\n"
                      "[[topics]]\ntopics = [\"" +
                          topic +
                          "\"]\nschema = \"json\"\npoll_interval = \"200ms\"\n"
                          "[plugin_config]\nconnection_string = \"" +
                          c.connection_string +
                          "\"\n"
                          "reconnect_timeout = \"10s\"\n");
    const auto started = std::chrono::steady_clock::now();
    rt.start();
    ASSERT_TRUE(rt.wait_state("pgbadconn", "error", 15s)) << rt.log();
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_LT(took, 10s) << "not retried as an outage (5 attempts x reconnect_timeout 10s)";
    const auto message = rt.sink_status("pgbadconn").value("message", "");
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_NE(message.find("connection_string"), std::string::npos) << message;
    rt.signal(SIGTERM);
    rt.wait_exit(30s);
    EXPECT_EQ(rt.log().find("s3cretpw"), std::string::npos) << "the password is never shown\n" << rt.log();
    EXPECT_EQ(message.find("s3cretpw"), std::string::npos) << message;
    EXPECT_EQ(kafka.committed(group_of("pgbadconn"), topic), -1001) << "nothing committed";
  }
}

TEST(PostgresSink, TextModeOnAJsonbMismatchedSchemaIsFatalNamingTopicAndMode) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgmode");
  const auto topic = unique_name("rawbytes");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {std::string("\x01\x02", 2)});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", pg_definition("pgmode", "\"" + topic + "\"", db, "payload_mode = \"text\"", "raw"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("pgmode", "error", 30s)) << rt.log();
  const auto message = rt.sink_status("pgmode").value("message", "");
  EXPECT_NE(message.find("topic '" + topic + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("payload_mode 'text'"), std::string::npos) << message;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

TEST(PostgresSink, TextAndByteaModesStoreThePayloadAsItCame) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgtextbytea");
  const auto text_topic = unique_name("text"), raw_topic = unique_name("raw");
  kafka.create_topic(text_topic);
  kafka.create_topic(raw_topic);
  kafka.produce_values(text_topic, {"héllo \"quoted\"; --", ""});
  kafka.produce_values(raw_topic, {std::string("\x00\x01\xff", 3)});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("t.toml", pg_definition("pgtext", "\"" + text_topic + "\"", db,
                                            "payload_mode = \"text\"\ntarget_table = \"texts\"", "text"));
  rt.add_definition("b.toml", pg_definition("pgbytea", "\"" + raw_topic + "\"", db,
                                            "payload_mode = \"bytea\"\ntarget_table = \"blobs\"", "raw"));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        return kafka.committed(group_of("pgtext"), text_topic) == 2 &&
               kafka.committed(group_of("pgbytea"), raw_topic) == 1;
      },
      60s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT payload, pg_typeof(payload)::text FROM texts ORDER BY pico_offset", db),
            (Rows{{"héllo \"quoted\"; --", "text"}, {"", "text"}}));
  EXPECT_EQ(pg.query("SELECT encode(payload, 'hex'), pg_typeof(payload)::text FROM blobs", db),
            (Rows{{"0001ff", "bytea"}}));
}

TEST(PostgresSink, DatabaseOutageIsRetriedThenEverythingIsWrittenOnce) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgoutage");
  const auto topic = unique_name("outage");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", pg_definition("pgoutage", "\"" + topic + "\"", db, "target_table = \"t\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pgoutage"), topic) == 10; }, 60s)) << rt.log();

  pg.stop();
  kafka.produce_values(topic, json_values(10, 20));
  const bool retried = wait_until([&] { return rt.log().find("retrying in") != std::string::npos; }, 30s);
  pg.start();
  ASSERT_TRUE(retried) << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pgoutage"), topic) == 20; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("pgoutage"), "running") << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_id), min(pico_offset), max(pico_offset) FROM t", db),
            (Rows{{"20", "20", "0", "19"}}));
}

// A server restart longer than the runtime's own retries (about 3 s in all): the sink keeps
// reconnecting within each attempt (reconnect_timeout), so it stays running and loses nothing.
TEST(PostgresSink, ServerDownLongerThanTheRuntimeRetriesIsWaitedOut) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pglong");
  const auto topic = unique_name("longoutage");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "pg.toml", pg_definition("pglong", "\"" + topic + "\"", db, "target_table = \"t\"\nreconnect_timeout = \"4s\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pglong"), topic) == 5; }, 60s)) << rt.log();
  pg.stop();
  kafka.produce_values(topic, json_values(5, 15));
  std::this_thread::sleep_for(std::chrono::seconds(8));  // > 3 s of runtime back-off, < 5 x reconnect_timeout
  EXPECT_EQ(kafka.committed(group_of("pglong"), topic), 5) << "nothing committed while the server is down";
  EXPECT_EQ(rt.sink_state("pglong"), "running") << rt.log();
  pg.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pglong"), topic) == 15; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("pglong"), "running") << rt.log();
  // One warning for the outage and one line for its end, however many attempts it took.
  const std::string log = rt.log();
  auto occurrences = [&](const std::string& part) {
    size_t n = 0;
    for (size_t at = log.find(part); at != std::string::npos; at = log.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("PostgreSQL is unreachable"), 1u) << log;
  EXPECT_EQ(occurrences("reconnected to PostgreSQL after"), 1u) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("reconnected to PostgreSQL after [0-9.]+ s unreachable"))) << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_id) FROM t", db), (Rows{{"15", "15"}}));
}

// Another session creating the same table at the same moment (another block, another runtime):
// the sink's CREATE TABLE IF NOT EXISTS waits on the uncommitted catalog row, then fails with a
// unique violation. That is a race lost, not a broken table: retried, and the write goes on.
TEST(PostgresSink, TableCreatedConcurrentlyByAnotherSessionIsRetried) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgrace");
  const auto topic = unique_name("race");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5));
  PGconn* other = PQconnectdb(pg.conninfo(db).c_str());
  ASSERT_EQ(PQstatus(other), CONNECTION_OK);
  PQclear(PQexec(other, "BEGIN"));
  PGresult* created = PQexec(other, "CREATE TABLE t (payload jsonb)");  // the sink's layout, uncommitted
  ASSERT_EQ(PQresultStatus(created), PGRES_COMMAND_OK) << PQerrorMessage(other);
  PQclear(created);

  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml",
                    pg_definition("pgrace", "\"" + topic + "\"", db,
                                  "target_table = \"t\"\nwrite_mode = \"append\"\ninclude_metadata = false"));
  rt.start();
  // The sink's CREATE is now waiting for this transaction.
  EXPECT_TRUE(wait_until(
      [&] {
        return !pg.query("SELECT 1 FROM pg_stat_activity WHERE datname = '" + db + "' AND wait_event_type = 'Lock'")
                    .empty();
      },
      30s))
      << rt.log();
  PQclear(PQexec(other, "COMMIT"));
  PQfinish(other);
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pgrace"), topic) == 5; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state("pgrace"), "running") << rt.log();
  EXPECT_NE(rt.log().find("SQLSTATE 23505"), std::string::npos) << "the race happened\n" << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*) FROM t", db), (Rows{{"5"}}));
}

// Produces JSON values {"id": <id>, "v": <v>} in one go.
std::vector<std::string> id_values(const std::vector<std::pair<std::string, int>>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const auto& [id, v] : items) out.push_back(R"({"id": )" + id + R"(, "v": )" + std::to_string(v) + "}");
  return out;
}

TEST(PostgresSink, UpsertKeepsTheLastRecordPerKeyWithinAndAcrossBatchesAndRejectsAMissingKey) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgupsert");
  const auto topic = unique_name("upsert");
  kafka.create_topic(topic);
  const std::string config =
      "target_table = \"t\"\npayload_mode = \"columns\"\nwrite_mode = \"upsert\"\nupsert_key = [\"id\"]\n"
      "columns = [{ name = \"id\", type = \"text\" }, { name = \"v\", type = \"int8\" }]";
  // One batch: keys repeat inside it.
  kafka.produce_values(topic,
                       id_values({{"\"a\"", 0}, {"\"b\"", 1}, {"\"a\"", 2}, {"\"c\"", 3}, {"\"b\"", 4}, {"\"a\"", 5}}));
  run_until_committed("pgupsert", topic, db, config, 6);
  EXPECT_EQ(pg.query("SELECT id, v::text, pico_offset::text FROM t ORDER BY id", db),
            (Rows{{"a", "5", "5"}, {"b", "4", "4"}, {"c", "3", "3"}}));
  EXPECT_EQ(pg.query("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                     "WHERE table_name = 't' AND column_name IN ('id', 'v') ORDER BY ordinal_position",
                     db),
            (Rows{{"id", "text", "NO"}, {"v", "bigint", "YES"}}))
      << "declared order; the key is NOT NULL";
  // Later batches overwrite.
  kafka.produce_values(topic, id_values({{"\"c\"", 10}, {"\"a\"", 11}, {"\"c\"", 12}}));
  run_until_committed("pgupsert", topic, db, config, 9);
  EXPECT_EQ(pg.query("SELECT id, v::text FROM t ORDER BY id", db), (Rows{{"a", "11"}, {"b", "4"}, {"c", "12"}}));

  // A record without the key (offset 10) or with a null one: rejected, Error naming it, the
  // record before it committed.
  kafka.produce_values(
      topic, {R"({"id": "d", "v": 20})", R"({"v": 21})", R"({"id": null, "v": 22})", R"({"id": "e", "v": 23})"});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", pg_definition("pgupsert", "\"" + topic + "\"", db, config));
  rt.start();
  ASSERT_TRUE(rt.wait_state("pgupsert", "error", 60s)) << rt.log();
  const auto message = rt.sink_status("pgupsert").value("message", "");
  EXPECT_NE(message.find(topic + "[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("offset 10"), std::string::npos) << message;
  EXPECT_NE(message.find("field 'id': missing"), std::string::npos) << message;
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("pgupsert"), topic) == 10; }, 10s))
      << kafka.committed(group_of("pgupsert"), topic);
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(pg.query("SELECT v::text FROM t WHERE id = 'd'", db), (Rows{{"20"}}));
}

// docs/changes.md: Debezium change events applied by key — upserts, deletes (a missing key is
// a no-op), the tombstone after a delete, several changes to one key in one batch (the last
// wins), a truncate, and a composite key.
ProducedRecord debezium(const std::string& op, const std::string& key, const std::string& before,
                        const std::string& after) {
  return {R"({"before":)" + before + R"(,"after":)" + after + R"(,"source":{"connector":"postgresql"},"op":")" + op +
              R"(","ts_ms":1733480000000})",
          key,
          {},
          0};
}

TEST(PostgresSink, DebeziumChangesUpsertDeleteAndTruncateByACompositeKey) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgchanges");
  const auto topic = unique_name("changes");
  kafka.create_topic(topic);
  const std::string config =
      "target_table = \"t\"\npayload_mode = \"columns\"\nwrite_mode = \"upsert\"\nupsert_key = [\"id\", \"region\"]\n"
      "columns = [{ name = \"id\", type = \"int8\" }, { name = \"region\", type = \"text\" }, "
      "{ name = \"name\", type = \"text\" }]";
  const std::string block = "changes = \"debezium\"\n";
  auto key = [](int id, const char* region) {
    return R"({"id":)" + std::to_string(id) + R"(,"region":")" + region + "\"}";
  };
  auto row = [](int id, const char* region, const char* name) {
    return R"({"id":)" + std::to_string(id) + R"(,"region":")" + region + R"(","name":")" + name + "\"}";
  };
  kafka.produce(topic, {debezium("r", key(1, "eu"), "null", row(1, "eu", "a")),
                        debezium("c", key(2, "eu"), "null", row(2, "eu", "b")),
                        debezium("u", key(1, "eu"), row(1, "eu", "a"), row(1, "eu", "a2")),
                        debezium("d", key(2, "eu"), row(2, "eu", "b"), "null"),
                        {"", key(2, "eu"), {}, 0, true},  // Debezium's tombstone after the delete
                        debezium("c", key(3, "us"), "null", row(3, "us", "c")),
                        debezium("d", key(9, "eu"), row(9, "eu", "gone"), "null")});  // not there: a no-op
  run_until_committed("pgchanges", topic, db, config, 7, block);
  EXPECT_EQ(pg.query("SELECT id::text, region, name FROM t ORDER BY id", db),
            (Rows{{"1", "eu", "a2"}, {"3", "us", "c"}}));

  // Several changes to one key in one batch: the last one is what the table holds.
  kafka.produce(topic, {debezium("u", key(3, "us"), row(3, "us", "c"), row(3, "us", "c2")),
                        debezium("d", key(3, "us"), row(3, "us", "c2"), "null"),
                        debezium("c", key(3, "us"), "null", row(3, "us", "c3")),
                        debezium("c", key(4, "us"), "null", row(4, "us", "d")),
                        debezium("d", key(1, "eu"), row(1, "eu", "a2"), "null")});
  run_until_committed("pgchanges", topic, db, config, 12, block);
  EXPECT_EQ(pg.query("SELECT id::text, region, name FROM t ORDER BY id", db),
            (Rows{{"3", "us", "c3"}, {"4", "us", "d"}}));

  // A truncate empties the table; what follows it lands.
  kafka.produce(topic, {debezium("c", key(6, "eu"), "null", row(6, "eu", "wiped")),
                        {R"({"before":null,"after":null,"source":{"table":"t"},"op":"t"})", std::nullopt, {}, 0},
                        debezium("c", key(5, "eu"), "null", row(5, "eu", "e"))});
  run_until_committed("pgchanges", topic, db, config, 15, block);
  EXPECT_EQ(pg.query("SELECT id::text, region, name FROM t ORDER BY id", db), (Rows{{"5", "eu", "e"}}));

  // A truncate that ends its batch: no row is staged after it, and it still empties the table.
  kafka.produce(topic, {debezium("c", key(8, "eu"), "null", row(8, "eu", "f")),
                        {R"({"before":null,"after":null,"source":{"table":"t"},"op":"t"})", std::nullopt, {}, 0}});
  run_until_committed("pgchanges", topic, db, config, 17, block);
  EXPECT_EQ(pg.query("SELECT count(*)::text FROM t", db), (Rows{{"0"}}));
}

TEST(PostgresSink, ChangeEventsNeedUpsertModeAndASinkThatAppliesThemAtCheck) {
  auto& kafka = Kafka::shared();
  const std::string topics = "\"" + unique_name("changes_check") + "\"";
  Runtime pg_insert(kafka.bootstrap());
  pg_insert.add_definition(
      "pg.toml", pg_definition("pgchk", topics, "db", "target_table = \"t\"", "json", "changes = \"keyed\"\n"));
  auto [code, out] = pg_insert.check();
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("key 'plugin_config.write_mode'"), std::string::npos) << out;
  EXPECT_NE(out.find("set write_mode = \"upsert\""), std::string::npos) << out;

  // A sink that writes plain records only (no change_ops): refused at the block's `changes`.
  Runtime testkit(kafka.bootstrap());
  testkit.add_definition("tk.toml",
                         "type = \"sink\"\nkey = \"tkchk\"\npath = \"libpicomq_connector_testkit_sink\"\n"
                         "[[topics]]\ntopics = [" +
                             topics + "]\nchanges = \"debezium\"\n");
  std::tie(code, out) = testkit.check();
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("key 'topics[0].changes': the sink 'testkit' does not apply change events"), std::string::npos)
      << out;
}

TEST(PostgresSink, UpsertOnPicoKeyInJsonbModeAndBadUpsertOptionsAreRefusedInOpen) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgupkey");
  const auto topic = unique_name("upkey");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.reserve(6);
  for (int i = 0; i < 6; ++i)
    records.push_back({"{\"n\": " + std::to_string(i) + "}", std::string(i % 2 ? "odd" : "even"), {}});
  kafka.produce(topic, records);
  run_until_committed("pgupkey", topic, db,
                      "target_table = \"t\"\nwrite_mode = \"upsert\"\nupsert_key = [\"pico_key\"]", 6);
  EXPECT_EQ(pg.query("SELECT convert_from(pico_key, 'UTF8'), payload->>'n' FROM t ORDER BY 1", db),
            (Rows{{"even", "4"}, {"odd", "5"}}));

  for (const auto& [bad, expected] : std::vector<std::pair<std::string, std::string>>{
           {"write_mode = \"upsert\"", "needs upsert_key"},
           {"upsert_key = [\"pico_key\"]", "upsert_key: is only for write_mode 'upsert'"},
           {"write_mode = \"upsert\"\nupsert_key = [\"nope\"]", "key column 'nope' is not a column"},
           {"write_mode = \"upsert\"\nupsert_key = [\"pico_headers\"]", "jsonb"},
           {"payload_mode = \"columns\"\ncolumns = [{ name = \"a\", type = \"money\" }]", "unknown type 'money'"},
           {"auto_add_columns = true", "only for payload_mode 'columns'"}}) {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("pg.toml", pg_definition("pgbadopt", "\"" + topic + "\"", db, bad));
    rt.start();
    ASSERT_TRUE(rt.wait_state("pgbadopt", "error", 30s)) << bad << "\n" << rt.log();
    const auto message = rt.sink_status("pgbadopt").value("message", "");
    EXPECT_NE(message.find(expected), std::string::npos) << bad << ": " << message;
    rt.signal(SIGTERM);
    rt.wait_exit(30s);
  }
}

TEST(PostgresSink, InferredColumnsGrowWithAutoAddAndATypeConflictStopsInErrorNamingTheRecord) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgcols");
  const auto topic = unique_name("cols");
  kafka.create_topic(topic);
  kafka.produce_values(
      topic, {R"({"id": 1, "name": "a", "amount": 2.5, "tags": ["x"]})", R"({"id": 2, "name": "b", "amount": 3})"});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml",
                    pg_definition("pgcols", "\"" + topic + "\"", db,
                                  "target_table = \"t\"\npayload_mode = \"columns\"\nauto_add_columns = true"));
  rt.start();
  const auto group = group_of("pgcols");
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 2; }, 60s)) << rt.log();
  const std::string columns_sql =
      "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 't' AND column_name NOT LIKE "
      "'pico%' ORDER BY ordinal_position";
  EXPECT_EQ(pg.query(columns_sql, db),
            (Rows{{"id", "bigint"}, {"name", "text"}, {"amount", "double precision"}, {"tags", "jsonb"}}));

  // A later batch with a new field: the column is added, nullable.
  kafka.produce_values(topic, {R"({"id": 3, "name": "c", "amount": 1, "vip": true})"});
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 3; }, 60s)) << rt.log();
  EXPECT_EQ(
      pg.query(columns_sql, db),
      (Rows{
          {"id", "bigint"}, {"name", "text"}, {"amount", "double precision"}, {"tags", "jsonb"}, {"vip", "boolean"}}));
  EXPECT_NE(rt.log().find("added columns vip boolean"), std::string::npos) << rt.log();

  // A value that conflicts with its column's type: a rejection, never a cast.
  kafka.produce_values(topic, {R"({"id": 4, "name": "d"})", R"({"id": "five", "name": "e"})", R"({"id": 6})"});
  ASSERT_TRUE(rt.wait_state("pgcols", "error", 60s)) << rt.log();
  const auto message = rt.sink_status("pgcols").value("message", "");
  EXPECT_NE(message.find(topic + "[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("offset 4"), std::string::npos) << message;
  EXPECT_NE(message.find("field 'id': expected int8, found string"), std::string::npos) << message;
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 4; }, 10s)) << kafka.committed(group, topic);
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(pg.query("SELECT id::text, name, amount::text, tags::text, vip::text FROM t WHERE pico_offset < 4 "
                     "ORDER BY pico_offset",
                     db),
            (Rows{{"1", "a", "2.5", R"(["x"])", std::nullopt},
                  {"2", "b", "3", std::nullopt, std::nullopt},
                  {"3", "c", "1", std::nullopt, "true"},
                  {"4", "d", std::nullopt, std::nullopt, std::nullopt}}));
  EXPECT_TRUE(pg.query("SELECT 1 FROM t WHERE id::text = 'five'", db).empty());
}

// SIGKILL at random moments while records flow, restart with the same group, three times, then
// a clean run to the end: the table holds every record exactly once.
// `kills`: how many kills came before every record was committed.
void kill_and_replay(const std::string& key, const std::string& plugin_config, int64_t count,
                     const std::function<void(const std::string& db)>& check, int& kills) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database(key);
  const auto topic = unique_name(key);
  kafka.create_topic(topic);
  std::vector<std::string> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back("{\"id\": " + std::to_string(i % 100) + ", \"v\": " + std::to_string(i) + "}");
  kafka.produce_values(topic, values);
  const std::string group = group_of(key);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> kill_after_ms(0, 200);
  kills = 0;
  for (int run = 0; run <= 3; ++run) {
    const int64_t before = kafka.committed(group, topic);
    Runtime rt(kafka.bootstrap(), key + "-" + std::to_string(run));
    std::string block = "schema = \"json\"\npoll_interval = \"50ms\"\nbatch_length = 10\n";
    block += "properties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
    rt.add_definition(
        "pg.toml", postgres_definition(key, "\"" + topic + "\"", db, block, "target_table = \"t\"\n" + plugin_config));
    rt.start();
    if (run < 3 && before < count) {
      // Kill while it is writing: after its first commit, at a random moment.
      ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) > before; }, 60s)) << rt.log();
      std::this_thread::sleep_for(Millis(kill_after_ms(rng)));
      rt.kill_hard();
      rt.wait_exit(30s);
      const int64_t at = kafka.committed(group, topic);
      if (at < count) ++kills;
      std::cout << key << " run " << run << ": killed at committed " << at << "\n";
    } else if (run == 3) {
      ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == count; }, 120s)) << rt.log();
      // The earlier run may have finished everything before its kill: wait for this one to be up.
      EXPECT_TRUE(rt.wait_state(key, "running", 30s)) << rt.log();
      rt.signal(SIGTERM);
      EXPECT_EQ(rt.wait_exit(30s), 0);
    }
  }
  std::cout << key << ": " << kills << " kills before the end\n";
  check(db);
}

TEST(PostgresSink, SigkillBetweenWriteAndCommitThenRestartHoldsEveryRecordExactlyOnce) {
  auto& pg = Postgres::shared();
  // Insert mode streams up to 64 batches per transaction, the next beside the commit: enough
  // records that the load outlasts its first commit and a kill up to 200 ms later.
  const int64_t inserts = 200000;
  int insert_kills = 0;
  kill_and_replay(
      "pgkillins", "", inserts,
      [&](const std::string& db) {
        EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_id), count(DISTINCT payload), min(pico_offset), "
                           "max(pico_offset) FROM t",
                           db),
                  (Rows{{std::to_string(inserts), std::to_string(inserts), std::to_string(inserts), "0",
                         std::to_string(inserts - 1)}}));
      },
      insert_kills);
  EXPECT_GE(insert_kills, 1) << "no kill came while records were still being written";
  const int64_t count = 6000;
  // Upsert, inferred columns (the restarts read the existing table): one row per key, the last value.
  int upsert_kills = 0;
  kill_and_replay(
      "pgkillups", "payload_mode = \"columns\"\nwrite_mode = \"upsert\"\nupsert_key = [\"id\"]", count,
      [&](const std::string& db) {
        EXPECT_EQ(pg.query("SELECT count(*), count(*) FILTER (WHERE v = id + " + std::to_string(count - 100) +
                               " AND pico_offset = v) FROM t",
                           db),
                  (Rows{{"100", "100"}}));
      },
      upsert_kills);
  EXPECT_GE(upsert_kills, 1) << "no kill came while records were still being written";
}

}  // namespace
}  // namespace picomq::test
