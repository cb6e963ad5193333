#include "surreal_server.h"

#include <curl/curl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/testing/shared_server.hpp"

namespace picomq::test {
namespace {

// sinks/surrealdb/server.sh (a compile definition of this file alone: the compiler cache serves
// the rest to any clone).
const std::string kScript = PICOMQ_SURREALDB_SH;

std::string g_unavailable;

struct ScriptResult {
  int status;
  std::string out;
};
ScriptResult run_script(const std::string& args) {
  const std::string cmd = "bash " + kScript + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("could not run " + cmd);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : 255, out};
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

const std::string& SurrealServer::unavailable() { return g_unavailable; }

SurrealServer* SurrealServer::shared() {
  if (!g_unavailable.empty()) return nullptr;
  static bool fetched = false;
  if (fetched) return &kit::testing::SharedServer<SurrealServer>::get("picomq-surreal");
  // No server binary on this machine: a skip, with fetch-server.sh's reason.
  const std::string fetch = kScript.substr(0, kScript.rfind('/')) + "/fetch-server.sh";
  FILE* p = popen(("bash " + fetch + " 2>&1").c_str(), "r");
  std::string out;
  char buf[256];
  while (p) {
    const size_t n = fread(buf, 1, sizeof buf, p);
    if (n == 0) break;
    out.append(buf, n);
  }
  const int rc = p ? pclose(p) : -1;
  if (rc != 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
    g_unavailable = "no SurrealDB server on this machine: " + out;
    while (!g_unavailable.empty() && g_unavailable.back() == '\n') g_unavailable.pop_back();
    return nullptr;
  }
  fetched = true;
  return &kit::testing::SharedServer<SurrealServer>::get("picomq-surreal");
}

void SurrealServer::start() {
  const ScriptResult r = run_script("start " + dir_.string() + " --owner " + std::to_string(getpid()));
  if (r.status != 0)
    throw std::runtime_error("could not start SurrealDB (" + kScript + " start, exit " + std::to_string(r.status) +
                             ")");
  port_ = std::stoi(r.out);
}
void SurrealServer::stop() { (void)run_script("stop " + dir_.string()); }
void SurrealServer::kill() {
  if (run_script("kill " + dir_.string()).status != 0) throw std::runtime_error("could not kill SurrealDB");
}

std::string SurrealServer::fresh_namespace(const std::string& prefix) const {
  static std::atomic<int> n{0};
  return prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(++n);
}

nlohmann::json SurrealServer::sql(const std::string& ns, const std::string& db, const std::string& text) const {
  CURL* c = curl_easy_init();
  std::string body;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!ns.empty()) headers = curl_slist_append(headers, ("surreal-ns: " + ns).c_str());
  if (!db.empty()) headers = curl_slist_append(headers, ("surreal-db: " + db).c_str());
  const std::string url = this->url() + "/sql";
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERPWD, "root:root");
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, text.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(text.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) throw std::runtime_error(std::string("test: /sql failed: ") + curl_easy_strerror(rc));
  if (status != 200)
    throw std::runtime_error("test: /sql answered " + std::to_string(status) + ": " + body + " to " + text);
  return nlohmann::json::parse(body);
}

nlohmann::json SurrealServer::result(const std::string& ns, const std::string& db, const std::string& text) const {
  const nlohmann::json all = sql(ns, db, text);
  for (const auto& st : all)
    if (st.value("status", "") != "OK") throw std::runtime_error("test: " + text + ": " + st.dump());
  return all.back()["result"];
}

void SurrealServer::create(const std::string& ns, const std::string& db) const {
  result(
      "", "",
      "DEFINE NAMESPACE IF NOT EXISTS `" + ns + "`; USE NS `" + ns + "`; DEFINE DATABASE IF NOT EXISTS `" + db + "`;");
}

}  // namespace picomq::test
