// The PostgreSQL test server (sinks/postgres/server.sh) and the Postgres client helper do what
// the PostgreSQL sink's tests will lean on: databases, tables, rows (NULL, unicode, jsonb),
// an outage and recovery, databases isolated from each other.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

using Rows = std::vector<Postgres::Row>;

TEST(PostgresServer, AnswersOnItsPortAsSuperuserWithUtf8) {
  auto& pg = Postgres::shared();
  EXPECT_GE(pg.port(), 20000);
  EXPECT_LT(pg.port(), 32000);
  EXPECT_NE(pg.conninfo("x").find("port=" + std::to_string(pg.port())), std::string::npos);
  auto rows = pg.query(
      "SELECT current_user, current_setting('server_version_num')::int / 10000, "
      "pg_encoding_to_char(encoding), current_setting('listen_addresses') "
      "FROM pg_database WHERE datname = current_database()");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "postgres");
  // The major version sinks/postgres/server.sh was asked for (PICOMQ_PG_VERSION, 18 unless told).
  const char* wanted = std::getenv("PICOMQ_PG_VERSION");
  EXPECT_EQ(rows[0][1], wanted && *wanted ? wanted : "18");
  EXPECT_EQ(rows[0][2], "UTF8");
  EXPECT_EQ(rows[0][3], "127.0.0.1");
}

TEST(PostgresServer, TableRowsRoundTripWithNullAndUnicode) {
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("rows");
  EXPECT_LE(db.size(), 63u);
  pg.exec("CREATE TABLE events (id bigint PRIMARY KEY, name text, amount numeric(10,2), at timestamptz)", db);
  pg.exec(
      "INSERT INTO events VALUES (1, 'plain', 12.50, '2024-01-02T03:04:05Z'),"
      " (2, NULL, NULL, NULL),"
      " (3, 'Zürich – 東京 🚀', -0.01, '2024-06-30T23:59:59.123456Z'),"
      " (4, '', 0, NULL)",
      db);
  pg.exec("SET TIME ZONE 'UTC'", db);  // its own connection: the next query is not affected
  auto rows = pg.query(
      "SELECT id, name, amount, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
      "FROM events ORDER BY id",
      db);
  const Rows expected = {
      {"1", "plain", "12.50", "2024-01-02 03:04:05"},
      {"2", std::nullopt, std::nullopt, std::nullopt},
      {"3", "Zürich – 東京 🚀", "-0.01", "2024-06-30 23:59:59"},
      {"4", "", "0.00", std::nullopt},
  };
  EXPECT_EQ(rows, expected);
  // Length in characters, not bytes: the server stored UTF-8 text as text.
  EXPECT_EQ(pg.query("SELECT length(name), octet_length(name) FROM events WHERE id = 3", db), (Rows{{"13", "23"}}));
  // Statements without rows give no rows; several statements in one call run in order.
  EXPECT_TRUE(pg.query("UPDATE events SET name = 'x' WHERE id = 4; DELETE FROM events WHERE id = 1", db).empty());
  EXPECT_EQ(pg.query("SELECT count(*) FROM events", db), (Rows{{"3"}}));
}

TEST(PostgresServer, JsonbRoundTrip) {
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("jsonb");
  pg.exec("CREATE TABLE docs (id int, doc jsonb)", db);
  pg.exec(R"sql(INSERT INTO docs VALUES
      (1, '{"n": 1, "tags": ["a", "b"], "nested": {"ok": true, "v": null}, "s": "é\u00e9"}'),
      (2, 'null'), (3, NULL))sql",
          db);
  auto rows = pg.query("SELECT doc, doc->>'n', doc #>> '{nested,ok}', jsonb_typeof(doc) FROM docs ORDER BY id", db);
  ASSERT_EQ(rows.size(), 3u);
  // jsonb normalizes: keys sorted by length then bytes, one space after ':' and ','.
  EXPECT_EQ(rows[0][0], R"({"n": 1, "s": "éé", "tags": ["a", "b"], "nested": {"v": null, "ok": true}})");
  EXPECT_EQ(rows[0][1], "1");
  EXPECT_EQ(rows[0][2], "true");
  EXPECT_EQ(rows[0][3], "object");
  EXPECT_EQ(rows[1], (Postgres::Row{"null", std::nullopt, std::nullopt, "null"}));  // JSON null is not SQL NULL
  EXPECT_EQ(rows[2], (Postgres::Row{std::nullopt, std::nullopt, std::nullopt, std::nullopt}));
}

TEST(PostgresServer, ServerErrorsCarryTheServersMessage) {
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("errors");
  pg.exec("CREATE TABLE t (id int PRIMARY KEY)", db);
  pg.exec("INSERT INTO t VALUES (1)", db);
  try {
    pg.exec("INSERT INTO t VALUES (1)", db);
    FAIL() << "duplicate key accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key value violates unique constraint"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(pg.query("SELECT * FROM no_such_table", db), std::runtime_error);
  try {
    pg.query("SELECT 1", "no_such_database");
    FAIL() << "connected to a missing database";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"no_such_database\" does not exist"), std::string::npos) << e.what();
  }
}

TEST(PostgresServer, OutageThenRecoveryKeepsTheData) {
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("outage");
  pg.exec("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')", db);

  pg.stop();
  pg.stop();  // idempotent
  try {
    pg.query("SELECT 1", db);
    FAIL() << "query succeeded while the server is stopped";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot connect"), std::string::npos) << what;
    EXPECT_NE(what.find("Connection refused"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(pg.port())), std::string::npos) << what;
  }

  const auto t0 = std::chrono::steady_clock::now();
  pg.start();  // same port and data dir
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[          ] postgres restart took " << ms << " ms\n";
  pg.start();  // already running: fine
  pg.exec("INSERT INTO t VALUES ('after')", db);
  EXPECT_EQ(pg.query("SELECT v FROM t ORDER BY v DESC", db), (Rows{{"before"}, {"after"}}));
}

TEST(PostgresServer, DatabasesAreIsolated) {
  auto& pg = Postgres::shared();
  const auto a = pg.create_database("iso");
  const auto b = pg.create_database("iso");
  ASSERT_NE(a, b);
  pg.exec("CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2)", a);
  pg.exec("CREATE TABLE t (v text); INSERT INTO t VALUES ('only b')", b);
  EXPECT_EQ(pg.query("SELECT v FROM t ORDER BY v", a), (Rows{{"1"}, {"2"}}));
  EXPECT_EQ(pg.query("SELECT v FROM t", b), (Rows{{"only b"}}));
  pg.exec("DROP TABLE t", a);
  EXPECT_THROW(pg.query("SELECT v FROM t", a), std::runtime_error);
  EXPECT_EQ(pg.query("SELECT v FROM t", b), (Rows{{"only b"}}));
  EXPECT_EQ(pg.query("SELECT current_database()", b), (Rows{{b}}));
}

}  // namespace
}  // namespace picomq::test
