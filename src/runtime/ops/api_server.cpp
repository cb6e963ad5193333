// The operations API's server: the route table (in the order of docs/operations.md's reference)
// and one named handler per endpoint. Past the ~350 lines of the runtime's other files because it
// is that reference: each handler is short, and reading them in one place is reading the API.
// GET /metrics' exposition and GET /sinks/{key}'s masking are in metrics_exposition.cpp and
// masked_definition.cpp.
#include "runtime/ops/api_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <thread>

#include "config/env.h"
#include "decoders/payload_decoder.h"
#include "runtime/config_check.h"
#include "runtime/delivery/delivery_window.h"
#include "runtime/kafka/dead_letter_reader.h"
#include "runtime/kafka/group_offsets.h"
#include "runtime/plugin_host/sink_instance.h"
#include "runtime/redrive.h"
#include "runtime/tap.h"
#include "transform/time.h"

namespace picomq::runtime {

using nlohmann::json;

namespace {

json error_json(const std::string& message) { return {{"error", message}}; }

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
}

json config_errors_json(const std::vector<config::ConfigError>& errors) {
  json out = json::array();
  for (const auto& e : errors)
    out.push_back({{"file", e.file},
                   {"line", e.line},
                   {"column", e.column},
                   {"key", e.key},
                   {"message", e.message},
                   {"text", e.to_string()}});
  return out;
}

json block_json(const BlockStatus& b) {
  json lag = json::array();
  for (const auto& l : b.lag)
    lag.push_back({{"topic", l.topic},
                   {"partition", l.partition},
                   {"position", l.position},
                   {"high", l.high},
                   {"lag", l.position >= 0 && l.high >= 0 ? std::max<int64_t>(0, l.high - l.position) : -1}});
  return {{"group_id", b.group_id},
          {"assigned", b.assigned},
          {"paused", b.paused},
          {"paused_by_operator", b.paused_by_operator},
          {"buffered_records", b.buffered_records},
          {"buffered_bytes", b.buffered_bytes},
          {"lag", lag},
          {"broker_reachable", b.broker_unreachable_since_ms == 0},
          {"counters",
           {{"consumed_records", b.consumed_records},
            {"consumed_bytes", b.consumed_bytes},
            {"written_records", b.delivered_records},
            {"filtered_records", b.filtered_records},
            {"skipped_records", b.skipped_records},
            {"dead_lettered_records", b.dead_lettered_records},
            {"rejected_records", b.rejected_records},
            {"stored_batches", b.stored_batches},
            {"committed_batches", b.committed_batches},
            {"commits", b.commits},
            {"failed_commits", b.failed_commits}}}};
}

int64_t parse_timestamp(const json& v, std::string& error) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    std::string why;
    if (auto t = transform::time::parse_rfc3339(v.get<std::string>(), why))
      return t->seconds * 1000 + t->nanos / 1000000;
    error = "'timestamp' must be epoch milliseconds or an RFC 3339 time, got \"" + v.get<std::string>() + "\": " + why;
    return 0;
  }
  error = "'timestamp' must be epoch milliseconds or an RFC 3339 time";
  return 0;
}

}  // namespace

// The body of POST /sinks/{key}/offsets: where to set the offsets (`to`, `timestamp` or
// `offsets`) and, optionally, of which block; the error for a 400 answer, else empty.
std::string offsets_request(const json& body, size_t blocks, kafka::OffsetTarget& target, int& block) {
  if (body.is_discarded() || !body.is_object())
    return "the body must be a JSON object: {\"to\": \"earliest\"|\"latest\"}, "
           "{\"timestamp\": ms|\"RFC 3339\"} or {\"offsets\": [{\"topic\", \"partition\", \"offset\"}]}";
  std::string error;
  if (body.contains("to")) {
    const auto to = body["to"].is_string() ? body["to"].get<std::string>() : "";
    if (to == "earliest") target.kind = kafka::OffsetTarget::Kind::Earliest;
    else if (to == "latest") target.kind = kafka::OffsetTarget::Kind::Latest;
    else return "'to' must be \"earliest\" or \"latest\"";
  } else if (body.contains("timestamp")) {
    target.kind = kafka::OffsetTarget::Kind::Timestamp;
    target.timestamp_ms = parse_timestamp(body["timestamp"], error);
    if (!error.empty()) return error;
  } else if (body.contains("offsets") && body["offsets"].is_array()) {
    target.kind = kafka::OffsetTarget::Kind::Explicit;
    for (const auto& o : body["offsets"]) {
      if (!o.is_object() || !o.value("topic", json()).is_string() ||
          !o.value("partition", json()).is_number_integer() || !o.value("offset", json()).is_number_integer())
        return "each of 'offsets' must be {\"topic\": string, \"partition\": int, \"offset\": int}";
      target.offsets[{o["topic"].get<std::string>(), o["partition"].get<int32_t>()}] = o["offset"].get<int64_t>();
    }
  } else {
    return "give one of 'to', 'timestamp' or 'offsets'";
  }
  if (body.contains("block")) {
    if (!body["block"].is_number_integer() || body["block"].get<int>() < 0 || body["block"].get<size_t>() >= blocks)
      return "'block' must be the index of one of the sink's [[topics]] blocks";
    block = body["block"].get<int>();
  }
  return {};
}

