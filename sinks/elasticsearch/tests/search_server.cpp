#include "search_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"

namespace picomq::test {
namespace {

// sinks/elasticsearch/server.sh, from the build (tests/CMakeLists.txt): __FILE__ is relative under
// the compiler cache.
const std::string kScript = PICOMQ_SEARCH_SH;
// A small write queue, so a test with many requests in flight meets 429s (es_rejected_execution_exception)
// while the ordinary tests (4 in flight, 1 shard) do not.
const char* kSettings = " --setting thread_pool.write.queue_size=4";

struct Slot {
  SearchServer* server = nullptr;
  FILE* starting = nullptr;  // popen of `server.sh start`, not yet read
  std::string error;
};
std::mutex g_mutex;
std::map<SearchServer::Flavor, Slot> g_slots;
pid_t g_owner = 0;

void stop_all_at_exit() {
  if (getpid() != g_owner) return;
  for (auto& [flavor, slot] : g_slots) {
    if (slot.starting) {
      pclose(slot.starting);
      slot.starting = nullptr;
    }
    if (slot.server) {
      slot.server->stop();
      std::error_code ec;
      std::filesystem::remove_all(slot.server->dir(), ec);
    }
  }
}

std::string start_command(SearchServer::Flavor f, const std::filesystem::path& dir) {
  return "bash " + kScript + " start " + dir.string() + " " + flavor_name(f) + " --owner " + std::to_string(getpid()) +
         kSettings;
}

// Reads a started `server.sh start`: the port, or throws with what the script said.
int finish_start(FILE* p, SearchServer::Flavor f) {
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0)
    throw std::runtime_error("could not start " + flavor_name(f) +
                             " (sinks/elasticsearch/server.sh; see its output above)");
  return std::stoi(out);
}

std::filesystem::path fresh_dir(SearchServer::Flavor f) {
  std::string tmpl = "/tmp/picomq-" + flavor_name(f) + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

void begin(SearchServer::Flavor f, Slot& slot) {
  if (slot.server || slot.starting || !slot.error.empty()) return;
  if (!g_owner) {
    g_owner = getpid();
    std::atexit(stop_all_at_exit);
  }
  slot.server = new SearchServer(f, fresh_dir(f));
  slot.starting = popen(start_command(f, slot.server->dir()).c_str(), "r");
  if (!slot.starting) slot.error = "could not run " + kScript;
}

kit::HttpClient& client() {
  static kit::HttpClient c(kit::HttpClientOptions{.request_timeout = std::chrono::seconds(60)});
  return c;
}

}  // namespace

std::string flavor_name(SearchServer::Flavor f) {
  return f == SearchServer::Flavor::OpenSearch ? "opensearch" : "elasticsearch";
}

void SearchServer::start_early(std::initializer_list<Flavor> flavors) {
  std::lock_guard lock(g_mutex);
  for (Flavor f : flavors) begin(f, g_slots[f]);
}

SearchServer& SearchServer::shared(Flavor f) {
  std::lock_guard lock(g_mutex);
  Slot& slot = g_slots[f];
  begin(f, slot);
  if (!slot.error.empty()) throw std::runtime_error(slot.error);
  if (slot.starting) {
    FILE* p = slot.starting;
    slot.starting = nullptr;
    try {
      slot.server->port_ = finish_start(p, f);
      slot.server->read_version();
    } catch (const std::exception& e) {
      slot.error = e.what();
      throw;
    }
  }
  return *slot.server;
}

void SearchServer::start() {
  FILE* p = popen(start_command(flavor_, dir_).c_str(), "r");
  if (!p) throw std::runtime_error("could not run " + kScript);
  port_ = finish_start(p, flavor_);
  read_version();
}

void SearchServer::read_version() {
  const Reply r = call("GET", "/");
  if (r.status != 200 || !r.json.is_object() || !r.json["version"]["number"].is_string())
    throw std::runtime_error(flavor_name(flavor_) + ": GET / -> " + std::to_string(r.status) + ": " + r.text);
  version_ = r.json["version"]["number"].get<std::string>();
}
void SearchServer::stop() { (void)std::system(("bash " + kScript + " stop " + dir_.string()).c_str()); }
void SearchServer::kill() { (void)std::system(("bash " + kScript + " kill " + dir_.string()).c_str()); }

void SearchServer::pause(bool paused) {
  std::ifstream in(dir_ / "server.pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0) throw std::runtime_error(name() + ": no server.pid in " + dir_.string());
  if (::kill(pid, paused ? SIGSTOP : SIGCONT) != 0) throw std::runtime_error(name() + ": could not signal the node");
}

SearchServer::Reply SearchServer::call(const std::string& method, const std::string& path, const std::string& body,
                                       const std::string& content_type) const {
  kit::HttpRequest r{.method = method, .url = url() + path, .body = body};
  if (!body.empty()) r.headers.set("Content-Type", content_type);
  const kit::HttpResponse response = client().send(std::move(r));
  Reply out;
  out.status = response.status;
  out.text = response.completed() ? response.body : response.failure->message;
  out.json = nlohmann::json::parse(out.text, nullptr, false);
  if (out.json.is_discarded()) out.json = nullptr;
  return out;
}

nlohmann::json SearchServer::ok(const std::string& method, const std::string& path, const std::string& body) const {
  Reply r = call(method, path, body);
  if (r.status < 200 || r.status >= 300)
    throw std::runtime_error(name() + ": " + method + " " + path + " -> " + std::to_string(r.status) + ": " + r.text);
  return r.json;
}

std::string SearchServer::unique_index(const std::string& prefix) const {
  static std::atomic<int> counter{0};
  std::string test = "t";
  if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) test = info->name();
  std::string name = prefix + "-" + test;
  for (auto& c : name)
    c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) : '-';
  const std::string suffix = "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  return name.substr(0, 120) + suffix;
}

int64_t SearchServer::count(const std::string& index) const {
  ok("POST", "/" + index + "/_refresh");
  return ok("GET", "/" + index + "/_count")["count"].get<int64_t>();
}

std::optional<nlohmann::json> SearchServer::document(const std::string& index, const std::string& id) const {
  Reply r = call("GET", "/" + index + "/_doc/" + kit::percent_encode(id));
  if (r.status == 404) return std::nullopt;
  if (r.status != 200) throw std::runtime_error(name() + ": GET " + index + "/" + id + ": " + r.text);
  return r.json["_source"];
}

std::vector<nlohmann::json> SearchServer::documents(const std::string& index) const {
  ok("POST", "/" + index + "/_refresh");
  const auto r = ok("POST", "/" + index + "/_search", R"({"size":10000,"query":{"match_all":{}}})");
  std::vector<nlohmann::json> out;
  for (const auto& hit : r["hits"]["hits"]) {
    nlohmann::json d = hit["_source"];
    d["_id"] = hit["_id"];
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a["_id"] < b["_id"]; });
  return out;
}

}  // namespace picomq::test
