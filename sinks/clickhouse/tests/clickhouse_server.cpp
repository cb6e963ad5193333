#include "clickhouse_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/testing/shared_server.hpp"

namespace picomq::test {
namespace {

// sinks/clickhouse/server.sh, from the build (tests/CMakeLists.txt).
const std::string kScript = PICOMQ_CLICKHOUSE_SH;

std::string run_script(const std::string& args, const std::string& what) {
  return kit::testing::run_server_script(kScript, args, what + " ClickHouse");
}

kit::HttpClient& client() {
  static kit::HttpClient c(kit::HttpClientOptions{.request_timeout = std::chrono::seconds(60)});
  return c;
}

std::string unescape_tsv(const std::string& f) {
  if (f == "\\N") return f;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '\\' || i + 1 == f.size()) {
      out += f[i];
      continue;
    }
    const char c = f[++i];
    switch (c) {
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      default: out += c; break;
    }
  }
  return out;
}

}  // namespace

std::string ClickHouseServer::engine() {
  const char* e = std::getenv("PICOMQ_CLICKHOUSE_ENGINE");
  return e && *e ? e : "18.16";
}

ClickHouseServer& ClickHouseServer::shared() { return kit::testing::SharedServer<ClickHouseServer>::get("picomq-ch"); }

void ClickHouseServer::start() {
  const std::string out = run_script("start " + dir_.string() + " --owner " + std::to_string(getpid()), "start");
  port_ = std::stoi(out);
}

void ClickHouseServer::stop() { (void)std::system(("bash " + kScript + " stop " + dir_.string()).c_str()); }
void ClickHouseServer::kill() { (void)std::system(("bash " + kScript + " kill " + dir_.string()).c_str()); }

std::string ClickHouseServer::query(const std::string& sql, const std::string& user, const std::string& params) const {
  std::string url = this->url() + "/?user=" + kit::percent_encode(user) + params;
  if (user == "writer") url += "&password=picomq-test-password";
  kit::HttpRequest r{.method = "POST", .url = url, .body = sql};
  const kit::HttpResponse response = client().send(std::move(r));
  if (!response.completed())
    throw std::runtime_error("clickhouse: no answer: " + response.failure->message + " [sql: " + sql.substr(0, 300) +
                             "]");
  if (response.status != 200)
    throw std::runtime_error("clickhouse: " + response.body + " [sql: " + sql.substr(0, 300) + "]");
  return response.body;
}

void ClickHouseServer::lose_next_insert_answers(int n) const {
  if (!current_engine()) throw std::logic_error("only the current engine's front loses answers on request");
  kit::HttpRequest r{.method = "POST", .url = url() + "/_test/lose-insert-answers?n=" + std::to_string(n)};
  const kit::HttpResponse response = client().send(std::move(r));
  if (!response.completed() || response.status != 200) throw std::runtime_error("clickhouse front: fault not set");
}

std::vector<std::vector<std::string>> ClickHouseServer::rows(const std::string& select) const {
  const std::string body = query(select + " FORMAT TSV");
  std::vector<std::vector<std::string>> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    std::vector<std::string> row;
    size_t start = pos;
    for (size_t i = pos; i <= nl; ++i) {
      if (i == nl || body[i] == '\t') {
        row.push_back(unescape_tsv(body.substr(start, i - start)));
        start = i + 1;
      }
    }
    out.push_back(std::move(row));
    pos = nl + 1;
  }
  return out;
}

std::string ClickHouseServer::create_database(const std::string& prefix) const {
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
  name = name.substr(0, 60 - suffix.size()) + suffix;
  query("CREATE DATABASE " + name);
  return name;
}

}  // namespace picomq::test
