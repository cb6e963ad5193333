// HTTP sink: each batch as one or more requests to a URL templated per topic. Bodies: NDJSON, a
// JSON array, one JSON document or the raw payload per request, with or without the metadata
// envelope, bounded by max_request_bytes / max_request_records, gzip or zstd. Outcomes
// (docs/sinks/http.md, "Errors"): success_statuses written; 408, 429, 5xx and transport errors
// resent here with a back-off (honouring Retry-After) for up to retry_timeout, then retried by the
// runtime; 413 splits the request; any other refusal of the data bisects the request down to the
// records the endpoint refuses, which go to the bad-record policy while the rest is written;
// 401/403/404... stop the sink. Every request carries an idempotency key made of the records it
// holds, the same on every resend.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/bodies.h"
#include "http/config.h"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/oauth2.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace hs = picomq::http_sink;
using hs::Settings;
using namespace std::chrono_literals;

}  // namespace

class HttpSink : public sdk::BaseSink<HttpSink> {
 public:
  static constexpr std::string_view sink_name = "http";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Sends records to an HTTP endpoint (URL per topic): NDJSON, JSON array, one document or the raw payload per "
      "request; splits, bisects and retries by status.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  // A redriven dead letter is one more request body (at least once, as its replays).
  static constexpr bool takes_redrives = true;
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;

  static inline const kit::OptionTable<Settings>& options = hs::option_table();

  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { hs::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = hs::plan(config, problems);
    problems.throw_if_any();
    settings_ = std::move(plan->settings);
    url_ = std::make_unique<kit::NameTemplate>(std::move(plan->url));
    rules_.success_statuses(plan->success_statuses);
    headers_ = std::move(plan->headers);
    writer_ = kit::RecordJsonWriter(
        {.layout = settings_.include_metadata ? kit::JsonLayout::Envelope : kit::JsonLayout::PayloadOnly});
    if (!settings_.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(settings_.requests.max_in_flight));

    kit::HttpClientOptions client = kit::client_options(settings_.http, settings_.tls, settings_.auth);
    client.max_in_flight = static_cast<size_t>(settings_.requests.max_in_flight);
    client.secrets.insert(client.secrets.end(), plan->secrets.begin(), plan->secrets.end());
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!settings_.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    if (settings_.auth.type == kit::AuthType::OAuth2ClientCredentials)
      oauth_ = std::make_unique<kit::OAuth2ClientCredentials>(client, kit::oauth2_settings(settings_.auth));
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(
        host(), *client_, rules_, {.retry_timeout = settings_.requests.retry_timeout, .destination = "the endpoint"});
    log(sdk::LogLevel::Info, "http sink: " + std::string(hs::method_name(settings_.method)) + " " +
                                 kit::redact_url(settings_.url) + ", " +
                                 std::to_string(settings_.requests.max_in_flight) + " requests in flight");
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<BodyJob>(pending(), raw, writer_.begin(raw), *this);
    job->url = url_for(raw.topic);
    if (oauth_) job->authorization = "Bearer " + oauth_->token();  // here, never on the I/O thread
    hs::BatchPlan plan = hs::plan_batch(raw, settings_.tombstones);
    for (auto& [index, reason] : plan.refused) job->reject(index, reason);
    if (!plan.refused.empty()) count("rejected_records", plan.refused.size());
    // Items: the records in bodies, then the tombstones sent as DELETE (one request each).
    job->records = std::move(plan.in_bodies);
    const size_t in_bodies = job->records.size();
    std::vector<kit::Run> deletes;
    for (size_t index : plan.deletes) {
      deletes.push_back({.items = {job->records.size()}, .variant = kDelete});
      job->records.push_back(index);
    }
    job->framing = hs::framing(settings_.body);
    job->limits = hs::limits(settings_.body, settings_.requests.limits());
    engine_->submit(job, in_bodies, std::move(deletes));
    return job->result();
  }

  // No flush(): the sink holds nothing open. Every batch's requests are on their way when
  // write_batch returns and complete its write by themselves; the host waits for them. (Waiting
  // here for the clients to be idle stalled the delivery thread whenever poll_interval passed
  // with the window full, and the pipeline drained.)

  // The host is stopping (ABI 2.6): resends waiting now complete their writes as retries instead
  // of holding the stop up to retry_timeout; requests on the wire (and task polls) finish.
  void stop() {
    if (engine_) engine_->stop();
  }

