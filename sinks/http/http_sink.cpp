// HTTP sink: each batch as one or more requests to a URL templated per topic. Bodies: NDJSON, a
// JSON array, one JSON document or the raw payload per request, with or without the metadata
// envelope, bounded by max_request_bytes / max_request_records, gzip or zstd. Outcomes
// (docs/sinks/http.md, "Errors"): success_statuses written; 408, 429, 5xx and transport errors
// resent here with a back-off (honouring Retry-After) for up to retry_timeout, then retried by the
// runtime; 413 splits the request; any other refusal of the data bisects the request down to the
// records the endpoint refuses, which go to the bad-record policy while the rest is written;
// 401/403/404... stop the sink. Every request carries an idempotency key made of the records it
// holds, the same on every resend.
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/bodies.h"
#include "picomq/kit/batch_completion.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/oauth2.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/scheduler.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace hs = picomq::http_sink;
using namespace std::chrono_literals;

enum class Method { Post, Put, Patch };

struct Settings {
  std::string url;
  Method method = Method::Post;
  kit::JsonValue headers;
  kit::JsonValue secret_headers;
  hs::BodyFormat body = hs::BodyFormat::Ndjson;
  std::optional<std::string> content_type;
  bool include_metadata = true;
  kit::ByteSize max_request_bytes{};
  int64_t max_request_records = 0;
  std::vector<std::string> success_statuses;
  std::string idempotency_header;
  hs::Tombstones tombstones = hs::Tombstones::Skip;
  int64_t max_in_flight = 0;
  std::chrono::milliseconds retry_timeout{};
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

std::string_view method_name(Method m) { return m == Method::Put ? "PUT" : m == Method::Patch ? "PATCH" : "POST"; }

// The headers of a JSON object option ({ "X-Team" = "payments" }): names and string values.
std::vector<std::pair<std::string, std::string>> header_table(const kit::JsonValue& value, std::string_view option,
                                                              sdk::ConfigProblems* problems) {
  std::vector<std::pair<std::string, std::string>> out;
  if (value.text == "null") return out;
  const auto json = nlohmann::json::parse(value.text, nullptr, false);
  if (!json.is_object()) {
    if (problems) problems->add(option, "must be a table of header names to string values");
    return out;
  }
  for (const auto& [name, v] : json.items()) {
    const bool bad_name = name.empty() || name.find_first_of(" \t\r\n:") != std::string::npos;
    if (bad_name || !v.is_string() || v.get<std::string>().find_first_of("\r\n") != std::string::npos) {
      // The value is not quoted: it may be a secret.
      if (problems) problems->add(option, "header '" + name + "' needs a token name and a one-line string value");
      continue;
    }
    out.emplace_back(name, v.get<std::string>());
  }
  return out;
}

}  // namespace

class HttpSink : public sdk::BaseSink<HttpSink> {
 public:
  static constexpr std::string_view sink_name = "http";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Sends records to an HTTP endpoint (URL per topic): NDJSON, JSON array, one document or the raw payload per "
      "request; splits, bisects and retries by status.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;

