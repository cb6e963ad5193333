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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/sdk.hpp"
#include "quickwit/answers.h"
#include "quickwit/config.h"
#include "quickwit/documents.h"
#include "quickwit/index_config_yaml.h"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace picomq::quickwit;
using namespace std::chrono_literals;

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
  // A redriven dead letter is one more document (at least once, as its replays).
  static constexpr bool takes_redrives = true;
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
    declare_max_in_flight(static_cast<uint32_t>(s_.requests.max_in_flight));
    kit::HttpClientOptions client = kit::client_options(s_.http, s_.tls, s_.auth);
    client.max_in_flight = static_cast<size_t>(s_.requests.max_in_flight) + 1;
    client.max_response_body = 64u << 20;  // parse_failures quote the refused documents
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(
        host(), *client_, rules_,
        {.retry_timeout = s_.requests.retry_timeout, .destination = "Quickwit", .items = "documents"});
    write_path_ = write_path(s_);
    write_query_ = write_query(s_);
    index_config_ = index_config(s_);
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
      job->limits = s_.requests.limits();
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
    render_document(out, s_, *w.json, w.batch, *pmq_batch_record(&w.batch, w.records[item]));
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
    const auto answer = read_ingest_answer(response.body, reply.body(), reply.size());
    if (!answer)
      return reply.fail({.outcome = kit::Outcome::MaybeWritten,
                         .reason = job.context() +
                                   "an answer that is not Quickwit's ingest response: " + response.body_excerpt(200)});
    for (const auto& [item, why] : answer->failures) reply.reject(item, job.context() + bounded(why));
    if (answer->ingested) count("written_records", answer->ingested);
    if (answer->rejected > answer->failures.size())
      reply.fail({.outcome = kit::Outcome::Fatal,
                  .reason = job.context() + "Quickwit refused " + std::to_string(answer->rejected) +
                            " documents and named " + std::to_string(answer->failures.size()) +
                            " of them in parse_failures; the others cannot be told apart "
                            "(a Quickwit without detailed_response?): " +
                            response.body_excerpt(300)});
  }

  // A 200 from _elastic/_bulk. As documented it only says how many documents were taken for
  // processing; a Quickwit that answers in Elasticsearch's shape lists failed items instead (one
  // request holds one index: an item's failure is the whole request's).
  void bulk_accepted(IngestJob& job, kit::Reply& reply) {
    const kit::HttpResponse& response = reply.response();
    const auto answer = read_bulk_answer(response.body, reply.size());
    if (!answer) {
      reply.maybe_written();
      return reply.fail(
          {.outcome = kit::Outcome::MaybeWritten,
           .reason = job.context() + "an answer that is not Quickwit's _bulk response: " + response.body_excerpt(200)});
    }
    if (answer->failed_item) {
      const auto& [status, reason] = *answer->failed_item;
      const std::string why = "_bulk item status " + std::to_string(status) + ": " + reason;
      if (status == 404) return index_not_found(job, reply, why);
      const kit::Classification c{.outcome = status == 429 || status >= 500 ? kit::Outcome::Retry : kit::Outcome::Fatal,
                                  .reason = why + " " + response.body_excerpt(300),
                                  .status = static_cast<long>(status)};
      if (c.outcome == kit::Outcome::Retry) return reply.resend({}, c);
      return reply.fail({.outcome = c.outcome, .reason = reply.reason(c.reason), .status = c.status});
    }
    reply.maybe_written();
    count("written_records", answer->taken);
  }

  void index_not_found(IngestJob& job, kit::Reply& reply, const std::string& reason) {
    indexes_->forget(job.batch.topic);
    reply.fail({.outcome = creates_indexes() ? kit::Outcome::Retry : kit::Outcome::Fatal,
                .reason = "index " + job.index + " not found" +
                          (creates_indexes() ? " (deleted? it is created again on the next attempt)"
                                             : " (create it, or set index_config)") +
                          ": " + bounded(reason)});
  }

  bool creates_indexes() const { return index_config_.creates_indexes(); }

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
    if (index_config_.yaml) {
      post.body = yaml_index_config_for(*index_config_.yaml, id);  // checked at open
      post.headers.set("Content-Type", "application/yaml");
    } else {
      post.body = "{\"index_id\":\"" + id + "\"" + index_config_.json_members + "}";  // the id needs no escaping
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
  std::string write_path_;    // /api/v1/ or /api/v1/_elastic/, then the index id
  std::string write_query_;   // /ingest?... or /_bulk?...
  IndexConfig index_config_;  // what indexes are created from, if anything
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;  // after the client: stops before it
  std::unique_ptr<kit::DestinationCache<Index>> indexes_;
};

PICOMQ_SINK_PLUGIN(QuickwitSink)
