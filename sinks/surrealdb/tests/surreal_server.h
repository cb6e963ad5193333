#pragma once
// A real SurrealDB 3.3.5 server for the tests (sinks/surrealdb/server.sh, surrealkv storage), one
// per test process, started on first use on a free loopback port, stopped when the process exits
// (and by the script's watchdog should the process crash). And a small client of its own (libcurl,
// POST /sql with JSON answers: another endpoint and format than the sink's /rpc in CBOR) to set
// up and read back what the sink wrote. Where the server binary is not on the machine (the shared
// servers folder is absent: sinks/surrealdb/fetch-server.sh), shared() returns nullptr and
// unavailable() says why: tests skip with SURREAL_OR_SKIP(), which prints the reason.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace picomq::test {

class SurrealServer {
 public:
  // The server of this test process, or nullptr when this machine has no server binary (throws
  // when it is there but does not start: a test then fails, it is never skipped).
  static SurrealServer* shared();
  static const std::string& unavailable();

  explicit SurrealServer(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void start();  // first call: a fresh server; after stop()/kill(): the same data and port
  void stop();
  void kill();  // SIGKILL (a crash)

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& dir() const { return dir_; }

  // A fresh namespace name <prefix>_<n> (not created).
  std::string fresh_namespace(const std::string& prefix) const;
  // Runs SurrealQL `text` through POST /sql as root in ns/db ("" : no header); the answer of each
  // statement ({"status", "result", ...}). Throws on a non-200 answer.
  nlohmann::json sql(const std::string& ns, const std::string& db, const std::string& text) const;
  // The result of the last statement; throws when any statement's status is not OK.
  nlohmann::json result(const std::string& ns, const std::string& db, const std::string& text) const;
  // Creates ns and db.
  void create(const std::string& ns, const std::string& db) const;

 private:
  std::filesystem::path dir_;
  int port_ = 0;
};

}  // namespace picomq::test

// In a test body: skips (with the reason, printed) when this machine has no SurrealDB server.
#define SURREAL_OR_SKIP()                                                                          \
  do {                                                                                             \
    if (!::picomq::test::SurrealServer::shared()) {                                                \
      std::fprintf(stderr, "SKIPPED: %s\n", ::picomq::test::SurrealServer::unavailable().c_str()); \
      GTEST_SKIP() << ::picomq::test::SurrealServer::unavailable();                                \
    }                                                                                              \
  } while (0)
