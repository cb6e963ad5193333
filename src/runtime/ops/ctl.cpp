#include "runtime/ops/ctl.h"

#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

namespace picomq::runtime {
namespace {

using nlohmann::json;

constexpr int kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3, kNotRunning = 4;

struct Answer {
  int status = -1;  // -1: no answer (error says why)
  json body;
  std::string error;
  bool ok() const { return status >= 200 && status < 300; }
};

// One runtime's API.
class Api {
 public:
  Api(std::string url, const std::string& token, const std::string& ca_file, bool insecure) : url_(std::move(url)) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    client_ = std::make_unique<httplib::Client>(url_);
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(120, 0);  // a dead-letter scan may read for 30 s, a reset waits on the broker
    if (!token.empty()) client_->set_bearer_token_auth(token);
    if (!ca_file.empty()) client_->set_ca_cert_path(ca_file);
    if (insecure) client_->enable_server_certificate_verification(false);
  }
  const std::string& url() const { return url_; }
  Answer get(const std::string& path, const httplib::Params& params = {}) const {
    return of(client_->Get(path, params, httplib::Headers{}));
  }
  Answer post(const std::string& path, const std::string& body, const char* type = "application/json") const {
    return of(client_->Post(path, body, type));
  }
  Answer put(const std::string& path, const std::string& body) const {
    return of(client_->Put(path, body, "application/toml"));
  }
  Answer del(const std::string& path) const { return of(client_->Delete(path)); }

 private:
  Answer of(const httplib::Result& r) const {
    Answer a;
    if (!r) {
      a.error =
          url_ + ": no answer (" + httplib::to_string(r.error()) + "): is the runtime running with [api] enabled?";
      return a;
    }
    a.status = r->status;
    a.body = json::parse(r->body, nullptr, false);
    if (a.body.is_discarded()) a.body = json{{"error", r->body}};
    if (!a.ok())
      a.error =
          url_ + ": HTTP " + std::to_string(r->status) +
          (a.body.contains("error") && a.body["error"].is_string() ? ": " + a.body["error"].get<std::string>() : "");
    return a;
  }
  std::string url_;
  std::unique_ptr<httplib::Client> client_;
};

// The exit code of a failed answer, with its reason on stderr.
int failed(const Answer& a) {
  std::cerr << "error: " << a.error << '\n';
  if (a.body.contains("errors") && a.body["errors"].is_array())
    for (const auto& e : a.body["errors"])
      std::cerr << "  " << (e.contains("text") ? e["text"].get<std::string>() : e.dump()) << '\n';
  return a.status < 0 ? kUnreachable : kRefused;
}

std::string text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string cut(std::string s, size_t width) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.size() > width ? s.substr(0, width - 1) + "…" : s;
}

// Columns padded to their widest cell (the last one left as it is).
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << '\n';
  };
  print(header);
  for (const auto& r : rows) print(r);
}

struct Common {
  std::vector<std::string> urls;
  std::string token, ca_file;
  bool insecure = false;
  bool as_json = false;
  std::vector<Api> apis() const {
    std::vector<Api> out;
    for (const auto& u : urls) out.emplace_back(u, token, ca_file, insecure);
    return out;
  }
};

// ------------------------------------------------------------------ status, lag

// What each runtime says of its sinks (all, or `only`): a runtime that does not answer is said
// on stderr and counted into `code`.
struct RuntimeSinks {
  std::string url;
  json sinks;  // GET /sinks/{key} objects
};
std::vector<RuntimeSinks> sinks_of(const Common& c, const std::string& only, int& code) {
  std::vector<RuntimeSinks> out;
  for (const auto& api : c.apis()) {
    const Answer a = only.empty() ? api.get("/sinks") : api.get("/sinks/" + only);
    if (!a.ok()) code = std::max(code, failed(a));
    else out.push_back({api.url(), only.empty() ? a.body["sinks"] : json::array({a.body})});
  }
  return out;
}

