#pragma once
// A real ClickHouse server (Debian's 18.16, sinks/clickhouse/server.sh) for the tests, and a small
// HTTP client to set up and check what the sink wrote. One server per test process, started on
// first use on a free port, stopped when the process exits (and by the script's watchdog should
// the process crash). Used by the sink's own tests, the integration tests and the conformance
// adapter.
#include <filesystem>
#include <string>
#include <vector>

namespace picomq::test {

class ClickHouseServer {
 public:
  // The server of this test process: started on first call (throws when it cannot start; later
  // calls throw the same error without retrying).
  static ClickHouseServer& shared();

  // The engine the suites run against (PICOMQ_CLICKHOUSE_ENGINE, server.sh): "18.16" (Debian's
  // server, the default) or "chdb" (the current engine, 26.x, behind tests/chdb_http.py).
  static std::string engine();
  static bool current_engine() { return engine() == "chdb"; }

  explicit ClickHouseServer(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void start();  // first call: a fresh server; after stop()/kill(): the same data and ports
  void stop();   // SIGTERM; idempotent
  void kill();   // SIGKILL (a crash)

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& dir() const { return dir_; }

  // Runs one statement (as `user`, no password; "writer" gets its password); the answer's body.
  // Throws std::runtime_error with the server's message (and the SQL) on an error.
  // `params`: more of the URL's query string, e.g. "&output_format_json_quote_64bit_integers=0".
  std::string query(const std::string& sql, const std::string& user = "default", const std::string& params = "") const;
  // Rows of a SELECT as tab-separated fields (FORMAT TSV is added): each row a vector of fields,
  // TSV-escaped values unescaped (\N stays "\N").
  std::vector<std::vector<std::string>> rows(const std::string& select) const;
  // The current engine's front only: its next `n` inserts are written and their answers lost (the
  // connection closed without one).
  void lose_next_insert_answers(int n) const;
  // A fresh database named <prefix>_<test name>_<n>; returns its name.
  std::string create_database(const std::string& prefix) const;

 private:
  std::filesystem::path dir_;
  int port_ = 0;
};

}  // namespace picomq::test
