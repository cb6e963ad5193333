// PostgreSQL sink: payload modes jsonb / text / bytea / columns (typed columns, declared or
// inferred per topic, auto_add_columns), write modes insert (pico_id primary key, replays do
// nothing) / upsert (upsert_key, last record wins) / append, optional metadata columns, tables
// auto-created per topic from a name template. Rows go out with binary COPY
// (postgres/row_encoder.h); in insert and append modes consecutive batches into one table share
// one COPY and one transaction (a stream) for up to commit_interval, one stream per table on a
// connection of its own (max_open_tables); each batch's write completes when its stream commits.
// Insert mode after a partition assignment (start-up, rebalance: the only times a replay can
// come) streams through a staging table and INSERT ... ON CONFLICT DO NOTHING until a merge
// finds no row written before; a duplicate key met on the direct path is redone that way inside
// the same write. libpq I/O: postgres/client.h. Docs: docs/sinks/postgres.md,
// docs/sinks/postgres-encoding.md.
#include <libpq-fe.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/health.hpp"
#include "picomq/kit/metadata.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"
#include "postgres/client.h"
#include "postgres/config.h"
#include "postgres/conninfo.h"
#include "postgres/row_encoder.h"
#include "postgres/sql.h"

namespace {

namespace sdk = picomq::sdk;
namespace pg = picomq::postgres;
namespace kit = picomq::kit;
namespace dest = picomq::kit;
using pg::Clock;
using namespace std::chrono_literals;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

struct TopicTable {
  pg::TableName table;
  std::string display;  // schema.table for messages (unquoted)
  bool ready = false;   // created (auto_create_table) or found to exist
  // Columns mode with inferred columns: this topic's own layout (else the sink's shared one).
  std::unique_ptr<pg::RowEncoder> encoder;
};

using Partition = std::pair<std::string, int32_t>;  // topic, partition

// A COPY into one topic's table, in a transaction of its own, that the following batches for
// that table join; their writes complete when it commits (PostgresSink::end_stream). Staged: the
// COPY goes into the session's temp staging table and is merged with ON CONFLICT DO NOTHING.
struct Stream {
  TopicTable* target = nullptr;
  bool staged = false;
  size_t rows = 0;
  Clock::time_point opened, last_write;
  struct Write {
    sdk::Pending pending;
    const pmq_batch* batch;  // valid until `pending` completes (docs/abi.md): a redo re-encodes it
  };
  std::vector<Write> writes;
  std::set<Partition> partitions;
};

// A connection and the stream open on it, if any.
struct Slot {
  std::unique_ptr<pg::Connection> conn;
  std::optional<Stream> stream;
  const TopicTable* last_target = nullptr;  // the table of its last stream: reused for that table first
};

// A stream with no new batch for this long is committed: the runtime has nothing more to send
// for now (it sends the next batch as soon as a write is accepted), so waiting longer would only
// hold records back.
constexpr auto kStreamIdle = 10ms;
// A connection attempt gets at least this long, even when reconnect_timeout has (almost) run out.
constexpr auto kMinConnectAttempt = 1s;
// The start-up health check waits at most this long for an unreachable server (then the sink
// starts and keeps trying in the background).
constexpr auto kHealthCheckWait = 5s;

enum class Outcome { Retry, Partial, Fatal };

}  // namespace

class PostgresSink : public sdk::BaseSink<PostgresSink> {
 public:
  static constexpr std::string_view sink_name = "postgres";
  static constexpr std::string_view sink_version = "0.2.0";
  static constexpr std::string_view description =
      "Writes records into PostgreSQL tables (one per topic) with binary COPY; consecutive batches share a "
      "transaction for up to commit_interval, one COPY stream per table.";
  // Every batch is written by write_batch: batches is the only native plane (rows stay accepted,
  // as for every sink, and are never used since batches are native).
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  // Batches one COPY stream may hold before it commits (the runtime's window per block).
  static constexpr uint32_t max_in_flight = 64;
  static inline const kit::OptionTable<pg::Settings>& options = pg::option_table();
  // Cross-option checks, with file positions (picomq-connect --check; the runtime before open()).
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { pg::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;  // a host that skips validate() (ABI < 2.2) gets the same checks
    auto plan = pg::plan(config, problems);
    if (!plan) throw sdk::FatalError(trim(problems.text()));
    const pg::Settings& s = plan->settings;
    conninfo_ = s.connection_string;
    conn_options_ = plan->conn_options;
    reconnect_timeout_ = s.reconnect_timeout;
    template_ = std::move(plan->target_table);
    schema_ = s.schema;
    auto_create_ = s.auto_create_table;
    max_open_tables_ = static_cast<size_t>(s.max_open_tables);
    options_ = plan->layout;
    pg::LayoutOptions& lo = options_;
    if (!lo.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);  // pico_headers is their only use
    auto_add_ = s.auto_add_columns;
    commit_interval_ = s.commit_interval;
    streaming_ = plan->streaming;
    // Writes that complete at once must still be taken one at a time: a failed batch retried
    // after a later one landed would undo last-record-wins.
    if (!streaming_) declare_max_in_flight(1);
    infer_ = plan->infer_columns;
    if (!infer_) encoder_ = std::make_unique<pg::RowEncoder>(pg::make_layout(lo).value());
    const std::string payload_mode(pg::to_string(lo.payload_mode)), write_mode(pg::to_string(lo.write_mode));
    staging_.emplace(pg::TableName::temp(pg::kStagingTable).value());

    log(sdk::LogLevel::Info, "postgres sink: tables " + schema_ + "." + std::string(template_->source()) +
                                 ", payload_mode " + payload_mode + (infer_ ? " (inferred)" : "") +
                                 ", write_mode " + write_mode +
                                 (lo.include_metadata ? ", with metadata" : ", without metadata"));
    health_check();
    committer_ = std::thread([this] { committer_main(); });
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending done = pending();
    std::lock_guard lock(mutex_);
    try {
      if (write_raw(batch.raw(), done)) return done;  // in a stream: completes when it commits
    } catch (...) {
      count("failed_writes");
      throw;
    }
    done.done();
    return done;
  }