  static inline const kit::OptionTable<Settings> options{
      kit::option("url", &Settings::url).required().check(kit::not_empty()).help(
          "Endpoint URL template, resolved once per topic: {topic}, {topic_segment[N]} (the topic percent-encoded). "
          "http:// or https://."),
      kit::option("method", &Settings::method)
          .choices({{"POST", Method::Post}, {"PUT", Method::Put}, {"PATCH", Method::Patch}})
          .fallback(Method::Post)
          .help("HTTP method of the requests that carry records."),
      kit::option("headers", &Settings::headers).help("Static request headers: a table of name = value."),
      kit::option("secret_headers", &Settings::secret_headers)
          .secret()
          .help("Headers whose values are secrets (never logged or shown): a table of name = value."),
      kit::option("body", &Settings::body)
          .choices({{"ndjson", hs::BodyFormat::Ndjson},
                    {"json_array", hs::BodyFormat::JsonArray},
                    {"single", hs::BodyFormat::Single},
                    {"raw", hs::BodyFormat::Raw}})
          .fallback(hs::BodyFormat::Ndjson)
          .help("ndjson: records one per line; json_array: one JSON array; single: one JSON document per request; "
                "raw: one request per record with the payload's bytes as they are."),
      kit::option("content_type", &Settings::content_type)
          .help("Content-Type of the requests; default by body: application/x-ndjson, application/json, or by the "
                "topic's schema for raw."),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("JSON bodies: each record as {pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key, "
                "pico_headers, payload}. Off: the payload alone."),
      kit::option("max_request_bytes", &Settings::max_request_bytes)
          .fallback(kit::ByteSize{1 << 20})
          .help("Largest request body before compression; a batch is cut into as many requests as it takes (a "
                "record larger than this is sent alone)."),
      kit::option("max_request_records", &Settings::max_request_records)
          .fallback(500)
          .check(kit::at_least(1))
          .help("Most records in one request."),
      kit::option("success_statuses", &Settings::success_statuses)
          .fallback(std::vector<std::string>{"2xx"})
          .help("Statuses that mean written: codes (200), classes (2xx), ranges (200-204). A 2xx outside them is "
                "an error."),
      kit::option("idempotency_header", &Settings::idempotency_header)
          .fallback("Idempotency-Key")
          .help("Header carrying <topic>-<partition>-<first offset>-<last offset> of the request's records, the same "
                "on every resend: how a receiver drops replays. Empty: not sent."),
      kit::option("tombstones", &Settings::tombstones)
          .choices({{"skip", hs::Tombstones::Skip}, {"send", hs::Tombstones::Send}, {"delete", hs::Tombstones::Delete}})
          .fallback(hs::Tombstones::Skip)
          .help("Records with a null payload: skip them; send them (null payload); or send DELETE <url>/<key> (a "
                "tombstone without a key is refused)."),
      kit::option("max_in_flight", &Settings::max_in_flight)
          .fallback(4)
          .check(kit::at_least(1))
          .help("Requests on the wire at once (and batches of a block pending); offsets still commit in order."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long a request refused with 408, 429, 5xx or a transport error is resent here (back-off 200 ms "
                "to 5 s with jitter, at least the server's Retry-After) before the write fails and the runtime's "
                "retry takes over. 0: not resent here."),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
      kit::group(&Settings::auth, kit::auth_options()),
  };

  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) {
    options.validate(config, problems);
    if (auto t = kit::NameTemplate::parse(config.string("url")); !t) problems.add("url", t.error());
    std::string error;
    if (!hs::parse_statuses(config.strings("success_statuses"), &error)) problems.add("success_statuses", error);
    header_table(kit::JsonValue{config.json("headers")}, "headers", &problems);
    header_table(kit::JsonValue{config.json("secret_headers")}, "secret_headers", &problems);
    kit::validate_auth(config, problems);
  }

