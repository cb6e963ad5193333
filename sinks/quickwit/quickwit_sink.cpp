// Quickwit sink: each batch's records as NDJSON documents into an index per topic (an id template
// sanitised to Quickwit's index id rules; optionally created on its first batch from a configured
// index config), through POST /api/v1/<index>/ingest?commit=<mode>&detailed_response=true in
// requests bounded by max_request_bytes (Quickwit takes at most 10 MB) and max_request_records
// (the kit's splitter), max_in_flight on the wire. A write completes when the answers to all of its
// requests said the documents were accepted (in the write-ahead log with commit = auto; committed,
// searchable, with wait_for / force). Documents Quickwit could not parse come back in
// parse_failures, matched to their records by their text, and go to the bad-record policy while
// the rest is written. 429 (rate limited, write-ahead log full), 503, 5xx and transport errors are
// resent with the kit's back-off for retry_timeout; a 413 splits the request. Quickwit has no
// document ids: a replay writes its records again; each document carries its record id
// (id_field, pico_id by default) so that readers can drop repeats. endpoint = "elastic_bulk"
// sends the same documents through the Elasticsearch-compatible POST /api/v1/_elastic/<index>/_bulk
// instead (for fronts that allow only that API); Quickwit reports no per-document errors there.
// An index config may be a TOML table or YAML text (inline or a file), as Quickwit takes it.
// Docs: docs/sinks/quickwit.md.
#include <simdjson.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "index_config_yaml.h"
#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/metadata.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMaxBody = 10u << 20;  // Quickwit's ingest payload limit (10 MiB by default)

enum class Commit { Auto, WaitFor, Force };
enum class Endpoint { Ingest, ElasticBulk };

struct Settings {
  std::string url;
  std::string index;
  Commit commit = Commit::Auto;
  Endpoint endpoint = Endpoint::Ingest;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  std::string id_field;
  kit::JsonValue index_config;
  std::string index_config_yaml;
  std::string index_config_file;
  kit::ByteSize max_request_bytes{};
  int64_t max_request_records = 0;
  int64_t max_in_flight = 0;
  std::chrono::milliseconds retry_timeout{};
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "Quickwit's REST address, e.g. http://127.0.0.1:7280", .credentials = "use the auth options"});
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return !in.bad();
}

