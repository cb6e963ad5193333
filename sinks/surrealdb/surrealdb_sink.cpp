// SurrealDB sink: each batch as one or more POST /rpc "query" requests in CBOR (bounded by
// max_request_bytes / max_request_records with the kit's splitter, max_in_flight on the wire) into
// a table per topic (a sanitised name template, DEFINE TABLE IF NOT EXISTS on its first batch).
// The statement text is a constant; the table and the records are bound variables ($tb, $v).
// Insert mode: INSERT IGNORE (a replay finds its ids there and writes nothing); upsert mode:
// UPSERT type::record($tb, id) CONTENT. Record ids: [topic, partition, offset], the key, or a
// payload field. HTTP 200 does not mean written: every statement's status is read
// (surrealdb/rpc.h); a statement the server refuses is sent again one statement per record, and
// the records refused then go to the bad-record policy. Conflicts, timeouts, 408, 429, 5xx and
// transport errors are resent with the kit's back-off for retry_timeout. Change events (a block's
// `changes`, docs/changes.md): records named by their row's key (one field: its value; several:
// the array of their values), upserts UPSERT ... CONTENT, patches extending the record's fields,
// deletes DELETE, a truncate DELETE of the table, all in one FOR statement per request in record
// order; one request at a time (the kit's in-order engine) and one batch at a time per block.
// Docs: docs/sinks/surrealdb.md.
#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/destination_cache.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/request_engine.hpp"
#include "picomq/sdk.hpp"
#include "surrealdb/config.h"
#include "surrealdb/rpc.h"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace sr = picomq::surrealdb;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kSetupTimeout = 10s;

struct Table {
  std::string name;
};

}  // namespace

