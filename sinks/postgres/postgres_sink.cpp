// PostgreSQL sink: payload modes jsonb / text / bytea / columns (typed columns, declared or
// inferred per topic, auto_add_columns), write modes insert (pico_id primary key, replays do
// nothing) / upsert (upsert_key, last record wins) / append, optional metadata columns, tables
// auto-created per topic from a name template. Rows go out with binary COPY
// (postgres/row_encoder.h). In insert and append modes consecutive batches into one table share
// one COPY and one transaction: a segment of the kit's accumulator (postgres/segment.h), one per
// table, each on a connection of its own from a small pool (postgres/pool.h); a batch's write
// completes when its segment commits, and a segment commits on its own thread while the next
// one for its table streams. Insert mode after a partition assignment (start-up, rebalance: the
// only times a replay can come) streams through a staging table and INSERT ... ON CONFLICT DO
// NOTHING until a merge finds no row written before (postgres/replay.h). Options:
// postgres/config.h. Docs: docs/sinks/postgres.md, docs/sinks/postgres-encoding.md.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "picomq/kit/accumulator.hpp"
#include "picomq/kit/metadata.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/postgres/connection.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"
#include "postgres/config.h"
#include "postgres/pool.h"
#include "postgres/replay.h"
#include "postgres/row_encoder.h"
#include "postgres/segment.h"
#include "postgres/sql.h"

