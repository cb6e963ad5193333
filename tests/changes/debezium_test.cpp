// A real change-data pipeline (docs/changes.md): PostgreSQL with wal_level = logical -> Debezium's
// PostgreSQL connector (3.6.1.Final, from Maven Central) in a Kafka Connect worker -> Kafka ->
// picomq-connect (changes = "debezium") -> a PostgreSQL replica. A random workload of inserts,
// updates and deletes on three tables (a composite key, NULLs, key changes, a TOASTed column
// Debezium reports as unavailable, a truncate) runs while the runtime is killed with SIGKILL and
// restarted; once it has caught up, every table of the replica holds exactly the source's rows.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <random>
#include <set>

#include "harness.h"
#include "kafka_connect.h"
#include "postgres.h"

namespace picomq::test {
namespace {

using namespace std::chrono_literals;
using Rows = std::vector<Postgres::Row>;

constexpr std::string_view kSourceTables = R"(
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text);
CREATE TABLE order_lines (order_id int, line int, sku text NOT NULL, qty int NOT NULL, note text,
                          PRIMARY KEY (order_id, line));
CREATE TABLE documents (id int PRIMARY KEY, title text NOT NULL, body text NOT NULL);
-- Out of line and uncompressed: a body of a few kB is TOASTed, and an UPDATE that leaves it
-- alone gives Debezium no value for it (REPLICA IDENTITY DEFAULT).
ALTER TABLE documents ALTER COLUMN body SET STORAGE EXTERNAL;
)";

// The replica's own schema for two of the tables (as its owner would create it); customers is
// created by the sink, its key taken from the change events' keys.
constexpr std::string_view kReplicaTables = R"(
CREATE TABLE order_lines (order_id int8, line int8, sku text NOT NULL, qty int8 NOT NULL, note text,
                          PRIMARY KEY (order_id, line));
CREATE TABLE documents (id int8 PRIMARY KEY, title text NOT NULL, body text NOT NULL);
)";