// A YAML index config's problem, or nullopt (checked as it will be sent, with a stand-in id).
std::optional<std::string> check_yaml(const std::string& yaml) {
  try {
    (void)picomq::quickwit::yaml_index_config_for(yaml, "index-id");
    return std::nullopt;
  } catch (const picomq::quickwit::YamlConfigError& e) {
    return std::string("index config ") + e.what();
  }
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("Quickwit's REST address: http(s)://host:7280 (a path prefix for a proxy is kept; the sink adds "
                "/api/v1)."),
      kit::option("index", &Settings::index)
          .fallback(std::string("{topic}"))
          .check([](const std::string& v) -> std::optional<std::string> {
            auto t = kit::NameTemplate::parse(v);
            if (!t) return t.error();
            return std::nullopt;
          })
          .help("Index id template, resolved once per topic: {topic}, {topic_segment[N]}; sanitised to Quickwit's "
                "index id rules (^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$: other bytes become '_', a leading non-letter gets "
                "the prefix 'i', a shorter id is padded with '_', a longer one cut with a hash suffix)."),
      kit::option("commit", &Settings::commit)
          .choices({{"auto", Commit::Auto}, {"wait_for", Commit::WaitFor}, {"force", Commit::Force}})
          .fallback(Commit::Auto)
          .help("The ingest's commit mode, and so what a completed write means: auto = the documents are in "
                "Quickwit's write-ahead log (searchable after the index's commit_timeout_secs); wait_for = they are "
                "committed and searchable (the answer waits for the next commit: up to commit_timeout_secs); force = "
                "a commit is forced at once and awaited (costly with small batches)."),
      kit::option("endpoint", &Settings::endpoint)
          .choices({{"ingest", Endpoint::Ingest}, {"elastic_bulk", Endpoint::ElasticBulk}})
          .fallback(Endpoint::Ingest)
          .help(
              "Where documents go: ingest = POST /api/v1/<index>/ingest with detailed_response, so documents Quickwit "
              "cannot parse are rejected one by one through the bad-record policy; elastic_bulk = the "
              "Elasticsearch-compatible POST /api/v1/_elastic/<index>/_bulk (create actions, refresh = false / "
              "wait_for / true for commit auto / wait_for / force), for fronts that allow only that API: Quickwit "
              "reports no per-document errors there, so a document its mapping refuses is dropped by Quickwit (its "
              "log says so) and counted as written here."),
      kit::document_option(&Settings::document,
                           {.first = "id_field, ", .payload_adds = " (plus id_field unless empty)"}),
      kit::option("id_field", &Settings::id_field)
          .fallback(std::string("pico_id"))
          .help("A field holding the record id topic:partition:offset, first in every document: Quickwit keeps no "
                "document ids, so a replay writes records again and readers drop the repeats by this field. Empty: "
                "none (the pico_* fields of flat and envelope still identify a record)."),
      kit::option("index_config", &Settings::index_config)
          .check([](const kit::JsonValue& v) -> std::optional<std::string> {
            if (v.text == "null") return std::nullopt;
            simdjson::dom::parser parser;
            simdjson::dom::element root;
            simdjson::dom::object mapping;
            if (parser.parse(v.text).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
              return std::string("must be a table (Quickwit's index config)");
            if (root["doc_mapping"].get_object().get(mapping))
              return std::string("must hold doc_mapping (Quickwit's index config, without index_id: the sink sets it)");
            return std::nullopt;
          })
          .help(
              "Quickwit's index config as a table (version, doc_mapping, indexing_settings, search_settings, "
              "retention), e.g. { version = \"0.8\", doc_mapping = { mode = \"dynamic\", field_mappings = [...] } }: a "
              "topic's index that does not exist is created with it on its first batch (POST /api/v1/indexes; the sink "
              "sets index_id, version 0.8 when not given). Unset, like index_config_yaml and index_config_file: "
              "indexes "
              "must exist; a missing one stops the sink naming it."),
      kit::option("index_config_yaml", &Settings::index_config_yaml)
          .check([](const std::string& yaml) -> std::optional<std::string> {
            if (yaml.empty()) return std::nullopt;
            return check_yaml(yaml);
          })
          .help(
              "The same index config as YAML text (Quickwit's own format, e.g. a TOML multi-line string), sent as "
              "application/yaml with index_id replaced by the sink's (and version 0.8 added when absent); every scalar "
              "is passed as written, so Quickwit reads its types itself."),
      kit::option("index_config_file", &Settings::index_config_file)
          .check([](const std::string& path) -> std::optional<std::string> {
            if (path.empty()) return std::nullopt;
            std::string text;
            if (!read_file(path, text)) return "cannot read " + path;
            if (auto problem = check_yaml(text)) return path + ": " + *problem;
            return std::nullopt;
          })
          .help("A file holding Quickwit's index config as YAML (or JSON), e.g. the one given to `quickwit index "
                "create --index-config`; read when the sink opens, used as index_config is (index_id replaced)."),
      kit::option("max_request_bytes", &Settings::max_request_bytes)
          .fallback(kit::ByteSize{8u << 20})
          .check([](const kit::ByteSize& b) -> std::optional<std::string> {
            if (b.bytes == 0 || b.bytes > kMaxBody)
              return std::string("must be between 1 B and 10 MiB (Quickwit's ingest limit)");
            return std::nullopt;
          })
          .help(
              "Largest ingest body; a batch is cut into as many requests as it takes. Quickwit takes at most 10 MiB."),
      kit::option("max_request_records", &Settings::max_request_records)
          .fallback(10000)
          .check(kit::at_least(1))
          .help("Most documents in one ingest request."),
      kit::option("max_in_flight", &Settings::max_in_flight)
          .fallback(4)
          .check(kit::at_least(1))
          .help("Ingest requests on the wire at once (and batches of a block pending); offsets still commit in order."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long requests refused as transient (429 rate limited or write-ahead log full, 503, 5xx, "
                "transport errors) are resent here, back-off 200 ms to 5 s with jitter (at least Retry-After), before "
                "the write fails and the runtime's retry takes over. 0: not resent here."),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
      kit::group(&Settings::auth, kit::auth_options()),
  };
  return table;
}

std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  kit::validate_auth(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  if (int(s.index_config.text != "null") + int(!s.index_config_yaml.empty()) + int(!s.index_config_file.empty()) > 1)
    problems.add("index_config_file", "set one of index_config, index_config_yaml and index_config_file, not several");
  if (s.auth.type == kit::AuthType::OAuth2ClientCredentials)
    problems.add(
        "auth",
        "oauth2 is not supported by this sink (Quickwit has no auth of its own: a proxy's basic, bearer or api_key)");
  if (s.http.compression != kit::Compression::None)
    problems.add("compression",
                 "must be \"none\": compressed ingest bodies are not part of Quickwit's documented REST API");
  if (!problems.empty()) return std::nullopt;
  while (!s.url.empty() && s.url.back() == '/') s.url.pop_back();
  return s;
}

// Quickwit's index id rules: ^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$.
std::string index_id(const std::string& resolved) {
  std::string out;
  for (unsigned char c : resolved)
    out += c < 0x80 && (std::isalnum(c) || c == '-' || c == '_' || c == '.') ? static_cast<char>(c) : '_';
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) out = "i" + out;
  while (out.size() < 3) out += '_';
  return kit::fit_name(std::move(out), 255);
}