class HttpApiServer final : public ApiServer {
 public:
  HttpApiServer(const config::RuntimeConfig& config, Supervisor& sinks, StatusBoard& status)
      : config_(config), sinks_(sinks), status_(status) {}

  std::string url() const override { return url_; }

  std::string listen() {
    const auto& api = config_.api;
    if (api.tls_cert) {
      auto ssl = std::make_unique<httplib::SSLServer>(api.tls_cert->c_str(), api.tls_key->c_str());
      if (!ssl->is_valid())
        return "[api] cannot use tls_cert " + api.tls_cert->string() + " / tls_key " + api.tls_key->string() +
               " (unreadable, or not a PEM certificate and its key)";
      server_ = std::move(ssl);
    } else {
      server_ = std::make_unique<httplib::Server>();
    }
    routes();
    int port = api.port;
    if (port == 0) port = server_->bind_to_any_port(api.host);
    else if (!server_->bind_to_port(api.host, port)) port = -1;
    if (port <= 0)
      return "[api] cannot listen on " + api.host + ":" + std::to_string(api.port) + ": " + std::strerror(errno);
    url_ = std::string(api.tls_cert ? "https" : "http") + "://" + api.host + ":" + std::to_string(port);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    return {};
  }

  ~HttpApiServer() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  std::string url_;

 private:
  bool authorized(const httplib::Request& req) const {
    if (!config_.api.token) return true;
    // `<scheme> <token>`, the scheme case-insensitive (RFC 9110 §11.1): "bearer" and "BEARER" too.
    static constexpr std::string_view kBearer = "bearer";
    const std::string header = req.get_header_value("Authorization");
    const size_t space = header.find(' ');
    if (space == std::string::npos ||
        !std::equal(header.begin(), header.begin() + static_cast<long>(space), kBearer.begin(), kBearer.end(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; }))
      return false;
    const size_t token_at = header.find_first_not_of(' ', space);
    const std::string got = token_at == std::string::npos ? std::string() : header.substr(token_at);
    const std::string& expected = *config_.api.token;
    unsigned char diff = got.size() != expected.size();
    for (size_t i = 0; i < expected.size(); ++i)
      diff |= static_cast<unsigned char>(expected[i] ^ (i < got.size() ? got[i] : 0));
    return diff == 0;
  }

  json sink_json(const SinkStatus& s, bool with_definition) const {
    json j{{"key", s.key}, {"file", s.file}, {"state", to_string(s.state)}, {"error", s.message}};
    if (s.state != SinkState::Error && s.state != SinkState::Invalid) j["error"] = nullptr;
    if (!s.reload_error.empty()) j["reload_error"] = s.reload_error;
    j["blocks"] = json::array();
    for (const auto& b : s.blocks) j["blocks"].push_back(block_json(b));
    j["group_lag"] = group_lag_json(s);
    j["lag_error"] = s.lag_error.empty() ? json(nullptr) : json(s.lag_error);
    j["sink_counters"] = s.counters;
    if (with_definition)
      if (auto d = sinks_.definition(s.key))
        j["definition"] = json::parse(masked_definition_json(*d, config_.plugin_path));
    return j;
  }

  // The groups of a sink's blocks, as the offsets endpoints read and set them.
  std::vector<kafka::GroupSpec> groups(const config::SinkDefinition& d) const {
    return kafka::sink_groups(d, sinks_.bootstrap_servers(), config_.client_properties);
  }

