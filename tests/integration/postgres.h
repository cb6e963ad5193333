#pragma once
// A real PostgreSQL 15 server for the tests (sinks/postgres/server.sh) and a small libpq client
// to set up and check what a sink wrote. One server per test process, started on first use on a
// free port, stopped when the process exits (and by a watchdog should the process crash).
// Every call opens its own connection: simple, and right across an outage (stop()/start()).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace picomq::test {

class Postgres {
 public:
  using Row = std::vector<std::optional<std::string>>;  // text values, NULL as nullopt

  // The server of this test process: started on first call (throws when it cannot start;
  // later calls throw the same error without retrying).
  static Postgres& shared();
  static void stop_shared();  // stops it and removes its folder; also run at process exit

  Postgres(std::filesystem::path dir, int port) : dir_(std::move(dir)), port_(port) {}
  // First call: a fresh cluster in dir. After stop(): the same data dir and port (an outage).
  void start();
  void stop();  // fast shutdown; idempotent

  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::string host() const { return "127.0.0.1"; }
  // libpq key=value connection string: host 127.0.0.1, user postgres (trust auth), UTF8.
  std::string conninfo(const std::string& database = "postgres") const;

  // Runs one or more statements; throws std::runtime_error with the server's message.
  void exec(const std::string& sql, const std::string& database = "postgres") const;
  // Rows of the last statement's result, every value as text.
  std::vector<Row> query(const std::string& sql, const std::string& database = "postgres") const;
  // A new empty database named <prefix>_<test name>_<n> (lowercase, [a-z0-9_], at most 63
  // chars, no quoting needed); returns its name.
  std::string create_database(const std::string& prefix) const;

 private:
  std::filesystem::path dir_;
  int port_;
};

// A definition of the postgres sink: `topics` the TOML array's items, already quoted ("a", "b");
// `block_lines` the rest of the [[topics]] block; `plugin_config` the lines after the
// connection string, which is the shared server's for `database` unless `conninfo` names one.
std::string postgres_definition(const std::string& key, const std::string& topics, const std::string& database,
                                const std::string& block_lines, const std::string& plugin_config,
                                const std::string& conninfo = "");

}  // namespace picomq::test