  void open(const sdk::Config& config) {
    settings_ = options.parse(config);
    url_ = std::make_unique<kit::NameTemplate>(kit::NameTemplate::parse(settings_.url).value());
    std::string error;
    rules_.success_statuses(*hs::parse_statuses(settings_.success_statuses, &error));
    headers_ = header_table(settings_.headers, "headers", nullptr);
    const auto secret_headers = header_table(settings_.secret_headers, "secret_headers", nullptr);
    headers_.insert(headers_.end(), secret_headers.begin(), secret_headers.end());
    writer_ = kit::RecordJsonWriter(
        {.layout = settings_.include_metadata ? kit::JsonLayout::Envelope : kit::JsonLayout::PayloadOnly});
    if (!settings_.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(settings_.max_in_flight));

    kit::HttpClientOptions client = kit::client_options(settings_.http, settings_.tls, settings_.auth);
    client.max_in_flight = static_cast<size_t>(settings_.max_in_flight);
    for (const auto& [name, value] : secret_headers) client.secrets.push_back(value);
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!settings_.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    if (settings_.auth.type == kit::AuthType::OAuth2ClientCredentials)
      oauth_ = std::make_unique<kit::OAuth2ClientCredentials>(client, kit::oauth2_settings(settings_.auth));
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    log(sdk::LogLevel::Info, "http sink: " + std::string(method_name(settings_.method)) + " " +
                                 kit::redact_url(settings_.url) + ", " + std::to_string(settings_.max_in_flight) +
                                 " requests in flight");
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending result = pending();
    auto write = std::make_shared<BatchWrite>(result, batch.raw(), writer_.begin(batch.raw()));
    write->done.on_success([this](size_t rejected) {
      if (rejected) count("rejected_records", rejected);
    });
    write->url = url_for(batch.raw().topic);
    if (oauth_) write->authorization = "Bearer " + oauth_->token();  // here, never on the I/O thread
    hs::BatchPlan plan = hs::plan_batch(batch.raw(), settings_.tombstones);
    for (auto& [index, reason] : plan.refused) write->done.reject(index, reason);
    write->records = std::move(plan.in_bodies);
    const auto bodies = hs::render_bodies(batch.raw(), write->records, 0, write->records.size(), settings_.body,
                                          write->json, limits());
    write->done.add(bodies.size() + plan.deletes.size());
    for (const hs::Body& body : bodies) send(write, body.first, body.count, body.bytes, fresh_budget());
    for (size_t index : plan.deletes) send_delete(write, index, fresh_budget());
    finish_one(write);
    return result;
  }

  // No flush(): the sink holds nothing open. Every batch's requests are on their way when
  // write_batch returns and complete its write by themselves; the host waits for them. (Waiting
  // here for the clients to be idle stalled the delivery thread whenever poll_interval passed
  // with the window full, and the pipeline drained.)