class SurrealDbSink : public sdk::BaseSink<SurrealDbSink> {
 public:
  static constexpr std::string_view sink_name = "surrealdb";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records into SurrealDB tables (one per topic) over HTTP /rpc in CBOR: INSERT IGNORE or UPSERT with "
      "deterministic record ids, every statement's status checked, refused records to the bad-record policy.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;
  // A redriven dead letter is one more record: by its id, as a replay.
  static constexpr bool takes_redrives = true;
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static inline const kit::OptionTable<sr::Settings>& options = sr::option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { sr::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = sr::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<sr::Plan>(std::move(*plan));
    const sr::Settings& s = plan_->settings;
    encoder_ = std::make_unique<sr::Encoder>(s);
    // Change events are applied in order: a later batch never before an earlier one.
    declare_max_in_flight(
        s.changes ? 1 : static_cast<uint32_t>(std::min<int64_t>(s.requests.max_in_flight, max_in_flight)));
    kit::HttpClientOptions client = kit::client_options(s.http, s.tls, kit::AuthSettings{});
    client.max_in_flight = static_cast<size_t>(s.requests.max_in_flight);  // a DEFINE waits for a free slot
    client.max_response_body = 16u << 20;
    if (!s.password.empty()) client.secrets.push_back(s.password);
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                           {.retry_timeout = s.requests.retry_timeout,
                                            .destination = "the server",
                                            .items = "records",
                                            .written_counter = "written_records"});
    if (s.changes)
      // One request on the wire at a time, in submission order (a resend keeps its place, the
      // statements one per record of a refused request go first): a later change of a key never
      // lands before an earlier one.
      ordered_engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                                     {.retry_timeout = s.requests.retry_timeout,
                                                      .destination = "the server",
                                                      .items = "records",
                                                      .written_counter = "written_records",
                                                      .in_order = true});
    if (s.auth == sr::AuthMode::Basic)
      basic_ = "Basic " + kit::base64_encode(std::string_view(s.user + ":" + s.password));
    tables_ = std::make_unique<kit::DestinationCache<Table>>(
        plan_->table, kit::NamePolicy::Verbatim,
        [this](const std::string& name, std::string_view) { return prepare_table(name); }, "table");
    setup();
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    auto job = std::make_shared<StatementJob>(pending(), *this);
    sr::ItemPlan plan = encoder_->plan(raw);
    for (auto& [index, reason] : plan.refused) job->reject(index, reason);
    if (plan.skipped) count("skipped_tombstones", plan.skipped);
    if (plan.items.empty()) {
      engine_->submit(job, 0);
      return job->result();
    }
    refresh_token_if_due();
    if (!ready_) prepare_database();  // the server was unreachable at open: now, or the write retries
    job->topic = raw.topic;
    job->table = tables_->get(raw.topic).name;  // throws an SDK outcome when it cannot be defined
    job->shape = encoder_->shape(plan);
    job->items = std::move(plan.items);
    job->limits = plan_->settings.requests.limits();
    if (!plan.changes) {
      engine_->submit(job, job->items.size());
      return job->result();
    }
    if (!ordered_engine_)
      throw sdk::FatalError("a batch of change events reached a sink opened without a [[topics]] block with changes");
    ordered_engine_->submit(job, job->items.size());
    return job->result();
  }

  // The host is stopping (ABI 2.6): resends waiting now complete their writes as retries instead
  // of holding the stop up to retry_timeout; requests on the wire (and task polls) finish.
  void stop() {
    if (engine_) engine_->stop();
    if (ordered_engine_) ordered_engine_->stop();
  }

  void close() {
    if (ordered_engine_) ordered_engine_->close();
    if (engine_) engine_->close();
    if (client_) client_->close(std::chrono::seconds(5));
  }

 private:
  // A form of request: one statement for the run's items, or one statement per item (to find
  // which items a refused statement held).
  static constexpr uint32_t kPerItem = 1;

  // One batch's /rpc requests into one table: its items' CBOR bound as $v.
  struct StatementJob : kit::RequestJob {
    StatementJob(sdk::Pending p, SurrealDbSink& s) : RequestJob(std::move(p)), sink(s) {}
    SurrealDbSink& sink;
    std::string topic, table;
    sr::Shape shape = sr::Shape::Insert;
    std::vector<sr::Item> items;

    void render(size_t item, std::string& out) const override { out += items[item].cbor; }
    std::string body(const kit::Run& run, std::string rendered) const override {
      const std::string text =
          sr::statement_text(shape, sink.plan_->settings.mode, run.items.size(), run.variant == kPerItem);
      return sr::rpc_body(sink.next_id_++, text, table, run.items.size(), rendered);
    }
    kit::HttpRequest request(const kit::Run&) const override { return sink.rpc_request(); }
    void on_response(kit::Reply& reply) override { sink.handle(*this, reply); }
    size_t record(size_t item) const override { return items[item].record; }
    std::string context() const override { return "table " + table + ": "; }
  };

  std::string bounded(std::string_view text) const { return client_->redactor().bounded(text); }

  std::string authorization() const {
    if (plan_->settings.auth == sr::AuthMode::Basic) return basic_;
    if (plan_->settings.auth == sr::AuthMode::Signin) {
      std::lock_guard lock(token_mutex_);
      return token_.empty() ? std::string() : "Bearer " + token_;
    }
    return {};
  }

  kit::HttpRequest rpc_request(bool with_database = true) const {
    kit::HttpRequest r{.method = "POST", .url = plan_->base_url + "/rpc"};
    r.headers.set("Content-Type", "application/cbor");
    r.headers.set("Accept", "application/cbor");
    if (with_database) {
      r.headers.set("surreal-ns", plan_->settings.ns);
      r.headers.set("surreal-db", plan_->settings.database);
    }
    const std::string auth = authorization();
    if (!auth.empty()) r.headers.set("Authorization", auth);
    return r;
  }

  void handle(StatementJob& job, kit::Reply& reply) {
    kit::Classification c = reply.classification();
    if (c.status == 401 && plan_->settings.auth == sr::AuthMode::Signin) {
      // Signed in again by the next write_batch (an I/O thread never blocks on a sign-in): the
      // write fails as a retry now rather than resending with the refused token.
      token_stale_ = true;
      return reply.fail({.outcome = kit::Outcome::Retry,
                         .reason = "the session token was refused (expired?): signing in again; " + c.reason});
    }
    if (c.outcome == kit::Outcome::Written) return statements_done(job, reply);
    if (c.status == 401 || c.status == 403)
      c.reason = "authentication failed or not allowed (check user, password, auth_level): " + c.reason;
    reply.follow(c);
  }

  // A 2xx /rpc answer: every statement's status.
  void statements_done(StatementJob& job, kit::Reply& reply) {
    const bool per_item = reply.run().variant == kPerItem;
    const size_t n = reply.size();
    auto parsed = sr::parse_rpc_response(reply.response().body);
    const size_t expected = per_item ? n : 1;
    if (!parsed || parsed.value().error || parsed.value().statements.size() != expected) {
      std::string why = !parsed                ? parsed.error()
                        : parsed.value().error ? "RPC error: " + *parsed.value().error
                                               : "expected " + std::to_string(expected) + " statement answers, got " +
                                                     std::to_string(parsed.value().statements.size());
      return reply.fail({.outcome = kit::Outcome::Fatal, .reason = reply.reason(why)});
    }
    const auto& statements = parsed.value().statements;
    uint64_t written = 0, already = 0;
    std::vector<std::pair<size_t, std::string>> refused;  // applied unless the run is sent again
    std::optional<kit::Classification> retry, fatal;
    for (size_t k = 0; k < statements.size(); ++k) {
      const sr::StatementResult& st = statements[k];
      const size_t each = per_item ? 1 : n;
      if (st.ok) {
        written += each;
        continue;
      }
      const std::string reason = job.context() + st.kind + ": " + bounded(st.message);
      switch (sr::classify_error(st)) {
        case sr::ErrorClass::AlreadyThere: already += each; break;
        case sr::ErrorClass::Record:
          if (!per_item && n > 1) {
            // Which of them? The same records again, one statement each.
            count("record_hunts");
            log(sdk::LogLevel::Debug, "a statement of " + std::to_string(n) +
                                          " records was refused; sending them one statement each: " + reason);
            std::vector<size_t> all(n);
            for (size_t i = 0; i < n; ++i) all[i] = i;
            return reply.send_again(all, kPerItem);
          }
          refused.emplace_back(per_item ? k : 0, reason);
          break;
        case sr::ErrorClass::Retry:
          if (!retry) retry = kit::Classification{.outcome = kit::Outcome::Retry, .reason = reason};
          break;
        case sr::ErrorClass::TableGone:
          tables_->forget(job.topic);
          if (!retry)
            retry = kit::Classification{.outcome = kit::Outcome::Retry,
                                        .reason = reason + " (the table is defined again on the next attempt)"};
          break;
        case sr::ErrorClass::Fatal:
          fatal = kit::Classification{.outcome = kit::Outcome::Fatal, .reason = reason};
          break;
      }
    }
    if (written) reply.written(written);
    if (already) {
      count("already_written_records", already);
      reply.maybe_written();
    }
    if (fatal) return reply.fail(*fatal);
    // Statements are independent: resending the whole run repeats only idempotent writes (and
    // finds the refused records again).
    if (retry) return reply.resend({}, *retry);
    for (auto& [k, reason] : refused) reply.reject(k, std::move(reason));
  }

  // ------------------------------------------------------------------ setup (synchronous)

  // One query outside the write path; throws the SDK outcome of a failure. Returns the statements.
  std::vector<sr::StatementResult> query(const std::string& text, const std::string& what, bool with_database = true) {
    kit::HttpRequest r = rpc_request(with_database);
    r.body = sr::rpc_body(next_id_++, text, "", 0, "");
    r.timeout = kSetupTimeout;
    const kit::HttpResponse response = client_->send(std::move(r));
    kit::Classification c = rules_.classify(response);
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten)
      throw sdk::RetryableError(what + ": " + c.reason);
    if (c.outcome != kit::Outcome::Written) {
      if (c.status == 401 || c.status == 403)
        throw sdk::FatalError(what +
                              ": authentication failed or not allowed (check user, password, auth_level): " + c.reason);
      throw sdk::FatalError(what + ": " + c.reason);
    }
    auto parsed = sr::parse_rpc_response(response.body);
    if (!parsed) throw sdk::FatalError(what + ": " + parsed.error());
    if (parsed.value().error) throw sdk::FatalError(what + ": " + bounded(*parsed.value().error));
    return parsed.value().statements;
  }

  Table prepare_table(const std::string& resolved) {
    const std::string name = sr::table_identifier(resolved);
    if (!plan_->settings.define_table) return Table{name};
    // The name is [A-Za-z0-9_] only (table_identifier): safe between backticks.
    std::string text = "DEFINE TABLE IF NOT EXISTS `" + name + "` SCHEMALESS;";
    if (plan_->settings.index_offsets)
      text +=
          "DEFINE INDEX IF NOT EXISTS pico_offsets ON `" + name + "` FIELDS pico_topic, pico_partition, pico_offset;";
    for (const auto& st : query(text, "defining table " + name)) {
      if (st.ok) continue;
      const std::string why = "defining table " + name + ": " + st.kind + ": " + bounded(st.message);
      if (sr::classify_error(st) == sr::ErrorClass::Retry) throw sdk::RetryableError(why);
      throw sdk::FatalError(why);
    }
    count("created_tables");
    log(sdk::LogLevel::Info, "table " + name + " defined (IF NOT EXISTS)");
    return Table{name};
  }

  void sign_in() {
    const sr::Settings& s = plan_->settings;
    nlohmann::json creds = {{"user", s.user}, {"pass", s.password}};
    if (s.auth_level != sr::AuthLevel::Root) creds["ns"] = s.ns;
    if (s.auth_level == sr::AuthLevel::Database) creds["db"] = s.database;
    kit::HttpRequest r{.method = "POST", .url = plan_->base_url + "/signin", .timeout = kSetupTimeout};
    r.body = kit::HttpBody(creds.dump());
    r.headers.set("Content-Type", "application/json");
    r.headers.set("Accept", "application/json");
    const kit::HttpResponse response = client_->send(std::move(r));
    const kit::Classification c = rules_.classify(response);
    if (c.outcome == kit::Outcome::Retry || c.outcome == kit::Outcome::MaybeWritten)
      throw sdk::RetryableError("signing in: " + c.reason);
    if (c.outcome != kit::Outcome::Written)
      throw sdk::FatalError("signing in as " + s.user +
                            ": authentication failed (check user, password, auth_level): " + c.reason);
    const auto j = nlohmann::json::parse(response.body, nullptr, false);
    if (j.is_discarded() || !j.contains("token") || !j["token"].is_string())
      throw sdk::FatalError("signing in: the answer has no token: " + response.body_excerpt(200));
    {
      std::lock_guard lock(token_mutex_);
      token_ = j["token"].get<std::string>();
    }
    signed_in_at_ = Clock::now();
    token_stale_ = false;
    count("signins");
  }

  void refresh_token_if_due() {
    if (plan_->settings.auth != sr::AuthMode::Signin) return;
    std::lock_guard lock(signin_mutex_);
    if (token_stale_ || Clock::now() - signed_in_at_ >= plan_->settings.token_refresh) sign_in();
  }

  // At open: signs in / checks the credentials, creates the namespace and database (when asked),
  // and checks that they exist. An unreachable server is a warning (each write retries, and does
  // this first); wrong credentials or a missing namespace / database stop the sink now.
  void setup() {
    const sr::Settings& s = plan_->settings;
    try {
      if (s.auth == sr::AuthMode::Signin) {
        std::lock_guard lock(signin_mutex_);
        sign_in();
      }
      prepare_database();
    } catch (const sdk::RetryableError& e) {
      count("destination_unreachable");
      log(sdk::LogLevel::Warn,
          std::string("the server is not reachable now (the sink starts and retries with each write): ") + e.what());
      if (s.auth == sr::AuthMode::Signin) token_stale_ = true;
    }
  }

  // Throws RetryableError when the server cannot be reached, FatalError when it refuses.
  void prepare_database() {
    const sr::Settings& s = plan_->settings;
    std::lock_guard lock(setup_mutex_);
    if (ready_) return;
    {
      if (s.create_namespace) {
        const auto st = query("DEFINE NAMESPACE IF NOT EXISTS `" + s.ns + "`; USE NS `" + s.ns +
                                  "`; DEFINE DATABASE IF NOT EXISTS `" + s.database + "`;",
                              "creating namespace " + s.ns + " / database " + s.database, false);
        for (const auto& one : st)
          if (!one.ok)
            log(sdk::LogLevel::Warn, "create_namespace: " + one.kind + ": " + bounded(one.message) +
                                         " (the namespace and database must exist already)");
      }
      const auto st = query("INFO FOR DB;", "checking namespace " + s.ns + " / database " + s.database);
      if (st.size() != 1 || !st[0].ok)
        throw sdk::FatalError("namespace " + s.ns + " / database " + s.database + ": " +
                              (st.empty() ? std::string("no answer") : st[0].kind + ": " + bounded(st[0].message)) +
                              (s.create_namespace ? "" : " (create_namespace is off)"));
      log(sdk::LogLevel::Info, "connected to SurrealDB at " + kit::redact_url(plan_->base_url) + ": namespace " + s.ns +
                                   ", database " + s.database + ", table " + s.table + ", " +
                                   (s.changes ? std::string("change events: one batch and one request at a time")
                                              : std::to_string(s.requests.max_in_flight) + " requests in flight"));
      ready_ = true;
    }
  }

  std::unique_ptr<sr::Plan> plan_;
  std::unique_ptr<sr::Encoder> encoder_;
  // A 400 is the server not reading the request (a parse error): the statement text is constant
  // and the records are bound values, so no record causes one; bisecting it down to "refused"
  // records would hand every record to the bad-record policy. 413 still splits.
  kit::OutcomeRules rules_ = kit::OutcomeRules().on(
      400, kit::Outcome::Fatal,
      "the server could not read the request (this server version may not take the sink's statements)");
  std::string basic_;
  mutable std::mutex token_mutex_;
  std::mutex signin_mutex_;
  std::string token_;
  std::mutex setup_mutex_;
  std::atomic<bool> ready_{false};
  Clock::time_point signed_in_at_{};
  std::atomic<bool> token_stale_{false};
  mutable std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;          // after the client: stops before it
  std::unique_ptr<kit::RequestEngine> ordered_engine_;  // change events (in_order)
  std::unique_ptr<kit::DestinationCache<Table>> tables_;
};

PICOMQ_SINK_PLUGIN(SurrealDbSink)
