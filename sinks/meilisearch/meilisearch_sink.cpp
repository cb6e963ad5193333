// Meilisearch sink: each batch's records as documents of an index per topic (a uid template,
// sanitised to [A-Za-z0-9_-], created on its first batch with the primary key), sent as NDJSON
// (POST = add or replace, PUT = add or update) in requests bounded by max_request_bytes /
// max_request_records (the kit's splitter; gzip by the kit's client). Every request is an
// asynchronous task: a batch's write completes only when GET /tasks/{uid} says `succeeded` for
// every task that carries its records (a 202 is no write). Tasks are enqueued in order, one
// request at a time (Meilisearch processes them in enqueue order), and polled with back-off
// bounded by task_timeout. A task is atomic: a task that failed on a document (invalid or missing
// id, bad _geo...) is bisected — its halves enqueued again — down to the records Meilisearch
// refuses, which go to the bad-record policy. Document ids: the record id topic:partition:offset
// in the kit's reversible [A-Za-z0-9_-] encoding (a replay replaces the same documents), the key
// in that encoding, or a payload field. Tombstones: skipped or (id = key) deleted by id.
// Change events (a block's `changes`, docs/changes.md): documents named by their row's key,
// upserts POSTed (replaced whole), patches PUT (merged), deletes by id, a truncate as DELETE
// /indexes/{uid}/documents between the tasks of the rows around it; each task awaited before the
// next request goes (a task that fails or is resent never lands after a later one), one batch at
// a time. Docs: docs/sinks/meilisearch.md.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meilisearch/config.h"
#include "meilisearch/documents.h"
#include "meilisearch/tasks.h"
#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace picomq::meilisearch;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Index {
  std::string uid;
};

}  // namespace

