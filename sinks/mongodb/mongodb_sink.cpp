// MongoDB sink: records into MongoDB collections (one per topic, from a name template) through
// libmongoc, as bulk writes: unordered inserts (write_strategy insert), or ordered replace-one /
// update-one upserts and delete-ones (replace, update, tombstones). _id is the record id
// "topic:partition:offset" by default, so a replay re-inserts the same _id and MongoDB's
// duplicate-key error 11000 on it means "already written"; or the record key, a payload field,
// or an ObjectId the sink makes (mongodb/document.h). Consecutive batches for one collection are
// one bulk write: a segment of the kit's accumulator, up to max_batch_records / max_batch_bytes /
// commit_interval (libmongoc splits it into messages of at most 48 MB and maxWriteBatchSize
// documents), committed on the accumulator's committer threads (max_concurrent_writes bulk
// writes of different collections at once) while the next one fills. Per-document
// outcomes from writeErrors (mongodb/errors.h): already written, rejected (the bad-record
// policy; the rest is written), or resent — only the part not acknowledged — for retry_timeout.
// Change events (changes = ... in [[topics]], docs/changes.md): _id is the row's key; upserts
// are replace-one upserts, patches update-one $set upserts, deletes delete-ones and truncates
// delete-many {} of the collection, in record order in one ordered bulk write per segment.
// Docs: docs/sinks/mongodb.md.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mongodb/client.h"
#include "mongodb/config.h"
#include "mongodb/document.h"
#include "mongodb/errors.h"
#include "picomq/kit/accumulator.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace sdk = picomq::sdk;
namespace kit = picomq::kit;
namespace mg = picomq::mongodb;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Batches one bulk write may gather (the accumulator's max_batches); max_in_flight leaves room
// for the next bulk filling while one commits.
constexpr size_t kSegmentBatches = 64;
constexpr auto kSegmentIdle = 10ms;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct TopicCollection {
  std::string name;
  bool ready = false;  // indexes created
};

// One bulk write: the operations of consecutive batches for one collection, with each
// operation's write and record, so writeErrors map back to records.
class BulkSegment final : public kit::Segment {
 public:
  using CommitFn = std::function<void(BulkSegment&)>;
  BulkSegment(std::string collection, CommitFn commit)
      : collection_(std::move(collection)), commit_(std::move(commit)) {}

  void add(sdk::Pending write, mg::Encoded& e) {
    const auto w = static_cast<uint32_t>(writes_.size());
    writes_.push_back(std::move(write));
    for (auto& op : e.ops) {
      refs_.push_back({w, op.record});
      ops_.push_back(std::move(op));
    }
  }
  void commit() override { commit_(*this); }

  const std::string& collection() const { return collection_; }
  const std::vector<mg::Op>& ops() const { return ops_; }
  // Applied only once the commit succeeds (a failed commit fails every write anyway).
  void reject(size_t op, const std::string& reason) { writes_[refs_[op].write].reject(refs_[op].record, reason); }

 private:
  struct Ref {
    uint32_t write, record;
  };
  std::string collection_;
  CommitFn commit_;
  std::vector<mg::Op> ops_;
  std::vector<Ref> refs_;
  std::vector<sdk::Pending> writes_;
};

}  // namespace

