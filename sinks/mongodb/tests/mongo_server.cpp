#include "mongo_server.h"

#include <gtest/gtest.h>
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/testing/shared_server.hpp"

namespace picomq::test {
namespace {

// sinks/mongodb/server.sh (a compile definition of this file alone: the compiler cache serves
// the rest to any clone).
const std::string kScript = PICOMQ_MONGODB_SH;

std::string run_script(const std::string& args, const std::string& what) {
  return kit::testing::run_server_script(kScript, args, what + " FerretDB");
}

struct Pooled {
  explicit Pooled(void* pool)
      : pool(static_cast<mongoc_client_pool_t*>(pool)), client(mongoc_client_pool_pop(this->pool)) {}
  ~Pooled() { mongoc_client_pool_push(pool, client); }
  mongoc_client_pool_t* pool;
  mongoc_client_t* client;
};

bson_t* from_json(const std::string& json) {
  bson_error_t e;
  bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()), static_cast<ssize_t>(json.size()), &e);
  if (!b) throw std::runtime_error(std::string("test: not Extended JSON: ") + e.message + ": " + json);
  return b;
}

nlohmann::json to_json(const bson_t* doc) {
  char* s = bson_as_relaxed_extended_json(doc, nullptr);
  nlohmann::json j = nlohmann::json::parse(s);
  bson_free(s);
  return j;
}

std::string read_all(const std::filesystem::path& p) {
  FILE* f = std::fopen(p.c_str(), "r");
  if (!f) throw std::runtime_error("test: cannot read " + p.string());
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace

MongoServer& MongoServer::shared() { return kit::testing::SharedServer<MongoServer>::get("picomq-mongo"); }

MongoServer::~MongoServer() {
  if (pool_) mongoc_client_pool_destroy(static_cast<mongoc_client_pool_t*>(pool_));
}

void MongoServer::start() {
  const std::string out = run_script("start " + dir_.string() + " --owner " + std::to_string(getpid()), "start");
  port_ = std::stoi(out);
}
void MongoServer::stop() { (void)std::system(("bash " + kScript + " stop " + dir_.string()).c_str()); }
void MongoServer::kill() { run_script("kill " + dir_.string(), "kill"); }
void MongoServer::backend_stop() { run_script("backend-stop " + dir_.string(), "stop the PostgreSQL of"); }
void MongoServer::backend_start() { run_script("backend-start " + dir_.string(), "start the PostgreSQL of"); }

std::string MongoServer::backend_psql() const {
  const std::string pg_port = read_all(dir_ / "pg_port");
  return "psql -h 127.0.0.1 -p " + pg_port.substr(0, pg_port.find_first_of("\r\n")) +
         " -U postgres -d postgres -At -q -v ON_ERROR_STOP=1";
}

std::string MongoServer::backend_sql(const std::string& sql) const {
  // The statement goes through a file: no shell quoting of its identifiers and literals.
  static std::atomic<int> n{0};
  const auto file = dir_ / ("backend-" + std::to_string(getpid()) + "-" + std::to_string(++n) + ".sql");
  {
    FILE* f = std::fopen(file.c_str(), "w");
    if (!f) throw std::runtime_error("test: cannot write " + file.string());
    std::fputs(sql.c_str(), f);
    std::fclose(f);
  }
  const std::string cmd = backend_psql() + " -f " + file.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("test: could not run " + cmd);
  std::string out;
  char buf[256];
  while (size_t k = fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  const int rc = pclose(p);
  std::filesystem::remove(file);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (rc != 0) throw std::runtime_error("test: psql failed on " + sql + ": " + out);
  return out;
}

std::string MongoServer::backend_table(const std::string& db, const std::string& collection) const {
  auto literal = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
  };
  return backend_sql("SELECT _jsonb->>'table' FROM \"" + db +
                     "\"._ferretdb_database_metadata WHERE _jsonb->>'_id' = " + literal(collection));
}

int MongoServer::backend_locks(const std::string& db, const std::string& table, bool granted) const {
  return std::stoi(
      backend_sql("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace s "
                  "ON s.oid = c.relnamespace WHERE s.nspname = '" +
                  db + "' AND c.relname = '" + table + "' AND " + (granted ? "l.granted" : "NOT l.granted")));
}

MongoServer::TableLock::TableLock(const MongoServer& server, const std::string& db, const std::string& collection)
    : table_(server.backend_table(db, collection)) {
  if (table_.empty()) throw std::runtime_error("test: no FerretDB table for " + db + "." + collection);
  psql_ = popen((server.backend_psql() + " >/dev/null 2>&1").c_str(), "w");
  if (!psql_) throw std::runtime_error("test: could not run psql");
  std::fprintf(psql_, "BEGIN;\nLOCK TABLE \"%s\".\"%s\" IN EXCLUSIVE MODE;\n", db.c_str(), table_.c_str());
  std::fflush(psql_);
  for (int i = 0; i < 400 && server.backend_locks(db, table_, true) == 0; ++i) usleep(50'000);
  if (server.backend_locks(db, table_, true) == 0) throw std::runtime_error("test: the table lock was not granted");
}

void MongoServer::TableLock::release() {
  if (!psql_) return;
  std::fprintf(psql_, "COMMIT;\n\\q\n");
  pclose(psql_);
  psql_ = nullptr;
}

void* MongoServer::client_pool() const {
  static std::once_flag init;
  std::call_once(init, [] { mongoc_init(); });
  auto* self = const_cast<MongoServer*>(this);
  if (!self->pool_) {
    bson_error_t e;
    mongoc_uri_t* uri = mongoc_uri_new_with_error((this->uri() + "?serverSelectionTimeoutMS=10000").c_str(), &e);
    if (!uri) throw std::runtime_error(std::string("test: ") + e.message);
    self->pool_ = mongoc_client_pool_new(uri);
    mongoc_client_pool_set_error_api(static_cast<mongoc_client_pool_t*>(self->pool_), MONGOC_ERROR_API_VERSION_2);
    mongoc_uri_destroy(uri);
  }
  return pool_;
}

std::string MongoServer::fresh_database(const std::string& prefix) const {
  static std::atomic<int> counter{0};
  auto clean = [](std::string s) {
    for (auto& c : s)
      c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) : '_';
    return s;
  };
  std::string test = "t";
  if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) test = info->name();
  const std::string suffix = "_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
  std::string name = clean(prefix) + "_" + clean(test);
  // FerretDB on PostgreSQL keeps a database as a schema: 63 bytes at most.
  return name.substr(0, 60 - suffix.size()) + suffix;
}