  json offsets_json(const config::SinkDefinition& d, std::string& error) const {
    json blocks = json::array();
    for (const auto& g : groups(d)) {
      auto parts = kafka::read_group_offsets(g, error);
      if (!error.empty()) return {};
      json ps = json::array();
      for (const auto& p : parts)
        ps.push_back({{"topic", p.topic},
                      {"partition", p.partition},
                      {"committed", p.committed < 0 ? json(nullptr) : json(p.committed)},
                      {"start", p.low},
                      {"end", p.high},
                      {"lag", p.lag()}});
      blocks.push_back({{"group_id", g.group_id}, {"partitions", ps}});
    }
    return {{"key", d.key}, {"blocks", blocks}};
  }

  void routes() {
    auto& s = *server_;
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
      // section 6.3), as `curl -X POST` sends it. cpp-httplib 0.11 reads such a POST until the
      // connection closes (then answers 400): it is told the length. The request is the
      // server's own non-const object; this handler runs before the body is read.
      if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
        const_cast<httplib::Request&>(req).set_header("Content-Length", "0");
      if (req.path == "/" || req.path == "/index.html") return httplib::Server::HandlerResponse::Unhandled;
      if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", "Bearer");
      reply(res, 401, error_json("missing or wrong bearer token (Authorization: Bearer <[api] token>)"));
      return httplib::Server::HandlerResponse::Handled;
    });
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(std::move(ep));
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {}
      reply(res, 500, error_json(what));
    });
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) reply(res, 404, error_json("no such endpoint: " + req.method + " " + req.path));
      else reply(res, res.status, error_json("HTTP " + std::to_string(res.status)));
    });

    for (const Route& route : route_table()) {
      auto handler = [this, h = route.handler](const httplib::Request& req, httplib::Response& res) {
        (this->*h)(req, res);
      };
      const std::string_view method = route.method;
      if (method == "GET") s.Get(route.pattern, handler);
      else if (method == "POST") s.Post(route.pattern, handler);
      else if (method == "PUT") s.Put(route.pattern, handler);
      else s.Delete(route.pattern, handler);
    }
  }

  // ------------------------------------------------------------------ the endpoints

  using Handler = void (HttpApiServer::*)(const httplib::Request&, httplib::Response&);
  struct Route {
    const char* method;
    const char* pattern;  // a regex of the whole path; its groups are req.matches[1..]
    Handler handler;
  };
  // The API, in the order of docs/operations.md's reference.
  static std::span<const Route> route_table() {
    static constexpr Route kRoutes[] = {
        {"GET", "/health/live", &HttpApiServer::live},
        {"GET", "/health/ready", &HttpApiServer::ready},
        {"GET", "/sinks", &HttpApiServer::list_sinks},
        {"GET", R"(/sinks/([^/]+))", &HttpApiServer::get_sink},
        {"POST", R"(/sinks/([^/]+)/(stop|start|restart|pause|resume))", &HttpApiServer::control_sink},
        {"GET", R"(/sinks/([^/]+)/offsets)", &HttpApiServer::get_offsets},
        {"POST", R"(/sinks/([^/]+)/offsets)", &HttpApiServer::set_offsets},
        {"GET", R"(/sinks/([^/]+)/tap)", &HttpApiServer::tap},
        {"GET", R"(/sinks/([^/]+)/dead-letters)", &HttpApiServer::dead_letters},
        {"GET", R"(/sinks/([^/]+)/dead-letters/counts)", &HttpApiServer::dead_letter_counts},
        {"POST", R"(/sinks/([^/]+)/dead-letters/redrive)", &HttpApiServer::redrive},
        {"GET", R"(/sinks/([^/]+)/redrives)", &HttpApiServer::list_redrives},
        {"GET", R"(/sinks/([^/]+)/redrives/([^/]+))", &HttpApiServer::get_redrive},
        {"DELETE", R"(/sinks/([^/]+)/redrives/([^/]+))", &HttpApiServer::stop_redrive},
        {"POST", "/validate", &HttpApiServer::validate},
        {"PUT", R"(/sinks/([^/]+))", &HttpApiServer::put},
        {"DELETE", R"(/sinks/([^/]+))", &HttpApiServer::delete_sink},
        {"POST", "/reload", &HttpApiServer::reload},
        {"GET", "/metrics", &HttpApiServer::metrics_page},
        {"GET", "/", &HttpApiServer::status_page},
    };
    return kRoutes;
  }

  void status_page(const httplib::Request&, httplib::Response& res) {
    res.set_content(kStatusPageHtml, "text/html; charset=utf-8");
  }

  void live(const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "live"}}); }

  // Ready when every enabled sink runs and its blocks reach the broker (or, with no sink to tell,
  // when the broker answers us).
  void ready(const httplib::Request&, httplib::Response& res) {
    json why = json::array();
    bool broker_checked = false;
    for (const auto& st : status_.all()) {
      if (st.state == SinkState::Disabled) continue;
      if (st.state != SinkState::Running) why.push_back("sink '" + st.key + "' is " + std::string(to_string(st.state)));
      for (size_t i = 0; i < st.blocks.size(); ++i) {
        broker_checked = broker_checked || !st.blocks[i].group_id.empty();
        if (st.blocks[i].broker_unreachable_since_ms)
          why.push_back("sink '" + st.key + "' topics[" + std::to_string(i) + "]: broker unreachable");
      }
      if (st.state == SinkState::Running && st.blocks.empty())
        why.push_back("sink '" + st.key + "' has not joined its group yet");
    }
    if (!broker_checked && why.empty()) {
      std::string error;
      kafka::read_group_offsets(
          {sinks_.bootstrap_servers(), config_.client_properties, "picomq-connect-health", {}, {}}, error);
      if (!error.empty()) why.push_back("broker: " + error);
    }
    reply(res, why.empty() ? 200 : 503, {{"status", why.empty() ? "ready" : "not ready"}, {"reasons", why}});
  }

  void list_sinks(const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const auto& st : status_.all()) out.push_back(sink_json(st, true));
    reply(res, 200, {{"sinks", out}});
  }

  void get_sink(const httplib::Request& req, httplib::Response& res) {
    auto st = status_.get(req.matches[1]);
    if (!st) return reply(res, 404, error_json("no sink '" + std::string(req.matches[1]) + "'"));
    reply(res, 200, sink_json(*st, true));
  }

  // POST /sinks/{key}/stop|start|restart|pause|resume
  void control_sink(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1], action = req.matches[2];
    Supervisor::Outcome o;
    if (action == "stop") o = sinks_.stop(key);
    else if (action == "start") o = sinks_.start(key);
    else if (action == "restart") o = sinks_.restart(key);
    else o = sinks_.pause(key, action == "pause");
    json body = o.status == 200 ? json{{"message", o.message}} : error_json(o.message);
    if (auto st = status_.get(key)) body["sink"] = sink_json(*st, false);
    reply(res, o.status, body);
  }

  void get_offsets(const httplib::Request& req, httplib::Response& res) {
    auto d = sinks_.definition(req.matches[1]);
    if (!d) return reply(res, 404, error_json("no sink '" + std::string(req.matches[1]) + "'"));
    std::string error;
    json out = offsets_json(*d, error);
    if (!error.empty()) return reply(res, 502, error_json(error));
    reply(res, 200, out);
  }

  // POST /sinks/{key}/offsets: sets the committed offsets of a stopped sink's groups (all its
  // blocks, or the one `block` names), then answers as GET does.
  void set_offsets(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1];
    auto d = sinks_.definition(key);
    if (!d) return reply(res, 404, error_json("no sink '" + key + "'"));
    if (auto st = status_.get(key); st && st->state != SinkState::Stopped && st->state != SinkState::Disabled)
      return reply(res, 409,
                   error_json("sink '" + key + "' is " + std::string(to_string(st->state)) +
                              ": stop it first (POST /sinks/" + key +
                              "/stop); offsets change only while "
                              "no consumer of its groups runs"));
    json body = json::parse(req.body, nullptr, false);
    kafka::OffsetTarget target;
    int block = -1;
    if (std::string error = offsets_request(body, d->topics.size(), target, block); !error.empty())
      return reply(res, 400, error_json(error));
    auto gs = groups(*d);
    for (size_t i = 0; i < gs.size(); ++i) {
      if (block >= 0 && static_cast<size_t>(block) != i) continue;
      kafka::OffsetTarget t = target;
      if (t.kind == kafka::OffsetTarget::Kind::Explicit && gs.size() > 1) {
        // Each block gets the partitions of its own topics.
        std::string probe;
        auto parts = kafka::read_group_offsets(gs[i], probe);
        std::erase_if(t.offsets, [&](const auto& kv) {
          return std::none_of(parts.begin(), parts.end(), [&](const auto& p) {
            return p.topic == kv.first.first && p.partition == kv.first.second;
          });
        });
        if (t.offsets.empty()) continue;
      }
      if (auto e = kafka::reset_group_offsets(gs[i], t); !e.empty()) return reply(res, 409, error_json(e));
      spdlog::info("sink '{}': offsets of group '{}' set by the operator", key, gs[i].group_id);
    }
    get_offsets(req, res);
  }

  // GET /sinks/{key}/tap?stage=decoded|transformed|written&limit=N&wait=S[&block=N]: copies of
  // the next records passing the stage (runtime/tap.h), once `limit` came or after `wait` seconds.
  void tap(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1];
    const std::string stage_name = req.has_param("stage") ? req.get_param_value("stage") : "transformed";
    const auto stage = Tap::stage_of(stage_name);
    if (!stage) return reply(res, 400, error_json("'stage' must be decoded, transformed or written"));
    int64_t limit = 10, block = -1;
    if (req.has_param("limit") &&
        (!integer_param(req, "limit", limit) || limit < 1 || limit > static_cast<int64_t>(Tap::kMaxRecords)))
      return reply(res, 400, error_json("'limit' must be an integer from 1 to " + std::to_string(Tap::kMaxRecords)));
    if (req.has_param("block") && (!integer_param(req, "block", block) || block < 0))
      return reply(res, 400, error_json("'block' must be a [[topics]] block's index"));
    double wait_s = 10;
    if (req.has_param("wait")) {
      try {
        size_t used = 0;
        const std::string v = req.get_param_value("wait");
        wait_s = std::stod(v, &used);
        if (used != v.size() || !(wait_s > 0) || wait_s > static_cast<double>(Tap::kMaxWait.count())) throw 0;
      } catch (...) {
        return reply(
            res, 400,
            error_json("'wait' must be seconds, more than 0 and at most " + std::to_string(Tap::kMaxWait.count())));
      }
    }
    Supervisor::Outcome why;
    const auto tap = sinks_.tap(key, why);
    if (!tap) return reply(res, why.status, error_json(why.message));
    std::vector<std::string> records;
    if (!tap->collect(*stage, static_cast<int>(block), static_cast<size_t>(limit),
                      std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)), records))
      return reply(res, 409, error_json("a tap of sink '" + key + "' is running: one at a time"));
    std::string body = R"({"stage":")" + stage_name + R"(","records":[)";
    for (size_t i = 0; i < records.size(); ++i) body += (i ? "," : "") + records[i];
    body += "]}";
    res.status = 200;
    res.set_content(body, "application/json");
  }

  // GET /sinks/{key}/dead-letters: a page of the sink's dead letters, filtered (the query's
  // stage, reason, topic, partition, from_offset, to_offset, since, until, ids), from `cursor`
  // (a page's next_cursor), at most `limit` (default 50, at most 1000); or with `latest=N` the
  // newest N among the last N of each partition, newest first.
  void dead_letters(const httplib::Request& req, httplib::Response& res) {
    std::string topic, error;
    kafka::DeadLetterFilter filter;
    if (!dead_letter_request(req, res, topic, filter)) return;
    int64_t limit = 50;
    if (req.has_param("limit") && (!integer_param(req, "limit", limit) || limit < 1 || limit > 1000))
      return reply(res, 400, error_json("'limit' must be an integer from 1 to 1000"));
    const kafka::DeadLetterReader reader(sinks_.bootstrap_servers(), config_.client_properties, topic);
    int64_t latest = 0;
    if (req.has_param("latest") && (!integer_param(req, "latest", latest) || latest < 1 || latest > 1000))
      return reply(res, 400, error_json("'latest' must be an integer from 1 to 1000"));
    const auto page = latest ? reader.latest(filter, static_cast<size_t>(latest), error)
                             : reader.page(filter, req.get_param_value("cursor"), static_cast<size_t>(limit), error);
    if (!error.empty() && page.records.empty()) return reply(res, 502, error_json(error));
    res.status = 200;
    res.set_content(kafka::page_json(topic, page), "application/json");
  }

  // GET /sinks/{key}/dead-letters/counts: how many dead letters of each stage and reason.
  void dead_letter_counts(const httplib::Request& req, httplib::Response& res) {
    std::string topic, error;
    kafka::DeadLetterFilter filter;
    if (!dead_letter_request(req, res, topic, filter)) return;
    const kafka::DeadLetterReader reader(sinks_.bootstrap_servers(), config_.client_properties, topic);
    const auto counts = tally_.count(reader, filter, error);
    if (!error.empty() && counts.matched == 0) return reply(res, 502, error_json(error));
    res.status = 200;
    res.set_content(kafka::counts_json(topic, counts), "application/json");
  }

  // POST /sinks/{key}/dead-letters/redrive: sends the dead letters the query's filters select back
  // through the sink's definition as it is now (runtime/redrive.h). {"dry_run": true}: what it
  // would do with a page of them (cursor, limit), nothing written. Otherwise a redrive starts
  // (202, its progress; `chunk` in the query or the body: dead letters per commit), or
  // {"resume": "<id>"} goes on with one cut by a crash or a stop, its selection as it was.
  void redrive(const httplib::Request& req, httplib::Response& res) {
    const json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (!body.is_object())
      return reply(res, 400, error_json("the body must be a JSON object: {}, {\"dry_run\": true} or {\"resume\": id}"));
    std::string topic, error;
    kafka::DeadLetterFilter filter;
    if (!dead_letter_request(req, res, topic, filter)) return;
    if (!body.value("dry_run", false)) {
      RedriveRequest request;
      request.dead_letter_topic = topic;
      request.filter = std::move(filter);
      if (body.contains("resume")) {
        if (!body["resume"].is_string() || body["resume"].get<std::string>().empty())
          return reply(res, 400, error_json("'resume' must be a redrive's id"));
        request.resume = body["resume"].get<std::string>();
      }
      int64_t chunk = body.contains("chunk") && body["chunk"].is_number_integer() ? body["chunk"].get<int64_t>() : 500;
      if (req.has_param("chunk") && !integer_param(req, "chunk", chunk))
        return reply(res, 400, error_json("'chunk' must be an integer"));
      if (chunk < 1 || chunk > 10000) return reply(res, 400, error_json("'chunk' must be from 1 to 10000"));
      request.chunk = static_cast<size_t>(chunk);
      request.apply_changes = body.value("apply_changes", false);
      Supervisor::Outcome why;
      const auto r = sinks_.start_redrive(req.matches[1], std::move(request), why);
      if (!r) return reply(res, why.status, error_json(why.message));
      res.status = 202;
      res.set_header("Location", "/sinks/" + r->sink() + "/redrives/" + r->id());
      res.set_content(r->progress_json(), "application/json");
      return;
    }
    int64_t limit = 50;
    if (req.has_param("limit") && (!integer_param(req, "limit", limit) || limit < 1 || limit > 1000))
      return reply(res, 400, error_json("'limit' must be an integer from 1 to 1000"));
    auto d = sinks_.definition(req.matches[1]);
    const std::string out = redrive_dry_run(*d, config_, sinks_.bootstrap_servers(), topic, filter,
                                            req.get_param_value("cursor"), static_cast<size_t>(limit), error);
    if (out.empty()) return reply(res, 502, error_json(error));
    res.status = 200;
    res.set_content(out, "application/json");
  }

  // GET /sinks/{key}/redrives: this process's redrives of the sink (oldest first, with their
  // progress), then the others Kafka knows of (run by another runtime, or before a restart):
  // "interrupted" ones resume with {"resume": id}.
  void list_redrives(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1];
    if (!sinks_.known(key)) return reply(res, 404, error_json("no sink '" + key + "'"));
    std::string body = "{\"redrives\":[";
    bool first = true;
    std::set<std::string> here;
    for (const auto& r : sinks_.redrives(key)) {
      body += (first ? "" : ",") + r->progress_json();
      first = false;
      here.insert(r->id());
    }
    std::string topic, error;
    kafka::DeadLetterFilter filter;
    httplib::Response ignored;
    if (dead_letter_request(req, ignored, topic, filter)) {
      for (const auto& r : redrives_in_kafka(sinks_.bootstrap_servers(), config_, key, topic, error)) {
        if (here.count(json::parse(r).value("id", ""))) continue;
        body += (first ? "" : ",") + r;
        first = false;
      }
    }
    body += "]";
    if (!error.empty()) body += ",\"error\":" + json(error).dump();
    res.status = 200;
    res.set_content(body + "}", "application/json");
  }

  // GET /sinks/{key}/redrives/{id}: one redrive's progress.
  void get_redrive(const httplib::Request& req, httplib::Response& res) {
    const auto r = sinks_.redrive(req.matches[1], req.matches[2]);
    if (!r)
      return reply(
          res, 404,
          error_json("no redrive '" + std::string(req.matches[2]) + "' of sink '" + std::string(req.matches[1]) +
                     "' in this process (one cut by a restart resumes with {\"resume\": id})"));
    res.status = 200;
    res.set_content(r->progress_json(), "application/json");
  }

  // DELETE /sinks/{key}/redrives/{id}: stops it after the chunk it writes (committed): resumable.
  void stop_redrive(const httplib::Request& req, httplib::Response& res) {
    const auto r = sinks_.redrive(req.matches[1], req.matches[2]);
    if (!r)
      return reply(res, 404,
                   error_json("no redrive '" + std::string(req.matches[2]) + "' of sink '" +
                              std::string(req.matches[1]) + "' in this process"));
    r->stop();
    r->join();
    res.status = 200;
    res.set_content(r->progress_json(), "application/json");
  }

  static bool integer_param(const httplib::Request& req, const char* name, int64_t& out) {
    const std::string v = req.get_param_value(name);
    try {
      size_t used = 0;
      out = std::stoll(v, &used);
      return used == v.size();
    } catch (...) {
      return false;
    }
  }

  // The dead-letter topic of the sink's block (`block`, or the one its blocks share) and the
  // query's filter; false once an error is answered.
  bool dead_letter_request(const httplib::Request& req, httplib::Response& res, std::string& topic,
                           kafka::DeadLetterFilter& filter) {
    const std::string key = req.matches[1];
    auto d = sinks_.definition(key);
    if (!d) {
      reply(res, 404, error_json("no sink '" + key + "'"));
      return false;
    }
    std::vector<std::string> topics;  // per block; empty: none
    for (const auto& b : d->topics) topics.push_back(b.dead_letter_topic.value_or(""));
    if (req.has_param("block")) {
      int64_t block = -1;
      if (!integer_param(req, "block", block) || block < 0 || block >= static_cast<int64_t>(topics.size())) {
        reply(res, 400,
              error_json("'block' must be a [[topics]] block of the sink, 0 to " + std::to_string(topics.size() - 1)));
        return false;
      }
      topic = topics[static_cast<size_t>(block)];
      if (topic.empty()) {
        reply(res, 404,
              error_json("sink '" + key + "' topics[" + std::to_string(block) + "] has no dead-letter topic"));
        return false;
      }
    } else {
      std::vector<std::string> distinct;
      for (const auto& t : topics)
        if (!t.empty() && std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
      if (distinct.empty()) {
        reply(res, 404,
              error_json("sink '" + key +
                         "' has no dead-letter topic (on_bad_record = \"dead_letter\" and "
                         "dead_letter_topic in a [[topics]] block)"));
        return false;
      }
      if (distinct.size() > 1) {
        reply(res, 400,
              error_json("sink '" + key + "' dead-letters to " + std::to_string(distinct.size()) +
                         " topics (one per block): name the block, ?block=N"));
        return false;
      }
      topic = distinct.front();
    }
    filter.sink = key;
    if (req.has_param("stage")) {
      filter.stage = req.get_param_value("stage");
      if (*filter.stage != "decode" && *filter.stage != "transform" && *filter.stage != "sink") {
        reply(res, 400, error_json("'stage' must be decode, transform or sink"));
        return false;
      }
    }
    if (req.has_param("reason")) filter.reason = req.get_param_value("reason");
    if (req.has_param("topic")) filter.topic = req.get_param_value("topic");
    for (const auto& [name, target] :
         {std::pair<const char*, std::optional<int64_t>*>{"from_offset", &filter.from_offset},
          {"to_offset", &filter.to_offset}}) {
      if (!req.has_param(name)) continue;
      int64_t v = 0;
      if (!integer_param(req, name, v)) {
        reply(res, 400, error_json(std::string("'") + name + "' must be an offset (an integer)"));
        return false;
      }
      *target = v;
    }
    if (req.has_param("partition")) {
      int64_t p = 0;
      if (!integer_param(req, "partition", p) || p < 0 || p > INT32_MAX) {
        reply(res, 400, error_json("'partition' must be a partition number"));
        return false;
      }
      filter.partition = static_cast<int32_t>(p);
    }
    for (const auto& [name, target] :
         {std::pair<const char*, std::optional<int64_t>*>{"since", &filter.since_ms}, {"until", &filter.until_ms}}) {
      if (!req.has_param(name)) continue;
      const std::string v = req.get_param_value(name);
      std::string error;
      const json value = !v.empty() && std::all_of(v.begin(), v.end(), ::isdigit) ? json(std::stoll(v)) : json(v);
      *target = parse_timestamp(value, error);
      if (!error.empty()) {
        reply(res, 400, error_json(std::string("'") + name + "': " + error.substr(error.find(' ') + 1)));
        return false;
      }
    }
    if (req.has_param("ids")) {
      const std::string ids = req.get_param_value("ids");
      for (size_t start = 0; start < ids.size();) {
        const size_t comma = std::min(ids.find(',', start), ids.size());
        if (comma > start) filter.ids.push_back(ids.substr(start, comma - start));
        start = comma + 1;
      }
    }
    return true;
  }

  // POST /validate: a definition's TOML checked as --check does, nothing written.
  void validate(const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.has_param("file") ? req.get_param_value("file") : "request.toml";
    auto parsed = config::parse_sink_definition(req.body, name, config::process_env(), decoders::compile_block_schema);
    auto errors = check_definition(parsed, config_.plugin_path);
    reply(res, 200, {{"valid", errors.empty()}, {"errors", config_errors_json(errors)}});
  }

  void delete_sink(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1];
    auto d = sinks_.definition(key);
    if (!d) return reply(res, 404, error_json("no sink '" + key + "'"));
    std::error_code ec;
    std::filesystem::remove(d->file, ec);
    if (ec) return reply(res, 500, error_json("cannot remove " + d->file + ": " + ec.message()));
    reload_reply(res, 200);
  }

  void reload(const httplib::Request&, httplib::Response& res) { reload_reply(res, 200); }

  void metrics_page(const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_exposition(status_.all()), "text/plain; version=0.0.4; charset=utf-8");
  }

  void reload_reply(httplib::Response& res, int status) {
    auto r = sinks_.reload();
    reply(res, status,
          {{"started", r.started},
           {"restarted", r.restarted},
           {"stopped", r.stopped},
           {"unchanged", r.unchanged},
           {"errors", r.errors}});
  }

  // PUT /sinks/{key}: the body is the definition's TOML; it is checked as --check does (its key
  // must be the URL's), written atomically (a dot-file renamed over the target) and reloaded.
  void put(const httplib::Request& req, httplib::Response& res) {
    const std::string key = req.matches[1];
    std::filesystem::path target;
    if (auto existing = sinks_.definition(key)) target = existing->file;
    else target = config_.sinks_dir / (key + ".toml");
    auto parsed =
        config::parse_sink_definition(req.body, target.string(), config::process_env(), decoders::compile_block_schema);
    auto errors = check_definition(parsed, config_.plugin_path);
    if (parsed.definition && parsed.definition->key != key)
      errors.push_back({target.string(), 0, 0, "key",
                        "the definition's key is '" + parsed.definition->key + "' but the URL names '" + key + "'"});
    if (!errors.empty())
      return reply(res, 400,
                   {{"error", "invalid definition: nothing was written"}, {"errors", config_errors_json(errors)}});
    const auto tmp = target.parent_path() / ("." + target.filename().string() + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << req.body;
      out.flush();
      if (!out) return reply(res, 500, error_json("cannot write " + tmp.string()));
    }
    std::error_code ec;
    std::filesystem::rename(tmp, target, ec);
    if (ec) return reply(res, 500, error_json("cannot replace " + target.string() + ": " + ec.message()));
    reload_reply(res, 200);
  }

  const config::RuntimeConfig& config_;
  Supervisor& sinks_;
  // The dead-letter counts between requests: each reads only the dead letters since the last.
  kafka::DeadLetterTally tally_;
  StatusBoard& status_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

std::unique_ptr<ApiServer> start_api_server(const config::RuntimeConfig& config, Supervisor& sinks, StatusBoard& status,
                                            std::string& error) {
  auto server = std::make_unique<HttpApiServer>(config, sinks, status);
  if (error = server->listen(); !error.empty()) return nullptr;
  return server;
}

}  // namespace picomq::runtime