  // The runtime seals what the sink holds (quiet partition, revoke, shutdown): commit every stream.
  void flush(std::chrono::milliseconds /*timeout*/) {
    std::lock_guard lock(mutex_);
    for (auto& slot : slots_) end_stream(slot);
  }

  // A partition assigned (start-up, rebalance) may replay records written before a crash: its
  // first batch tells (probe_replay).
  void partitions_assigned(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    if (options_.write_mode != pg::WriteMode::Insert) return;
    std::lock_guard lock(mutex_);
    for (const auto& tp : partitions) {
      Partition p{tp.topic, tp.partition};
      catching_up_.erase(p);
      unprobed_.insert(std::move(p));
    }
  }

  void partitions_revoked(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    std::lock_guard lock(mutex_);
    for (const auto& tp : partitions) {
      const Partition p{tp.topic, tp.partition};
      catching_up_.erase(p);
      unprobed_.erase(p);
    }
  }

  void close() {
    stop_.stop();  // first: a reconnect wait or a background connection attempt ends now
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    if (committer_.joinable()) committer_.join();
    std::lock_guard lock(mutex_);
    for (auto& slot : slots_) end_stream(slot);
    slots_.clear();
  }

 private:
  // ------------------------------------------------------------------ writes

  // Writes one batch (mutex_ held); its rejected records go to `write`. In a mode that allows it
  // the rows join the table's stream and the call returns true: `write` completes at that
  // stream's commit. Otherwise the batch is committed before the call returns false. A failure
  // throws (the batch's own outcome); a stream it breaks completes every write in it.
  bool write_raw(const pmq_batch& batch, sdk::Pending& write) {
    if (batch.record_count == 0) return false;
    const auto deadline = Clock::now() + reconnect_timeout_;  // this write attempt's wait for the server
    check_format(batch);
    TopicTable& target = table_for(batch.topic);
    const Partition tp{batch.topic, batch.partition};
    Slot& slot = slot_for(target);
    // A COPY whose connection broke cannot commit; schema changes and lookups run outside one.
    if (slot.stream && !slot.conn->ok())
      fail_stream(slot, Outcome::Retry, "the connection to PostgreSQL was lost during the COPY into " + target.display,
                  deadline);
    const bool probe = unprobed_.count(tp) > 0;
    if (slot.stream && (!target.ready || (infer_ && auto_add_) || probe)) end_stream(slot);
    connect(slot, deadline);
    try {
      if (infer_) prepare_inferred(*slot.conn, target, batch);
      else if (!target.ready) prepare_table(*slot.conn, target);
      if (probe) probe_replay(*slot.conn, target, batch);
      pg::RowEncoder& encoder = encoder_for(target);

      pg::EncodeResult encoded = encoder.encode(batch);
      if (!encoded.ok()) throw sdk::FatalError("topic '" + std::string(batch.topic) + "': " + encoded.error);
      for (const auto& r : encoded.rejected) write.reject(r.record_index, r.reason);
      if (encoded.rows == 0) return false;

      const pg::WriteMode mode = encoder.layout().write_mode;
      const bool staged = mode == pg::WriteMode::Insert && catching_up_.count(tp) > 0;
      if (streaming_) {
        // A direct stream cannot take replayed rows; a staged one takes any.
        if (slot.stream && staged && !slot.stream->staged) end_stream(slot);
        stream_batch(slot, target, encoder, encoded, batch, write, staged);
        encoder.recycle(std::move(encoded.copy_data));
        return true;
      }
      write_once(*slot.conn, target, encoder, encoded, tp, staged);
      encoder.recycle(std::move(encoded.copy_data));
      return false;
    } catch (const sdk::RetryableError&) {
      // The server went away: this attempt still gets its reconnect_timeout (one rule for the
      // time to Error, however the outage was found).
      if (!slot.conn->ok()) {
        note_unreachable("the connection was lost");
        await_server(slot, deadline);
      }
      throw;
    }
  }