std::vector<nlohmann::json> MongoServer::find(const std::string& db, const std::string& collection,
                                              const std::string& filter, const std::string& sort,
                                              const std::string& projection) const {
  Pooled pc(client_pool());
  mongoc_collection_t* coll = mongoc_client_get_collection(pc.client, db.c_str(), collection.c_str());
  bson_t* f = from_json(filter);
  std::string options = "{";
  if (!sort.empty()) options += "\"sort\": " + sort;
  if (!projection.empty()) options += std::string(sort.empty() ? "" : ", ") + "\"projection\": " + projection;
  bson_t* opts = from_json(options + "}");
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(coll, f, opts, nullptr);
  std::vector<nlohmann::json> out;
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) out.push_back(to_json(doc));
  bson_error_t e;
  const bool failed = mongoc_cursor_error(cursor, &e);
  mongoc_cursor_destroy(cursor);
  bson_destroy(f);
  bson_destroy(opts);
  mongoc_collection_destroy(coll);
  if (failed) throw std::runtime_error("test: find in " + db + "." + collection + ": " + e.message);
  return out;
}

int64_t MongoServer::count(const std::string& db, const std::string& collection, const std::string& filter) const {
  Pooled pc(client_pool());
  mongoc_collection_t* coll = mongoc_client_get_collection(pc.client, db.c_str(), collection.c_str());
  bson_t* f = from_json(filter);
  bson_error_t e;
  const int64_t n = mongoc_collection_count_documents(coll, f, nullptr, nullptr, nullptr, &e);
  bson_destroy(f);
  mongoc_collection_destroy(coll);
  if (n < 0) throw std::runtime_error("test: count in " + db + "." + collection + ": " + e.message);
  return n;
}

std::vector<std::string> MongoServer::collections(const std::string& db) const {
  Pooled pc(client_pool());
  mongoc_database_t* d = mongoc_client_get_database(pc.client, db.c_str());
  bson_error_t e;
  char** names = mongoc_database_get_collection_names_with_opts(d, nullptr, &e);
  mongoc_database_destroy(d);
  if (!names) throw std::runtime_error("test: collections of " + db + ": " + e.message);
  std::vector<std::string> out;
  for (char** n = names; *n; ++n) out.emplace_back(*n);
  bson_strfreev(names);
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json MongoServer::command(const std::string& db, const std::string& command_json) const {
  Pooled pc(client_pool());
  bson_t* cmd = from_json(command_json);
  bson_t reply;
  bson_error_t e;
  const bool ok = mongoc_client_command_simple(pc.client, db.c_str(), cmd, nullptr, &reply, &e);
  bson_destroy(cmd);
  nlohmann::json out = to_json(&reply);
  bson_destroy(&reply);
  if (!ok) throw std::runtime_error("test: command " + command_json + " on " + db + ": " + e.message);
  return out;
}

}  // namespace picomq::test