// What the tables hold, as text, in key order: the same query on both sides.
const std::vector<std::pair<std::string, std::string>> kCompare = {
    {"customers", "SELECT id::text, name, email FROM customers ORDER BY id"},
    {"order_lines", "SELECT order_id::text, line::text, sku, qty::text, note FROM order_lines ORDER BY order_id, line"},
    {"documents", "SELECT id::text, title, md5(body), length(body)::text FROM documents ORDER BY id"},
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Random statements on the source: each a change Debezium turns into events.
class Workload {
 public:
  Workload(Postgres& pg, std::string db, uint32_t seed) : pg_(pg), db_(std::move(db)), rng_(seed) {}

  void seed_rows() {
    for (int i = 0; i < 20; ++i) insert_customer();
    for (int i = 0; i < 10; ++i) insert_document();
    for (int i = 0; i < 30; ++i) insert_line();
  }

  void step() {
    switch (pick(12)) {
      case 0:
      case 1: insert_customer(); break;
      case 2: update_customer(); break;
      case 3: delete_one("customers", customers_); break;
      case 4: change_customer_key(); break;
      case 5:
      case 6: insert_line(); break;
      case 7: update_line(); break;
      case 8: delete_line(); break;
      case 9: insert_document(); break;
      case 10: retitle_document(); break;  // the body stays: Debezium cannot read it
      case 11: rewrite_document(); break;
    }
  }

  void truncate_lines() {
    pg_.exec("TRUNCATE order_lines", db_);
    lines_.clear();
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string text(size_t n) {
    static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::string s(n, 'x');
    for (auto& c : s) c = kChars[pick(36)];
    return s;
  }
  template <class Set>
  std::optional<typename Set::value_type> any(const Set& set) {
    if (set.empty()) return std::nullopt;
    auto it = set.begin();
    std::advance(it, pick(static_cast<int>(set.size())));
    return *it;
  }
  std::string maybe_null(const std::string& value) { return pick(4) == 0 ? "NULL" : quoted(value); }

  void insert_customer() {
    const int id = next_id_++;
    pg_.exec("INSERT INTO customers VALUES (" + std::to_string(id) + ", " + quoted("name " + text(6)) + ", " +
                 maybe_null(text(8) + "@example.com") + ")",
             db_);
    customers_.insert(id);
  }
  void update_customer() {
    if (auto id = any(customers_))
      pg_.exec("UPDATE customers SET name = " + quoted("renamed " + text(5)) + ", email = " + maybe_null(text(7)) +
                   " WHERE id = " + std::to_string(*id),
               db_);
  }
  // Debezium: a delete of the old key and a create of the new one.
  void change_customer_key() {
    if (auto id = any(customers_)) {
      const int to = next_id_++;
      pg_.exec("UPDATE customers SET id = " + std::to_string(to) + " WHERE id = " + std::to_string(*id), db_);
      customers_.erase(*id);
      customers_.insert(to);
    }
  }
  void delete_one(const std::string& table, std::set<int>& ids) {
    if (auto id = any(ids)) {
      pg_.exec("DELETE FROM " + table + " WHERE id = " + std::to_string(*id), db_);
      ids.erase(*id);
    }
  }
  void insert_line() {
    const int order = 1 + pick(15), line = 1 + pick(5);
    if (lines_.count({order, line})) return;
    pg_.exec("INSERT INTO order_lines VALUES (" + std::to_string(order) + ", " + std::to_string(line) + ", " +
                 quoted("SKU-" + text(4)) + ", " + std::to_string(1 + pick(9)) + ", " + maybe_null(text(10)) + ")",
             db_);
    lines_.insert({order, line});
  }
  void update_line() {
    if (auto l = any(lines_))
      pg_.exec("UPDATE order_lines SET qty = qty + 1, note = " + maybe_null(text(6)) +
                   " WHERE order_id = " + std::to_string(l->first) + " AND line = " + std::to_string(l->second),
               db_);
  }
  void delete_line() {
    if (auto l = any(lines_)) {
      pg_.exec("DELETE FROM order_lines WHERE order_id = " + std::to_string(l->first) +
                   " AND line = " + std::to_string(l->second),
               db_);
      lines_.erase(*l);
    }
  }
  void insert_document() {
    const int id = next_id_++;
    pg_.exec("INSERT INTO documents VALUES (" + std::to_string(id) + ", " + quoted("doc " + text(4)) + ", " +
                 quoted(text(4000 + static_cast<size_t>(pick(4000)))) + ")",
             db_);
    documents_.insert(id);
  }
  void retitle_document() {
    if (auto id = any(documents_))
      pg_.exec("UPDATE documents SET title = " + quoted("retitled " + text(4)) + " WHERE id = " + std::to_string(*id),
               db_);
  }
  void rewrite_document() {
    if (auto id = any(documents_))
      pg_.exec("UPDATE documents SET body = " + quoted(text(5000)) + " WHERE id = " + std::to_string(*id), db_);
  }

  Postgres& pg_;
  std::string db_;
  std::mt19937 rng_;
  int next_id_ = 1;
  std::set<int> customers_, documents_;
  std::set<std::pair<int, int>> lines_;
};

// Which tables of the replica differ from the source ("" when none).
std::string differences(const Postgres& source, const std::string& source_db, const Postgres& replica,
                        const std::string& replica_db) {
  std::string out;
  for (const auto& [table, sql] : kCompare) {
    Rows a, b;
    try {
      a = source.query(sql, source_db);
      b = replica.query(sql, replica_db);
    } catch (const std::exception& e) {
      out += table + ": " + e.what() + "\n";
      continue;
    }
    if (a != b)
      out += table + ": source " + std::to_string(a.size()) + " rows, replica " + std::to_string(b.size()) + "\n";
  }
  return out;
}

TEST(Debezium, APostgresReplicaEndsEqualToItsSourceThroughKeyChangesToastTruncateAndKills) {
  auto& kafka = Kafka::shared();
  auto& replica = Postgres::shared();

  // The source: a server of its own with logical decoding.
  // A short folder name: the server's unix socket path must fit 107 bytes.
  const auto dir = std::filesystem::temp_directory_path() / ("picomq-dbz-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  ::setenv("PICOMQ_PG_CONF", "wal_level = logical\nmax_replication_slots = 4\nmax_wal_senders = 4", 1);
  Postgres source(dir, free_port());
  source.start();
  ::unsetenv("PICOMQ_PG_CONF");
  const std::string source_db = source.create_database("dbzsrc");
  source.exec(std::string(kSourceTables), source_db);
  const std::string replica_db = replica.create_database("dbzreplica");
  replica.exec(std::string(kReplicaTables), replica_db);

  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("workload seed " + std::to_string(seed));
  Workload work(source, source_db, seed);
  work.seed_rows();  // Debezium's snapshot reads these (op "r")

  const std::string prefix = "dbz" + std::to_string(getpid());
  std::vector<std::string> topics;
  for (const char* table : {"customers", "order_lines", "documents"}) {
    topics.push_back(prefix + ".public." + table);
    kafka.create_topic(topics.back());
  }
  KafkaConnect connect(dir / "connect", kafka.bootstrap(), "debezium-connector-postgres");
  connect.start("name=" + prefix +
                    "\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\ntasks.max=1\n"
                    "database.hostname=127.0.0.1\ndatabase.port=" +
                    std::to_string(source.port()) + "\ndatabase.user=postgres\ndatabase.password=unused\n" +
                    "database.dbname=" + source_db + "\ntopic.prefix=" + prefix +
                    "\nplugin.name=pgoutput\nslot.name=" + prefix + "\npublication.name=" + prefix +
                    "\npublication.autocreate.mode=filtered\n"
                    "table.include.list=public.customers,public.order_lines,public.documents\n"
                    "snapshot.mode=initial\nskipped.operations=none\n",
                "key.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=false\n"
                "value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false");

  const std::string key = "replica";
  std::string topic_list;
  for (const auto& t : topics) topic_list += (topic_list.empty() ? "\"" : ", \"") + t + "\"";
  const std::string definition =
      "type = \"sink\"\nkey = \"" + key + "\"\npath = \"libpicomq_connector_postgres_sink\"\n[[topics]]\ntopics = [" +
      topic_list + "]\nchanges = \"debezium\"\npoll_interval = \"100ms\"\nbatch_length = 50\n" + static_member(key) +
      "\n[plugin_config]\nconnection_string = \"" + replica.conninfo(replica_db) +
      "\"\ntarget_table = \"{topic_segment[-1]}\"\npayload_mode = \"columns\"\nwrite_mode = \"upsert\"\n"
      "include_metadata = false\n";
  Runtime rt(kafka.bootstrap(), key);
  rt.add_definition("replica.toml", definition);
  rt.start();

  // The snapshot lands first.
  ASSERT_TRUE(wait_until([&] { return differences(source, source_db, replica, replica_db).empty(); }, 120s))
      << differences(source, source_db, replica, replica_db) << connect.log().substr(0, 20000) << rt.log();

  // The workload, with the runtime killed twice in it and a truncate between.
  constexpr int kSteps = 600;
  int kills = 0;
  for (int i = 0; i < kSteps; ++i) {
    work.step();
    if (i == kSteps / 2) work.truncate_lines();
    if (i == kSteps / 4 || i == 3 * kSteps / 4) {
      rt.kill_hard();
      rt.wait_exit(10s);
      ++kills;
      rt.start();
    }
  }
  ASSERT_FALSE(connect.failed()) << connect.log();
  EXPECT_EQ(kills, 2);
  const bool equal = wait_until([&] { return differences(source, source_db, replica, replica_db).empty(); }, 180s);
  EXPECT_TRUE(equal) << differences(source, source_db, replica, replica_db) << rt.log();
  EXPECT_EQ(rt.sink_state(key), "running") << rt.log();
  // The events were what this test is about: unchanged TOAST values and a truncate among them.
  auto events = [&](const std::string& topic) {
    std::string all;
    for (const auto& r : kafka.consume(topic, 1u << 20, 5s)) all += r.value.value_or("") + "\n";
    return all;
  };
  EXPECT_NE(events(topics[2]).find("__debezium_unavailable_value"), std::string::npos);
  EXPECT_NE(events(topics[1]).find(R"("op":"t")"), std::string::npos);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  connect.stop();
  source.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace picomq::test