class MeilisearchSink : public sdk::BaseSink<MeilisearchSink> {
 public:
  static constexpr std::string_view sink_name = "meilisearch";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records as documents into Meilisearch indexes (one per topic); a write completes when its tasks "
      "succeeded; documents a task fails on are found by bisection and rejected.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  // A redriven dead letter is one more document: by its primary key, as a replay.
  static constexpr bool takes_redrives = true;
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
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
    // Change events are applied in order: a later batch never before an earlier one.
    declare_max_in_flight(s_.changes ? 1 : static_cast<uint32_t>(s_.requests.max_in_flight));
    kit::HttpClientOptions client = kit::client_options(s_.http, s_.tls, kit::AuthSettings{});
    if (s_.api_key) client.auth = kit::BearerAuth{*s_.api_key};
    client.max_in_flight = static_cast<size_t>(s_.requests.max_in_flight) + 2;
    client.max_response_body = 1u << 20;
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                           {.retry_timeout = s_.requests.retry_timeout,
                                            .destination = "Meilisearch",
                                            .items = "documents",
                                            .in_order = true});
    key_query_ = "?primaryKey=" + kit::percent_encode(s_.primary_key);
    indexes_ = std::make_unique<kit::DestinationCache<Index>>(
        kit::NameTemplate::parse(s_.index).value(), kit::NamePolicy::Verbatim,
        [this](const std::string& name, std::string_view) { return prepare_index(index_uid(name)); }, "index");
    health_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<TaskJob>(pending(), raw, *this);
    // Plan: which record is which operation, with its id; refused records now.
    DocumentPlan plan = plan_documents(s_, raw);
    if (plan.skipped_tombstones) count("skipped_tombstones", plan.skipped_tombstones);
    for (auto& [record, why] : plan.refused) job->reject(record, std::move(why));
    job->items = std::move(plan.items);
    if (!job->items.empty()) {
      job->index = indexes_->get(raw.topic).uid;  // throws an SDK outcome when it cannot be prepared
      job->json.emplace(writer_.begin(raw));
      job->limits = s_.requests.limits();
    }
    // Runs of the same operation, in record order, each cut by the limits (a truncate alone).
    std::vector<kit::RequestEngine::Segment> segments;
    for (size_t from = 0; from < job->items.size();) {
      const Op op = job->items[from].op;
      size_t to = from + 1;
      while (op != Op::Truncate && to < job->items.size() && job->items[to].op == op) ++to;
      segments.push_back({.first = from, .count = to - from, .variant = static_cast<uint32_t>(op)});
      from = to;
    }
    engine_->submit(job, segments);
    return job->result();
  }

  // The host is stopping (ABI 2.6): resends waiting now complete their writes as retries instead
  // of holding the stop up to retry_timeout; requests on the wire (and task polls) finish.
  void stop() {
    if (engine_) engine_->stop();
  }

  void close() {
    closing_.stop();
    if (engine_) engine_->close();
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  // Request forms (Op): documents added / updated (NDJSON), deleted by id (a JSON array), merged
  // (a change's patch: PUT), or all deleted (a change's truncate).
  static constexpr uint32_t kDocuments = static_cast<uint32_t>(Op::Write), kDelete = static_cast<uint32_t>(Op::Delete),
                            kPatch = static_cast<uint32_t>(Op::Patch), kTruncate = static_cast<uint32_t>(Op::Truncate);

  // One batch's document requests (each a task) into one index.
  struct TaskJob : kit::RequestJob {
    TaskJob(sdk::Pending p, const pmq_batch& b, MeilisearchSink& s) : RequestJob(std::move(p)), batch(b), sink(s) {}
    const pmq_batch& batch;
    MeilisearchSink& sink;
    std::string index;
    std::vector<Item> items;
    std::optional<kit::BatchJsonWriter> json;

    void render(size_t item, std::string& out) const override { sink.render(*this, item, out); }
    kit::Framing framing_for(uint32_t variant) const override {
      return variant == kDelete ? kit::Framing::json_array() : kit::Framing::none();
    }
    kit::HttpRequest request(const kit::Run& run) const override { return sink.documents_request(*this, run); }
    void on_response(kit::Reply& reply) override { sink.enqueued(*this, reply); }
    size_t record(size_t item) const override { return items[item].record; }
    std::string context() const override { return "index " + index + ": "; }
  };

  // One item: an NDJSON document line, a JSON string id (a delete-batch element), or nothing (a
  // truncate).
  void render(const TaskJob& w, size_t position, std::string& out) const {
    render_item(out, w.items[position], *w.json, w.batch, s_.primary_key);
  }

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  // Requests go one at a time, in order (the engine's in_order): Meilisearch runs tasks in the
  // order it enqueued them, so a batch's deletes and documents (and the batches of a partition)
  // apply in record order.
  kit::HttpRequest documents_request(const TaskJob& job, const kit::Run& run) const {
    const std::string base = s_.url + "/indexes/" + job.index + "/documents";
    kit::HttpRequest r;
    if (run.variant == kTruncate) {
      r.method = "DELETE";  // every document of the index: a documentDeletion task
      r.url = base;
    } else if (run.variant == kDelete) {
      r.method = "POST";
      r.url = base + "/delete-batch";
      r.headers.set("Content-Type", "application/json");
    } else if (run.variant == kPatch) {
      r.method = "PUT";  // add or update: the fields it names merged into the document, which is added when missing
      r.url = base + key_query_;
      r.headers.set("Content-Type", "application/x-ndjson");
    } else {
      r.method = s_.method == Method::Update ? "PUT" : "POST";
      r.url = base + key_query_;
      r.headers.set("Content-Type", "application/x-ndjson");
    }
    return r;
  }

  // The answer to a documents request: a task enqueued (then polled), or the request refused.
  void enqueued(TaskJob& job, kit::Reply& reply) {
    const kit::Classification& c = reply.classification();
    switch (c.outcome) {
      case kit::Outcome::Written: {
        // The task is queued in order: the next request may go. Not under changes: a task that
        // fails (then resent or bisected) must not land after a later change of the batch, so
        // the next request waits for this task's end.
        if (!s_.changes) reply.release_order();
        auto uid = task_uid(reply.response().body);
        if (!uid) {
          reply.maybe_written();
          return reply.fail(
              {.outcome = kit::Outcome::MaybeWritten,
               .reason = job.context() + "no taskUid in the answer: " + reply.response().body_excerpt(200)});
        }
        count("tasks");
        return poll(reply.hold(), *uid, Clock::now(), 10ms);
      }
      case kit::Outcome::TooLarge:
      case kit::Outcome::Rejected: {
        const TaskError e = error_of(reply.response().body);
        if (c.outcome == kit::Outcome::Rejected && !document_error(e.code))
          return reply.fail({.outcome = kit::Outcome::Fatal, .reason = reply.reason(c.reason)});
        if (reply.size() > 1) return reply.split(c.reason);
        return reply.reject(0, (c.outcome == kit::Outcome::TooLarge ? "larger than Meilisearch's payload limit: "
                                                                    : "refused by Meilisearch: ") +
                                   bounded(c.reason));
      }
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten: return reply.follow();
      case kit::Outcome::Fatal: return reply.follow(with_hint(c));
    }
  }

  // ------------------------------------------------------------------ tasks

  void poll(std::shared_ptr<kit::Reply> reply, uint64_t uid, Clock::time_point since, std::chrono::milliseconds delay) {
    engine_->after(delay, [this, reply = std::move(reply), uid, since, delay](bool run) mutable {
      auto& job = static_cast<TaskJob&>(reply->job());
      if (!run) {
        reply->maybe_written();
        reply->fail(
            {.outcome = kit::Outcome::MaybeWritten,
             .reason = "closing while task " + std::to_string(uid) + " of index " + job.index + " was not finished"});
        return reply->finish();
      }
      count("task_polls");
      client_->send_async(
          {.method = "GET", .url = s_.url + "/tasks/" + std::to_string(uid)},
          [this, reply = std::move(reply), uid, since, delay](const kit::HttpResponse& response) mutable {
            task_answer(std::move(reply), uid, since, delay, response);
          });
    });
  }

  void task_answer(std::shared_ptr<kit::Reply> reply, uint64_t uid, Clock::time_point since,
                   std::chrono::milliseconds delay, const kit::HttpResponse& response) {
    auto& job = static_cast<TaskJob&>(reply->job());
    const std::string what = "task " + std::to_string(uid) + " of index " + job.index;
    const auto next = std::min<std::chrono::milliseconds>(delay * 2, 1s);
    const kit::Classification c = rules_.classify(response);
    TaskState task;
    if (c.outcome == kit::Outcome::Written) {
      task = task_state(response.body);
    } else if (c.outcome == kit::Outcome::Fatal) {  // 401 / 403 / 404 task_not_found
      reply->maybe_written();
      reply->fail(with_hint({.outcome = c.status == 404 ? kit::Outcome::MaybeWritten : kit::Outcome::Fatal,
                             .reason = what + ": " + bounded(c.reason),
                             .status = c.status}));
      return reply->finish();
    }
    if (!task.finished()) {  // or no answer: ask again
      if (!engine_->closed() && Clock::now() - since < s_.task_timeout) return poll(std::move(reply), uid, since, next);
      reply->maybe_written();
      reply->fail({.outcome = kit::Outcome::MaybeWritten,
                   .reason = what + " not finished after " + std::to_string(s_.task_timeout.count()) +
                             " ms (task_timeout; status " +
                             (task.status.empty() ? "unknown: " + bounded(c.reason) : task.status) +
                             "): its documents may still be written, a retry writes the same ids"});
      return reply->finish();
    }
    const TaskError& error = task.error;
    const std::string reason = what + " failed: " + error.code + ": " + bounded(error.message);
    const uint32_t variant = reply->run().variant;
    const bool truncate_of_no_index = variant == kTruncate && error.code == "index_not_found";
    switch (truncate_of_no_index ? TaskVerdict::Written : verdict(task)) {
      case TaskVerdict::Written:
        if (variant == kTruncate) count("truncates", reply->size());
        else count(variant == kDelete ? "deleted_records" : "written_records", reply->size());
        reply->written(reply->size());
        break;
      case TaskVerdict::Canceled:  // nothing of it was written
        count("canceled_tasks");
        reply->fail({.outcome = kit::Outcome::Retry, .reason = what + " was canceled"});
        break;
      case TaskVerdict::Bisect:  // failed (atomic: nothing of it was written) on a document
        count("failed_tasks");
        if (reply->size() > 1) reply->split(reason);  // the halves are enqueued first
        else reply->reject(0, job.context() + error.code + ": " + bounded(error.message));
        break;
      case TaskVerdict::Resend:
        count("failed_tasks");
        reply->resend({}, {.outcome = kit::Outcome::Retry, .reason = reason});
        break;
      case TaskVerdict::IndexGone:
        count("failed_tasks");
        indexes_->forget(job.batch.topic);
        reply->fail({.outcome = kit::Outcome::Retry, .reason = reason});
        break;
      case TaskVerdict::Fatal:
        count("failed_tasks");
        reply->fail({.outcome = kit::Outcome::Fatal, .reason = reason});
        break;
    }
    reply->finish();
  }

  kit::Classification with_hint(kit::Classification c) const {
    if (c.status == 401 || c.status == 403)
      c.reason = "the API key is missing or not allowed (check api_key and its actions): " + c.reason;
    return c;
  }

  // ------------------------------------------------------------------ indexes (synchronous, once per topic)

  // Waits for task `uid` to end; its final state.
  TaskState wait_task(uint64_t uid, const std::string& what) {
    // A task in progress, not a retry: the host's stop() does not cut it (a stopping runtime's
    // last batches still create their index); task_timeout bounds it.
    kit::RetryWait retry(closing_, s_.task_timeout, {.initial = 10ms, .max = 1s, .jitter = false});
    do {
      kit::HttpResponse r = client_->send({.method = "GET", .url = s_.url + "/tasks/" + std::to_string(uid)});
      const kit::Classification c = rules_.classify(r);
      if (c.outcome == kit::Outcome::Fatal) throw_setup(c, what);
      if (c.outcome == kit::Outcome::Written) {
        TaskState task = task_state(r.body);
        if (task.finished()) return task;
      }
    } while (retry.wait());
    if (retry.stopped()) throw sdk::RetryableError(what + ": closing before task " + std::to_string(uid) + " finished");
    throw sdk::RetryableError(what + ": task " + std::to_string(uid) + " not finished within task_timeout");
  }

  uint64_t enqueue_sync(kit::HttpRequest request, const std::string& what, const char* refused_hint) {
    request.headers.set("Content-Type", "application/json");
    kit::HttpResponse r = client_->send(std::move(request));
    const kit::Classification c = rules_.classify(r);
    if (c.outcome == kit::Outcome::Rejected) throw sdk::FatalError(what + std::string(refused_hint) + bounded(r.body));
    if (c.outcome != kit::Outcome::Written) throw_setup(c, what);
    auto uid = task_uid(r.body);
    if (!uid) throw sdk::RetryableError(what + ": no taskUid in the answer: " + r.body_excerpt(200));
    return *uid;
  }

  Index prepare_index(const std::string& uid) {
    const std::string what = "index " + uid;
    kit::HttpResponse got = client_->send({.method = "GET", .url = s_.url + "/indexes/" + uid});
    kit::Classification c = rules_.classify(got);
    if (c.outcome == kit::Outcome::Written) {
      const auto pk = index_primary_key(got.body);
      if (pk && *pk != s_.primary_key)
        throw sdk::FatalError(what + " has the primary key " + *pk + ", not primary_key = \"" + s_.primary_key +
                              "\": set primary_key to it, or write into another index");
    } else if (got.status == 404) {
      if (s_.create_index) {
        std::string body = "{\"uid\":";
        kit::append_json_escaped(body, uid);
        body += ",\"primaryKey\":";
        kit::append_json_escaped(body, s_.primary_key);
        body += "}";
        const uint64_t task =
            enqueue_sync({.method = "POST", .url = s_.url + "/indexes", .body = body}, "creating " + what, ": ");
        const TaskState created = wait_task(task, "creating " + what);
        const std::string& status = created.status;
        const TaskError& error = created.error;
        if (status == "succeeded") {
          count("created_indexes");
          log(sdk::LogLevel::Info, "created " + what + " with primary key " + s_.primary_key);
        } else if (!(status == "failed" && error.code == "index_already_exists")) {
          if (status == "failed" && error.type != "internal" && error.type != "system")
            throw sdk::FatalError("creating " + what + ": " + error.code + ": " + error.message);
          throw sdk::RetryableError("creating " + what + ": task " + status + " " + error.code + ": " + error.message);
        }
      }
    } else {
      throw_setup(c, "looking up " + what);
    }
    if (s_.index_settings.text != "null") {
      const uint64_t task = enqueue_sync(
          {.method = "PATCH", .url = s_.url + "/indexes/" + uid + "/settings", .body = s_.index_settings.text},
          "applying index_settings to " + what, " (index_settings refused): ");
      const TaskState applied = wait_task(task, "applying index_settings to " + what);
      const std::string& status = applied.status;
      const TaskError& error = applied.error;
      if (status != "succeeded") {
        if (error.type == "internal" || error.type == "system" || status == "canceled")
          throw sdk::RetryableError("applying index_settings to " + what + ": task " + status + ": " + error.message);
        throw sdk::FatalError("applying index_settings to " + what + ": " + error.code + ": " + error.message);
      }
    }
    return Index{uid};
  }

  [[noreturn]] void throw_setup(const kit::Classification& c, const std::string& what) const {
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten)
      throw sdk::RetryableError(what + ": " + c.reason);
    throw sdk::FatalError(what + ": " + with_hint(c).reason);
  }

  // Connects and checks the key now (GET /tasks?limit=1: tasks.get, which the sink needs anyway).
  // An unreachable server is a warning: the sink starts and each write retries.
  void health_check() {
    kit::HttpResponse r = client_->send({.method = "GET", .url = s_.url + "/tasks?limit=1", .timeout = 5s});
    const kit::Classification c = rules_.classify(r);
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten) {
      count("destination_unreachable");
      log(sdk::LogLevel::Warn,
          "Meilisearch is not reachable now (the sink starts and retries with each write): " + c.reason);
      return;
    }
    if (c.outcome != kit::Outcome::Written)
      throw sdk::FatalError("connecting to " + kit::redact_url(s_.url) + ": " + with_hint(c).reason);
    log(sdk::LogLevel::Info, "connected to Meilisearch at " + kit::redact_url(s_.url) + ": index " + s_.index +
                                 ", primary key " + s_.primary_key + ", " +
                                 (s_.changes ? std::string("change events: one batch and one task at a time")
                                             : std::to_string(s_.requests.max_in_flight) + " batches in flight"));
  }

  Settings s_;
  kit::RecordJsonWriter writer_;
  kit::OutcomeRules rules_;
  std::string key_query_;
  kit::StopSignal closing_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;  // after the client: stops before it
  std::unique_ptr<kit::DestinationCache<Index>> indexes_;
};

PICOMQ_SINK_PLUGIN(MeilisearchSink)
