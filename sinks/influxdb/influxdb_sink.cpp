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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "influxdb/config.h"
#include "influxdb/points.h"
#include "influxdb/write_errors.h"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace influx = picomq::influxdb;
using namespace std::chrono_literals;

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
  // A redriven dead letter is one more point: its series and time, as a replay.
  static constexpr bool takes_redrives = true;
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
    const bool headers_read = !s.tag_headers.empty() || std::find(s.metadata_fields.begin(), s.metadata_fields.end(),
                                                                  "pico_headers") != s.metadata_fields.end();
    if (!headers_read) declare_unread_fields(PMQ_FIELD_HEADERS);
    declare_max_in_flight(static_cast<uint32_t>(s.requests.max_in_flight));

    kit::HttpClientOptions client = kit::client_options(s.http, s.tls, s.auth);
    if (!s.token.empty()) {
      // 2.x: "Token"; 3.x documents "Bearer" (and takes "Token" too).
      client.auth = kit::ApiKeyAuth{"Authorization", (s.api == influx::Api::V3 ? "Bearer " : "Token ") + s.token};
    }
    client.max_in_flight = static_cast<size_t>(s.requests.max_in_flight);
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                           {.retry_timeout = s.requests.retry_timeout,
                                            .destination = "the server",
                                            .items = "lines",
                                            .written_counter = "written_records"});
    // 1.x: 400 on a partial write; 2.x: 422 (the default table: Rejected); 3.x: 400.
    rules_.on(500, "retention policy not found", kit::Outcome::Fatal,
              "InfluxDB 1.x: the retention policy does not exist (configuration)");
    rules_.on(400, kit::Outcome::Rejected, "InfluxDB: points refused (a partial write or a line it cannot parse)");
    open_check();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<WriteJob>(pending(), *this);
    std::string measurement;
    if (plan_->settings.measurement_field.empty()) {
      auto resolved = plan_->measurement.resolve(raw.topic);
      if (!resolved)
        throw sdk::FatalError("measurement " + std::string(plan_->measurement.source()) + " for topic " + raw.topic +
                              ": " + resolved.error());
      measurement = std::move(resolved).value();
    }
    job->lines = mapper_->map(raw, measurement);
    for (auto& [index, reason] : job->lines.refused) job->reject(index, reason);
    if (job->lines.skipped) count("skipped_tombstones", job->lines.skipped);
    if (!job->lines.refused.empty()) count("refused_records", job->lines.refused.size());
    job->limits = plan_->settings.requests.limits();
    engine_->submit(job, job->lines.lines.size());
    return job->result();
  }

  // No flush(): nothing is held open; every batch's requests are on their way when write_batch
  // returns and complete its write by themselves.

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
  // One batch's write requests: its points as lines.
  struct WriteJob : kit::RequestJob {
    WriteJob(sdk::Pending p, InfluxdbSink& s) : RequestJob(std::move(p)), sink(s) {}
    InfluxdbSink& sink;
    influx::BatchLines lines;

    void render(size_t item, std::string& out) const override { out.append(lines.line(item)); }
    kit::HttpRequest request(const kit::Run&) const override { return sink.write_request(); }
    void on_response(kit::Reply& reply) override { sink.write_answer(*this, reply); }
    size_t record(size_t item) const override { return lines.lines[item].record; }
  };

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  kit::HttpRequest write_request() const {
    kit::HttpRequest r{.method = "POST", .url = plan_->write_url};
    r.headers.set("Content-Type", "text/plain; charset=utf-8");
    r.headers.set("Accept", "application/json");
    return r;
  }

  void write_answer(WriteJob& job, kit::Reply& reply) {
    const kit::Classification& c = reply.classification();
    if (c.outcome == kit::Outcome::Rejected) return refused(job, reply);
    if (c.outcome == kit::Outcome::Fatal) return reply.follow(with_hint(c, reply.response()));
    reply.follow();
  }

  // A 400 / 422: the lines the server refused are rejected; the others are written (or sent again).
  void refused(WriteJob& job, kit::Reply& reply) {
    const kit::HttpResponse& response = reply.response();
    std::vector<std::string_view> lines;
    lines.reserve(reply.size());
    for (size_t k = 0; k < reply.size(); ++k) lines.push_back(job.lines.line(reply.item(k)));
    auto found = influx::refused_lines(response.body, lines);
    if (!found) {
      if (reply.size() > 1) return reply.split(reply.classification().reason);  // bisect: find the lines refused
      return reply.reject(0, "refused by InfluxDB: " + bounded(influx::error_text(response.body)));
    }
    std::vector<bool> gone(reply.size(), false);
    for (auto& [k, why] : found->lines) {
      gone[k] = true;
      reply.reject(k, "refused by InfluxDB: " + bounded(why));
    }
    std::vector<size_t> rest;
    for (size_t k = 0; k < reply.size(); ++k)
      if (!gone[k]) rest.push_back(k);
    if (rest.empty()) return;
    if (found->rest_written) return reply.written(rest.size());
    count("resent_after_refusal");
    reply.send_again(rest);
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
                 (s.api == influx::Api::V2 ? "org " + s.org + " / bucket " + s.bucket : "database " + s.database) +
                 " not found, or the write API " + std::string(influx::to_string(s.api)) + " is not served at " +
                 kit::redact_url(plan_->base_url) + " (the sink creates nothing): " + server;
    }
    return c;
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
                                 std::to_string(plan_->settings.requests.max_in_flight) + " requests in flight");
  }

  std::unique_ptr<influx::Plan> plan_;
  std::unique_ptr<influx::PointMapper> mapper_;
  kit::OutcomeRules rules_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;  // after the client: stops before it
};

PICOMQ_SINK_PLUGIN(InfluxdbSink)