// The table (with a RUNTIME column for a fleet), or with --json the answers: one runtime's
// array, or [{"url", "sinks"}] for a fleet.
int report(const Common& c, const std::vector<RuntimeSinks>& runtimes, std::vector<std::string> header,
           const std::vector<std::vector<std::string>>& rows, const std::function<json(const json&)>& json_of,
           int code) {
  const bool fleet = c.urls.size() > 1;
  if (c.as_json) {
    json all = json::array();
    for (const auto& r : runtimes) {
      json sinks = json::array();
      for (const auto& s : r.sinks) sinks.push_back(json_of(s));
      all.push_back({{"url", r.url}, {"sinks", sinks}});
    }
    std::cout << (fleet ? all : (all.empty() ? json() : all[0]["sinks"])).dump(2) << '\n';
    return code;
  }
  if (runtimes.empty()) return code;  // no runtime answered: the errors said why
  if (fleet) header.insert(header.begin(), "RUNTIME");
  print_table(header, rows);
  return code;
}

int status(const Common& c, const std::string& only) {
  int code = kOk;
  const auto runtimes = sinks_of(c, only, code);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runtimes)
    for (const auto& s : r.sinks) {
      const std::string state = text(s.value("state", json()));
      if (state == "error" || state == "invalid" || state == "stopped") code = std::max(code, kNotRunning);
      int64_t lag = 0, written = 0, dead = 0, assigned = 0;
      bool lag_known = false;
      for (const auto& b : s.value("blocks", json::array())) {
        assigned += static_cast<int64_t>(b.value("assigned", json::array()).size());
        written += b["counters"].value("written_records", int64_t{0});
        dead += b["counters"].value("dead_lettered_records", int64_t{0});
      }
      for (const auto& block : s.value("group_lag", json::array()))
        for (const auto& p : block) {
          lag += p.value("lag", int64_t{0});
          lag_known = true;
        }
      std::vector<std::string> row{text(s["key"]),
                                   state,
                                   std::to_string(s.value("blocks", json::array()).size()),
                                   std::to_string(assigned),
                                   lag_known ? std::to_string(lag) : "-",
                                   std::to_string(written),
                                   std::to_string(dead),
                                   cut(text(s.value("error", json())), 60)};
      if (c.urls.size() > 1) row.insert(row.begin(), r.url);
      rows.push_back(std::move(row));
    }
  return report(
      c, runtimes, {"SINK", "STATE", "BLOCKS", "ASSIGNED", "LAG", "WRITTEN", "DEAD-LETTERED", "ERROR"}, rows,
      [](const json& s) { return s; }, code);
}

int lag(const Common& c, const std::string& only) {
  int code = kOk;
  const auto runtimes = sinks_of(c, only, code);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runtimes)
    for (const auto& s : r.sinks) {
      const json group_lag = s.value("group_lag", json::array());
      for (size_t b = 0; b < group_lag.size(); ++b)
        for (const auto& p : group_lag[b]) {
          std::vector<std::string> row{text(s["key"]),
                                       std::to_string(b),
                                       text(p["topic"]),
                                       text(p["partition"]),
                                       text(p.value("committed", json())),
                                       text(p["end"]),
                                       text(p["lag"]),
                                       text(p.value("lag_seconds", json()))};
          if (c.urls.size() > 1) row.insert(row.begin(), r.url);
          rows.push_back(std::move(row));
        }
    }
  return report(
      c, runtimes, {"SINK", "BLOCK", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "AGE-S"}, rows,
      [](const json& s) {
        return json{{"key", s["key"]}, {"group_lag", s.value("group_lag", json::array())}};
      },
      code);
}

// ------------------------------------------------------------------ one runtime's verbs

const Api& single(const std::vector<Api>& apis) {
  if (apis.size() != 1) throw CLI::ValidationError("--url", "this command talks to one runtime: give one --url");
  return apis.front();
}

int control(const Common& c, const std::string& action, const std::string& sink) {
  const auto apis = c.apis();
  const Answer a = single(apis).post("/sinks/" + sink + "/" + action, "");
  if (!a.ok()) return failed(a);
  if (c.as_json) std::cout << a.body.dump(2) << '\n';
  else std::cout << text(a.body.value("message", json(action + ": done"))) << '\n';
  return kOk;
}

