// A real change-data pipeline (docs/changes.md): PostgreSQL with wal_level = logical -> Debezium's
// PostgreSQL connector (3.6.1.Final, from Maven Central) in a Kafka Connect worker -> Kafka ->
// picomq-connect (changes = "debezium") -> a PostgreSQL replica, ClickHouse, OpenSearch and
// MongoDB (FerretDB), one sink each in the same runtime. A random workload of inserts, updates and deletes on three
// tables (a composite key, NULLs, key changes, a TOASTed column Debezium reports as unavailable, a truncate) runs while
// the runtime is killed with SIGKILL and restarted; once it has caught up, every table of every destination holds
// exactly the source's rows.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "clickhouse_server.h"
#include "delta_table.h"
#include "harness.h"
#include "kafka_connect.h"
#include "mongo_server.h"
#include "postgres.h"
#include "search_server.h"

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

// A table's rows as text, in key order; NULL as "\\N".
using Table = std::vector<std::vector<std::string>>;

// The compared tables and their columns, in key order (the key first).
struct Compared {
  std::string table, columns, order;
};
const std::vector<Compared> kCompare = {
    {"customers", "id, name, email", "id"},
    {"order_lines", "order_id, line, sku, qty, note", "order_id, line"},
    {"documents", "id, title, body", "id"},
};

Table text_rows(const std::vector<Postgres::Row>& rows) {
  Table out;
  for (const auto& row : rows) {
    auto& r = out.emplace_back();
    for (const auto& v : row) r.push_back(v.value_or("\\N"));
  }
  return out;
}

// A PostgreSQL database's table (the source's, the replica's): every column as text.
Table postgres_rows(const Postgres& pg, const std::string& db, const Compared& c) {
  // Each column as text, and the order by the table's own columns (an output column of the same
  // name, the text, would sort 10 before 2).
  auto each = [&](std::string_view list, const std::string& before, const std::string& after) {
    std::string out;
    while (!list.empty()) {
      const size_t comma = list.find(", ");
      if (!out.empty()) out += ", ";
      out += before;
      out += list.substr(0, comma);
      out += after;
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 2);
    }
    return out;
  };
  return text_rows(pg.query(
      "SELECT " + each(c.columns, "", "::text") + " FROM " + c.table + " ORDER BY " + each(c.order, c.table + ".", ""),
      db));
}

// The columns of `c` of documents (OpenSearch's _source, MongoDB's relaxed Extended JSON), in key
// order: a row's key columns are integers.
Table document_rows(const std::vector<nlohmann::json>& documents, const Compared& c) {
  std::vector<std::string> names;
  for (std::string_view rest = c.columns; !rest.empty();) {
    const size_t comma = rest.find(", ");
    names.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
  }
  auto text = [](const nlohmann::json& v) -> std::string {
    if (v.is_null()) return "\\N";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("$numberLong")) return v["$numberLong"].get<std::string>();
    if (v.is_object() && v.contains("$numberInt")) return v["$numberInt"].get<std::string>();
    return v.dump();
  };
  Table out;
  for (const auto& d : documents) {
    auto& row = out.emplace_back();
    for (const auto& n : names) row.push_back(d.contains(n) ? text(d[n]) : "\\N");
  }
  const size_t key_columns = static_cast<size_t>(std::count(c.order.begin(), c.order.end(), ',')) + 1;
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    for (size_t i = 0; i < key_columns; ++i)
      if (a[i] != b[i]) return std::stoll(a[i]) < std::stoll(b[i]);
    return false;
  });
  return out;
}

// docs/changes.md's worked example: the Debezium connector's properties and the definition.
struct WorkedExample {
  std::string properties, definition;
};
WorkedExample worked_example() {
  std::ifstream in(PICOMQ_CHANGES_DOC);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("## A worked example");
  if (at == std::string::npos) throw std::runtime_error("docs/changes.md has no worked example");
  auto block = [&](const std::string& fence) {
    const std::string open = "```" + fence + "\n";
    const size_t begin = text.find(open, at);
    if (begin == std::string::npos) throw std::runtime_error("the worked example has no " + fence + " block");
    const size_t from = begin + open.size();
    return text.substr(from, text.find("```", from) - from);
  };
  return {block("properties"), block("toml")};
}

// The page's properties with `values` set in place of its own.
std::string connector_properties(const std::string& page, const std::map<std::string, std::string>& values) {
  std::string out;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find('=');
    auto it = eq == std::string::npos ? values.end() : values.find(line.substr(0, eq));
    out += (it == values.end() ? line : it->first + "=" + it->second) + "\n";
  }
  return out;
}

// The page's definition with this test's key, topics (`prefix` for "shop") and connection string,
// and the test's consumer settings in its block.
std::string replica_definition(const std::string& page, const std::string& key, const std::string& prefix,
                               const std::string& conninfo) {
  std::string out;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("key = ")) line = "key = \"" + key + "\"";
    if (line.starts_with("connection_string = ")) line = "connection_string = \"" + conninfo + "\"";
    if (line.starts_with("topics = "))
      for (size_t at; (at = line.find("\"shop.")) != std::string::npos;) line.replace(at + 1, 4, prefix);
    out += line + "\n";
    if (line.starts_with("changes = "))
      out += "poll_interval = \"100ms\"\nbatch_length = 50\n" + static_member(key) + "\n";
  }
  return out;
}