  void close() {
    closing_ = true;
    scheduler_.close();  // resends still waiting are completed as retries
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  using Clock = std::chrono::steady_clock;

  // One batch in flight: its requests, and how they complete its write (kit::BatchCompletion).
  struct BatchWrite {
    BatchWrite(sdk::Pending p, const pmq_batch& b, kit::BatchJsonWriter j) : done(std::move(p), 1), batch(b), json(j) {}
    kit::BatchCompletion done;  // 1: write_batch's own share, until all requests are sent
    const pmq_batch& batch;     // valid until the write completes (the ABI's promise)
    kit::BatchJsonWriter json;
    std::string url;
    std::string authorization;    // oauth2: "Bearer <token>" for every request of the batch
    std::vector<size_t> records;  // batch indices of the records in bodies
    std::mutex mutex;
    bool reauthorized = false;  // guarded: oauth2, a 401 already made it fetch a new token once
  };

  kit::SplitLimits limits() const {
    return {settings_.max_request_bytes.bytes, static_cast<size_t>(settings_.max_request_records)};
  }
  kit::ResendBudget fresh_budget() const { return kit::ResendBudget(settings_.retry_timeout); }

  std::string url_for(std::string_view topic) {
    std::lock_guard lock(urls_mutex_);
    auto it = urls_.find(std::string(topic));
    if (it != urls_.end()) return it->second;
    auto resolved = url_->resolve(kit::percent_encode(topic));  // '.' stays: {topic_segment[N]} still splits on it
    if (!resolved) throw sdk::FatalError("url for topic '" + std::string(topic) + "': " + resolved.error());
    return urls_.emplace(std::string(topic), resolved.value()).first->second;
  }

  kit::HttpRequest request(const BatchWrite& write, std::string method, std::string url, std::string body,
                           std::string_view key) {
    kit::HttpRequest r{.method = std::move(method), .url = std::move(url), .body = std::move(body)};
    for (const auto& [name, value] : headers_) r.headers.add(name, value);
    if (!settings_.idempotency_header.empty() && !key.empty()) r.headers.set(settings_.idempotency_header, std::string(key));
    if (!write.authorization.empty()) r.headers.set("Authorization", write.authorization);
    return r;
  }

  // oauth2: the destination refused the batch's token (401). Once per batch, a new token is
  // fetched (on the scheduler's thread: fetching blocks) and the request sent again.
  bool reauthorize(const std::shared_ptr<BatchWrite>& write, const kit::HttpResponse& response,
                   std::function<void()> resend) {
    {
      std::lock_guard lock(write->mutex);
      if (!oauth_ || response.status != 401 || write->reauthorized) return false;
      write->reauthorized = true;
    }
    count("token_refreshes");
    oauth_->invalidate(write->authorization.substr(std::string_view("Bearer ").size()));
    scheduler_.after(0ms, [this, write, resend = std::move(resend)](bool run) {
      try {
        if (!run) throw sdk::RetryableError("closing before the token was renewed");
        write->authorization = "Bearer " + oauth_->token();
      } catch (const std::exception& e) {
        fail(write, kit::Classification{.outcome = dynamic_cast<const sdk::FatalError*>(&e) ? kit::Outcome::Fatal
                                                                                            : kit::Outcome::Retry,
                                        .reason = e.what()});
        return finish_one(write);
      }
      resend();
    });
    return true;
  }

  // Sends records[first, first + count) of `write` (rendered in `body`) and handles what comes back.
  void send(const std::shared_ptr<BatchWrite>& write, size_t first, size_t n, std::string body,
            kit::ResendBudget budget) {
    send(write, first, n, std::make_shared<const std::string>(std::move(body)), budget);
  }
  // The body is shared between the request and the callback that may resend it: never copied.
  void send(const std::shared_ptr<BatchWrite>& write, size_t first, size_t n, std::shared_ptr<const std::string> body,
            kit::ResendBudget budget) {
    const pmq_batch& b = write->batch;
    const int64_t first_offset = pmq_batch_record(&b, write->records[first])->offset;
    const int64_t last_offset = pmq_batch_record(&b, write->records[first + n - 1])->offset;
    kit::HttpRequest r = request(*write, std::string(method_name(settings_.method)), write->url, {},
                                 hs::idempotency_key(b.topic, b.partition, first_offset, last_offset));
    r.body = kit::HttpBody::borrowed(*body);
    if (!r.headers.contains("Content-Type"))
      r.headers.set("Content-Type", settings_.content_type
                                        ? *settings_.content_type
                                        : std::string(hs::default_content_type(settings_.body, b.payload_format)));
    count("requests");
    client_->send_async(std::move(r), [this, write, first, n, budget, body](kit::HttpResponse response) mutable {
      if (reauthorize(write, response, [=, this] { send(write, first, n, body, budget); })) return;
      const kit::Classification c = rules_.classify(response);
      switch (c.outcome) {
        case kit::Outcome::Written:
          mark_written(write);
          return finish_one(write);
        case kit::Outcome::TooLarge:
          if (n > 1) {
            split(write, first, n, c.reason);
            return finish_one(write);
          }
          write->done.reject(write->records[first], "too large for the endpoint: " + c.reason);
          return finish_one(write);
        case kit::Outcome::Rejected:
          if (n > 1) {
            split(write, first, n, c.reason);  // bisect: find the records refused
            return finish_one(write);
          }
          write->done.reject(write->records[first], c.reason);
          return finish_one(write);
        case kit::Outcome::Retry:
        case kit::Outcome::MaybeWritten:
          if (c.outcome == kit::Outcome::MaybeWritten) mark_written(write);
          if (resend_later(write, first, n, body, budget, c)) return;
          fail(write, c);
          return finish_one(write);
        case kit::Outcome::Fatal:
          fail(write, c);
          return finish_one(write);
      }
    });
  }

  // Splits records[first, first + count) in two requests (a 413, or a refusal to narrow down).
  void split(const std::shared_ptr<BatchWrite>& write, size_t first, size_t n, const std::string& why) {
    count("splits");
    const kit::Halves h = kit::halves(first, n);
    log(sdk::LogLevel::Debug, "splitting a request of " + std::to_string(n) + " records: " + why);
    write->done.add(2);
    for (auto [from, half] : {std::pair{h.first_a, h.count_a}, std::pair{h.first_b, h.count_b}}) {
      // Each half as one body (its records fit: they did as a whole).
      auto bodies = hs::render_bodies(write->batch, write->records, from, half, settings_.body, write->json, {0, half});
      send(write, from, half, std::move(bodies.front().bytes), fresh_budget());
    }
  }

  // Schedules a resend after the budget's next wait (at least the server's Retry-After) while its
  // deadline allows; false when it does not (the write then fails as a retry).
  bool resend_later(const std::shared_ptr<BatchWrite>& write, size_t first, size_t n,
                    std::shared_ptr<const std::string> body, kit::ResendBudget& budget, const kit::Classification& c) {
    const auto wait = budget.next_delay(c);
    if (!wait || closing_) return false;
    const std::chrono::milliseconds delay = *wait;
    count("resends");
    log(sdk::LogLevel::Debug, "resending in " + std::to_string(delay.count()) + " ms: " + c.reason);
    scheduler_.after(delay, [this, write, first, n, body = std::move(body), budget, c](bool run) mutable {
      if (!run) {
        fail(write, c);
        return finish_one(write);
      }
      send(write, first, n, std::move(body), budget);
    });
    return true;
  }

  void send_delete(const std::shared_ptr<BatchWrite>& write, size_t index, kit::ResendBudget budget) {
    const pmq_record& r = *pmq_batch_record(&write->batch, index);
    const std::string key(reinterpret_cast<const char*>(r.key.data), r.key.size);
    std::string url = write->url;
    if (url.empty() || url.back() != '/') url += '/';
    url += hs::key_path_segment(key);
    kit::HttpRequest req = request(*write, "DELETE", std::move(url), {},
                                   hs::idempotency_key(write->batch.topic, write->batch.partition, r.offset, r.offset));
    count("requests");
    client_->send_async(std::move(req), [this, write, index, budget](kit::HttpResponse response) mutable {
      if (reauthorize(write, response, [=, this] { send_delete(write, index, budget); })) return;
      kit::Classification c = rules_.classify(response);
      if (response.status == 404 || response.status == 410) c.outcome = kit::Outcome::Written;  // already gone
      switch (c.outcome) {
        case kit::Outcome::Written: mark_written(write); break;
        case kit::Outcome::Rejected:
        case kit::Outcome::TooLarge: write->done.reject(index, c.reason); break;
        case kit::Outcome::Retry:
        case kit::Outcome::MaybeWritten:
          if (const auto wait = budget.next_delay(c); wait && !closing_) {
            count("resends");
            scheduler_.after(*wait, [this, write, index, budget, c](bool run) {
              if (run) return send_delete(write, index, budget);
              fail(write, c);
              finish_one(write);
            });
            return;
          }
          [[fallthrough]];
        case kit::Outcome::Fatal: fail(write, c); break;
      }
      finish_one(write);
    });
  }

  static void mark_written(const std::shared_ptr<BatchWrite>& write) { write->done.written(); }
  static void fail(const std::shared_ptr<BatchWrite>& write, const kit::Classification& c) { write->done.fail(c); }
  // One request of the write is done; the last one completes the write.
  static void finish_one(const std::shared_ptr<BatchWrite>& write) { write->done.finish_one(); }

  Settings settings_;
  std::unique_ptr<kit::NameTemplate> url_;
  kit::OutcomeRules rules_;
  std::vector<std::pair<std::string, std::string>> headers_;
  kit::RecordJsonWriter writer_;
  std::mutex urls_mutex_;
  std::unordered_map<std::string, std::string> urls_;
  std::atomic<bool> closing_{false};
  kit::Scheduler scheduler_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::OAuth2ClientCredentials> oauth_;
};

PICOMQ_SINK_PLUGIN(HttpSink)