void print_offsets(const json& body) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : body.value("blocks", json::array()))
    for (const auto& p : b.value("partitions", json::array()))
      rows.push_back({text(b["group_id"]), text(p["topic"]), text(p["partition"]), text(p["committed"]),
                      text(p["start"]), text(p["end"]), text(p["lag"])});
  print_table({"GROUP", "TOPIC", "PARTITION", "COMMITTED", "START", "END", "LAG"}, rows);
}

int offsets_show(const Common& c, const std::string& sink) {
  const auto apis = c.apis();
  const Answer a = single(apis).get("/sinks/" + sink + "/offsets");
  if (!a.ok()) return failed(a);
  if (c.as_json) std::cout << a.body.dump(2) << '\n';
  else print_offsets(a.body);
  return kOk;
}

int offsets_reset(const Common& c, const std::string& sink, const std::string& to, const std::string& timestamp,
                  const std::vector<std::string>& offsets, int block) {
  json body;
  const int given = !to.empty() + !timestamp.empty() + !offsets.empty();
  if (given != 1) throw CLI::ValidationError("offsets reset", "give one of --to, --timestamp, --offset");
  if (!to.empty()) body["to"] = to;
  if (!timestamp.empty()) {
    const bool digits = std::all_of(timestamp.begin(), timestamp.end(), ::isdigit);
    body["timestamp"] = digits ? json(std::stoll(timestamp)) : json(timestamp);
  }
  static const std::regex shape(R"(^(.+):(\d+)=(\d+)$)");
  for (const auto& o : offsets) {
    std::smatch m;
    if (!std::regex_match(o, m, shape))
      throw CLI::ValidationError("--offset", "'" + o + "' is not <topic>:<partition>=<offset>");
    body["offsets"].push_back(
        {{"topic", m[1].str()}, {"partition", std::stoi(m[2].str())}, {"offset", std::stoll(m[3].str())}});
  }
  if (block >= 0) body["block"] = block;
  const auto apis = c.apis();
  const Answer a = single(apis).post("/sinks/" + sink + "/offsets", body.dump());
  if (!a.ok()) return failed(a);
  if (c.as_json) std::cout << a.body.dump(2) << '\n';
  else print_offsets(a.body);
  return kOk;
}

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CLI::ValidationError(file, "cannot read it");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int validate(const Common& c, const std::string& file) {
  const auto apis = c.apis();
  const Answer a = single(apis).post("/validate?file=" + httplib::detail::encode_query_param(file), read_text(file),
                                     "application/toml");
  if (!a.ok()) return failed(a);
  if (c.as_json) std::cout << a.body.dump(2) << '\n';
  else if (a.body.value("valid", false)) std::cout << file << ": valid\n";
  else
    for (const auto& e : a.body.value("errors", json::array())) std::cout << "error: " << text(e["text"]) << '\n';
  return a.body.value("valid", false) ? kOk : kRefused;
}