// The parts one after another (a definition's text).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out += ... += parts);
  return out;
}

// Where the changes go, and what each destination holds.
struct Destination {
  std::string name;        // for messages
  std::string definition;  // the sink's definition ([[topics]] filled in by the test unless it starts with type =)
  std::function<Table(const Compared&)> rows;
  std::string only;  // compared on this table alone ("" every table)
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

// Which tables of the destinations differ from the source ("" when none).
std::string differences(const Postgres& source, const std::string& source_db,
                        const std::vector<Destination>& destinations) {
  std::string out;
  for (const Compared& c : kCompare) {
    Table want;
    try {
      want = postgres_rows(source, source_db, c);
    } catch (const std::exception& e) {
      return "source " + c.table + ": " + e.what() + "\n";
    }
    for (const Destination& d : destinations) {
      if (!d.only.empty() && d.only != c.table) continue;
      Table got;
      try {
        got = d.rows(c);
      } catch (const std::exception& e) {
        out += d.name + " " + c.table + ": " + e.what() + "\n";
        continue;
      }
      if (got == want) continue;
      out += d.name + " " + c.table + ": source " + std::to_string(want.size()) + " rows, " + d.name + " " +
             std::to_string(got.size());
      for (size_t i = 0; i < std::max(want.size(), got.size()); ++i)
        if (i >= want.size() || i >= got.size() || want[i] != got[i]) {
          auto show = [](const Table& t, size_t n) {
            std::string row;
            if (n < t.size())
              for (const auto& v : t[n]) row += (row.empty() ? "" : "|") + v.substr(0, 40);
            return row;
          };
          out += "; first difference at row " + std::to_string(i) + ": source [" + show(want, i) + "], " + d.name +
                 " [" + show(got, i) + "]";
          break;
        }
      out += "\n";
    }
  }
  return out;
}

TEST(Debezium, EveryDestinationEndsEqualToTheSourceThroughKeyChangesToastTruncateAndKills) {
  auto& kafka = Kafka::shared();
  auto& replica = Postgres::shared();
  auto& clickhouse = ClickHouseServer::shared();

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
  // The worked example of docs/changes.md, with this test's names in place of the page's.
  const WorkedExample example = worked_example();
  connect.start(connector_properties(example.properties, {{"name", prefix},
                                                          {"database.hostname", "127.0.0.1"},
                                                          {"database.port", std::to_string(source.port())},
                                                          {"database.user", "postgres"},
                                                          {"database.password", "unused"},
                                                          {"database.dbname", source_db},
                                                          {"topic.prefix", prefix},
                                                          {"slot.name", prefix},
                                                          {"publication.name", prefix}}),
                "key.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=false\n"
                "value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false");

  std::string topic_list;
  for (const auto& t : topics) topic_list += (topic_list.empty() ? "\"" : ", \"") + t + "\"";
  std::vector<Destination> destinations;
  destinations.push_back(
      {"replica", replica_definition(example.definition, prefix + "-replica", prefix, replica.conninfo(replica_db)),
       [&](const Compared& c) { return postgres_rows(replica, replica_db, c); }, ""});
  const std::string ch_db = clickhouse.create_database("dbz");
  destinations.push_back(
      {"clickhouse",
       "path = \"libpicomq_connector_clickhouse_sink\"\n[plugin_config]\nurl = \"" + clickhouse.url() +
           "\"\ndatabase = \"" + ch_db + "\"\ntarget_table = \"{topic_segment[-1]}\"\ninclude_metadata = false\n",
       [&](const Compared& c) {
         // Each key's latest row, deleted keys left out: what a reader of the table sees.
         std::string select;
         for (std::string_view rest = c.columns; !rest.empty();) {
           const size_t comma = rest.find(", ");
           select += (select.empty() ? "toString(" : ", toString(") + std::string(rest.substr(0, comma)) + ")";
           rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
         }
         return clickhouse.rows("SELECT " + select + " FROM (SELECT * FROM " + ch_db + ".`" + c.table +
                                "` FINAL) WHERE pico_deleted = 0 ORDER BY " + c.order);
       },
       ""});
  auto& opensearch = SearchServer::shared(SearchServer::Flavor::OpenSearch);
  destinations.push_back({"opensearch",
                          "path = \"libpicomq_connector_elasticsearch_sink\"\n[plugin_config]\nurl = \"" +
                              opensearch.url() + "\"\nindex = \"" + prefix +
                              "-{topic_segment[-1]}\"\ndocument = \"payload\"\n",
                          [&](const Compared& c) {
                            const std::string index = prefix + "-" + c.table;
                            if (opensearch.call("HEAD", "/" + index).status == 404) return Table{};
                            return document_rows(opensearch.documents(index), c);
                          },
                          ""});
  auto& mongo = MongoServer::shared();
  const std::string mongo_db = mongo.fresh_database("dbz");
  destinations.push_back(
      {"mongodb",
       "path = \"libpicomq_connector_mongodb_sink\"\n[plugin_config]\nconnection_uri = \"" + mongo.uri() +
           "\"\ndatabase = \"" + mongo_db +
           "\"\ncollection = \"{topic_segment[-1]}\"\nwrite_strategy = \"replace\"\nid_strategy = \"key\"\n"
           "include_metadata = false\n",
       [&](const Compared& c) { return document_rows(mongo.find(mongo_db, c.table), c); }, ""});
#ifdef PICOMQ_WITH_DELTA
  // Delta: a table per source table, created by its owner (as the sink requires under changes),
  // one definition each (a definition writes one table).
  const auto lake = dir / "lake";
  const std::map<std::string, std::string> lake_columns = {
      {"customers", R"([["id","int64",false],["name","string",true],["email","string",true]])"},
      {"order_lines",
       R"([["order_id","int64",false],["line","int64",false],["sku","string",true],["qty","int64",true],["note","string",true]])"},
      {"documents", R"([["id","int64",false],["title","string",true],["body","string",true]])"}};
  for (const auto& [name, columns] : lake_columns) {
    const std::string table = name, uri = (lake / name).string(), key = cat(prefix, "-delta-", name);
    delta::table_tool(cat("create-with ", uri, " '", columns, "'"));
    destinations.push_back({"delta-" + table,
                            cat("type = \"sink\"\nkey = \"", key, "\"\npath = \"libpicomq_connector_delta_sink\"\n",
                                "[[topics]]\ntopics = [\"", prefix, ".public.", table, "\"]\nchanges = \"debezium\"\n",
                                "poll_interval = \"100ms\"\nbatch_length = 50\n", static_member(key),
                                "\n[plugin_config]\ntable_uri = \"", uri, "\"\ncommit_interval = \"1s\"\n"),
                            [&lake, table](const Compared& c) {
                              const nlohmann::json dump = delta::table_tool("dump " + (lake / table).string());
                              return document_rows(dump["rows"].get<std::vector<nlohmann::json>>(), c);
                            },
                            table});
  }
#endif
  Runtime rt(kafka.bootstrap(), prefix);
  for (const Destination& d : destinations) {
    const std::string key = prefix + "-" + d.name;
    if (d.definition.starts_with("type = ")) {  // a whole definition (the page's)
      rt.add_definition(d.name + ".toml", d.definition);
      continue;
    }
    const std::string plugin_config = d.definition.substr(d.definition.find("[plugin_config]"));
    rt.add_definition(d.name + ".toml",
                      cat("type = \"sink\"\nkey = \"", key, "\"\n",
                          d.definition.substr(0, d.definition.find("[plugin_config]")), "[[topics]]\ntopics = [",
                          topic_list, "]\nchanges = \"debezium\"\npoll_interval = \"100ms\"\nbatch_length = 50\n",
                          static_member(key), "\n", plugin_config));
  }
  rt.start();
  auto diff = [&] { return differences(source, source_db, destinations); };

  // The snapshot lands first.
  ASSERT_TRUE(wait_until([&] { return diff().empty(); }, 120s)) << diff() << connect.log().substr(0, 20000) << rt.log();

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
  const bool equal = wait_until([&] { return diff().empty(); }, 180s);
  EXPECT_TRUE(equal) << diff() << rt.log();
  for (const Destination& d : destinations) EXPECT_EQ(rt.sink_state(prefix + "-" + d.name), "running") << rt.log();
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

// The sinks that cannot apply changes refuse them at --check, at the block's key, naming the sink
// (docs/changes.md: Iceberg for its library's commits, the append-only sinks for having no rows).
TEST(Debezium, SinksThatCannotApplyChangesRefuseThemAtCheck) {
  auto& kafka = Kafka::shared();
  std::vector<std::pair<std::string, std::string>> sinks = {{"s3", "libpicomq_connector_s3_sink"},
                                                            {"http", "libpicomq_connector_http_sink"},
                                                            {"influxdb", "libpicomq_connector_influxdb_sink"},
                                                            {"quickwit", "libpicomq_connector_quickwit_sink"}};
#ifdef PICOMQ_WITH_ICEBERG
  sinks.emplace_back("iceberg", "libpicomq_connector_iceberg_sink");
#endif
  for (const auto& [name, path] : sinks) {
    SCOPED_TRACE(name);
    Runtime rt(kafka.bootstrap());
    rt.add_definition(name + ".toml",
                      cat("type = \"sink\"\nkey = \"refuse_", name, "\"\npath = \"", path,
                          "\"\n[[topics]]\ntopics = [\"shop.public.customers\"]\nchanges = \"debezium\"\n"));
    auto [code, out] = rt.check();
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("key 'topics[0].changes': the sink '" + name + "' does not apply change events"),
              std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace picomq::test
