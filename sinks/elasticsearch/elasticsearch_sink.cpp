// Elasticsearch / OpenSearch sink: each batch as one or more _bulk requests (NDJSON, bounded by
// max_request_bytes / max_request_records with the kit's splitter, gzip / zstd by the kit's
// client, max_in_flight on the wire) into an index per topic (a sanitised name template, created on
// its first batch). Document ids: the record id topic:partition:offset (a replay overwrites), the
// key (optionally versioned by the offset), or none. Every item of the response is walked
// (elasticsearch/items.h): written or already there; refused documents go to the bad-record policy
// while the rest is written; items refused as transient (429, queue full, 5xx) are resent alone
// with the kit's back-off for retry_timeout, then the runtime retries the batch. A whole request
// refused with 400 is bisected down to the records the cluster refuses, a 413 split; 401/403 and
// the configuration errors stop the sink. Change events (a block's `changes`, docs/changes.md):
// documents by their row's key (index, update with doc_as_upsert, delete), a truncate as
// _refresh, then searches and deletes by _id until none is found, between the _bulk requests of
// the rows around it; one request at a time in record order and one batch at a time per block. Docs:
// docs/sinks/elasticsearch.md.
#include <simdjson.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "elasticsearch/bulk.h"
#include "elasticsearch/config.h"
#include "elasticsearch/items.h"
#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace es = picomq::elasticsearch;
using namespace std::chrono_literals;

constexpr auto kHealthCheckTimeout = 5s;

struct Index {
  std::string name;
};

}  // namespace