int apply(const Common& c, const std::string& file, std::string key) {
  const std::string body = read_text(file);
  if (key.empty()) {
    static const std::regex key_line(R"re((?:^|\n)\s*key\s*=\s*"([^"]+)")re");
    std::smatch m;
    if (!std::regex_search(body, m, key_line))
      throw CLI::ValidationError(file, "no `key = \"...\"` line: name the sink with --key");
    key = m[1].str();
  }
  const auto apis = c.apis();
  const Answer a = single(apis).put("/sinks/" + key, body);
  if (!a.ok()) return failed(a);
  if (c.as_json) {
    std::cout << a.body.dump(2) << '\n';
  } else {
    std::cout << "sink '" << key << "' applied:";
    for (const char* k : {"started", "restarted", "stopped", "unchanged"})
      if (!a.body.value(k, json::array()).empty()) std::cout << ' ' << k << ' ' << a.body[k].dump();
    std::cout << '\n';
    for (const auto& e : a.body.value("errors", json::array())) std::cout << "error: " << text(e) << '\n';
  }
  return a.body.value("errors", json::array()).empty() ? kOk : kRefused;
}

// ------------------------------------------------------------------ dead letters

struct DeadLetterQuery {
  std::string stage, reason, topic, since, until, ids, cursor;
  int partition = -1, block = -1;
  int64_t from_offset = -1, to_offset = -1;
  int limit = 50;
  bool all = false;
  httplib::Params params() const {
    httplib::Params p;
    auto add = [&](const char* k, const std::string& v) {
      if (!v.empty()) p.emplace(k, v);
    };
    add("stage", stage);
    add("reason", reason);
    add("topic", topic);
    add("since", since);
    add("until", until);
    add("ids", ids);
    if (partition >= 0) p.emplace("partition", std::to_string(partition));
    if (block >= 0) p.emplace("block", std::to_string(block));
    if (from_offset >= 0) p.emplace("from_offset", std::to_string(from_offset));
    if (to_offset >= 0) p.emplace("to_offset", std::to_string(to_offset));
    return p;
  }
};

int dead_letters_list(const Common& c, const std::string& sink, const DeadLetterQuery& q) {
  const auto apis = c.apis();
  const Api& api = single(apis);
  std::string cursor = q.cursor;
  json records = json::array();
  std::string next;
  do {
    auto params = q.params();
    params.emplace("limit", std::to_string(q.limit));
    if (!cursor.empty()) params.emplace("cursor", cursor);
    const Answer a = api.get("/sinks/" + sink + "/dead-letters", params);
    if (!a.ok()) return failed(a);
    for (const auto& r : a.body["records"]) records.push_back(r);
    next = a.body["next_cursor"].is_string() ? a.body["next_cursor"].get<std::string>() : "";
    cursor = next;
  } while (q.all && !next.empty());
  if (c.as_json) {
    std::cout << json{{"records", records}, {"next_cursor", next.empty() ? json() : json(next)}}.dump(2) << '\n';
    return kOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : records) {
    const auto& s = r["source"];
    rows.push_back({text(r["id"]), text(r["dead_lettered_at"]), text(r["stage"]),
                    text(s["topic"]) + "[" + text(s["partition"]) + "]@" + text(s["offset"]), cut(text(r["key"]), 24),
                    cut(text(r["reason"]), 100)});
  }
  print_table({"ID", "DEAD-LETTERED", "STAGE", "SOURCE", "KEY", "REASON"}, rows);
  if (!next.empty()) std::cout << "more: --cursor " << next << " (or --all)\n";
  return kOk;
}

struct RedriveOptions {
  bool dry_run = false, no_wait = false, apply_changes = false;
  std::string resume, stop;
  int chunk = 500;
};

// One line of a redrive's progress.
std::string redrive_line(const json& p) {
  std::string line = "redrive " + text(p["id"]) + " " + text(p["state"]) + ": " + text(p["written"]) + " written, " +
                     text(p["bad_again"]) + " bad again, " + text(p["filtered"]) + " filtered, " + text(p["no_block"]) +
                     " read by no block, " + text(p["scanned"]) + " scanned; at " + text(p["position"]) + " of " +
                     text(p["end"]);
  if (p.contains("error")) line += "\nerror: " + text(p["error"]);
  return line;
}

// A redrive that writes: started (or resumed, or stopped), then followed until it ends unless
// --no-wait. Exit 0 when it is done with nothing bad again, 1 when some were dead-lettered again or
// it failed or stopped (its id resumes it).
int redrive_for_real(const Common& c, const std::string& sink, const DeadLetterQuery& q, const RedriveOptions& o) {
  const auto apis = c.apis();
  const Api& api = single(apis);
  Answer a;
  if (!o.stop.empty()) {
    a = api.del("/sinks/" + sink + "/redrives/" + o.stop);
  } else {
    json body{{"chunk", o.chunk}};
    if (o.apply_changes) body["apply_changes"] = true;
    if (!o.resume.empty()) body["resume"] = o.resume;
    a = api.post("/sinks/" + sink + "/dead-letters/redrive?" + httplib::detail::params_to_query_str(q.params()),
                 body.dump());
  }
  if (!a.ok()) return failed(a);
  const std::string id = text(a.body["id"]);
  const std::string progress = "/sinks/" + sink + "/redrives/" + id;
  while (!o.no_wait && a.body.value("state", "") == "running") {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const Answer next = api.get(progress);
    if (!next.ok()) return failed(next);
    if (!c.as_json && next.body != a.body && next.body.value("state", "") == "running")
      std::cout << redrive_line(next.body) << '\n';
    a = next;
  }
  if (c.as_json) std::cout << a.body.dump(2) << '\n';
  else std::cout << redrive_line(a.body) << '\n';
  const std::string state = a.body.value("state", "");
  if (state == "running") return kOk;
  return state == "done" && a.body.value("bad_again", 0) == 0 ? kOk : kRefused;
}

int dead_letters_redrive(const Common& c, const std::string& sink, const DeadLetterQuery& q, const RedriveOptions& o) {
  if (!o.dry_run) return redrive_for_real(c, sink, q, o);
  const auto apis = c.apis();
  auto params = q.params();
  params.emplace("limit", std::to_string(q.limit));
  if (!q.cursor.empty()) params.emplace("cursor", q.cursor);
  const std::string path = "/sinks/" + sink + "/dead-letters/redrive?" + httplib::detail::params_to_query_str(params);
  const Answer a = single(apis).post(path, R"({"dry_run": true})");
  if (!a.ok()) return failed(a);
  if (c.as_json) {
    std::cout << a.body.dump(2) << '\n';
    return kOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : a.body["records"]) {
    const auto& s = r["source"];
    rows.push_back({text(r["id"]), text(s["topic"]) + "[" + text(s["partition"]) + "]@" + text(s["offset"]),
                    text(r["outcome"]), r.contains("stage") ? text(r["stage"]) : "-",
                    cut(r.contains("reason") ? text(r["reason"])
                                             : "was " + text(r["was"]["stage"]) + ": " + text(r["was"]["reason"]),
                        100)});
  }
  print_table({"ID", "SOURCE", "WOULD", "STAGE", "REASON"}, rows);
  const auto& sum = a.body["summary"];
  std::cout << "dry run: " << text(sum["write"]) << " would be written, " << text(sum["bad"]) << " bad again, "
            << text(sum["filtered"]) << " dropped by a filter, " << text(sum["no_block"])
            << " read by no block; nothing written\n";
  if (a.body["next_cursor"].is_string()) std::cout << "more: --cursor " << text(a.body["next_cursor"]) << '\n';
  return kOk;
}

int redrives_list(const Common& c, const std::string& sink) {
  const auto apis = c.apis();
  const Answer a = single(apis).get("/sinks/" + sink + "/redrives");
  if (!a.ok()) return failed(a);
  if (c.as_json) {
    std::cout << a.body.dump(2) << '\n';
    return kOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : a.body["redrives"])
    rows.push_back({text(r["id"]), text(r["state"]), r.contains("started_at") ? text(r["started_at"]) : "-",
                    r.contains("written") ? text(r["written"]) : "-",
                    r.contains("bad_again") ? text(r["bad_again"]) : "-", text(r["position"]) + " / " + text(r["end"]),
                    cut(r.contains("error") ? text(r["error"]) : "", 80)});
  print_table({"ID", "STATE", "STARTED", "WRITTEN", "BAD AGAIN", "POSITION / END", "ERROR"}, rows);
  if (a.body.contains("error"))
    std::cout << "(redrives of other runtimes not listed: " << text(a.body["error"]) << ")\n";
  return kOk;
}

int dead_letters_counts(const Common& c, const std::string& sink, const DeadLetterQuery& q) {
  const auto apis = c.apis();
  const Answer a = single(apis).get("/sinks/" + sink + "/dead-letters/counts", q.params());
  if (!a.ok()) return failed(a);
  if (c.as_json) {
    std::cout << a.body.dump(2) << '\n';
    return kOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : a.body["counts"])
    rows.push_back(
        {text(n["count"]), text(n["stage"]), text(n["first"]), text(n["last"]), cut(text(n["reason"]), 100)});
  print_table({"COUNT", "STAGE", "FIRST", "LAST", "REASON"}, rows);
  std::cout << text(a.body["matched"]) << " dead letter(s) of sink '" << sink << "' in " << text(a.body["topic"])
            << '\n';
  return kOk;
}

// One JSON line per record: the tap's records as they came (pipe them to jq).
int tap(const Common& c, const std::string& sink, const std::string& stage, int limit, double wait, int block) {
  const auto apis = c.apis();
  httplib::Params params{{"stage", stage}, {"limit", std::to_string(limit)}, {"wait", std::to_string(wait)}};
  if (block >= 0) params.emplace("block", std::to_string(block));
  const Answer a = single(apis).get("/sinks/" + sink + "/tap", params);
  if (!a.ok()) return failed(a);
  if (c.as_json) {
    std::cout << a.body.dump(2) << '\n';
    return kOk;
  }
  for (const auto& r : a.body["records"]) std::cout << r.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  std::cerr << a.body["records"].size() << " record(s) " << stage << " by sink '" << sink << "'\n";
  return kOk;
}

}  // namespace

int run_ctl(const std::vector<std::string>& args) {
  CLI::App app{"picomq-connect ctl: a running picomq-connect through its operations API (docs/operations.md)",
               "picomq-connect ctl"};
  app.require_subcommand(1);
  Common c;
  app.add_option("--url", c.urls, "the API's URL (repeat for a fleet: status and lag ask each)");
  app.add_option("--token", c.token, "the bearer token ([api] token)")->envname("PICOMQ_API_TOKEN");
  app.add_option("--ca-file", c.ca_file, "PEM file of the CA that signed the API's certificate (https)");
  app.add_flag("--insecure", c.insecure, "do not verify the API's certificate (https)");
  app.add_flag("--json", c.as_json, "print the API's JSON instead of a table");

  std::string sink, action, file, key;
  auto* st = app.add_subcommand("status", "each sink's state, assignment, lag, records written and dead-lettered");
  st->add_option("sink", sink, "one sink (default: all)");
  auto* lg = app.add_subcommand("lag", "each partition's committed offset, end and lag, per sink and block");
  lg->add_option("sink", sink, "one sink (default: all)");
  std::vector<CLI::App*> controls;
  for (const char* verb : {"stop", "start", "restart", "pause", "resume"}) {
    auto* v = app.add_subcommand(verb, std::string(verb) + " a sink");
    v->add_option("sink", sink, "the sink's key")->required();
    controls.push_back(v);
  }
  auto* off = app.add_subcommand("offsets", "a sink's committed offsets: show, or reset while it is stopped");
  off->require_subcommand(1);
  auto* off_show = off->add_subcommand("show", "the committed offsets of each block's group");
  off_show->add_option("sink", sink)->required();
  auto* off_reset = off->add_subcommand("reset", "set them (the sink must be stopped)");
  std::string to, timestamp;
  std::vector<std::string> offsets;
  int block = -1;
  off_reset->add_option("sink", sink)->required();
  off_reset->add_option("--to", to, "earliest | latest")->check(CLI::IsMember({"earliest", "latest"}));
  off_reset->add_option("--timestamp", timestamp, "the first offset at or after it (epoch ms or RFC 3339)");
  off_reset->add_option("--offset", offsets, "<topic>:<partition>=<offset> (repeatable)");
  off_reset->add_option("--block", block, "one [[topics]] block's group only");
  auto* val = app.add_subcommand("validate", "check a definition file as --check would, on the runtime");
  val->add_option("file", file)->required();
  auto* app_ = app.add_subcommand("apply", "add or replace a definition (checked first; reloaded at once)");
  app_->add_option("file", file)->required();
  app_->add_option("--key", key, "the sink's key (default: the file's `key`)");
  auto* tp = app.add_subcommand("tap", "copies of the live records passing a stage of a sink, one JSON line each");
  std::string tap_stage = "transformed";
  int tap_limit = 10;
  double tap_wait = 10;
  tp->add_option("sink", sink)->required();
  tp->add_option("--stage", tap_stage, "decoded | transformed (what the sink is called with) | written")
      ->check(CLI::IsMember({"decoded", "transformed", "written"}));
  tp->add_option("--limit", tap_limit, "at most this many records (1-1000)")->check(CLI::Range(1, 1000));
  tp->add_option("--wait", tap_wait, "seconds to wait for them (at most 60)")->check(CLI::Range(0.001, 60.0));
  tp->add_option("--block", block, "one [[topics]] block only");
  auto* dl = app.add_subcommand("dead-letters", "a sink's dead letters: list, counts");
  dl->require_subcommand(1);
  DeadLetterQuery q;
  auto filters = [&](CLI::App* cmd) {
    cmd->add_option("sink", sink)->required();
    cmd->add_option("--stage", q.stage, "decode | transform | sink")
        ->check(CLI::IsMember({"decode", "transform", "sink"}));
    cmd->add_option("--reason", q.reason, "a part of the reason");
    cmd->add_option("--topic", q.topic, "the source topic");
    cmd->add_option("--partition", q.partition, "the source partition");
    cmd->add_option("--from-offset", q.from_offset, "source offsets from (inclusive)");
    cmd->add_option("--to-offset", q.to_offset, "source offsets to (inclusive)");
    cmd->add_option("--since", q.since, "dead-lettered at or after (epoch ms or RFC 3339)");
    cmd->add_option("--until", q.until, "dead-lettered before");
    cmd->add_option("--ids", q.ids, "these dead letters: <partition>:<offset>,...");
    cmd->add_option("--block", q.block, "the [[topics]] block whose dead-letter topic to read");
  };
  auto* dl_list = dl->add_subcommand("list", "the dead letters, a page at a time");
  filters(dl_list);
  dl_list->add_option("--limit", q.limit, "per page (1-1000)")->check(CLI::Range(1, 1000));
  dl_list->add_option("--cursor", q.cursor, "where a page starts (the last page's `more: --cursor`)");
  dl_list->add_flag("--all", q.all, "every page");
  auto* dl_counts = dl->add_subcommand("counts", "how many, by stage and reason");
  filters(dl_counts);
  auto* dl_redrive =
      dl->add_subcommand("redrive", "send dead letters back through the sink (--dry-run: what it would do)");
  RedriveOptions redrive_options;
  filters(dl_redrive);
  dl_redrive->add_option("--limit", q.limit, "--dry-run: dead letters per page (1-1000)")->check(CLI::Range(1, 1000));
  dl_redrive->add_option("--cursor", q.cursor, "--dry-run: where the page starts");
  dl_redrive->add_flag("--dry-run", redrive_options.dry_run,
                       "prepare them with the sink's definition as it is now, write nothing");
  dl_redrive->add_option("--chunk", redrive_options.chunk, "dead letters written per commit of its position (1-10000)")
      ->check(CLI::Range(1, 10000));
  dl_redrive->add_option("--resume", redrive_options.resume,
                         "go on with the redrive of this id (cut by a crash or a stop)");
  dl_redrive->add_option("--stop", redrive_options.stop, "stop the redrive of this id after the chunk it writes");
  dl_redrive->add_flag("--no-wait", redrive_options.no_wait, "start it and print its id, do not follow it");
  dl_redrive->add_flag("--apply-changes", redrive_options.apply_changes,
                       "redrive into a sink with change events (no newer change of their keys was applied)");
  auto* dl_redrives = dl->add_subcommand("redrives", "the sink's redrives in this runtime, with their progress");
  dl_redrives->add_option("sink", sink)->required();

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
    if (c.urls.empty()) {
      const char* env = std::getenv("PICOMQ_API_URL");
      std::string list = env ? env : "http://127.0.0.1:8083";
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        if (comma > start) c.urls.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    }
    if (*st) return status(c, sink);
    if (*lg) return lag(c, sink);
    for (auto* v : controls)
      if (*v) return control(c, v->get_name(), sink);
    if (*off_show) return offsets_show(c, sink);
    if (*off_reset) return offsets_reset(c, sink, to, timestamp, offsets, block);
    if (*val) return validate(c, file);
    if (*app_) return apply(c, file, key);
    if (*tp) return tap(c, sink, tap_stage, tap_limit, tap_wait, block);
    if (*dl_list) return dead_letters_list(c, sink, q);
    if (*dl_counts) return dead_letters_counts(c, sink, q);
    if (*dl_redrive) return dead_letters_redrive(c, sink, q, redrive_options);
    if (*dl_redrives) return redrives_list(c, sink);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  return kUsage;
}

}  // namespace picomq::runtime
