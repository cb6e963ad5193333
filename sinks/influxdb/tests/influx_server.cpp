#include "influx_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"

namespace picomq::test {
namespace {

// sinks/influxdb/server.sh (a compile definition of this file alone: the compiler cache serves
// the rest to any clone).
const std::string kScript = PICOMQ_INFLUXDB_SH;

InfluxServer* g_shared[3] = {nullptr, nullptr, nullptr};
std::string g_start_error[3];
pid_t g_owner = 0;

void stop_shared_at_exit() {
  if (getpid() != g_owner) return;
  for (InfluxServer* s : g_shared) {
    if (!s) continue;
    s->stop();
    std::error_code ec;
    std::filesystem::remove_all(s->dir(), ec);
  }
}

std::string run_script(const std::string& args, const std::string& what) {
  const std::string cmd = "bash " + kScript + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("could not run " + cmd);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) throw std::runtime_error("could not " + what + " InfluxDB: " + cmd);
  return out;
}

kit::HttpClient& client() {
  // Read-backs of tens of thousands of points: far above the client's 4 MiB default.
  static kit::HttpClient c({.max_in_flight = 4, .max_response_body = size_t{1} << 30});
  return c;
}

std::string checked(kit::HttpResponse r, const std::string& what) {
  if (!r.completed()) throw std::runtime_error("test: " + what + ": " + r.failure->message);
  if (r.status / 100 != 2) throw std::runtime_error("test: " + what + ": " + r.status_line + " " + r.body);
  return std::move(r.body);
}

// RFC 4180 rows of a CSV text (quoted fields with "" for a quote).
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
      continue;
    }
    if (c == '"') quoted = any = true;
    else if (c == ',') row.push_back(std::move(cell)), cell.clear(), any = true;
    else if (c == '\r') continue;
    else if (c == '\n') {
      if (any || !cell.empty()) row.push_back(std::move(cell));
      rows.push_back(std::move(row));
      row.clear(), cell.clear(), any = false;
    } else cell += c, any = true;
  }
  if (any || !cell.empty()) row.push_back(std::move(cell)), rows.push_back(std::move(row));
  return rows;
}

}  // namespace

InfluxServer& InfluxServer::shared(int version) {
  if (version != 1 && version != 2) throw std::invalid_argument("InfluxServer: version 1 or 2");
  if (g_shared[version]) return *g_shared[version];
  if (!g_start_error[version].empty()) throw std::runtime_error(g_start_error[version]);
  char tmpl[] = "/tmp/picomq-influx-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  auto* s = new InfluxServer(tmpl, version);
  try {
    s->start();
  } catch (const std::exception& e) {
    g_start_error[version] = e.what();
    s->stop();
    delete s;
    throw;
  }
  g_shared[version] = s;
  if (!g_owner) {
    g_owner = getpid();
    std::atexit(stop_shared_at_exit);
  }
  return *s;
}

void InfluxServer::start() {
  const std::string out = run_script(
      "start " + dir_.string() + " " + std::to_string(version_) + " --owner " + std::to_string(getpid()), "start");
  port_ = std::stoi(out);
}
void InfluxServer::stop() { (void)std::system(("bash " + kScript + " stop " + dir_.string()).c_str()); }
void InfluxServer::kill() { run_script("kill " + dir_.string(), "kill"); }

std::string InfluxServer::fresh_database(const std::string& prefix) const {
  static std::atomic<int> counter{0};
  auto clean = [](std::string s) {
    for (auto& c : s)
      c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) : '_';
    return s;
  };
  std::string test = "t";
  if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) test = info->name();
  const std::string name = clean(prefix) + "_" + clean(test) + "_" + std::to_string(++counter);
  if (version_ == 1) {
    influxql("", "CREATE DATABASE \"" + name + "\"");
  } else {
    kit::HttpRequest orgs{.method = "GET", .url = url() + "/api/v2/orgs?org=" + kOrg};
    orgs.headers.set("Authorization", std::string("Token ") + kToken);
    const auto found = nlohmann::json::parse(checked(client().send(std::move(orgs)), "looking up org"));
    const std::string org_id = found.at("orgs").at(0).at("id");
    kit::HttpRequest create{.method = "POST",
                            .url = url() + "/api/v2/buckets",
                            .body = nlohmann::json{{"orgID", org_id}, {"name", name}}.dump()};
    create.headers.set("Authorization", std::string("Token ") + kToken);
    create.headers.set("Content-Type", "application/json");
    checked(client().send(std::move(create)), "creating bucket " + name);
  }
  return name;
}

