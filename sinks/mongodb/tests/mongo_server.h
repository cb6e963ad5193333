#pragma once
// A real MongoDB-wire server for the tests: FerretDB v1.24.2 on PostgreSQL 15
// (sinks/mongodb/server.sh), one per test process, started on first use on free loopback ports,
// stopped when the process exits (and by the script's watchdog should the process crash). And a
// small libmongoc client of its own (queries through libmongoc's find / count / commands, not the
// sink's code) to set up and read back what the sink wrote. Used by the sink's own tests, its
// Kafka tests and the conformance adapter.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace picomq::test {

class MongoServer {
 public:
  // The server of this test process: started on first call (throws when it cannot start; later
  // calls throw the same error without retrying; a test then fails, it is never skipped).
  static MongoServer& shared();

  explicit MongoServer(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~MongoServer();
  void start();          // first call: fresh servers; after stop()/kill(): the same data and ports
  void stop();           // FerretDB and PostgreSQL; idempotent
  void kill();           // SIGKILL FerretDB (a crash)
  void backend_stop();   // PostgreSQL down under a running FerretDB: writes fail
  void backend_start();  // and back

  int port() const { return port_; }
  std::string uri() const { return "mongodb://127.0.0.1:" + std::to_string(port_) + "/"; }
  const std::filesystem::path& dir() const { return dir_; }

  // A fresh database name <prefix>_<test>_<n> (MongoDB creates it on the first write).
  std::string fresh_database(const std::string& prefix) const;
  // Documents of db.collection matching `filter` (Extended JSON), sorted by `sort` ("": not
  // sorted), only the `projection` fields ("": all), each as relaxed Extended JSON parsed
  // ({"$date": ...}, {"$binary": ...}, {"$oid": ...}).
  std::vector<nlohmann::json> find(const std::string& db, const std::string& collection,
                                   const std::string& filter = "{}", const std::string& sort = "{\"_id\": 1}",
                                   const std::string& projection = "") const;
  int64_t count(const std::string& db, const std::string& collection, const std::string& filter = "{}") const;
  std::vector<std::string> collections(const std::string& db) const;
  // Runs a command (Extended JSON) on `db`; its reply. Throws with the server's message.
  nlohmann::json command(const std::string& db, const std::string& command_json) const;

  // The PostgreSQL behind FerretDB, where FerretDB 1.24 keeps a database as a schema of that
  // name and each collection as a table of one jsonb column, named in the schema's
  // _ferretdb_database_metadata (used to stall one collection's writes with a table lock).
  // psql's command line to it (add -c / -f, or feed stdin).
  std::string backend_psql() const;
  // One SQL statement's result, unaligned, trimmed. Throws when psql fails.
  std::string backend_sql(const std::string& sql) const;
  // The table of db.collection ("" while the collection does not exist).
  std::string backend_table(const std::string& db, const std::string& collection) const;
  // Locks on that table: held (granted) or waited for (not granted).
  int backend_locks(const std::string& db, const std::string& table, bool granted) const;

  // A PostgreSQL session holding EXCLUSIVE on db.collection's table until release() (or the
  // end of the object): reads go on, FerretDB's INSERTs into it wait — a stalled collection.
  class TableLock {
   public:
    TableLock(const MongoServer& server, const std::string& db, const std::string& collection);
    ~TableLock() { release(); }
    TableLock(const TableLock&) = delete;
    TableLock& operator=(const TableLock&) = delete;
    void release();
    const std::string& table() const { return table_; }

   private:
    FILE* psql_ = nullptr;
    std::string table_;
  };

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  void* pool_ = nullptr;  // mongoc_client_pool_t
  void* client_pool() const;
};

}  // namespace picomq::test