  // One transaction for one batch (commit_interval 0, upsert): straight COPY in insert mode
  // unless its partition is replaying; a duplicate key there (a replay nobody announced) is
  // written again at once through the staging table, which skips the rows written before.
  void write_once(pg::Connection& c, TopicTable& target, pg::RowEncoder& encoder, const pg::EncodeResult& encoded,
                  const Partition& tp, bool staged) {
    const pg::TableLayout& layout = encoder.layout();
    if (layout.write_mode == pg::WriteMode::Insert && !staged) {
      c.run("BEGIN", "BEGIN");
      try {
        copy(c, pg::copy_sql(target.table, layout), encoded.copy_data, target.display);
        c.commit(target.display);
        return;
      } catch (const sdk::FatalError&) {
        c.rollback();
        if (c.last_sqlstate() != "23505") throw;
        note_conflict(target, 1);
        catching_up_.insert(tp);
      } catch (...) {
        c.rollback();
        throw;
      }
    }
    const pg::WriteStatements st = pg::write_statements(target.table, *staging_, layout);
    c.run("BEGIN", "BEGIN");
    size_t inserted = encoded.rows;
    try {
      if (!st.create_staging.empty()) c.run(st.create_staging, "creating the staging table");
      copy(c, st.copy, encoded.copy_data, target.display);
      if (!st.merge.empty()) inserted = c.run_counting(st.merge, "writing into " + target.display);
    } catch (...) {
      c.rollback();
      throw;
    }
    c.commit(target.display);
    if (layout.write_mode == pg::WriteMode::Insert) merged(target, {tp}, encoded.rows, inserted);
  }

  // Adds the batch's rows to the table's stream, opening one (BEGIN, [staging,] COPY) if there
  // is none.
  void stream_batch(Slot& slot, TopicTable& target, pg::RowEncoder& encoder, const pg::EncodeResult& encoded,
                    const pmq_batch& batch, sdk::Pending& write, bool staged) {
    pg::Connection& c = *slot.conn;
    if (!slot.stream) {
      c.run("BEGIN", "BEGIN");
      try {
        if (staged) {
          const pg::WriteStatements st = pg::write_statements(target.table, *staging_, encoder.layout());
          c.run(st.create_staging, "creating the staging table");
          c.begin_copy(st.copy, "COPY into the staging table for " + target.display);
        } else {
          c.begin_copy(pg::copy_sql(target.table, encoder.layout()), "COPY into " + target.display);
        }
      } catch (...) {
        c.rollback();
        throw;
      }
      slot.stream.emplace();
      slot.stream->target = &target;
      slot.stream->staged = staged;
      slot.stream->opened = Clock::now();
      slot.last_target = &target;
      wake_.notify_all();  // the committer sleeps while no stream is open
    }
    Stream& s = *slot.stream;
    // The header goes once, at the start of the stream; each batch adds its tuples.
    const std::string& data = encoded.copy_data;  // header, tuples, 2-byte trailer
    const size_t from = s.rows == 0 ? 0 : pg::kCopyHeaderBytes;
    s.writes.push_back({write, &batch});
    s.rows += encoded.rows;
    s.last_write = Clock::now();
    s.partitions.emplace(batch.topic, batch.partition);
    if (!c.put_copy_data(std::string_view(data).substr(from, data.size() - from - 2))) {
      // Broken mid-stream: the server's error (a duplicate key is redone through staging) or a
      // lost connection. Every write in the stream, this one too, gets its outcome there.
      end_stream(slot, /*sent=*/false);
      return;
    }
    if (s.writes.size() >= max_in_flight) end_stream(slot);
  }

  // Ends the slot's stream (mutex_ held): trailer, end of COPY, [merge,] COMMIT; then completes
  // every write in it with the outcome.
  void end_stream(Slot& slot, bool sent = true) {
    if (!slot.stream) return;
    Stream& s = *slot.stream;
    pg::Connection& c = *slot.conn;
    const std::string what = (s.staged ? "COPY into the staging table for " : "COPY into ") + s.target->display;
    size_t inserted = s.rows;
    try {
      try {
        if (sent) sent = c.put_copy_data(std::string_view("\xff\xff", 2));  // the trailer
        c.end_copy(sent, what);
        if (s.staged)
          inserted = c.run_counting(pg::merge_sql(s.target->table, *staging_, encoder_for(*s.target).layout()),
                                    "writing into " + s.target->display);
      } catch (...) {
        c.rollback();
        throw;
      }
      c.commit(s.target->display);
    } catch (const sdk::FatalError& e) {
      if (c.last_sqlstate() == "23505" && !s.staged && options_.write_mode == pg::WriteMode::Insert) {
        redo_staged(slot);
        return;
      }
      fail_stream(slot, Outcome::Fatal, e.what(), {});
      return;
    } catch (const sdk::PartialWriteError& e) {
      fail_stream(slot, Outcome::Partial, e.what(), {});
      return;
    } catch (const sdk::RetryableError& e) {
      fail_stream(slot, Outcome::Retry, e.what(), {});
      return;
    } catch (const std::exception& e) {
      fail_stream(slot, Outcome::Partial, e.what(), {});
      return;
    }
    stream_committed(slot, inserted);
  }