std::vector<nlohmann::json> InfluxServer::influxql(const std::string& db, const std::string& statement) const {
  std::string target = url() + "/query?epoch=ns&q=" + kit::percent_encode(statement);
  if (!db.empty()) target += "&db=" + kit::percent_encode(db);
  kit::HttpRequest r{.method = "POST", .url = target};
  r.headers.set("Authorization", "Basic " + kit::base64_encode(std::string(kUser) + ":" + kPassword));
  const auto j = nlohmann::json::parse(checked(client().send(std::move(r)), "InfluxQL " + statement));
  std::vector<nlohmann::json> out;
  for (const auto& result : j.at("results")) {
    if (result.contains("error"))
      throw std::runtime_error("test: InfluxQL " + statement + ": " + result["error"].dump());
    if (result.contains("series"))
      for (const auto& s : result["series"]) out.push_back(s);
  }
  return out;
}

std::vector<std::string> InfluxServer::tag_keys(const std::string& db, const std::string& measurement) const {
  std::vector<std::string> out;
  for (const auto& s : influxql(db, "SHOW TAG KEYS FROM \"" + measurement + "\""))
    for (const auto& v : s.at("values")) out.push_back(v.at(0));
  return out;
}

std::map<std::string, std::string> InfluxServer::field_types(const std::string& db,
                                                             const std::string& measurement) const {
  std::map<std::string, std::string> out;
  for (const auto& s : influxql(db, "SHOW FIELD KEYS FROM \"" + measurement + "\""))
    for (const auto& v : s.at("values")) out[v.at(0)] = v.at(1);
  return out;
}

std::vector<InfluxServer::Row> InfluxServer::flux(const std::string& query) const {
  kit::HttpRequest r{.method = "POST",
                     .url = url() + "/api/v2/query?org=" + kOrg,
                     .body = nlohmann::json{{"query", query}, {"dialect", {{"annotations", {"datatype"}}}}}.dump()};
  r.headers.set("Authorization", std::string("Token ") + kToken);
  r.headers.set("Content-Type", "application/json");
  r.headers.set("Accept", "application/csv");
  const auto rows = csv_rows(checked(client().send(std::move(r)), "Flux " + query));
  std::vector<Row> out;
  std::vector<std::string> types, header;
  bool expect_header = false;
  for (const auto& row : rows) {
    if (row.empty() || (row.size() == 1 && row[0].empty())) continue;
    if (row[0] == "#datatype") {
      types = row;
      expect_header = true;
      continue;
    }
    if (expect_header) {
      header = row;
      expect_header = false;
      continue;
    }
    Row r;
    for (size_t i = 1; i < row.size() && i < header.size(); ++i) {
      r[header[i]] = row[i];
      if (i < types.size()) r["#type:" + header[i]] = types[i];
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<InfluxServer::Row> InfluxServer::flux_points(const std::string& bucket,
                                                         const std::string& measurement) const {
  return flux("from(bucket: \"" + bucket + "\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"" +
              measurement + "\")");  // one table per series and field (a group() cannot mix field types)
}

int64_t InfluxServer::point_count(const std::string& db, const std::string& measurement) const {
  if (version_ == 1) {
    int64_t n = 0;
    for (const auto& s : influxql(db, "SELECT * FROM \"" + measurement + "\""))
      n += static_cast<int64_t>(s.at("values").size());
    return n;
  }
  // One row per point (series and time) once the fields are pivoted into columns, counted by the server.
  const auto rows =
      flux("from(bucket: \"" + db + "\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"" + measurement +
           "\") |> pivot(rowKey: [\"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\") "
           "|> keep(columns: [\"_time\"]) |> group() |> map(fn: (r) => ({r with one: 1})) |> count(column: \"one\")");
  return rows.empty() ? 0 : std::stoll(rows.at(0).at("one"));
}

}  // namespace picomq::test
