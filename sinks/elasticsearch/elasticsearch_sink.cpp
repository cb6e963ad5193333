// Elasticsearch / OpenSearch sink: each batch as one or more _bulk requests (NDJSON, bounded by
// max_request_bytes / max_request_records with the kit's splitter, gzip / zstd by the kit's
// client, max_in_flight on the wire) into an index per topic (a sanitised name template, created on
// its first batch). Document ids: the record id topic:partition:offset (a replay overwrites), the
// key (optionally versioned by the offset), or none. Every item of the response is walked
// (elasticsearch/items.h): written or already there; refused documents go to the bad-record policy
// while the rest is written; items refused as transient (429, queue full, 5xx) are resent alone
// with the kit's back-off for retry_timeout, then the runtime retries the batch. A whole request
// refused with 400 is bisected down to the records the cluster refuses, a 413 split; 401/403 and
// the configuration errors stop the sink. Docs: docs/sinks/elasticsearch.md.
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
#include "picomq/kit/batch_completion.hpp"
#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/scheduler.hpp"
#include "picomq/kit/splitter.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace es = picomq::elasticsearch;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

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
      "(record id, key, key versioned by offset), per-item outcomes, transient items resent alone.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  static inline const kit::OptionTable<es::Settings>& options = es::option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { es::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = es::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<es::Plan>(std::move(*plan));
    const es::Settings& s = plan_->settings;
    encoder_ = std::make_unique<es::BulkEncoder>(s, plan_->routing_path);
    if (s.document == es::Layout::Payload) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(s.max_in_flight));
    if (s.compatible_with) {
      const std::string v = std::to_string(s.compatible_with);
      accept_ = "application/vnd.elasticsearch+json; compatible-with=" + v;
      ndjson_type_ = "application/vnd.elasticsearch+x-ndjson; compatible-with=" + v;
      json_type_ = accept_;
    }

    kit::HttpClientOptions client = kit::client_options(s.http, s.tls, s.auth);
    client.max_in_flight = static_cast<size_t>(s.max_in_flight) + 1;  // +1: an index lookup beside a full window
    client.max_response_body = 64u << 20;
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    indexes_ = std::make_unique<kit::DestinationCache<Index>>(
        plan_->index, kit::NamePolicy::IndexName,
        [this](const std::string& name, std::string_view) { return prepare_index(name); }, "index");
    health_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    sdk::Pending result = pending();
    auto write = std::make_shared<BatchWrite>(result, raw);
    es::BatchPlan plan = encoder_->plan(raw);
    for (auto& [index, reason] : plan.refused) write->done.reject(index, reason);
    if (plan.skipped) count("skipped_tombstones", plan.skipped);
    if (plan.items.empty()) {
      write->done.finish_one();
      return result;
    }
    write->index = indexes_->get(raw.topic).name;  // throws an SDK outcome when it cannot be prepared
    write->items = std::move(plan.items);
    write->renderer.emplace(encoder_->begin(raw, write->index));
    auto chunks = kit::split_records(
        0, write->items.size(), limits(), kit::Framing::none(),
        [&](size_t i, std::string& out) { write->renderer->append(out, write->items[i]); });
    write->done.add(chunks.size());
    for (kit::Chunk& chunk : chunks) {
      std::vector<size_t> positions(chunk.count);
      for (size_t k = 0; k < chunk.count; ++k) positions[k] = chunk.first + k;
      send(write, std::move(positions), std::make_shared<const std::string>(std::move(chunk.body)), fresh_budget());
    }
    write->done.finish_one();
    return result;
  }

  // No flush(): nothing is held open; every batch's requests are on their way when write_batch
  // returns and complete its write by themselves.

  void close() {
    closing_ = true;
    scheduler_.close();  // resends still waiting are completed as retries
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  // One batch in flight: its items, and how its requests complete its write (kit::BatchCompletion).
  struct BatchWrite {
    BatchWrite(sdk::Pending p, const pmq_batch& b) : done(std::move(p), 1), batch(b) {}
    kit::BatchCompletion done;  // 1: write_batch's own share, until all requests are sent
    const pmq_batch& batch;     // valid until the write completes (the ABI's promise)
    std::string index;
    std::vector<es::Item> items;
    std::optional<es::BulkEncoder::ForBatch> renderer;
  };
  using WritePtr = std::shared_ptr<BatchWrite>;
  using Body = std::shared_ptr<const std::string>;

  kit::SplitLimits limits() const {
    return {plan_->settings.max_request_bytes.bytes, static_cast<size_t>(plan_->settings.max_request_records)};
  }
  kit::ResendBudget fresh_budget() const { return kit::ResendBudget(plan_->settings.retry_timeout); }

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  std::string body_of(const BatchWrite& write, const std::vector<size_t>& positions) const {
    std::string out;
    for (size_t pos : positions) write.renderer->append(out, write.items[pos]);
    return out;
  }

  kit::HttpRequest bulk_request(const Body& body) const {
    kit::HttpRequest r{.method = "POST", .url = plan_->base_url + "/_bulk" + plan_->bulk_query};
    r.body = kit::HttpBody::borrowed(*body);
    r.headers.set("Content-Type", ndjson_type_);
    r.headers.set("Accept", accept_);
    return r;
  }

  // Sends the items at `positions` of `write` (rendered in `body`) and handles what comes back.
  void send(const WritePtr& write, std::vector<size_t> positions, Body body, kit::ResendBudget budget) {
    count("requests");
    client_->send_async(bulk_request(body), [this, write, positions = std::move(positions), body,
                                             budget](kit::HttpResponse response) mutable {
      const kit::Classification c = rules_.classify(response);
      const size_t n = positions.size();
      switch (c.outcome) {
        case kit::Outcome::Written: return items_done(write, positions, response, budget);
        case kit::Outcome::TooLarge:
        case kit::Outcome::Rejected:
          if (n > 1) return split(write, positions, c.reason);  // bisect: find the records refused
          write->done.reject(write->items[positions[0]].record,
                        (c.outcome == kit::Outcome::TooLarge ? "too large for the cluster: " : "refused by the cluster: ") +
                            bounded(c.reason));
          return finish_one(write);
        case kit::Outcome::Retry:
        case kit::Outcome::MaybeWritten:
          if (c.outcome == kit::Outcome::MaybeWritten) mark_written(write);
          if (resend_later(write, std::move(positions), std::move(body), budget, c)) return;
          fail(write, c);
          return finish_one(write);
        case kit::Outcome::Fatal:
          fail(write, with_hint(c));
          return finish_one(write);
      }
    });
  }

  static kit::Classification with_hint(kit::Classification c) {
    if (c.status == 401 || c.status == 403)
      c.reason = "authentication failed or not allowed (check auth and the user's index privileges): " + c.reason;
    return c;
  }

  // A 2xx _bulk response: walks every item.
  void items_done(const WritePtr& write, const std::vector<size_t>& positions, const kit::HttpResponse& response,
                  kit::ResendBudget budget) {
    auto parsed = es::parse_bulk_response(response.body, positions.size());
    if (!parsed) {
      mark_written(write);  // the request went through; what of it is unknown
      fail(write, {.outcome = kit::Outcome::MaybeWritten,
                   .reason = "index " + write->index + ": " + parsed.error() + ": " + response.body_excerpt(200)});
      return finish_one(write);
    }
    const es::BulkResponse& r = parsed.value();
    const bool external = plan_->settings.version_type == es::VersionType::External;
    uint64_t written = 0, already = 0, rejected = 0;
    std::vector<size_t> again;
    std::string retry_reason;
    for (size_t k = 0; k < positions.size(); ++k) {
      const es::Item& item = write->items[positions[k]];
      if (!r.errors) {
        ++written;
        continue;
      }
      std::string reason;
      switch (es::classify_item(r.items[k], item.op, external, &reason)) {
        case es::ItemOutcome::Written: ++written; break;
        case es::ItemOutcome::AlreadyThere: ++already; break;
        case es::ItemOutcome::Rejected:
          ++rejected;
          write->done.reject(item.record, "index " + write->index + ": " + bounded(reason));
          break;
        case es::ItemOutcome::Retry:
          again.push_back(positions[k]);
          if (retry_reason.empty()) retry_reason = reason;
          break;
        case es::ItemOutcome::Fatal:
          if (r.items[k].type == "index_not_found_exception" && plan_->settings.auto_create_index &&
              !plan_->settings.data_stream) {
            indexes_->forget(write->batch.topic);  // deleted while the sink ran: created again next attempt
            fail(write, {.outcome = kit::Outcome::Retry,
                         .reason = "index " + write->index + " is gone; it is created again on the next attempt"});
          } else {
            fail(write, {.outcome = kit::Outcome::Fatal, .reason = "index " + write->index + ": " + bounded(reason)});
          }
          break;
      }
    }
    if (written) count("documents", written);
    if (already) count("already_there", already);
    if (rejected) count("rejected_records", rejected);
    if (written || already) mark_written(write);
    if (again.empty()) return finish_one(write);
    count("item_retries", again.size());
    auto body = std::make_shared<const std::string>(body_of(*write, again));
    const kit::Classification c{.outcome = kit::Outcome::Retry,
                                .reason = "index " + write->index + ": " + std::to_string(again.size()) + " of " +
                                          std::to_string(positions.size()) + " items refused as transient: " +
                                          bounded(retry_reason)};
    if (resend_later(write, std::move(again), std::move(body), budget, c)) return;
    fail(write, c);
    finish_one(write);
  }

  // Splits the items at `positions` in two requests (a 413, or a 400 to narrow down).
  void split(const WritePtr& write, const std::vector<size_t>& positions, const std::string& why) {
    count("splits");
    log(sdk::LogLevel::Debug, "splitting a _bulk request of " + std::to_string(positions.size()) + " items: " + why);
    write->done.add(1);  // two halves replace this request
    for (auto& half : kit::halve(positions)) {
      auto body = std::make_shared<const std::string>(body_of(*write, half));
      send(write, std::move(half), std::move(body), fresh_budget());
    }
  }

  // Schedules a resend after the budget's next wait (at least the server's Retry-After) while its
  // deadline allows; false when it does not (the write then fails as a retry).
  bool resend_later(const WritePtr& write, std::vector<size_t> positions, Body body, kit::ResendBudget& budget,
                    const kit::Classification& c) {
    const auto wait = budget.next_delay(c);
    if (!wait || closing_) return false;
    const std::chrono::milliseconds delay = *wait;
    count("resends");
    log(sdk::LogLevel::Debug, "resending " + std::to_string(positions.size()) + " items in " +
                                  std::to_string(delay.count()) + " ms: " + c.reason);
    scheduler_.after(delay, [this, write, positions = std::move(positions), body = std::move(body), budget,
                             c](bool run) mutable {
      if (!run) {
        fail(write, c);
        return finish_one(write);
      }
      send(write, std::move(positions), std::move(body), budget);
    });
    return true;
  }

  static void mark_written(const WritePtr& write) { write->done.written(); }
  static void fail(const WritePtr& write, const kit::Classification& c) { write->done.fail(c); }
  static void finish_one(const WritePtr& write) { write->done.finish_one(); }

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
      count("created_indices");
      return Index{name};
    }
    // Another writer created it first.
    if (created.status == 400 && created.body.find("resource_already_exists_exception") != std::string::npos)
      return Index{name};
    if (c.outcome == kit::Outcome::Rejected)  // 400: the settings or mappings are refused
      throw sdk::FatalError("creating index " + name + " with index_settings / index_mappings: " + bounded(created.body));
    throw_setup_outcome(c, "creating index " + name);
    return Index{name};
  }

  // index_template: put once, before the first index is looked up (again after a failure).
  void put_index_template() {
    const es::Settings& s = plan_->settings;
    if (s.index_template.text == "null") return;
    std::lock_guard lock(template_mutex_);
    if (template_put_) return;
    const std::string name =
        s.index_template_name.empty() ? "picomq-" + std::string(sink_key().empty() ? "sink" : sink_key()) : s.index_template_name;
    kit::HttpRequest put{.method = "PUT", .url = plan_->base_url + "/_index_template/" + kit::percent_encode(name),
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
                                 plan_->settings.index + ", action " + std::string(es::to_string(plan_->settings.action)) +
                                 ", " + std::to_string(plan_->settings.max_in_flight) + " requests in flight");
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
  std::atomic<bool> closing_{false};
  kit::Scheduler scheduler_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::DestinationCache<Index>> indexes_;
};

PICOMQ_SINK_PLUGIN(ElasticsearchSink)