class ElasticsearchSink : public sdk::BaseSink<ElasticsearchSink> {
 public:
  static constexpr std::string_view sink_name = "elasticsearch";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records as documents into Elasticsearch / OpenSearch indices (one per topic) with _bulk: stable ids "
      "(record id, key, key versioned by offset), per-item outcomes, transient items resent alone; change events "
      "(upsert, patch, delete, truncate) applied by the row's key, in order.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  // A redriven dead letter is one more document: by its record or key id, as a replay.
  static constexpr bool takes_redrives = true;
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static inline const kit::OptionTable<es::Settings>& options = es::option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { es::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = es::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<es::Plan>(std::move(*plan));
    const es::Settings& s = plan_->settings;
    encoder_ = std::make_unique<es::BulkEncoder>(s, plan_->routing_path);
    if (s.document == kit::JsonLayout::PayloadOnly) declare_unread_fields(PMQ_FIELD_HEADERS);
    // Change events are applied in order: a later batch never before an earlier one.
    declare_max_in_flight(plan_->changes ? 1 : static_cast<uint32_t>(s.requests.max_in_flight));
    if (s.compatible_with) {
      const std::string v = std::to_string(s.compatible_with);
      accept_ = "application/vnd.elasticsearch+json; compatible-with=" + v;
      ndjson_type_ = "application/vnd.elasticsearch+x-ndjson; compatible-with=" + v;
      json_type_ = accept_;
    }

    kit::HttpClientOptions client = kit::client_options(s.http, s.tls, s.auth);
    client.max_in_flight =
        static_cast<size_t>(s.requests.max_in_flight) + 1;  // +1: an index lookup beside a full window
    client.max_response_body = 64u << 20;
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                           {.retry_timeout = s.requests.retry_timeout,
                                            .destination = "the cluster",
                                            .items = "documents",
                                            .written_counter = "written_records"});
    if (plan_->changes)
      // One request on the wire at a time, in submission order (a resend keeps its place, halves
      // go first): the bulk applies its items in order per shard, and nothing overtakes it.
      ordered_engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                                     {.retry_timeout = s.requests.retry_timeout,
                                                      .destination = "the cluster",
                                                      .items = "documents",
                                                      .written_counter = "written_records",
                                                      .in_order = true});
    indexes_ = std::make_unique<kit::DestinationCache<Index>>(
        plan_->index, kit::NamePolicy::IndexName,
        [this](const std::string& name, std::string_view) { return prepare_index(name); }, "index");
    health_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<BulkJob>(pending(), raw, *this);
    es::BatchPlan plan = encoder_->plan(raw);
    for (auto& [index, reason] : plan.refused) job->reject(index, reason);
    if (plan.skipped) count("skipped_tombstones", plan.skipped);
    if (!plan.items.empty()) {
      job->index = indexes_->get(raw.topic).name;  // throws an SDK outcome when it cannot be prepared
      job->items = std::move(plan.items);
      job->renderer.emplace(encoder_->begin(raw, job->index));
      job->limits = plan_->settings.requests.limits();
    }
    if (!plan.changes) {
      engine_->submit(job, job->items.size());
      return job->result();
    }
    if (!ordered_engine_)
      throw sdk::FatalError("a batch of change events reached a sink opened without a [[topics]] block with changes");
    job->changes = true;
    ordered_engine_->submit(job, change_segments(job->items));
    return job->result();
  }

  // No flush(): nothing is held open; every batch's requests are on their way when write_batch
  // returns and complete its write by themselves.

  // The host is stopping (ABI 2.6): resends waiting now complete their writes as retries instead
  // of holding the stop up to retry_timeout; requests on the wire (and task polls) finish.
  void stop() {
    if (engine_) engine_->stop();
    if (ordered_engine_) ordered_engine_->stop();
  }

  void close() {
    if (engine_) engine_->close();  // resends still waiting are completed as retries
    if (ordered_engine_) ordered_engine_->close();
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  // The request forms of a batch of change events: _bulk runs, and a truncate's two requests.
  enum Variant : uint32_t { kBulk = 0, kRefresh = 1, kSearch = 2, kDeleteFound = 3 };
  // Documents a truncate's search finds (and deletes) at once: the default index.max_result_window.
  static constexpr int kTruncatePage = 10000;

  // One batch's _bulk requests: its items rendered by the batch's encoder, into one index.
  struct BulkJob : kit::RequestJob {
    BulkJob(sdk::Pending p, const pmq_batch& b, ElasticsearchSink& s) : RequestJob(std::move(p)), batch(b), sink(s) {}
    const pmq_batch& batch;  // valid until the write completes (the ABI's promise)
    ElasticsearchSink& sink;
    std::string index;
    std::vector<es::Item> items;
    std::optional<es::BulkEncoder::ForBatch> renderer;
    bool changes = false;  // change events: on the ordered engine, truncates between the bulk runs
    // A truncate under way: the deletes of the documents its last search found (one request of
    // this job on the wire at a time, in order: no lock).
    mutable std::string found_deletes;
    size_t found = 0;

    void render(size_t item, std::string& out) const override { renderer->append(out, items[item]); }
    std::string body(const kit::Run& run, std::string rendered) const override {
      if (run.variant == kRefresh) return {};
      if (run.variant == kSearch)
        return R"({"size":)" + std::to_string(kTruncatePage) +
               R"(,"_source":false,"track_total_hits":false,"query":{"match_all":{}}})";
      if (run.variant == kDeleteFound) return found_deletes;
      return rendered;
    }
    kit::HttpRequest request(const kit::Run& run) const override { return sink.job_request(*this, run); }
    void on_response(kit::Reply& reply) override {
      if (reply.run().variant == kBulk) return sink.bulk_answer(*this, reply);
      sink.truncate_answer(*this, reply);
    }
    size_t record(size_t item) const override { return items[item].record; }
    std::string context() const override { return "index " + index + ": "; }
  };

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  kit::HttpRequest bulk_request() const {
    kit::HttpRequest r{.method = "POST", .url = plan_->base_url + "/_bulk" + plan_->bulk_query};
    r.headers.set("Content-Type", ndjson_type_);
    r.headers.set("Accept", accept_);
    return r;
  }

  kit::HttpRequest job_request(const BulkJob& job, const kit::Run& run) const {
    if (run.variant == kBulk) return bulk_request();
    // A truncate, with the core APIs every cluster has (_delete_by_query is in the reindex module,
    // which minimal nodes lack): the index refreshed, so that a search sees every document written
    // before; then, until a search finds none, the documents it found deleted by _id with a
    // refresh. Each step waits for the one before (the ordered engine), the rows after the
    // truncate wait for the last.
    const std::string url = plan_->base_url + "/" + kit::percent_encode(job.index);
    kit::HttpRequest r{.method = "POST"};
    switch (run.variant) {
      case kRefresh: r.url = url + "/_refresh"; break;
      case kSearch:
        r.url = url + "/_search?filter_path=hits.hits._id,hits.hits._routing";
        r.headers.set("Content-Type", json_type_);
        break;
      default:
        r.url = plan_->base_url +
                "/_bulk?refresh=true&filter_path=errors,items.*.status,items.*.result,"
                "items.*.error.type,items.*.error.reason";
        r.headers.set("Content-Type", ndjson_type_);
        break;
    }
    r.headers.set("Accept", accept_);
    return r;
  }

  // A batch of change events as segments of the ordered engine: the bulk items between
  // truncates, each truncate a run of its own (its refresh, then its _delete_by_query).
  static std::vector<kit::RequestEngine::Segment> change_segments(const std::vector<es::Item>& items) {
    std::vector<kit::RequestEngine::Segment> segments;
    size_t first = 0;
    for (size_t i = 0; i <= items.size(); ++i) {
      if (i < items.size() && items[i].op != es::Op::Truncate) continue;
      if (i > first) segments.push_back({.first = first, .count = i - first, .variant = kBulk});
      if (i < items.size()) segments.push_back({.first = i, .count = 1, .variant = kRefresh});
      first = i + 1;
    }
    return segments;
  }

  // A truncate's answers: the refresh, each search, each delete of what it found (the next step
  // sent from here, first in the engine's order). A missing index is empty.
  void truncate_answer(BulkJob& job, kit::Reply& reply) {
    const kit::HttpResponse& response = reply.response();
    if (response.status == 404 && response.body.find("index_not_found_exception") != std::string::npos)
      return truncated(job, reply);
    if (reply.classification().outcome != kit::Outcome::Written) return reply.follow(with_hint(reply.classification()));
    switch (reply.run().variant) {
      case kRefresh: return reply.send_again({0}, kSearch);
      case kSearch: {
        simdjson::dom::parser parser;
        simdjson::dom::element root;
        simdjson::dom::array hits;
        if (parser.parse(response.body).get(root))
          return reply.fail(
              {.outcome = kit::Outcome::Retry,
               .reason = job.context() + "truncate: the search response is not JSON: " + response.body_excerpt(200)});
        // filter_path leaves {} when nothing matched.
        if (root["hits"]["hits"].get_array().get(hits) || hits.size() == 0) return truncated(job, reply);
        job.found_deletes.clear();
        job.found = 0;
        for (simdjson::dom::element hit : hits) {
          std::string_view id, routing;
          if (hit["_id"].get_string().get(id)) continue;
          job.found_deletes += "{\"delete\":{\"_index\":";
          kit::append_json_escaped(job.found_deletes, job.index);
          job.found_deletes += ",\"_id\":";
          kit::append_json_escaped(job.found_deletes, id);
          if (!hit["_routing"].get_string().get(routing)) {
            job.found_deletes += ",\"routing\":";
            kit::append_json_escaped(job.found_deletes, routing);
          }
          job.found_deletes += "}}\n";
          ++job.found;
        }
        return reply.send_again({0}, kDeleteFound);
      }
      default: {
        auto parsed = es::parse_bulk_response(response.body, job.found);
        if (!parsed) {
          reply.maybe_written();
          return reply.resend({}, {.outcome = kit::Outcome::MaybeWritten,
                                   .reason = "truncate: " + parsed.error() + ": " + response.body_excerpt(200)});
        }
        for (const es::ItemResult& item : parsed.value().items) {
          std::string reason;
          if (es::classify_item(item, es::Op::Delete, false, &reason) == es::ItemOutcome::Written) continue;
          reply.maybe_written();  // the others may be deleted; all go again
          return reply.resend({},
                              {.outcome = kit::Outcome::Retry, .reason = "truncate: deleting a document: " + reason});
        }
        count("truncated_documents", job.found);
        return reply.send_again({0}, kSearch);  // until a search finds nothing
      }
    }
  }

  void truncated(BulkJob& job, kit::Reply& reply) {
    log(sdk::LogLevel::Info, job.context() + "truncate: every document deleted");
    count("truncates");
    reply.written(reply.size());
  }

  static kit::Classification with_hint(kit::Classification c) {
    if (c.status == 401 || c.status == 403)
      c.reason = "authentication failed or not allowed (check auth and the user's index privileges): " + c.reason;
    return c;
  }

  // What a _bulk response means: a 2xx has an answer per item, walked here; the rest is the
  // engine's (bisection on 400, split on 413, resends, a Fatal stop).
  void bulk_answer(BulkJob& job, kit::Reply& reply) {
    if (reply.classification().outcome != kit::Outcome::Written) return reply.follow(with_hint(reply.classification()));
    const kit::HttpResponse& response = reply.response();
    auto parsed = es::parse_bulk_response(response.body, reply.size());
    if (!parsed) {
      reply.maybe_written();  // the request went through; what of it is unknown
      return reply.fail({.outcome = kit::Outcome::MaybeWritten,
                         .reason = job.context() + parsed.error() + ": " + response.body_excerpt(200)});
    }
    const es::BulkResponse& r = parsed.value();
    if (!r.errors) return reply.written(reply.size());
    const bool external = plan_->settings.version_type == es::VersionType::External;
    uint64_t written = 0, already = 0;
    std::vector<size_t> again;
    std::string retry_reason;
    // Change events: once an item is refused as transient, it and every item after it that was
    // not rejected go again, in order (a later change of its key applied now would otherwise be
    // overtaken by the resent earlier one; applied again after it, the later one still wins).
    bool resending = false;
    for (size_t k = 0; k < reply.size(); ++k) {
      std::string reason;
      const es::ItemOutcome outcome = es::classify_item(r.items[k], job.items[reply.item(k)].op, external, &reason);
      if (resending && (outcome == es::ItemOutcome::Written || outcome == es::ItemOutcome::AlreadyThere)) {
        again.push_back(k);
        continue;
      }
      switch (outcome) {
        case es::ItemOutcome::Written: ++written; break;
        case es::ItemOutcome::AlreadyThere: ++already; break;
        case es::ItemOutcome::Rejected: reply.reject(k, reply.reason(reason)); break;
        case es::ItemOutcome::Retry:
          again.push_back(k);
          if (retry_reason.empty()) retry_reason = reason;
          resending = job.changes;
          break;
        case es::ItemOutcome::Fatal:
          if (r.items[k].type == "index_not_found_exception" && plan_->settings.auto_create_index &&
              !plan_->settings.data_stream) {
            indexes_->forget(job.batch.topic);  // deleted while the sink ran: created again next attempt
            reply.fail({.outcome = kit::Outcome::Retry,
                        .reason = job.context() + "the index is gone; it is created again on the next attempt"});
          } else {
            reply.fail({.outcome = kit::Outcome::Fatal, .reason = reply.reason(reason)});
          }
          break;
      }
    }
    if (written) reply.written(written);
    if (already) {
      count("already_written_records", already);
      reply.maybe_written();
    }
    if (again.empty()) return;
    count("item_retries", again.size());
    const std::string why = std::to_string(again.size()) + " of " + std::to_string(reply.size()) +
                            " items refused as transient: " + bounded(retry_reason);
    reply.resend(again, {.outcome = kit::Outcome::Retry, .reason = why});
  }

  // ------------------------------------------------------------------ indices

  // Synchronous (write_batch's thread, once per topic): the index exists afterwards, or the
  // outcome is thrown.
  Index prepare_index(const std::string& name) {
    const es::Settings& s = plan_->settings;
    put_index_template();
    if (s.data_stream || !s.auto_create_index) return Index{name};
    const std::string url = plan_->base_url + "/" + name;
    kit::HttpResponse head = client_->send({.method = "HEAD", .url = url});
    kit::Classification c = rules_.classify(head);
    if (c.outcome == kit::Outcome::Written) return Index{name};
    if (head.status != 404) throw_setup_outcome(c, "looking up index " + name);
    kit::HttpRequest put{.method = "PUT", .url = url, .body = plan_->create_body};
    put.headers.set("Content-Type", json_type_);
    put.headers.set("Accept", accept_);
    kit::HttpResponse created = client_->send(std::move(put));
    c = rules_.classify(created);
    if (c.outcome == kit::Outcome::Written) {
      log(sdk::LogLevel::Info, "created index " + name + (plan_->create_body.empty() ? "" : ": " + plan_->create_body));
      count("created_indexes");
      return Index{name};
    }
    // Another writer created it first.
    if (created.status == 400 && created.body.find("resource_already_exists_exception") != std::string::npos)
      return Index{name};
    if (c.outcome == kit::Outcome::Rejected)  // 400: the settings or mappings are refused
      throw sdk::FatalError("creating index " + name +
                            " with index_settings / index_mappings: " + bounded(created.body));
    throw_setup_outcome(c, "creating index " + name);
    return Index{name};
  }

  // index_template: put once, before the first index is looked up (again after a failure).
  void put_index_template() {
    const es::Settings& s = plan_->settings;
    if (s.index_template.text == "null") return;
    std::lock_guard lock(template_mutex_);
    if (template_put_) return;
    const std::string name = s.index_template_name.empty()
                                 ? "picomq-" + std::string(sink_key().empty() ? "sink" : sink_key())
                                 : s.index_template_name;
    kit::HttpRequest put{.method = "PUT",
                         .url = plan_->base_url + "/_index_template/" + kit::percent_encode(name),
                         .body = s.index_template.text};
    put.headers.set("Content-Type", json_type_);
    put.headers.set("Accept", accept_);
    kit::HttpResponse r = client_->send(std::move(put));
    const kit::Classification c = rules_.classify(r);
    if (c.outcome == kit::Outcome::Rejected)
      throw sdk::FatalError("putting index template " + name + " (index_template): " + bounded(r.body));
    if (c.outcome != kit::Outcome::Written) throw_setup_outcome(c, "putting index template " + name);
    template_put_ = true;
    log(sdk::LogLevel::Info, "put index template " + name);
  }

  [[noreturn]] void throw_setup_outcome(const kit::Classification& c, const std::string& what) const {
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten)
      throw sdk::RetryableError(what + ": " + c.reason);
    throw sdk::FatalError(what + ": " + with_hint(c).reason);
  }

  // ------------------------------------------------------------------ start-up check

  // Connects and authenticates now, so wrong credentials stop the sink at start, not at the first
  // record. An unreachable cluster is not a configuration error: a warning, and the sink starts
  // (each write retries).
  void health_check() {
    kit::HttpRequest r{.method = "GET", .url = plan_->base_url + "/", .timeout = kHealthCheckTimeout};
    r.headers.set("Accept", accept_);
    const kit::HttpResponse response = client_->send(std::move(r));
    const kit::Classification c = rules_.classify(response);
    switch (c.outcome) {
      case kit::Outcome::Written: break;
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten:
        count("destination_unreachable");
        log(sdk::LogLevel::Warn,
            "the cluster is not reachable now (the sink starts and retries with each write): " + c.reason);
        return;
      default: throw sdk::FatalError("connecting to " + kit::redact_url(plan_->base_url) + ": " + with_hint(c).reason);
    }
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    std::string_view number = "unknown", distribution = "elasticsearch";
    if (!parser.parse(response.body).get(root)) {
      std::string_view v;
      if (!root["version"]["number"].get_string().get(v)) number = v;
      if (!root["version"]["distribution"].get_string().get(v)) distribution = v;
    }
    server_ = std::string(distribution == "opensearch" ? "OpenSearch " : "Elasticsearch ") + std::string(number);
    log(sdk::LogLevel::Info, "connected to " + server_ + " at " + kit::redact_url(plan_->base_url) + ": index " +
                                 plan_->settings.index + ", action " +
                                 std::string(es::to_string(plan_->settings.action)) + ", " +
                                 std::to_string(plan_->settings.requests.max_in_flight) + " requests in flight");
  }

  std::unique_ptr<es::Plan> plan_;
  std::unique_ptr<es::BulkEncoder> encoder_;
  kit::OutcomeRules rules_;
  std::string accept_ = "application/json";
  std::string ndjson_type_ = "application/x-ndjson";
  std::string json_type_ = "application/json";
  std::string server_;
  std::mutex template_mutex_;
  bool template_put_ = false;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;          // after the client: stops before it
  std::unique_ptr<kit::RequestEngine> ordered_engine_;  // change events: one request at a time, in order
  std::unique_ptr<kit::DestinationCache<Index>> indexes_;
};

PICOMQ_SINK_PLUGIN(ElasticsearchSink)
