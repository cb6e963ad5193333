#pragma once
// A real SeaweedFS 4.48 S3 server (sinks/s3/server.sh; it verifies SigV4 signatures) for the
// tests, and what they check the sink's objects with: boto3 (PyPI, tools/venv), an independent
// S3 client. One server per test process, started on first use on free ports, stopped when the
// process exits (and by the script's watchdog should the process crash). Used by the sink's own
// tests, its integration tests and its conformance adapter.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace picomq::test {

struct S3Object {
  std::string key;
  std::string bytes;  // as stored
  std::string text;   // decompressed by the key's extension (.gz, .zst), else the bytes
  std::string etag;
};

class SeaweedfsServer {
 public:
  static constexpr const char* kAccessKey = "picomq-test";
  static constexpr const char* kSecretKey = "picomq-test-secret";

  // The server of this test process: started on first call (throws when it cannot start; later
  // calls throw the same error without retrying).
  static SeaweedfsServer& shared();

  explicit SeaweedfsServer(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void start();  // first call: a fresh server; after stop()/kill(): the same data and ports
  void stop();   // SIGKILL; idempotent
  void kill() { stop(); }

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The server's Iceberg REST catalog (SeaweedFS serves one next to S3; server.sh gives it a port).
  int iceberg_port() const;
  std::string iceberg_endpoint() const { return "http://127.0.0.1:" + std::to_string(iceberg_port()); }
  const std::filesystem::path& dir() const { return dir_; }
  // The lines of the server's log that say why it takes no writes (low disk), or "nothing".
  std::string disk_space_complaints() const;

  // A fresh bucket named <prefix>-<pid>-<n> (lower case); returns its name. Created with a
  // signed PUT (the kit's client): throws with S3's answer when refused.
  std::string create_bucket(const std::string& prefix) const;
  // Writes one object with a signed PUT (the kit's client); throws with S3's answer when refused.
  void put_object(const std::string& bucket, const std::string& key, const std::string& body,
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) const;
  // Every object of `bucket` under `prefix`, by key, read with boto3 (but the S3 sink's probe
  // objects `_picomq/conditional-write-probe`).
  std::vector<S3Object> objects(const std::string& bucket, const std::string& prefix = "") const;
  // [plugin_config] lines that reach this server with the test credentials.
  std::string plugin_config(const std::string& bucket) const;

 private:
  std::filesystem::path dir_;
  int port_ = 0;
};

}  // namespace picomq::test