  // The stream met a row written before (23505) on the direct path: a replay nobody announced
  // (no assignment before it, or a probe that missed it). Its batches are written again, now,
  // through the staging table, in a transaction of their own: no write fails for it.
  void redo_staged(Slot& slot) {
    Stream& s = *slot.stream;
    pg::Connection& c = *slot.conn;
    note_conflict(*s.target, s.writes.size());
    for (const auto& p : s.partitions) catching_up_.insert(p);
    pg::RowEncoder& encoder = encoder_for(*s.target);
    const pg::WriteStatements st = pg::write_statements(s.target->table, *staging_, encoder.layout());
    size_t inserted = 0, rows = 0;
    try {
      c.run("BEGIN", "BEGIN");
      try {
        c.run(st.create_staging, "creating the staging table");
        c.begin_copy(st.copy, "COPY into the staging table for " + s.target->display);
        bool sent = true;
        for (size_t i = 0; i < s.writes.size() && sent; ++i) {
          // Re-encoded from the batch the runtime still holds (its rejections were reported).
          pg::EncodeResult e = encoder.encode(*s.writes[i].batch);
          if (!e.ok()) throw sdk::FatalError("topic '" + std::string(s.writes[i].batch->topic) + "': " + e.error);
          rows += e.rows;
          const size_t from = i == 0 ? 0 : pg::kCopyHeaderBytes;
          sent = c.put_copy_data(std::string_view(e.copy_data).substr(from, e.copy_data.size() - from - 2));
        }
        if (sent) sent = c.put_copy_data(std::string_view("\xff\xff", 2));
        c.end_copy(sent, "COPY into the staging table for " + s.target->display);
        inserted = c.run_counting(st.merge, "writing into " + s.target->display);
      } catch (...) {
        c.rollback();
        throw;
      }
      c.commit(s.target->display);
    } catch (const sdk::FatalError& e) {
      fail_stream(slot, Outcome::Fatal, e.what(), {});
      return;
    } catch (const sdk::PartialWriteError& e) {
      fail_stream(slot, Outcome::Partial, e.what(), {});
      return;
    } catch (const sdk::RetryableError& e) {
      fail_stream(slot, Outcome::Retry, e.what(), {});
      return;
    } catch (const std::exception& e) {
      fail_stream(slot, Outcome::Partial, e.what(), {});
      return;
    }
    s.rows = rows;
    s.staged = true;
    stream_committed(slot, inserted);
  }