  void close() {
    if (engine_) engine_->close();  // resends still waiting are completed as retries
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  static constexpr uint32_t kDelete = 1;  // a request form: DELETE <url>/<key> of a tombstone

  // One batch's requests: bodies of records, and DELETEs of tombstones.
  struct BodyJob : kit::RequestJob {
    BodyJob(sdk::Pending p, const pmq_batch& b, kit::BatchJsonWriter j, HttpSink& s)
        : RequestJob(std::move(p)), batch(b), json(std::move(j)), sink(s) {}
    const pmq_batch& batch;  // valid until the write completes (the ABI's promise)
    kit::BatchJsonWriter json;
    HttpSink& sink;
    std::string url;
    std::vector<size_t> records;  // batch indices: those in bodies, then the tombstones to DELETE
    mutable std::mutex mutex;
    std::string authorization;  // guarded; oauth2: "Bearer <token>" for every request of the batch
    bool reauthorized = false;  // guarded: a 401 already made it fetch a new token once

    void render(size_t item, std::string& out) const override {
      hs::render_record(*pmq_batch_record(&batch, records[item]), sink.settings_.body, json, out);
    }
    kit::HttpRequest request(const kit::Run& run) const override { return sink.request_for(*this, run); }
    void on_response(kit::Reply& reply) override { sink.answer(*this, reply); }
    size_t record(size_t item) const override { return records[item]; }
  };

  std::string url_for(std::string_view topic) {
    std::lock_guard lock(urls_mutex_);
    auto it = urls_.find(std::string(topic));
    if (it != urls_.end()) return it->second;
    auto resolved = url_->resolve(kit::percent_encode(topic));  // '.' stays: {topic_segment[N]} still splits on it
    if (!resolved) throw sdk::FatalError("url for topic '" + std::string(topic) + "': " + resolved.error());
    return urls_.emplace(std::string(topic), resolved.value()).first->second;
  }

  // A body's request (method, url, headers, the idempotency key of its records) or a tombstone's DELETE.
  kit::HttpRequest request_for(const BodyJob& job, const kit::Run& run) const {
    const pmq_batch& b = job.batch;
    const int64_t first = pmq_batch_record(&b, job.records[run.items.front()])->offset;
    const int64_t last = pmq_batch_record(&b, job.records[run.items.back()])->offset;
    kit::HttpRequest r{.method = std::string(hs::method_name(settings_.method)), .url = job.url};
    if (run.variant == kDelete) {
      const pmq_record& rec = *pmq_batch_record(&b, job.records[run.items.front()]);
      r.method = "DELETE";
      if (r.url.empty() || r.url.back() != '/') r.url += '/';
      r.url += hs::key_path_segment(std::string_view(reinterpret_cast<const char*>(rec.key.data), rec.key.size));
    }
    for (const auto& [name, value] : headers_) r.headers.add(name, value);
    if (!settings_.idempotency_header.empty())
      r.headers.set(settings_.idempotency_header, hs::idempotency_key(b.topic, b.partition, first, last));
    {
      std::lock_guard lock(job.mutex);
      if (!job.authorization.empty()) r.headers.set("Authorization", job.authorization);
    }
    if (run.variant != kDelete && !r.headers.contains("Content-Type"))
      r.headers.set("Content-Type", settings_.content_type
                                        ? *settings_.content_type
                                        : std::string(hs::default_content_type(settings_.body, b.payload_format)));
    return r;
  }

  void answer(BodyJob& job, kit::Reply& reply) {
    if (reauthorize(job, reply)) return;
    kit::Classification c = reply.classification();
    if (reply.run().variant == kDelete && (reply.response().status == 404 || reply.response().status == 410))
      return reply.written(1);  // already gone
    if (c.outcome == kit::Outcome::Rejected && reply.size() == 1)
      return reply.reject(0, c.reason);  // the endpoint's answer is the reason
    reply.follow(c);
  }

  // oauth2: the destination refused the batch's token (401). Once per batch, a new token is
  // fetched (on the engine's scheduler thread: fetching blocks) and the request sent again.
  bool reauthorize(BodyJob& job, kit::Reply& reply) {
    std::string refused;
    {
      std::lock_guard lock(job.mutex);
      if (!oauth_ || reply.response().status != 401 || job.reauthorized) return false;
      job.reauthorized = true;
      refused = job.authorization.substr(std::string_view("Bearer ").size());
    }
    count("token_refreshes");
    oauth_->invalidate(refused);
    reply.resend_after([this, &job]() -> std::optional<kit::Classification> {
      std::string token = "Bearer " + oauth_->token();  // throws an SDK outcome when it cannot be had
      std::lock_guard lock(job.mutex);
      job.authorization = std::move(token);
      return std::nullopt;
    });
    return true;
  }

  Settings settings_;
  std::unique_ptr<kit::NameTemplate> url_;
  kit::OutcomeRules rules_;
  std::vector<std::pair<std::string, std::string>> headers_;
  kit::RecordJsonWriter writer_;
  std::mutex urls_mutex_;
  std::unordered_map<std::string, std::string> urls_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;  // after the client: stops before it
  std::unique_ptr<kit::OAuth2ClientCredentials> oauth_;
};

PICOMQ_SINK_PLUGIN(HttpSink)