namespace {

namespace sdk = picomq::sdk;
namespace pg = picomq::postgres;
namespace kit = picomq::kit;
using pg::Clock;
using namespace std::chrono_literals;

// One topic's table. Columns mode with inferred columns gives each topic its own layout (and
// encoder); the other modes share the sink's.
struct TopicTable {
  pg::TableName table;
  std::string display;  // schema.table for messages (unquoted)
  bool ready = false;   // created (auto_create_table) or found to exist
  std::shared_ptr<pg::RowEncoder> encoder;
  std::shared_ptr<const pg::TableLayout> layout;
  // Bumped when auto_add_columns changes the layout: batches encoded before and after go into
  // different segments (their COPYs name different columns).
  uint32_t generation = 0;
  // Change events without upsert_key: the table's key columns (its primary key, or the fields of
  // its first change's key).
  std::vector<std::string> key;
};

// A segment with no new batch for this long is committed: the runtime has nothing more to send
// for now (it sends the next batch as soon as a write is accepted), so waiting longer would only
// hold records back.
constexpr auto kSegmentIdle = 10ms;
// Batches one COPY may hold before it commits.
constexpr size_t kSegmentBatches = 64;
// The start-up health check waits at most this long for an unreachable server (then the sink
// starts and keeps trying in the background), and at least this long.
constexpr auto kHealthCheckWait = 5s;
constexpr auto kMinConnectAttempt = 1s;

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
  // Writes per block pending at once: a full segment of 64 batches committing, and as many again
  // streaming into the next one meanwhile.
  static constexpr uint32_t max_in_flight = 2 * kSegmentBatches;
  // A redriven dead letter is written like a replayed record: by pico_id (insert) or its key.
  static constexpr bool takes_redrives = true;
  // Change events (docs/changes.md): upserts, patches and deletes by key, and truncates, each
  // batch's in its transaction (write_mode upsert).
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static inline const kit::OptionTable<pg::Settings>& options = pg::option_table();
  // Cross-option checks, with file positions (picomq-connect --check; the runtime before open()).
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { pg::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;  // a host that skips validate() (ABI < 2.2) gets the same checks
    auto plan = pg::plan(config, problems);
    problems.throw_if_any();
    const pg::Settings& s = plan->settings;
    reconnect_timeout_ = s.reconnect_timeout;
    template_ = std::move(plan->target_table);
    schema_ = s.schema;
    auto_create_ = s.auto_create_table;
    layout_options_ = plan->layout;
    infer_ = plan->infer_columns;
    auto_add_ = s.auto_add_columns;
    if (!layout_options_.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);  // pico_headers is their only use
    // Upsert, and commit_interval 0: a transaction per batch, committed in its write, one write
    // at a time (a failed batch retried after a later one landed would undo last-record-wins).
    if (!plan->streaming) declare_max_in_flight(1);
    if (!infer_) {
      shared_layout_ = std::make_shared<const pg::TableLayout>(pg::make_layout(layout_options_).value());
      shared_encoder_ = std::make_shared<pg::RowEncoder>(*shared_layout_);
    }

    // A connection per open segment, and one for a segment committing beside them.
    auto log_fn = [this](sdk::LogLevel level, const std::string& m) { log(level, m); };
    auto count_fn = [this](const char* name, uint64_t n) { count(name, n); };
    pool_ = std::make_unique<pg::ConnectionPool>(s.connection_string, plan->conn_options,
                                                 static_cast<size_t>(s.max_open_tables) + 1, reconnect_timeout_,
                                                 pg::ConnectionPool::Hooks{log_fn, count_fn});
    segments_ = std::make_unique<pg::CopySegment::Shared>(
        pg::CopySegment::Shared{*pool_, replays_, pg::TableName::temp(pg::kStagingTable).value(), log_fn, count_fn});
    log(sdk::LogLevel::Info, "postgres sink: tables " + schema_ + "." + std::string(template_->source()) +
                                 ", payload_mode " + std::string(pg::to_string(layout_options_.payload_mode)) +
                                 (infer_ ? " (inferred)" : "") + ", write_mode " +
                                 std::string(pg::to_string(layout_options_.write_mode)) +
                                 (layout_options_.include_metadata ? ", with metadata" : ", without metadata"));
    health_check();
    // Streaming: segments commit on the accumulator's committer thread, each on its own
    // connection, so the next COPY into a table streams while the previous one's COMMIT runs (the
    // server's backend finishing one COPY and another starting the next, side by side). Otherwise
    // each batch's transaction commits in its write.
    accumulator_ = std::make_unique<kit::Accumulator>(
        kit::AccumulatorLimits{.commit_interval = plan->streaming ? s.commit_interval : 0ms,
                               .idle = kSegmentIdle,
                               .max_batches = kSegmentBatches,
                               .max_open = static_cast<size_t>(s.max_open_tables),
                               .background_commits = plan->streaming},
        [this](const kit::CommitReport& r) { committed(r); });
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending write = pending();
    const pmq_batch& raw = batch.raw();
    if (raw.record_count == 0) {
      write.done();
      return write;
    }
    const auto deadline = Clock::now() + reconnect_timeout_;  // this write attempt's wait for the server
    // Its table lookup and replay check take time: the segment it joins must not commit as idle meanwhile.
    const auto preparing = accumulator_->preparing();
    Encoded e;
    try {
      std::lock_guard lock(mutex_);
      e = prepare(raw, write, deadline);
    } catch (...) {
      count("failed_writes");
      throw;
    }
    if (e.rows == 0 && !e.truncate) {  // every record rejected
      write.done();
      return write;
    }
    // The segment that takes this batch completes `write` when it commits. A failure to open or
    // fill one fails this write (and, for a broken COPY, retries the segment's earlier ones).
    auto failing = [this](auto&& step) {
      try {
        return step();
      } catch (...) {
        count("failed_writes");
        throw;
      }
    };
    accumulator_->append(
        e.key, write, {e.data.size(), e.rows},
        [&] {
          return failing([&] {
            auto lease = pool_->acquire(deadline);
            return std::make_unique<pg::CopySegment>(*segments_, std::move(lease), e.table, e.staged, deadline);
          });
        },
        [&](kit::Segment& s) {
          failing([&] { static_cast<pg::CopySegment&>(s).add(raw, e.data, e.rows, e.staged, deadline); });
        });
    std::lock_guard lock(mutex_);
    e.encoder->recycle(std::move(e.data));  // sent: its memory serves a later batch
    return write;
  }

  // The runtime seals what the sink holds (quiet partition, revoke, shutdown): commit every segment.
  void flush(std::chrono::milliseconds /*timeout*/) { accumulator_->flush(); }

  // A partition assigned (start-up, rebalance) may replay records written before a crash: its
  // first batch tells (probe_replay).
  void partitions_assigned(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    if (layout_options_.write_mode != pg::WriteMode::Insert) return;
    for (const auto& tp : partitions) replays_.assigned({std::string(tp.topic), tp.partition});
  }

  void partitions_revoked(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    for (const auto& tp : partitions) replays_.revoked({std::string(tp.topic), tp.partition});
  }

  void close() {
    if (pool_) pool_->stop();                 // first: a reconnect wait or a background connection attempt ends now
    if (accumulator_) accumulator_->close();  // commits what is open
    if (pool_) pool_->close();
  }

 private:
  // The connection for a write's lookups and schema changes, leased on first use.
  using Db = std::function<pg::Connection&()>;

  // A batch ready for a segment.
  struct Encoded {
    std::string key;  // the segment's: the table, and its layout generation
    pg::CopySegment::Table table;
    std::string data;  // the COPY data
    size_t rows = 0;
    bool staged = false;
    bool truncate = false;  // change events: the batch empties its table (with no row after it, maybe)
    std::shared_ptr<pg::RowEncoder> encoder;  // hands the buffer back
  };