  void stream_committed(Slot& slot, size_t inserted) {
    Stream s = std::move(*slot.stream);
    slot.stream.reset();
    for (auto& w : s.writes) w.pending.done();
    if (s.staged) merged(*s.target, s.partitions, s.rows, inserted);
    auto ms = [](Clock::duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
    log(sdk::LogLevel::Debug, "table " + s.target->display + ": committed " + std::to_string(s.rows) + " rows of " +
                                  std::to_string(s.writes.size()) + " batches in one " +
                                  (s.staged ? "staged " : "") + "COPY (batches for " + ms(s.last_write - s.opened) +
                                  " ms, commit after " + ms(Clock::now() - s.last_write) + " ms more)");
  }

  // The slot's stream cannot commit: every write in it gets `outcome`. A lost connection first
  // waits for the server (up to reconnect_timeout from when the outage was found, or `deadline`),
  // so these writes' attempt lasts as long as any other's.
  void fail_stream(Slot& slot, Outcome outcome, const std::string& message, std::optional<Clock::time_point> deadline) {
    if (!slot.stream) return;
    Stream s = std::move(*slot.stream);
    slot.stream.reset();
    if (outcome == Outcome::Retry && !slot.conn->ok()) {
      slot.conn->disconnect();
      note_unreachable("the connection was lost: " + message);
      const auto since = outage_.since().value_or(Clock::now());
      await_server(slot, deadline ? *deadline : since + reconnect_timeout_);
    }
    count("failed_writes", s.writes.size());
    for (auto& w : s.writes) {
      if (outcome == Outcome::Retry) w.pending.retry(message);
      else if (outcome == Outcome::Partial) w.pending.partial(message);
      else w.pending.fatal(message);
    }
  }

  // A merge through staging inserted `inserted` of `rows`: all of them means the partitions are
  // past the replay and their next streams go straight into the table again.
  void merged(const TopicTable& target, const std::set<Partition>& partitions, size_t rows, size_t inserted) {
    if (inserted < rows) count("replayed_rows_skipped", rows - inserted);
    if (inserted < rows) return;
    for (const auto& p : partitions)
      if (catching_up_.erase(p))
        log(sdk::LogLevel::Info, "table " + target.display + ": " + p.first + "[" + std::to_string(p.second) +
                                     "] is past the replay; straight COPY again");
  }

  void note_conflict(const TopicTable& target, size_t batches) {
    count("conflict_redos");
    log(sdk::LogLevel::Info, "table " + target.display + ": the COPY met rows written before (SQLSTATE 23505, a " +
                                 "replay); its " + std::to_string(batches) + " batch(es) are written again through "
                                 "the staging table, which skips those, in the same write");
  }

  // The first batch of a partition after an assignment: is its first record in the table
  // already? Then it is a replay (a crash or a rebalance before the offsets were committed):
  // the partition's batches stream through staging until a merge finds nothing written before.
  void probe_replay(pg::Connection& c, const TopicTable& target, const pmq_batch& batch) {
    const Partition p{batch.topic, batch.partition};
    unprobed_.erase(p);
    if (options_.write_mode != pg::WriteMode::Insert || batch.record_count == 0) return;
    const int64_t first = batch.records[0].offset;
    const auto rows = c.query("SELECT 1 FROM " + target.table.sql() + " WHERE \"pico_id\" = $1",
                              {dest::record_id(batch.topic, batch.partition, first)},
                              "looking for replayed records in " + target.display);
    if (rows.empty()) return;
    catching_up_.insert(p);
    log(sdk::LogLevel::Info, "table " + target.display + ": " + p.first + "[" + std::to_string(p.second) +
                                 "] at offset " + std::to_string(first) + " was written before (a replay after a " +
                                 "restart or a rebalance): streaming through the staging table until past it");
  }

  // One whole COPY: statement, data, end.
  void copy(pg::Connection& c, const std::string& sql, const std::string& data, const std::string& table) {
    const std::string what = "COPY into " + table;
    c.begin_copy(sql, what);
    c.end_copy(c.put_copy_data(data), what);
  }

  // The slot for a batch into `target`: its open stream; else a connection of its own (the one
  // it used last, one never used, a new one up to max_open_tables); else any connection with no
  // stream; else the slot of the oldest stream, which commits first.
  Slot& slot_for(const TopicTable& target) {
    Slot *unused = nullptr, *free = nullptr;
    for (auto& s : slots_) {
      if (s.stream && s.stream->target == &target) return s;
      if (s.stream) continue;
      if (s.last_target == &target) return s;
      if (!s.last_target && !unused) unused = &s;
      if (!free) free = &s;
    }
    if (unused) return *unused;
    if (slots_.size() < max_open_tables_) return slots_.emplace_back();
    if (free) return *free;
    Slot* oldest = &slots_.front();
    for (auto& s : slots_)
      if (s.stream->opened < oldest->stream->opened) oldest = &s;
    end_stream(*oldest);
    return *oldest;
  }

  pg::RowEncoder& encoder_for(TopicTable& target) { return target.encoder ? *target.encoder : *encoder_; }

  // ------------------------------------------------------------------ connections, outages

  std::unique_ptr<pg::Connection> new_connection() {
    return std::make_unique<pg::Connection>(conninfo_, conn_options_,
                                            [this](sdk::LogLevel level, const std::string& m) { log(level, m); });
  }

  // Connects the slot unless connected. An unreachable server is tried again until `deadline`
  // (back-off 250 ms to 2 s): a server restart takes longer than the runtime's own retries
  // (about 3 s in all) would wait. A refusal (credentials, database) is fatal.
  void connect(Slot& slot, Clock::time_point deadline) {
    if (slot.conn && slot.conn->ok()) return;
    if (!slot.conn) slot.conn = new_connection();
    kit::Backoff backoff({.initial = 250ms, .max = 2000ms});
    for (;;) {
      auto error = slot.conn->connect(std::max(deadline, Clock::now() + kMinConnectAttempt), stop_);
      if (!error) {
        note_connected();
        return;
      }
      switch (error->kind) {
        case pg::ConnectFailure::BadOption:
          throw sdk::FatalError("connection_string: " + error->message + " (a configuration error, not retried)");
        case pg::ConnectFailure::Refused:
          throw sdk::FatalError("cannot connect to PostgreSQL: " + error->message);
        case pg::ConnectFailure::Stopped:
          throw sdk::RetryableError("cannot connect to PostgreSQL: the sink is closing");
        case pg::ConnectFailure::Unreachable:
          note_unreachable(error->message);
          break;
      }
      // (An attempt that ran to the deadline ends a hair before it: that is the end too.)
      const auto left = deadline - Clock::now();
      if (left < 50ms)
        throw sdk::RetryableError("cannot connect to PostgreSQL (tried for reconnect_timeout, " +
                                  kit::format_duration(reconnect_timeout_) + "): " + error->message);
      if (!stop_.wait_for(std::min<Clock::duration>(backoff.next(), left)))
        throw sdk::RetryableError("cannot connect to PostgreSQL: the sink is closing");
    }
  }

  // connect(), for a wait whose failure is the caller's to report.
  void await_server(Slot& slot, Clock::time_point deadline) {
    try {
      connect(slot, deadline);
    } catch (const std::exception& e) {
      log(sdk::LogLevel::Debug, std::string("still waiting for PostgreSQL: ") + e.what());
    }
  }

  // One warning per outage (and a counter in the status file), not one per attempt.
  void note_unreachable(const std::string& message) {
    if (outage_.failed()) {
      count("destination_unreachable");
      log(sdk::LogLevel::Warn, "PostgreSQL is unreachable (" + message + "); each write attempt waits up to " +
                                   "reconnect_timeout (" + kit::format_duration(reconnect_timeout_) + ") for it, and " +
                                   "the sink stops in Error after the runtime's 5 attempts (about 5 x " +
                                   "reconnect_timeout + 3 s)");
    } else {
      log(sdk::LogLevel::Debug, "PostgreSQL still unreachable: " + message);
    }
  }

  void note_connected() {
    const uint64_t attempts = outage_.attempts();
    if (auto lasted = outage_.recovered()) {
      count("destination_reconnected");
      log(sdk::LogLevel::Info, "reconnected to PostgreSQL after " + kit::format_duration(*lasted) +
                                   " unreachable (" + std::to_string(attempts) + " failed attempts)");
    }
  }

  // In open(): connect and authenticate now, so a wrong password, a missing database or schema,
  // or a missing privilege stops the sink at start instead of at the first record (which may
  // be days away on a quiet topic). A server that cannot be reached is not a configuration
  // error: a warning and the destination_unreachable counter, and the sink starts anyway.
  void health_check() {
    Slot& slot = slots_.emplace_back();
    slot.conn = new_connection();
    auto error = slot.conn->connect(Clock::now() + std::clamp<std::chrono::milliseconds>(
                                                       reconnect_timeout_, kMinConnectAttempt, kHealthCheckWait),
                                    stop_);
    if (error) {
      switch (error->kind) {
        case pg::ConnectFailure::BadOption:
          throw sdk::FatalError("connection_string: " + error->message + " (a configuration error, not retried)");
        case pg::ConnectFailure::Refused:
          throw sdk::FatalError("cannot connect to PostgreSQL: " + error->message);
        case pg::ConnectFailure::Stopped:
        case pg::ConnectFailure::Unreachable:
          note_unreachable(error->message + "; the sink starts and connects when it can");
          return;
      }
    }
    try {
      check_schema(*slot.conn);
    } catch (const sdk::RetryableError& e) {  // lost right after connecting: an outage, not a mistake
      slot.conn->disconnect();
      note_unreachable(e.what());
      return;
    }
    log(sdk::LogLevel::Info, "connected to PostgreSQL " + std::to_string(slot.conn->server_version() / 10000) +
                                 ": schema " + schema_ + " usable");
  }

  // The schema exists and the sink's role may use it (and create tables in it with
  // auto_create_table): checked once at start, with the server's catalog.
  void check_schema(pg::Connection& c) {
    const auto rows = c.query(
        "SELECT n.oid IS NOT NULL, coalesce(has_schema_privilege(n.oid, 'USAGE'), false), "
        "coalesce(has_schema_privilege(n.oid, 'CREATE'), false), current_user, current_database() "
        "FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1",
        {schema_}, "checking schema " + schema_);
    if (rows.empty() || rows[0].size() < 5) throw sdk::RetryableError("checking schema " + schema_ + ": no answer");
    const auto& r = rows[0];
    const std::string role = r[3].value_or("?"), database = r[4].value_or("?");
    if (r[0] != "t")
      throw sdk::FatalError("schema \"" + schema_ + "\" does not exist in database " + database +
                            " (create it, or set the `schema` option)");
    if (r[1] != "t")
      throw sdk::FatalError("role " + role + " has no USAGE privilege on schema \"" + schema_ + "\" (GRANT USAGE ON " +
                            "SCHEMA ... TO " + role + ")");
    if (auto_create_ && r[2] != "t")
      throw sdk::FatalError("role " + role + " has no CREATE privilege on schema \"" + schema_ + "\", which " +
                            "auto_create_table needs (GRANT CREATE ON SCHEMA ... TO " + role + ", or create the " +
                            "tables and set auto_create_table = false)");
  }

  // Commits each stream when it has been idle for kStreamIdle or open for commit_interval; while
  // the server is unreachable and nothing is connected, tries to connect now and then, so the
  // recovery is logged (and counted) even when no record comes.
  void committer_main() {
    kit::Backoff probe_backoff({.initial = 1000ms, .max = 10000ms});
    auto next_probe = Clock::now();
    std::unique_lock lock(mutex_);
    while (!closing_) {
      const auto now = Clock::now();
      std::optional<Clock::time_point> next;
      bool ended = false;
      for (auto& slot : slots_) {
        if (!slot.stream) continue;
        const auto due = std::min(slot.stream->last_write + kStreamIdle, slot.stream->opened + commit_interval_);
        if (now >= due) {
          end_stream(slot);
          ended = true;
          break;  // end_stream may take a while: look at the clock again
        }
        next = next ? std::min(*next, due) : due;
      }
      if (ended) continue;
      if (outage_.active() && now >= next_probe && !connected()) {
        lock.unlock();  // a connection attempt of its own: writes go on meanwhile
        auto conn = new_connection();
        const bool ok = !conn->connect(Clock::now() + 2s, stop_);
        lock.lock();
        if (ok) {
          probe_backoff.reset();
          Slot* home = nullptr;
          for (auto& s : slots_)
            if (!s.stream && !(s.conn && s.conn->ok())) home = &s;
          if (home) home->conn = std::move(conn);
          note_connected();
        }
        next_probe = Clock::now() + probe_backoff.next();
        continue;
      }
      auto until = next.value_or(now + 1s);
      if (outage_.active()) until = std::min(until, std::max(next_probe, now + 10ms));
      wake_.wait_until(lock, until);
    }
  }

  bool connected() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.conn && s.conn->ok(); });
  }

  // ------------------------------------------------------------------ tables, layouts

  void check_format(const pmq_batch& batch) const {
    const auto mode = options_.payload_mode;
    const bool fits = mode == pg::PayloadMode::Bytea ||
                      ((mode == pg::PayloadMode::Jsonb || mode == pg::PayloadMode::Columns) &&
                       batch.payload_format == PMQ_PAYLOAD_JSON) ||
                      (mode == pg::PayloadMode::Text &&
                       (batch.payload_format == PMQ_PAYLOAD_TEXT || batch.payload_format == PMQ_PAYLOAD_JSON));
    if (fits) return;
    const std::string needs = mode != pg::PayloadMode::Text ? "schema = \"json\"" : "schema = \"text\" or \"json\"";
    throw sdk::FatalError("topic '" + std::string(batch.topic) + "': payload_mode '" +
                          std::string(pg::to_string(mode)) + "' needs " + needs + ", but the topic's schema is '" +
                          (batch.schema ? batch.schema : "?") + "'");
  }

  TopicTable& table_for(const std::string& topic) {
    if (auto it = tables_.find(topic); it != tables_.end()) return it->second;
    auto resolved = template_->resolve(topic);
    if (!resolved) throw sdk::FatalError("target_table for topic '" + topic + "': " + resolved.error());
    auto name = dest::sanitize_name(resolved.value(), dest::NamePolicy::SqlIdentifier);
    if (!name) throw sdk::FatalError("target_table for topic '" + topic + "': " + name.error());
    auto table = pg::TableName::make(schema_, name.value());
    if (!table) throw sdk::FatalError("target_table for topic '" + topic + "': " + table.error());
    auto [it, _] =
        tables_.emplace(topic, TopicTable{std::move(table).value(), schema_ + "." + name.value(), false, nullptr});
    return it->second;
  }


  // The table's columns (name, type) in order; nullopt when it does not exist. Columns of a type
  // the sink does not write are left out (logged).
  std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing_columns(pg::Connection& c,
                                                                                      const TopicTable& target) {
    const auto rows = c.query("SELECT a.attname, format_type(a.atttypid, a.atttypmod), c.oid IS NOT NULL "
                              "FROM (SELECT to_regclass($1) AS oid) c LEFT JOIN pg_attribute a ON a.attrelid = c.oid "
                              "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                              {target.table.sql()}, "looking up table " + target.display);
    if (rows.empty() || rows[0][2] != "t") return std::nullopt;
    std::vector<std::pair<std::string, pg::ColumnType>> out;
    for (const auto& row : rows) {
      if (!row[0]) continue;
      const std::string name = *row[0], type = row[1].value_or("");
      auto ct = type == "timestamp with time zone" ? std::optional(pg::ColumnType::Timestamptz)
                                                   : pg::parse_column_type(type);
      if (!ct) {
        log(sdk::LogLevel::Warn, "table " + target.display + ": column '" + name + "' has type " + type +
                                     ", which columns mode does not write; it is left alone");
        continue;
      }
      out.emplace_back(name, *ct);
    }
    return out;
  }

  void set_layout(TopicTable& target, std::vector<pg::Column> payload) {
    pg::LayoutOptions lo = options_;
    lo.payload_columns = std::move(payload);
    auto layout = pg::make_layout(lo);
    if (!layout) throw sdk::FatalError("table " + target.display + ": table layout: " + layout.error());
    target.encoder = std::make_unique<pg::RowEncoder>(std::move(layout).value());
  }

  // Columns mode without declared columns: on a topic's first batch the layout is the existing
  // table's columns (if any) plus the batch's inferred ones (created, or added with
  // auto_add_columns); on later batches, auto_add_columns adds the fields not seen before.
  // Added columns are committed on their own, before the batch's transaction.
  void prepare_inferred(pg::Connection& conn, TopicTable& target, const pmq_batch& batch) {
    if (target.ready && !auto_add_) return;
    const auto reserved = pg::reserved_column_names(options_.write_mode, options_.include_metadata);
    auto is_reserved = [&](const std::string& n) { return std::find(reserved.begin(), reserved.end(), n) != reserved.end(); };
    const pg::InferResult inferred = pg::infer_columns(batch, reserved);
    for (const auto& note : inferred.notes)
      log(sdk::LogLevel::Warn, "topic '" + std::string(batch.topic) + "': " + note);

    std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing;
    std::vector<pg::Column> payload;
    if (!target.ready) {
      existing = existing_columns(conn, target);
      if (!existing && !auto_create_)
        throw sdk::FatalError("table " + target.display +
                              " does not exist and auto_create_table is off (create it, or turn auto_create_table on)");
      if (existing)
        for (const auto& [name, type] : *existing)
          if (!is_reserved(name)) payload.push_back(pg::Column{name, type, pg::Source::Field, name, false});
    } else {
      for (const auto& c : target.encoder->layout().columns)
        if (c.source == pg::Source::Field) payload.push_back(pg::Column{c.name, c.type, c.source, c.field, false});
    }
    const bool table_exists = target.ready || existing.has_value();
    std::vector<pg::Column> added;
    for (const auto& c : inferred.columns) {
      auto it = std::find_if(payload.begin(), payload.end(), [&](const pg::Column& p) { return p.name == c.name; });
      if (it != payload.end()) {
        it->field = c.field;
        continue;
      }
      if (table_exists && !auto_add_) continue;
      payload.push_back(c);
      if (table_exists) added.push_back(c);
    }
    if (target.ready && added.empty()) return;
    if (payload.empty())
      throw sdk::FatalError("topic '" + std::string(batch.topic) + "': payload_mode 'columns' found no fields to make " +
                            "columns of in the first batch (no JSON objects with fields); declare `columns`");
    set_layout(target, std::move(payload));
    if (!table_exists) {
      conn.run_ddl(pg::create_table_sql(target.table, target.encoder->layout()), "creating table " + target.display);
    } else if (!added.empty()) {
      auto sql = pg::add_columns_sql(target.table, added);
      if (!sql) throw sdk::FatalError("table " + target.display + ": " + sql.error());
      conn.run_ddl(sql.value(), "adding columns to " + target.display);
      std::string names;
      for (const auto& c : added) names += (names.empty() ? "" : ", ") + c.name + " " + std::string(pg::sql_type(c.type));
      log(sdk::LogLevel::Info, "table " + target.display + ": added columns " + names);
    }
    target.ready = true;
  }

  void prepare_table(pg::Connection& c, TopicTable& target) {
    if (auto_create_) {
      c.run_ddl(pg::create_table_sql(target.table, encoder_->layout()), "creating table " + target.display);
    } else {
      const auto rows = c.query("SELECT to_regclass($1) IS NOT NULL", {target.table.sql()},
                                "looking up table " + target.display);
      if (rows.empty() || rows[0][0] != "t")
        throw sdk::FatalError("table " + target.display +
                              " does not exist and auto_create_table is off (create it, or turn auto_create_table on)");
    }
    target.ready = true;
  }

  std::string conninfo_;          // secret: never logged
  pg::ConnOptions conn_options_;  // conninfo_ parsed (holds the password too: never logged)
  std::chrono::milliseconds commit_interval_{1000};
  std::chrono::milliseconds reconnect_timeout_{15000};
  bool streaming_ = true;  // batches may share a COPY (insert and append modes, commit_interval > 0)
  size_t max_open_tables_ = 4;
  // Everything below: write calls, the hooks and the committer thread.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Slot> slots_;  // a deque: slots keep their address as more are added
  std::thread committer_;
  bool closing_ = false;
  kit::StopSignal stop_;  // close(): every reconnect wait ends
  kit::Outage outage_;
  // Insert mode: partitions assigned whose first batch has not been looked at (probe_replay),
  // and partitions whose batches go through staging until a merge finds no replayed row.
  std::set<Partition> unprobed_, catching_up_;
  std::optional<dest::NameTemplate> template_;
  std::string schema_;
  bool auto_create_ = true;
  pg::LayoutOptions options_;
  bool infer_ = false;  // columns mode without declared columns: a layout per topic
  bool auto_add_ = false;
  std::unique_ptr<pg::RowEncoder> encoder_;  // the shared layout (all modes but inferred columns)
  std::optional<pg::TableName> staging_;
  std::unordered_map<std::string, TopicTable> tables_;
};

PICOMQ_SINK_PLUGIN(PostgresSink)
