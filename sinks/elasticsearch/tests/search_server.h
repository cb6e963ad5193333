#pragma once
// Real OpenSearch and Elasticsearch nodes (sinks/elasticsearch/server.sh, from the machine's server
// cache: OpenSearch 3.6.0 or 2.19.6 by PICOMQ_OPENSEARCH_VERSION, Elasticsearch 8.19.21 or 7.10.2
// by PICOMQ_ELASTICSEARCH_VERSION; the newest unless told) for the tests, and a small HTTP client to
// set up and read back what the sink wrote. One node of each flavor per test process, started on
// first use (or early, in the background, with start_early()) on free loopback ports, heap 512 MB,
// stopped when the process exits (and by the script's watchdog should the process crash). A node
// that cannot start fails every test that needs it, loudly. Used by the sink's tests and the
// conformance adapter.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace picomq::test {

class SearchServer {
 public:
  enum class Flavor { OpenSearch, Elasticsearch };

  // Begins starting these nodes in the background (both at once: a JVM start is mostly waiting).
  static void start_early(std::initializer_list<Flavor> flavors);
  // The node of this flavor of this test process: started on first call unless start_early()
  // did; throws when it cannot start (later calls throw the same error).
  static SearchServer& shared(Flavor flavor);

  SearchServer(Flavor flavor, std::filesystem::path dir) : flavor_(flavor), dir_(std::move(dir)) {}
  void start();  // after stop()/kill(): the same data and port
  void stop();   // SIGTERM; idempotent
  void kill();   // SIGKILL (a crash)
  // SIGSTOP / SIGCONT: a node that accepts connections and answers nothing (an outage that ends
  // at once when it is resumed, without a JVM start).
  void pause(bool paused);

  Flavor flavor() const { return flavor_; }
  // "OpenSearch 3.6.0", "Elasticsearch 8.19.21", ...: the node's own version (GET / once started).
  std::string name() const { return (flavor_ == Flavor::OpenSearch ? "OpenSearch " : "Elasticsearch ") + version_; }
  const std::string& version() const { return version_; }
  int major() const { return version_.empty() ? 0 : std::stoi(version_); }
  // The error type of a document that does not fit its mapping: Elasticsearch 8.8+ names it
  // document_parsing_exception, OpenSearch and older Elasticsearch mapper_parsing_exception.
  std::string parsing_exception() const {
    return flavor_ == Flavor::Elasticsearch && major() >= 8 ? "document_parsing_exception" : "mapper_parsing_exception";
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& dir() const { return dir_; }

  struct Reply {
    long status = 0;  // 0: no answer
    std::string text;
    nlohmann::json json;  // the body parsed (null when not JSON)
  };
  Reply call(const std::string& method, const std::string& path, const std::string& body = "",
             const std::string& content_type = "application/json") const;
  // call() that throws std::runtime_error unless the status is 2xx.
  nlohmann::json ok(const std::string& method, const std::string& path, const std::string& body = "") const;

  // A fresh index name <prefix>-<test name>-<n> (lower case; not created).
  std::string unique_index(const std::string& prefix) const;
  // Documents in `index` after a refresh (_count).
  int64_t count(const std::string& index) const;
  // The _source of document `id`, or nullopt (GET <index>/_doc/<id>).
  std::optional<nlohmann::json> document(const std::string& index, const std::string& id) const;
  // Every document of `index` after a refresh, each its _source with "_id" added, by _id.
  std::vector<nlohmann::json> documents(const std::string& index) const;

 private:
  Flavor flavor_;
  std::filesystem::path dir_;
  int port_ = 0;
  std::string version_;
  void read_version();
};

// "opensearch" / "elasticsearch", for test names.
std::string flavor_name(SearchServer::Flavor f);

}  // namespace picomq::test
