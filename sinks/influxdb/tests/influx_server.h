#pragma once
// Real InfluxDB servers for the tests: 1.6.7 (v1 API, Debian's package, authentication on) and 2.8.0 (v2 API)
// from sinks/influxdb/server.sh, one of each per test process, started on first use on free
// loopback ports, stopped when the process exits (and by the script's watchdog should the process
// crash). And a small read-back client of the tests' own: InfluxQL over GET /query (1.x) and Flux
// over POST /api/v2/query with the datatype annotation (2.x), database / bucket set-up.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace picomq::test {

class InfluxServer {
 public:
  static constexpr const char* kUser = "picomq";
  static constexpr const char* kPassword = "picomq-secret";
  static constexpr const char* kToken = "picomq-test-token";
  static constexpr const char* kOrg = "picomq";

  // The server of this version (1 or 2) for this test process: started on first call (throws
  // when it cannot start; later calls throw the same error; a test then fails, never skips).
  static InfluxServer& shared(int version);

  InfluxServer(std::filesystem::path dir, int version) : dir_(std::move(dir)), version_(version) {}
  void start();  // first call: a fresh server; after stop()/kill(): the same data and port
  void stop();
  void kill();  // SIGKILL (a crash)

  int version() const { return version_; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& dir() const { return dir_; }

  // A fresh name <prefix>_<test>_<n>: created as a database (1.x) or bucket (2.x) of org picomq.
  std::string fresh_database(const std::string& prefix) const;

  // 1.x: an InfluxQL statement's series ({"name", "tags", "columns", "values"}), as the admin
  // user. Throws with the server's error.
  std::vector<nlohmann::json> influxql(const std::string& db, const std::string& statement) const;
  // 1.x: tag keys, and field keys with their types, of a measurement.
  std::vector<std::string> tag_keys(const std::string& db, const std::string& measurement) const;
  std::map<std::string, std::string> field_types(const std::string& db, const std::string& measurement) const;

  // 2.x: a Flux query's rows, each column -> value, and "#type:<column>" -> its annotated datatype
  // (long, unsignedLong, double, string, boolean, dateTime:RFC3339).
  using Row = std::map<std::string, std::string>;
  std::vector<Row> flux(const std::string& query) const;
  // 2.x: every point of `measurement` in `bucket` (unpivoted: one row per field).
  std::vector<Row> flux_points(const std::string& bucket, const std::string& measurement) const;

  // Points of a measurement (both versions): how many distinct times x series.
  int64_t point_count(const std::string& db, const std::string& measurement) const;

 private:
  std::filesystem::path dir_;
  int version_;
  int port_ = 0;
};

}  // namespace picomq::test