struct Index {
  std::string id;
};

}  // namespace

class QuickwitSink : public sdk::BaseSink<QuickwitSink> {
 public:
  static constexpr std::string_view sink_name = "quickwit";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records as NDJSON documents into Quickwit indexes (one per topic) through the ingest API; documents "
      "Quickwit cannot parse are rejected alone; each document carries its record id (no document ids in Quickwit).";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  static inline const kit::OptionTable<Settings>& options = option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto s = plan(config, problems);
    problems.throw_if_any();
    s_ = std::move(*s);
    kit::RecordJsonOptions o;
    o.layout = s_.document;
    writer_ = kit::RecordJsonWriter(o);
    if (s_.document == kit::JsonLayout::PayloadOnly) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(s_.max_in_flight));
    kit::HttpClientOptions client = kit::client_options(s_.http, s_.tls, s_.auth);
    client.max_in_flight = static_cast<size_t>(s_.max_in_flight) + 1;
    client.max_response_body = 64u << 20;  // parse_failures quote the refused documents
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(
        host(), *client_, rules_, {.retry_timeout = s_.retry_timeout, .destination = "Quickwit", .items = "documents"});
    write_query_ =
        s_.endpoint == Endpoint::Ingest
            ? std::string("/ingest?detailed_response=true&commit=") + (s_.commit == Commit::Auto      ? "auto"
                                                                       : s_.commit == Commit::WaitFor ? "wait_for"
                                                                                                      : "force")
            : std::string("/_bulk?refresh=") + (s_.commit == Commit::Auto      ? "false"
                                                : s_.commit == Commit::WaitFor ? "wait_for"
                                                                               : "true");
    write_path_ = s_.endpoint == Endpoint::Ingest ? "/api/v1/" : "/api/v1/_elastic/";
    if (!s_.index_config_yaml.empty()) {
      yaml_config_ = s_.index_config_yaml;
    } else if (!s_.index_config_file.empty()) {
      std::string text;
      if (!read_file(s_.index_config_file, text))
        throw sdk::FatalError("index_config_file: cannot read " + s_.index_config_file);
      if (auto problem = check_yaml(text))
        throw sdk::FatalError("index_config_file: " + s_.index_config_file + ": " + *problem);
      yaml_config_ = std::move(text);
    } else if (s_.index_config.text != "null") {
      simdjson::dom::parser parser;
      simdjson::dom::object root;
      if (parser.parse(s_.index_config.text).get_object().get(root)) throw sdk::FatalError("index_config: not a table");
      config_members_.clear();
      bool has_version = false;
      for (auto [k, v] : root) {
        if (k == "index_id") continue;  // the sink's
        if (k == "version") has_version = true;
        config_members_ += ',';
        kit::append_json_escaped(config_members_, k);
        config_members_ += ":" + simdjson::minify(v);
      }
      if (!has_version) config_members_ += ",\"version\":\"0.8\"";
    }
    if (s_.commit != Commit::Auto && s_.http.timeout < 65s)
      log(sdk::LogLevel::Warn,
          "commit = wait_for / force answers after a commit, which can take the index's "
          "commit_timeout_secs (60 s by default): a timeout below it fails writes that Quickwit "
          "then completes (and a retry duplicates them); raise timeout above commit_timeout_secs");
    indexes_ = std::make_unique<kit::DestinationCache<Index>>(
        kit::NameTemplate::parse(s_.index).value(), kit::NamePolicy::Verbatim,
        [this](const std::string& name, std::string_view) { return prepare_index(index_id(name)); }, "index");
    health_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<IngestJob>(pending(), raw, *this);
    for (size_t i = 0; i < raw.record_count; ++i) {
      const pmq_record& r = *pmq_batch_record(&raw, i);
      if (r.payload.data == nullptr) {  // Quickwit deletes by query only: a tombstone has nothing to do
        count("skipped_tombstones");
        continue;
      }
      if (s_.document == kit::JsonLayout::PayloadOnly) {
        if (auto why = kit::payload_document_refusal(raw, r)) {
          job->reject(i, std::move(*why));
          continue;
        }
      }
      job->records.push_back(i);
    }
    if (!job->records.empty()) {
      job->index = indexes_->get(raw.topic).id;  // throws an SDK outcome when it cannot be prepared
      job->json.emplace(writer_.begin(raw));
      job->limits = {s_.max_request_bytes.bytes, static_cast<size_t>(s_.max_request_records)};
    }
    engine_->submit(job, job->records.size());
    return job->result();
  }

  // The host is stopping (ABI 2.6): resends waiting now complete their writes as retries instead
  // of holding the stop up to retry_timeout; requests on the wire (and task polls) finish.
  void stop() {
    if (engine_) engine_->stop();
  }

  void close() {
    if (engine_) engine_->close();
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  // One batch's ingest requests into one index: a document line per record.
  struct IngestJob : kit::RequestJob {
    IngestJob(sdk::Pending p, const pmq_batch& b, QuickwitSink& s) : RequestJob(std::move(p)), batch(b), sink(s) {}
    const pmq_batch& batch;
    QuickwitSink& sink;
    std::string index;
    std::vector<size_t> records;  // the batch's records that become documents
    std::optional<kit::BatchJsonWriter> json;

    void render(size_t item, std::string& out) const override { sink.render(*this, item, out); }
    kit::HttpRequest request(const kit::Run&) const override { return sink.ingest_request(*this); }
    void on_response(kit::Reply& reply) override { sink.ingest_answer(*this, reply); }
    size_t record(size_t item) const override { return records[item]; }
    std::string context() const override { return "index " + index + ": "; }
  };

  // One document line: {"pico_id":"topic:0:42", ...}\n
  void render(const IngestJob& w, size_t item, std::string& out) const {
    const pmq_record& r = *pmq_batch_record(&w.batch, w.records[item]);
    if (s_.endpoint == Endpoint::ElasticBulk) out += "{\"create\":{}}\n";  // the index is the path's
    const size_t start = out.size();
    w.json->append(out, r);
    if (!s_.id_field.empty()) {
      std::string field;
      kit::append_json_escaped(field, s_.id_field);
      field += ':';
      kit::append_json_escaped(field, kit::record_id(w.batch.topic, w.batch.partition, r.offset));
      size_t after = start + 1;
      while (after < out.size() && (out[after] == ' ' || out[after] == '\t')) ++after;
      if (out[after] != '}') field += ',';
      out.insert(start + 1, field);
    }
    out += '\n';
  }

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  kit::HttpRequest ingest_request(const IngestJob& job) const {
    kit::HttpRequest r{.method = "POST", .url = s_.url + write_path_ + job.index + write_query_};
    r.headers.set("Content-Type", "application/x-ndjson");
    return r;
  }

  void ingest_answer(IngestJob& job, kit::Reply& reply) {
    const kit::Classification& c = reply.classification();
    switch (c.outcome) {
      case kit::Outcome::Written:
        if (s_.endpoint == Endpoint::ElasticBulk) return bulk_accepted(job, reply);
        return accepted(job, reply);
      case kit::Outcome::TooLarge:
        if (reply.size() > 1) return reply.split(c.reason);
        return reply.reject(0, "larger than Quickwit's ingest limit: " + bounded(c.reason));
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten: return reply.follow();
      case kit::Outcome::Rejected:  // 400: the request itself (index id, query, ingest v1 without detailed_response)
      case kit::Outcome::Fatal:
        if (reply.response().status == 404) return index_not_found(job, reply, c.reason);
        return reply.fail({.outcome = kit::Outcome::Fatal, .reason = job.context() + hint(c)});
    }
  }

  std::string hint(const kit::Classification& c) const {
    if (c.status == 401 || c.status == 403)
      return "authentication failed or not allowed at the proxy in front of Quickwit (check the auth options): " +
             bounded(c.reason);
    if (c.reason.find("detailed_response") != std::string::npos)
      return "this Quickwit does not report parse failures (ingest v1): the sink needs ingest v2 (Quickwit 0.9): " +
             bounded(c.reason);
    return bounded(c.reason);
  }

  // A 200: the documents were accepted, except those in parse_failures, matched to their records
  // by their text (the document as sent).
  void accepted(IngestJob& job, kit::Reply& reply) {
    const kit::HttpResponse& response = reply.response();
    reply.maybe_written();
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    uint64_t rejected = 0, ingested = reply.size();
    if (parser.parse(response.body).get(root) || root.type() != simdjson::dom::element_type::OBJECT) {
      return reply.fail({.outcome = kit::Outcome::MaybeWritten,
                         .reason = job.context() +
                                   "an answer that is not Quickwit's ingest response: " + response.body_excerpt(200)});
    }
    if (root["num_rejected_docs"].get_uint64().get(rejected)) rejected = 0;
    if (root["num_ingested_docs"].get_uint64().get(ingested)) ingested = reply.size();
    size_t matched = 0;
    simdjson::dom::array failures;
    if (rejected > 0 && !root["parse_failures"].get_array().get(failures)) {
      // The lines of the body, in order: line k is the request's item k.
      const std::string& body = reply.body();
      std::unordered_multimap<std::string_view, size_t> lines;
      size_t from = 0;
      for (size_t k = 0; k < reply.size(); ++k) {
        const size_t nl = body.find('\n', from);
        lines.emplace(std::string_view(body).substr(from, nl - from), k);
        from = nl + 1;
      }
      for (simdjson::dom::element f : failures) {
        std::string_view document, message, reason;
        if (f["document"].get_string().get(document)) continue;
        if (f["message"].get_string().get(message)) message = "";
        if (f["reason"].get_string().get(reason)) reason = "refused";
        auto it = lines.find(document);
        if (it == lines.end()) continue;
        reply.reject(it->second, job.context() + std::string(reason) + ": " + bounded(message));
        lines.erase(it);
        ++matched;
      }
    }
    if (ingested) count("documents", ingested);
    if (rejected > matched)
      reply.fail({.outcome = kit::Outcome::Fatal,
                  .reason = job.context() + "Quickwit refused " + std::to_string(rejected) + " documents and named " +
                            std::to_string(matched) +
                            " of them in parse_failures; the others cannot be told apart "
                            "(a Quickwit without detailed_response?): " +
                            response.body_excerpt(300)});
  }

  // A 200 from _elastic/_bulk. As documented it only says how many documents were taken for
  // processing; a Quickwit that answers in Elasticsearch's shape lists failed items instead (one
  // request holds one index: an item's failure is the whole request's).
  void bulk_accepted(IngestJob& job, kit::Reply& reply) {
    const kit::HttpResponse& response = reply.response();
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(response.body).get(root) || root.type() != simdjson::dom::element_type::OBJECT) {
      reply.maybe_written();
      return reply.fail(
          {.outcome = kit::Outcome::MaybeWritten,
           .reason = job.context() + "an answer that is not Quickwit's _bulk response: " + response.body_excerpt(200)});
    }
    bool errors = false;
    simdjson::dom::array items;
    if (!root["errors"].get_bool().get(errors) && errors && !root["items"].get_array().get(items)) {
      for (simdjson::dom::element item : items) {
        simdjson::dom::object action;
        if (item.get_object().get(action) || action.begin() == action.end()) continue;
        const simdjson::dom::element result = (*action.begin()).value;
        uint64_t status = 0;
        if (result["status"].get_uint64().get(status) || status < 300) continue;
        std::string_view reason = "(no reason given)";
        if (result["error"]["reason"].get_string().get(reason)) (void)0;
        const std::string why = "_bulk item status " + std::to_string(status) + ": " + std::string(reason);
        if (status == 404) return index_not_found(job, reply, why);
        const kit::Classification c{
            .outcome = status == 429 || status >= 500 ? kit::Outcome::Retry : kit::Outcome::Fatal,
            .reason = why + " " + response.body_excerpt(300),
            .status = static_cast<long>(status)};
        if (c.outcome == kit::Outcome::Retry) return reply.resend({}, c);
        return reply.fail({.outcome = c.outcome, .reason = reply.reason(c.reason), .status = c.status});
      }
    }
    reply.maybe_written();
    uint64_t taken = reply.size();
    if (root["num_docs_for_processing"].get_uint64().get(taken)) taken = reply.size();
    count("documents", taken);
  }

  void index_not_found(IngestJob& job, kit::Reply& reply, const std::string& reason) {
    indexes_->forget(job.batch.topic);
    reply.fail({.outcome = creates_indexes() ? kit::Outcome::Retry : kit::Outcome::Fatal,
                .reason = "index " + job.index + " not found" +
                          (creates_indexes() ? " (deleted? it is created again on the next attempt)"
                                             : " (create it, or set index_config)") +
                          ": " + bounded(reason)});
  }

  bool creates_indexes() const { return yaml_config_.has_value() || !config_members_.empty(); }

  // ------------------------------------------------------------------ indexes (synchronous, once per topic)

  Index prepare_index(const std::string& id) {
    const std::string url = s_.url + "/api/v1/indexes/" + id;
    kit::HttpResponse got = client_->send({.method = "GET", .url = url});
    kit::Classification c = rules_.classify(got);
    if (c.outcome == kit::Outcome::Written) return Index{id};
    if (got.status != 404) throw_setup(c, "looking up index " + id);
    if (!creates_indexes())
      throw sdk::FatalError(
          "index " + id +
          " does not exist in Quickwit (create it, or set index_config for the sink to): " + bounded(got.body));
    kit::HttpRequest post{.method = "POST", .url = s_.url + "/api/v1/indexes"};
    if (yaml_config_) {
      post.body = picomq::quickwit::yaml_index_config_for(*yaml_config_, id);  // checked at open
      post.headers.set("Content-Type", "application/yaml");
    } else {
      post.body = "{\"index_id\":\"" + id + "\"" + config_members_ + "}";  // the id needs no escaping
      post.headers.set("Content-Type", "application/json");
    }
    kit::HttpResponse created = client_->send(std::move(post));
    c = rules_.classify(created);
    if (c.outcome == kit::Outcome::Written) {
      count("created_indexes");
      log(sdk::LogLevel::Info, "created index " + id + " from index_config");
      return Index{id};
    }
    if ((created.status == 400 || created.status == 409) && created.body.find("already exists") != std::string::npos)
      return Index{id};  // another writer created it first
    if (c.outcome == kit::Outcome::Rejected)
      throw sdk::FatalError("creating index " + id + " from index_config: " + bounded(created.body));
    throw_setup(c, "creating index " + id);
  }

  [[noreturn]] void throw_setup(const kit::Classification& c, const std::string& what) const {
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten)
      throw sdk::RetryableError(what + ": " + c.reason);
    throw sdk::FatalError(what + ": " + hint(c));
  }

  void health_check() {
    kit::HttpResponse r = client_->send({.method = "GET", .url = s_.url + "/api/v1/indexes", .timeout = 5s});
    const kit::Classification c = rules_.classify(r);
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten) {
      count("destination_unreachable");
      log(sdk::LogLevel::Warn,
          "Quickwit is not reachable now (the sink starts and retries with each write): " + c.reason);
      return;
    }
    if (c.outcome != kit::Outcome::Written)
      throw sdk::FatalError("connecting to " + kit::redact_url(s_.url) + ": " + hint(c));
    log(sdk::LogLevel::Info, "connected to Quickwit at " + kit::redact_url(s_.url) + ": index " + s_.index +
                                 ", commit " +
                                 (s_.commit == Commit::Auto      ? "auto"
                                  : s_.commit == Commit::WaitFor ? "wait_for"
                                                                 : "force"));
  }

  Settings s_;
  kit::RecordJsonWriter writer_;
  kit::OutcomeRules rules_;
  std::string write_path_;                  // /api/v1/ or /api/v1/_elastic/, then the index id
  std::string write_query_;                 // /ingest?... or /_bulk?...
  std::string config_members_;              // an index_config table, as JSON members after index_id
  std::optional<std::string> yaml_config_;  // or YAML text
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;  // after the client: stops before it
  std::unique_ptr<kit::DestinationCache<Index>> indexes_;
};

PICOMQ_SINK_PLUGIN(QuickwitSink)