  // ------------------------------------------------------------------ writes

  // The batch's table made ready (created, columns added), its partition probed for a replay,
  // its rows encoded; rejected records go to `write`. mutex_ held. Throws the batch's outcome.
  Encoded prepare(const pmq_batch& batch, sdk::Pending& write, Clock::time_point deadline) {
    check_format(batch);
    TopicTable& target = table_for(batch.topic);
    const pg::Partition tp{batch.topic, batch.partition};
    const bool probe = replays_.unprobed(tp);
    if (infer_ || !target.ready || probe) {
      // Lookups and schema changes on a connection of their own, outside any COPY, taken when
      // one is needed (inferred columns need none once the table is known and nothing is added).
      pg::ConnectionPool::Lease lease;
      const Db db = [&]() -> pg::Connection& {
        if (!lease) lease = pool_->acquire(deadline);
        return *lease;
      };
      try {
        if (infer_) prepare_inferred(db, target, batch);
        else if (!target.ready) prepare_table(db(), target);
        if (probe) probe_replay(db(), target, batch);
      } catch (const sdk::RetryableError& e) {
        if (lease && !lease->ok()) pool_->await_server(*lease, e.what(), deadline);
        throw;
      }
    }
    Encoded out;
    out.encoder = target.encoder ? target.encoder : shared_encoder_;
    const std::shared_ptr<const pg::TableLayout>& layout = target.layout ? target.layout : shared_layout_;
    pg::EncodeResult encoded = out.encoder->encode(batch);
    if (!encoded.ok()) throw sdk::FatalError("topic '" + std::string(batch.topic) + "': " + encoded.error);
    for (const auto& r : encoded.rejected) write.reject(r.record_index, r.reason);
    out.key = segment_key(target);
    out.table = pg::CopySegment::Table{&target.table, target.display, layout};
    out.data = std::move(encoded.copy_data);
    out.rows = encoded.rows;
    out.truncate = encoded.truncate;
    // Upsert always merges through staging; insert while the partition replays.
    out.staged = layout->write_mode == pg::WriteMode::Upsert ||
                 (layout->write_mode == pg::WriteMode::Insert && replays_.staged(tp));
    return out;
  }

  // The accumulator's report of a commit (or of a segment that broke).
  void committed(const kit::CommitReport& r) {
    if (!r.ok) {
      count("failed_writes", r.batches);
      log(sdk::LogLevel::Debug,
          "table " + r.key + ": " + std::to_string(r.batches) + " batches failed (" + r.trigger + "): " + r.error);
      return;
    }
    log(sdk::LogLevel::Debug, "table " + r.key + ": committed " + std::to_string(r.records) + " rows of " +
                                  std::to_string(r.batches) + " batches in one COPY (" + r.trigger + "; open " +
                                  std::to_string(r.open_for.count()) + " ms, commit " + std::to_string(r.took.count()) +
                                  " ms)");
  }

  // The first batch of a partition after an assignment: is its first record in the table
  // already? Then it is a replay (a crash or a rebalance before the offsets were committed):
  // the partition's batches stream through staging until a merge finds nothing written before.
  void probe_replay(pg::Connection& c, const TopicTable& target, const pmq_batch& batch) {
    const pg::Partition p{batch.topic, batch.partition};
    const int64_t first = batch.records[0].offset;
    const bool replaying = !c.query("SELECT 1 FROM " + target.table.sql() + " WHERE \"pico_id\" = $1",
                                    {kit::record_id(batch.topic, batch.partition, first)},
                                    "looking for replayed records in " + target.display)
                                .empty();
    replays_.probed(p, replaying);
    if (replaying)
      log(sdk::LogLevel::Info, "table " + target.display + ": " + p.first + "[" + std::to_string(p.second) +
                                   "] at offset " + std::to_string(first) + " was written before (a replay after a " +
                                   "restart or a rebalance): streaming through the staging table until past it");
  }

  // ------------------------------------------------------------------ tables, layouts

  void check_format(const pmq_batch& batch) const {
    const auto mode = layout_options_.payload_mode;
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
    auto name = kit::sanitize_name(resolved.value(), kit::NamePolicy::SqlIdentifier);
    if (!name) throw sdk::FatalError("target_table for topic '" + topic + "': " + name.error());
    auto table = pg::TableName::make(schema_, name.value());
    if (!table) throw sdk::FatalError("target_table for topic '" + topic + "': " + table.error());
    auto [it, _] =
        tables_.emplace(topic, TopicTable{.table = std::move(table).value(), .display = schema_ + "." + name.value()});
    return it->second;
  }

