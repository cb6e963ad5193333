// InfluxDB sink: each batch as points in line protocol (influxdb/points.h), written with one or
// more write requests (bounded by max_request_lines / max_request_bytes with the kit's splitter,
// gzip by the kit's client, max_in_flight on the wire) to the v1 (/write), v2 (/api/v2/write) or v3
// (/api/v3/write_lp) API. Records that cannot be points are refused before sending. A partial write
// (1.x 400, 2.x 422, 3.x 400 with line numbers) is read back to exactly the refused lines
// (influxdb/write_errors.h): their records go to the bad-record policy, the rest is written (resent
// when the server did not say it wrote it); an answer that does not name them is bisected. 413 is
// split; 429 / 5xx / transport errors are resent with the kit's back-off for retry_timeout, then
// the runtime retries; 401 / 403 / 404 stop the sink with what to fix. Docs: docs/sinks/influxdb.md.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "influxdb/config.h"
#include "influxdb/points.h"
#include "influxdb/write_errors.h"
#include "picomq/kit/batch_completion.hpp"
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
namespace influx = picomq::influxdb;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kOpenCheckTimeout = 5s;

}  // namespace

class InfluxdbSink : public sdk::BaseSink<InfluxdbSink> {
 public:
  static constexpr std::string_view sink_name = "influxdb";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records as points in line protocol to InfluxDB 1.x (/write), 2.x (/api/v2/write) or 3.x "
      "(/api/v3/write_lp): measurement, tags, fields and time mapped from the record; refused lines of a "
      "partial write rejected exactly.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  static inline const kit::OptionTable<influx::Settings>& options = influx::option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { influx::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = influx::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<influx::Plan>(std::move(*plan));
    const influx::Settings& s = plan_->settings;
    mapper_ = std::make_unique<influx::PointMapper>(*plan_);
    const bool headers_read = !s.tag_headers.empty() ||
                              std::find(s.metadata_fields.begin(), s.metadata_fields.end(), "pico_headers") !=
                                  s.metadata_fields.end();
    if (!headers_read) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(s.max_in_flight));

    kit::HttpClientOptions client = kit::client_options(s.http, s.tls, s.auth);
    if (!s.token.empty()) {
      // 2.x: "Token"; 3.x documents "Bearer" (and takes "Token" too).
      client.auth = kit::ApiKeyAuth{"Authorization", (s.api == influx::Api::V3 ? "Bearer " : "Token ") + s.token};
    }
    client.max_in_flight = static_cast<size_t>(s.max_in_flight);
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    // 1.x: 400 on a partial write; 2.x: 422 (the default table: Rejected); 3.x: 400.
    rules_.on(500, "retention policy not found", kit::Outcome::Fatal,
              "InfluxDB 1.x: the retention policy does not exist (configuration)");
    rules_.on(400, kit::Outcome::Rejected, "InfluxDB: points refused (a partial write or a line it cannot parse)");
    open_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    sdk::Pending result = pending();
    auto write = std::make_shared<BatchWrite>(result);
    std::string measurement;
    if (plan_->settings.measurement_field.empty()) {
      auto resolved = plan_->measurement.resolve(raw.topic);
      if (!resolved) throw sdk::FatalError("measurement " + std::string(plan_->measurement.source()) + " for topic " +
                                           raw.topic + ": " + resolved.error());
      measurement = std::move(resolved).value();
    }
    write->lines = mapper_->map(raw, measurement);
    for (auto& [index, reason] : write->lines.refused) write->done.reject(index, reason);
    if (write->lines.skipped) count("skipped_tombstones", write->lines.skipped);
    if (!write->lines.refused.empty()) count("refused_records", write->lines.refused.size());
    const size_t n = write->lines.lines.size();
    if (n == 0) {
      write->done.finish_one();
      return result;
    }
    auto chunks = kit::split_records(0, n, limits(), kit::Framing::none(),
                                     [&](size_t i, std::string& out) { out.append(write->lines.line(i)); });
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
  struct BatchWrite {
    explicit BatchWrite(sdk::Pending p) : done(std::move(p), 1) {}
    kit::BatchCompletion done;  // 1: write_batch's own share, until all requests are sent
    influx::BatchLines lines;
  };
  using WritePtr = std::shared_ptr<BatchWrite>;
  using Body = std::shared_ptr<const std::string>;

  kit::SplitLimits limits() const {
    return {plan_->settings.max_request_bytes.bytes, static_cast<size_t>(plan_->settings.max_request_lines)};
  }
  kit::ResendBudget fresh_budget() const { return kit::ResendBudget(plan_->settings.retry_timeout); }

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  static std::string body_of(const BatchWrite& write, const std::vector<size_t>& positions) {
    std::string out;
    for (size_t pos : positions) out.append(write.lines.line(pos));
    return out;
  }

  kit::HttpRequest write_request(const Body& body) const {
    kit::HttpRequest r{.method = "POST", .url = plan_->write_url};
    r.body = kit::HttpBody::borrowed(*body);
    r.headers.set("Content-Type", "text/plain; charset=utf-8");
    r.headers.set("Accept", "application/json");
    return r;
  }

  // Sends the lines at `positions` of `write` (rendered in `body`) and handles what comes back.
  void send(const WritePtr& write, std::vector<size_t> positions, Body body, kit::ResendBudget budget) {
    count("requests");
    client_->send_async(write_request(body), [this, write, positions = std::move(positions), body,
                                              budget](kit::HttpResponse response) mutable {
      const kit::Classification c = rules_.classify(response);
      const size_t n = positions.size();
      switch (c.outcome) {
        case kit::Outcome::Written:
          count("points", n);
          write->done.written();
          { write->done.finish_one(); return; }
        case kit::Outcome::TooLarge:
          if (n > 1) return split(write, positions, c.reason);
          reject(write, positions[0], "too large for the server: " + bounded(c.reason));
          { write->done.finish_one(); return; }
        case kit::Outcome::Rejected: return refused(write, positions, response, c);
        case kit::Outcome::Retry:
        case kit::Outcome::MaybeWritten:
          if (c.outcome == kit::Outcome::MaybeWritten) write->done.written();
          if (resend_later(write, std::move(positions), std::move(body), budget, c)) return;
          write->done.fail(c);
          { write->done.finish_one(); return; }
        case kit::Outcome::Fatal:
          write->done.fail(with_hint(c, response));
          { write->done.finish_one(); return; }
      }
    });
  }

  void reject(const WritePtr& write, size_t position, const std::string& reason) {
    count("rejected_records");
    write->done.reject(write->lines.lines[position].record, reason);
  }

  // A 400 / 422: the lines the server refused are rejected; the others are written (or resent).
  void refused(const WritePtr& write, const std::vector<size_t>& positions, const kit::HttpResponse& response,
               const kit::Classification& c) {
    std::vector<std::string_view> lines;
    lines.reserve(positions.size());
    for (size_t pos : positions) lines.push_back(write->lines.line(pos));
    auto found = influx::refused_lines(response.body, lines);
    if (!found) {
      if (positions.size() > 1) return split(write, positions, c.reason);  // bisect: find the lines refused
      reject(write, positions[0], "refused by InfluxDB: " + bounded(influx::error_text(response.body)));
      { write->done.finish_one(); return; }
    }
    std::vector<bool> gone(positions.size(), false);
    for (auto& [k, why] : found->lines) {
      gone[k] = true;
      reject(write, positions[k], "refused by InfluxDB: " + bounded(why));
    }
    std::vector<size_t> rest;
    for (size_t k = 0; k < positions.size(); ++k)
      if (!gone[k]) rest.push_back(positions[k]);
    if (found->rest_written || rest.empty()) {
      if (!rest.empty()) {
        count("points", rest.size());
        write->done.written();
      }
      { write->done.finish_one(); return; }
    }
    count("resent_after_refusal");
    auto body = std::make_shared<const std::string>(body_of(*write, rest));
    send(write, std::move(rest), std::move(body), fresh_budget());
  }

  kit::Classification with_hint(kit::Classification c, const kit::HttpResponse& response) const {
    const influx::Settings& s = plan_->settings;
    const std::string server = response.completed() ? bounded(influx::error_text(response.body)) : c.reason;
    if (c.status == 401 || c.status == 403) {
      c.reason = std::string("InfluxDB refused the credentials (") +
                 (s.api == influx::Api::V1 ? "check auth_user / auth_password and the user's WRITE privilege on the "
                                             "database"
                                           : "check token and its write permission") +
                 "): " + server;
    } else if (c.status == 404) {
      c.reason = std::string("InfluxDB: ") +
                 (s.api == influx::Api::V2 ? "org " + s.org + " / bucket " + s.bucket
                                           : "database " + s.database) +
                 " not found, or the write API " + std::string(influx::to_string(s.api)) +
                 " is not served at " + kit::redact_url(plan_->base_url) + " (the sink creates nothing): " + server;
    }
    return c;
  }

  // Splits the lines at `positions` in two requests (a 413, or a refusal to narrow down).
  void split(const WritePtr& write, const std::vector<size_t>& positions, const std::string& why) {
    count("splits");
    log(sdk::LogLevel::Debug, "splitting a write of " + std::to_string(positions.size()) + " lines: " + why);
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
    log(sdk::LogLevel::Debug, "resending " + std::to_string(positions.size()) + " lines in " +
                                  std::to_string(delay.count()) + " ms: " + c.reason);
    scheduler_.after(delay, [this, write, positions = std::move(positions), body = std::move(body), budget,
                             c](bool run) mutable {
      if (!run) {
        write->done.fail(c);
        { write->done.finish_one(); return; }
      }
      send(write, std::move(positions), std::move(body), budget);
    });
    return true;
  }

  // Connects, authenticates and finds the database / bucket now (an empty write: it needs write
  // permission and writes nothing), so a wrong token or name stops the sink at start, not at the
  // first record. An unreachable server is not a configuration error: a warning, and the sink
  // starts (each write retries).
  void open_check() {
    kit::HttpRequest r{.method = "POST", .url = plan_->write_url, .timeout = kOpenCheckTimeout};
    r.headers.set("Content-Type", "text/plain; charset=utf-8");
    const kit::HttpResponse response = client_->send(std::move(r));
    const kit::Classification c = rules_.classify(response);
    switch (c.outcome) {
      case kit::Outcome::Written:
      case kit::Outcome::Rejected:  // 400 "writing requires points": the server got as far as the body
        break;
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten:
        count("destination_unreachable");
        log(sdk::LogLevel::Warn,
            "InfluxDB is not reachable now (the sink starts and retries with each write): " + c.reason);
        return;
      default:
        throw sdk::FatalError("writing to " + kit::redact_url(plan_->write_url) + ": " + with_hint(c, response).reason);
    }
    const auto version = response.headers.get("X-Influxdb-Version");
    log(sdk::LogLevel::Info, "connected to InfluxDB " + std::string(version ? *version : "(version not reported)") +
                                 " at " + kit::redact_url(plan_->base_url) + ": api " +
                                 std::string(influx::to_string(plan_->settings.api)) + ", " +
                                 std::to_string(plan_->settings.max_in_flight) + " requests in flight");
  }

  std::unique_ptr<influx::Plan> plan_;
  std::unique_ptr<influx::PointMapper> mapper_;
  kit::OutcomeRules rules_;
  std::atomic<bool> closing_{false};
  kit::Scheduler scheduler_;
  std::unique_ptr<kit::HttpClient> client_;
};

PICOMQ_SINK_PLUGIN(InfluxdbSink)