class MongoDbSink : public sdk::BaseSink<MongoDbSink> {
 public:
  static constexpr std::string_view sink_name = "mongodb";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records into MongoDB collections (one per topic) as bulk writes through libmongoc: unordered inserts "
      "with _id = record id (a replay's duplicate-key error counts as written), or replace / update upserts. Applies "
      "change events (upsert, patch, delete, truncate by the row's key as _id; write_strategy replace, id_strategy "
      "key).";
  // A redriven dead letter is one more document: by its _id strategy, as a replay.
  static constexpr bool takes_redrives = true;
  // Change events (docs/changes.md): upserts, deletes, truncates and patches, by the row's key.
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 2 * kSegmentBatches;
  static inline const kit::OptionTable<mg::Settings>& options = mg::option_table();

  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) {
    auto plan = mg::plan(config, problems);
    if (!plan) return;
    std::string error;
    mongoc_uri_t* uri = mg::parse_uri(plan->settings.uri, error);
    if (!uri) problems.add("connection_uri", "libmongoc cannot read it: " + error);
    else mongoc_uri_destroy(uri);
  }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = mg::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<mg::Plan>(std::move(*plan));
    const mg::Settings& s = plan_->settings;
    log_route_ = std::make_unique<mg::LibraryLogRoute>([this](mongoc_log_level_t level, const std::string& line) {
      log(level <= MONGOC_LOG_LEVEL_CRITICAL  ? sdk::LogLevel::Error
          : level == MONGOC_LOG_LEVEL_WARNING ? sdk::LogLevel::Warn
          : level <= MONGOC_LOG_LEVEL_INFO    ? sdk::LogLevel::Info
                                              : sdk::LogLevel::Debug,
          line);
    });
    std::string error;
    mongoc_uri_t* uri = mg::parse_uri(s.uri, error);
    if (!uri) throw sdk::FatalError("connection_uri: libmongoc cannot read it: " + error);
    hosts_ = mg::uri_hosts(uri);
    client_ = std::make_unique<mg::Client>(uri, s.database);
    encoder_ = std::make_unique<mg::DocumentEncoder>(s);
    if (!s.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);
    // Upserts and deletes are ordered: a batch must not land after a later one it was retried
    // behind (the runtime keeps one write per block in flight).
    if (writes_in_order()) declare_max_in_flight(1);
    log(sdk::LogLevel::Info, "mongodb sink: " + hosts_ + ", database " + s.database + ", collections " + s.collection +
                                 ", id_strategy " + id_strategy_name() + ", write_strategy " + write_strategy_name() +
                                 (plan_->changes ? ", change events by the row's key" : ""));
    health_check();
    kit::AccumulatorLimits limits =
        kit::accumulator_limits(s.batching, kSegmentBatches, static_cast<size_t>(s.max_open_collections));
    limits.idle = kSegmentIdle;
    limits.background_commits = true;
    // Collections side by side; one collection's bulk writes in order (ordered_per_key).
    limits.committers = static_cast<size_t>(s.max_concurrent_writes);
    accumulator_ = std::make_unique<kit::Accumulator>(limits, [this](const kit::CommitReport& r) { committed(r); });
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending write = pending();
    const pmq_batch& raw = batch.raw();
    if (raw.record_count == 0) {
      write.done();
      return write;
    }
    const std::string collection = collection_for(raw);
    mg::Encoded encoded = encoder_->encode(raw, now_ms());
    for (const auto& r : encoded.rejected) write.reject(r.record, r.reason);
    if (!encoded.rejected.empty()) count("rejected_records", encoded.rejected.size());
    if (encoded.ops.empty()) {
      write.done();
      return write;
    }
    accumulator_->append(
        collection, write, {encoded.bytes, encoded.ops.size()},
        [&] { return std::make_unique<BulkSegment>(collection, [this](BulkSegment& s) { commit_bulk(s); }); },
        [&](kit::Segment& s) { static_cast<BulkSegment&>(s).add(write, encoded); });
    return write;
  }

  // The host's flush (idle, revoke, shutdown): every open bulk write goes to the committers now.
  // Not waited for here — the host waits for the writes' completions itself, and a bulk write
  // stalled on one collection must not keep the delivery thread from handing over another
  // collection's batches (max_concurrent_writes). close() waits for everything.
  void flush(std::chrono::milliseconds /*timeout*/) { accumulator_->seal_all(); }

  void close() {
    stop_.stop();  // resend waits end now
    if (accumulator_) accumulator_->close();
  }

 private:
  std::string id_strategy_name() const {
    switch (plan_->settings.id_strategy) {
      case mg::IdStrategy::RecordId: return "record_id";
      case mg::IdStrategy::Key: return "key";
      case mg::IdStrategy::Field: return "field";
      case mg::IdStrategy::Generated: return "generated";
    }
    return "?";
  }
  std::string write_strategy_name() const {
    switch (plan_->settings.write_strategy) {
      case mg::WriteStrategy::Insert: return "insert";
      case mg::WriteStrategy::Replace: return "replace";
      case mg::WriteStrategy::Update: return "update";
    }
    return "?";
  }

  // ------------------------------------------------------------------ bulk writes

  // Upserts, deletes and change events are written in record order (ordered bulk writes, one
  // batch at a time per block); plain inserts are not.
  bool writes_in_order() const {
    const mg::Settings& s = plan_->settings;
    return s.write_strategy != mg::WriteStrategy::Insert || s.delete_on_tombstone || plan_->changes;
  }

  // The accumulator's commit of one bulk write (on its committer thread, or flush()'s caller).
  // Resends what is not acknowledged until retry_timeout (what each reply means:
  // mg::judge_attempt); rejections are applied once every other operation is written.
  void commit_bulk(BulkSegment& s) {
    using State = mg::OpState;
    const bool ordered = writes_in_order();
    kit::RetryWait retry(stop_, plan_->settings.retry_timeout, {.initial = 100ms, .max = 5s});
    const auto& ops = s.ops();
    std::vector<State> state(ops.size(), State::Pending);
    std::vector<std::string> reasons(ops.size());
    size_t start = 0;  // ordered: the first operation not yet applied
    uint64_t already = 0;
    for (int attempt = 0;; ++attempt) {
      std::vector<const mg::Op*> batch;
      std::vector<size_t> index;  // batch position -> ops index
      std::vector<bool> inserts;
      for (size_t i = ordered ? start : 0; i < ops.size(); ++i)
        if (state[i] == State::Pending) {
          batch.push_back(&ops[i]);
          index.push_back(i);
          inserts.push_back(ops[i].kind == mg::OpKind::Insert);
        }
      if (batch.empty()) break;
      count("bulk_writes");
      if (attempt) count("resends");
      const mg::BulkResult r = client_->bulk(s.collection(), ordered, batch);
      const mg::AttemptVerdict v = mg::judge_attempt(r, inserts, ordered, s.collection(),
                                                     [&](const std::vector<size_t>& at, std::string& error) {
                                                       std::vector<const bson_t*> docs;
                                                       docs.reserve(at.size());
                                                       for (size_t b : at) docs.push_back(batch[b]->doc.get());
                                                       return client_->ids_present(s.collection(), docs, error);
                                                     });
      if (v.looked_up) count("duplicate_lookups");
      if (r.reply.removed > 0) count("deleted_records", static_cast<uint64_t>(r.reply.removed));
      if (!v.fatal.empty()) throw sdk::FatalError(v.fatal);
      for (size_t b = 0; b < batch.size(); ++b) {
        if (v.state[b] == State::Pending) continue;
        state[index[b]] = v.state[b];
        if (v.state[b] == State::Rejected) reasons[index[b]] = v.reasons[b];
      }
      already += v.already_written;
      if (ordered) start = v.resume < batch.size() ? index[v.resume] : ops.size();
      if (v.retry.empty()) continue;
      if (!retry.wait()) {
        // Some of this segment may be written: a replay is idempotent with deterministic ids.
        throw sdk::PartialWriteError(v.retry + " (resent for " + std::to_string(plan_->settings.retry_timeout.count()) +
                                     " ms)");
      }
      log(sdk::LogLevel::Debug, "resending " + std::to_string(std::count(state.begin(), state.end(), State::Pending)) +
                                    " operations: " + v.retry);
    }
    if (already) count("already_written_records", already);
    size_t rejected = 0;
    for (size_t i = 0; i < ops.size(); ++i)
      if (state[i] == State::Rejected) {
        s.reject(i, reasons[i]);
        ++rejected;
      }
    if (rejected) {
      count("rejected_records", rejected);
      log(sdk::LogLevel::Info,
          "collection " + s.collection() + ": " + std::to_string(rejected) +
              " documents refused (the bad-record policy decides): " +
              reasons[std::distance(state.begin(), std::find(state.begin(), state.end(), State::Rejected))]);
    }
  }

  void committed(const kit::CommitReport& r) {
    if (!r.ok) {
      count("failed_writes", r.batches);
      log(sdk::LogLevel::Debug,
          "collection " + r.key + ": " + std::to_string(r.batches) + " batches failed (" + r.trigger + "): " + r.error);
      return;
    }
    count("written_records", r.records);
    log(sdk::LogLevel::Debug, "collection " + r.key + ": wrote " + std::to_string(r.records) + " operations of " +
                                  std::to_string(r.batches) + " batches (" + r.trigger + "; " +
                                  std::to_string(r.took.count()) + " ms)");
  }

  // ------------------------------------------------------------------ collections

  // The batch's collection, resolved on its topic's first batch (and its indexes created).
  std::string collection_for(const pmq_batch& batch) {
    std::lock_guard lock(mutex_);
    auto it = collections_.find(batch.topic);
    if (it == collections_.end()) {
      auto resolved = plan_->collection.resolve(batch.topic);
      if (!resolved)
        throw sdk::FatalError("collection for topic '" + std::string(batch.topic) + "': " + resolved.error());
      auto name = mg::collection_name(resolved.value(), plan_->settings.database);
      if (!name) throw sdk::FatalError("collection for topic '" + std::string(batch.topic) + "': " + name.error());
      it = collections_.emplace(batch.topic, TopicCollection{name.value(), false}).first;
    }
    if (!it->second.ready) {
      create_indexes(it->second.name);
      it->second.ready = true;
    }
    return it->second.name;
  }

  // indexes (and business_key's unique index) on first use: createIndexes keeps an index that
  // exists with the same keys and options.
  void create_indexes(const std::string& collection) {
    const mg::Settings& s = plan_->settings;
    std::vector<std::pair<std::vector<std::string>, bool>> wanted;
    for (const auto& fields : plan_->indexes) wanted.emplace_back(fields, false);
    if (!s.business_key.empty()) wanted.emplace_back(s.business_key, true);
    if (wanted.empty()) return;
    bson_t cmd = BSON_INITIALIZER, list, index, keys;
    BSON_APPEND_UTF8(&cmd, "createIndexes", collection.c_str());
    BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &list);
    std::string names;
    for (size_t i = 0; i < wanted.size(); ++i) {
      const std::string key = std::to_string(i);
      bson_append_document_begin(&list, key.c_str(), -1, &index);
      BSON_APPEND_DOCUMENT_BEGIN(&index, "key", &keys);
      std::string name;
      for (const auto& f : wanted[i].first) {
        BSON_APPEND_INT32(&keys, f.c_str(), 1);
        name += (name.empty() ? "" : "_") + f + "_1";
      }
      bson_append_document_end(&index, &keys);
      BSON_APPEND_UTF8(&index, "name", name.c_str());
      if (wanted[i].second) BSON_APPEND_BOOL(&index, "unique", true);
      bson_append_document_end(&list, &index);
      names += (names.empty() ? "" : ", ") + name + (wanted[i].second ? " (unique)" : "");
    }
    bson_append_array_end(&cmd, &list);
    std::string error;
    uint32_t domain = 0, code = 0;
    const bool ok = client_->command(cmd, nullptr, error, &domain, &code);
    bson_destroy(&cmd);
    if (!ok) {
      const std::string what = "creating indexes " + names + " on " + s.database + "." + collection + ": " + error;
      if (domain == MONGOC_ERROR_SERVER &&
          mg::classify_command(static_cast<int32_t>(code), false) == mg::ItemOutcome::Fatal)
        throw sdk::FatalError(what);
      // IndexOptionsConflict 85, IndexKeySpecsConflict 86, CannotCreateIndex 67, BadValue 2,
      // InvalidIndexSpecificationOption 197: the index as configured cannot be made.
      if (domain == MONGOC_ERROR_SERVER && (code == 85 || code == 86 || code == 67 || code == 2 || code == 197))
        throw sdk::FatalError(what);
      throw sdk::RetryableError(what);
    }
    log(sdk::LogLevel::Info, "collection " + s.database + "." + collection + ": indexes " + names);
  }

  // ------------------------------------------------------------------ start-up check

  // Pings now, so a wrong password stops the sink at start, not at the first record. A server
  // that does not answer is not a configuration error: a warning, and the sink starts anyway.
  void health_check() {
    bson_t ping = BSON_INITIALIZER, reply;
    BSON_APPEND_INT32(&ping, "ping", 1);
    std::string error;
    uint32_t domain = 0, code = 0;
    const bool ok = client_->command(ping, &reply, error, &domain, &code);
    bson_destroy(&ping);
    bson_destroy(&reply);
    if (ok) {
      log(sdk::LogLevel::Info, "connected to MongoDB at " + hosts_);
      return;
    }
    const bool auth = (domain == MONGOC_ERROR_CLIENT && code == MONGOC_ERROR_CLIENT_AUTHENTICATE) ||
                      (domain == MONGOC_ERROR_SERVER && (code == 18 || code == 13));
    if (auth) throw sdk::FatalError("connecting to MongoDB at " + hosts_ + ": " + error);
    count("destination_unreachable");
    log(sdk::LogLevel::Warn, "MongoDB at " + hosts_ +
                                 " is not reachable now (the sink starts and retries with each "
                                 "write): " +
                                 error);
  }

  std::unique_ptr<mg::Plan> plan_;
  std::string hosts_;
  // Before client_: libmongoc may still log while the client pool is destroyed.
  std::unique_ptr<mg::LibraryLogRoute> log_route_;
  std::unique_ptr<mg::Client> client_;
  std::unique_ptr<mg::DocumentEncoder> encoder_;
  kit::StopSignal stop_;
  std::mutex mutex_;  // collections_
  std::unordered_map<std::string, TopicCollection> collections_;
  std::unique_ptr<kit::Accumulator> accumulator_;  // last: its threads stop before the rest goes
};

PICOMQ_SINK_PLUGIN(MongoDbSink)