  // The table's columns (name, type) in order; nullopt when it does not exist. Columns of a type
  // the sink does not write are left out (logged).
  std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing_columns(pg::Connection& c,
                                                                                      const TopicTable& target) {
    const auto rows = c.query(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), c.oid IS NOT NULL "
        "FROM (SELECT to_regclass($1) AS oid) c LEFT JOIN pg_attribute a ON a.attrelid = c.oid "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        {target.table.sql()}, "looking up table " + target.display);
    if (rows.empty() || rows[0][2] != "t") return std::nullopt;
    std::vector<std::pair<std::string, pg::ColumnType>> out;
    for (const auto& row : rows) {
      if (!row[0]) continue;
      const std::string name = *row[0], type = row[1].value_or("");
      auto ct =
          type == "timestamp with time zone" ? std::optional(pg::ColumnType::Timestamptz) : pg::parse_column_type(type);
      if (!ct) {
        std::string message = "table " + target.display + ": column '" + name + "' has type ";
        message += type;
        message += ", which columns mode does not write; it is left alone";
        log(sdk::LogLevel::Warn, message);
        continue;
      }
      out.emplace_back(name, *ct);
    }
    return out;
  }

  void set_layout(TopicTable& target, std::vector<pg::Column> payload) {
    pg::LayoutOptions lo = layout_options_;
    lo.payload_columns = std::move(payload);
    if (lo.upsert_key.empty()) lo.upsert_key = target.key;  // change events: the table's own key
    auto layout = pg::make_layout(lo);
    if (!layout) throw sdk::FatalError("table " + target.display + ": table layout: " + layout.error());
    target.layout = std::make_shared<const pg::TableLayout>(std::move(layout).value());
    target.encoder = std::make_shared<pg::RowEncoder>(*target.layout);
  }

  // Columns mode without declared columns: on a topic's first batch the layout is the existing
  // table's columns (if any) plus the batch's inferred ones (created, or added with
  // auto_add_columns); on later batches, auto_add_columns adds the fields not seen before.
  // Added columns are committed on their own, before the batch's transaction.
  void prepare_inferred(const Db& db, TopicTable& target, const pmq_batch& batch) {
    if (target.ready && !auto_add_) return;
    const auto reserved = pg::reserved_column_names(layout_options_.write_mode, layout_options_.include_metadata);
    auto is_reserved = [&](const std::string& n) {
      return std::find(reserved.begin(), reserved.end(), n) != reserved.end();
    };
    const pg::InferResult inferred = pg::infer_columns(batch, reserved);
    for (const auto& note : inferred.notes)
      log(sdk::LogLevel::Warn, "topic '" + std::string(batch.topic) + "': " + note);

    std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing;
    std::vector<pg::Column> payload;
    if (!target.ready) {
      existing = existing_columns(db(), target);
      if (!existing && !auto_create_)
        throw sdk::FatalError("table " + target.display +
                              " does not exist and auto_create_table is off (create it, or turn auto_create_table on)");
      if (layout_options_.changes && layout_options_.upsert_key.empty())
        target.key = existing ? primary_key(db(), target) : change_key_fields(target, batch);
      if (existing)
        for (const auto& [name, type] : *existing)
          if (!is_reserved(name)) payload.push_back(pg::Column{name, type, pg::Source::Field, name, false});
    } else {
      for (const auto& c : target.layout->columns)
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
      throw sdk::FatalError("topic '" + std::string(batch.topic) +
                            "': payload_mode 'columns' found no fields to make " +
                            "columns of in the first batch (no JSON objects with fields); declare `columns`");
    if (!table_exists) {
      set_layout(target, std::move(payload));
      db().run_ddl(pg::create_table_sql(target.table, *target.layout), "creating table " + target.display);
    } else if (!added.empty()) {
      auto sql = pg::add_columns_sql(target.table, added);
      if (!sql) throw sdk::FatalError("table " + target.display + ": " + sql.error());
      // The open COPY into this table would hold the ALTER's lock back until it commits: commit it now.
      if (target.ready) accumulator_->seal(segment_key(target), "columns added");
      db().run_ddl(sql.value(), "adding columns to " + target.display);
      set_layout(target, std::move(payload));
      if (target.ready) ++target.generation;
      std::string names;
      for (const auto& c : added)
        names += (names.empty() ? "" : ", ") + c.name + " " + std::string(pg::sql_type(c.type));
      log(sdk::LogLevel::Info, "table " + target.display + ": added columns " + names);
    } else {
      set_layout(target, std::move(payload));
    }
    target.ready = true;
  }

  // An existing table's primary key columns, in key order: what change events are applied by.
  std::vector<std::string> primary_key(pg::Connection& c, const TopicTable& target) {
    const auto rows = c.query(
        "SELECT a.attname FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY k.n",
        {target.table.sql()}, "looking up the primary key of " + target.display);
    std::vector<std::string> key;
    for (const auto& row : rows)
      if (row[0]) key.push_back(*row[0]);
    if (key.empty())
      throw sdk::FatalError("table " + target.display +
                            " has no primary key to apply change events by: give it one, or set upsert_key");
    return key;
  }

  // A new table's key: the fields of the first change's key object in its first batch.
  std::vector<std::string> change_key_fields(const TopicTable& target, const pmq_batch& batch) {
    for (size_t i = 0; i < batch.record_count; ++i) {
      const pmq_bytes key = pmq_record_key_json(&batch, pmq_batch_record(&batch, i));
      if (!key.data) continue;
      simdjson::dom::parser parser;
      simdjson::dom::object object;
      if (parser.parse(reinterpret_cast<const char*>(key.data), key.size).get_object().get(object)) continue;
      std::vector<std::string> fields;
      for (const simdjson::dom::key_value_pair member : object) {
        auto name = kit::sanitize_name(member.key, kit::NamePolicy::SqlIdentifier);
        if (!name)
          throw sdk::FatalError("table " + target.display + ": key field '" + std::string(member.key) +
                                "': " + name.error());
        fields.push_back(std::move(name).value());
      }
      if (!fields.empty()) return fields;
    }
    throw sdk::FatalError("table " + target.display +
                          ": the first batch of changes names no key to create the table with (set upsert_key)");
  }

  std::string segment_key(const TopicTable& target) const {
    return target.generation == 0 ? target.display : target.display + " #" + std::to_string(target.generation);
  }

  void prepare_table(pg::Connection& c, TopicTable& target) {
    if (auto_create_) {
      c.run_ddl(pg::create_table_sql(target.table, *shared_layout_), "creating table " + target.display);
    } else {
      const auto rows =
          c.query("SELECT to_regclass($1) IS NOT NULL", {target.table.sql()}, "looking up table " + target.display);
      if (rows.empty() || rows[0][0] != "t")
        throw sdk::FatalError("table " + target.display +
                              " does not exist and auto_create_table is off (create it, or turn auto_create_table on)");
    }
    target.ready = true;
  }

  // ------------------------------------------------------------------ start-up health check

  // In open(): connect and authenticate now, so a wrong password, a missing database or schema,
  // or a missing privilege stops the sink at start instead of at the first record (which may
  // be days away on a quiet topic). A server that cannot be reached is not a configuration
  // error: a warning and the destination_unreachable counter, and the sink starts anyway.
  void health_check() {
    auto lease = pool_->connect_at_start(
        std::clamp<std::chrono::milliseconds>(reconnect_timeout_, kMinConnectAttempt, kHealthCheckWait));
    if (!lease) return;
    try {
      check_schema(*lease);
    } catch (const sdk::RetryableError& e) {  // lost right after connecting: an outage, not a mistake
      lease->disconnect();
      pool_->note_unreachable(e.what());
      return;
    }
    log(sdk::LogLevel::Info, "connected to PostgreSQL " + std::to_string(lease->server_version() / 10000) +
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

  std::chrono::milliseconds reconnect_timeout_{15000};
  std::optional<kit::NameTemplate> template_;
  std::string schema_;
  bool auto_create_ = true;
  pg::LayoutOptions layout_options_;
  bool infer_ = false;  // columns mode without declared columns: a layout per topic
  bool auto_add_ = false;
  std::shared_ptr<const pg::TableLayout> shared_layout_;  // all modes but inferred columns
  std::shared_ptr<pg::RowEncoder> shared_encoder_;
  pg::Replays replays_;
  std::unique_ptr<pg::ConnectionPool> pool_;
  std::unique_ptr<pg::CopySegment::Shared> segments_;
  // Writers' state: tables, layouts, encoders (not thread-safe). Never held while waiting for a
  // segment: commits run on other threads and take none of it.
  std::mutex mutex_;
  std::unordered_map<std::string, TopicTable> tables_;
  std::unique_ptr<kit::Accumulator> accumulator_;  // last: its threads stop before the rest goes
};

PICOMQ_SINK_PLUGIN(PostgresSink)
