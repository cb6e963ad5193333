// PostgreSQL sink: payload modes jsonb / text / bytea / columns (typed columns, declared or
// inferred per topic, auto_add_columns), write modes insert (pico_id primary key, replays do
// nothing) / upsert (upsert_key, last record wins) / append, optional metadata columns, tables
// auto-created per topic from a name template. Rows go out with binary COPY
// (postgres/row_encoder.h); in insert and append modes consecutive batches into one table share
// one COPY and one transaction for up to commit_interval (each batch's write completes when that
// transaction commits), else one transaction per batch. Docs: docs/sinks/postgres.md,
// docs/sinks/postgres-encoding.md.
#include <libpq-fe.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"
#include "postgres/conninfo.h"
#include "postgres/row_encoder.h"
#include "postgres/sql.h"

namespace {

namespace sdk = picomq::sdk;
namespace pg = picomq::postgres;
namespace dest = picomq::kit;

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// How a failed statement is reported to the runtime.
enum class Failure { Retry, Fatal };

// SQLSTATE classes (docs/sinks/postgres.md): connection loss, serialization failure, deadlock,
// insufficient resources and server shutdowns are worth a retry; everything else is not.
Failure classify(std::string_view sqlstate, bool connection_bad) {
  if (connection_bad || sqlstate.empty()) return connection_bad ? Failure::Retry : Failure::Fatal;
  if (sqlstate.starts_with("08")) return Failure::Retry;
  if (sqlstate == "40001" || sqlstate == "40P01") return Failure::Retry;
  if (sqlstate.starts_with("53")) return Failure::Retry;
  if (sqlstate.starts_with("57P0")) return Failure::Retry;
  return Failure::Fatal;
}

struct TopicTable {
  pg::TableName table;
  std::string display;  // schema.table for messages (unquoted)
  bool ready = false;   // created (auto_create_table) or found to exist
  // Columns mode with inferred columns: this topic's own layout (else the sink's shared one).
  std::unique_ptr<pg::RowEncoder> encoder;
  bool replaying = false;  // insert mode: batches go through the staging table (see write_raw)
};

using Clock = std::chrono::steady_clock;

// A COPY into one table, in a transaction of its own, that the following batches for that table
// join; their writes complete when it commits (PostgresSink::end_stream).
struct OpenCopy {
  TopicTable* target = nullptr;
  size_t rows = 0;
  Clock::time_point opened, last_write;
  std::vector<sdk::Pending> writes;
};

// A stream with no new batch for this long is committed: the runtime has nothing more to send
// for now (it sends the next batch as soon as a write is accepted), so waiting longer would only
// hold records back.
constexpr auto kStreamIdle = std::chrono::milliseconds(10);

}  // namespace

class PostgresSink : public sdk::BaseSink<PostgresSink> {
 public:
  static constexpr std::string_view sink_name = "postgres";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records into PostgreSQL tables (one per topic) with binary COPY; consecutive batches share a "
      "transaction for up to commit_interval.";
  // Every batch is written by write_batch: batches is the only native plane (rows stay accepted,
  // as for every sink, and are never used since batches are native).
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  // Batches one COPY stream may hold before it commits (the runtime's window per block).
  static constexpr uint32_t max_in_flight = 64;
  static constexpr std::array options{
      pmq_option{.name = "connection_string", .type = PMQ_OPTION_STRING,
                 .flags = PMQ_OPTION_REQUIRED | PMQ_OPTION_SECRET, .default_json = nullptr, .allowed = nullptr,
                 .help = "libpq connection string (key=value or postgresql:// URI). Never logged. The sink sets "
                         "client_encoding to UTF8."},
      pmq_option{.name = "reconnect_timeout", .type = PMQ_OPTION_DURATION, .flags = 0, .default_json = "\"15s\"",
                 .allowed = nullptr,
                 .help = "How long one write keeps trying to reconnect to an unreachable server (with a back-off "
                         "from 250 ms to 2 s) before it fails and the runtime's retry takes over; with the runtime's "
                         "5 attempts a restart of the server of up to about 5 times this long loses nothing and "
                         "keeps the sink running. 0: one connection attempt per write."},
      pmq_option{.name = "commit_interval", .type = PMQ_OPTION_DURATION, .flags = 0, .default_json = "\"1s\"",
                 .allowed = nullptr,
                 .help = "insert and append modes: consecutive batches into one table are written as one COPY in "
                         "one transaction, committed after this long, after 64 batches, when no batch has come for "
                         "10 ms, or when a batch for another table comes. A batch's records (and offsets) are "
                         "acknowledged at that commit. 0: one transaction per batch. upsert mode always commits "
                         "each batch on its own (its writes must land in order)."},
      pmq_option{.name = "target_table", .type = PMQ_OPTION_STRING, .flags = 0, .default_json = "\"{topic}\"",
                 .allowed = nullptr,
                 .help = "Table name template, resolved once per topic: {topic}, {topic_segment[N]} (N from 0, or "
                         "negative from the end). Sanitised to a PostgreSQL identifier (at most 63 bytes, with a hash "
                         "suffix when cut) and always quoted."},
      pmq_option{.name = "schema", .type = PMQ_OPTION_STRING, .flags = 0, .default_json = "\"public\"",
                 .allowed = nullptr, .help = "Schema of the target tables (quoted; it must exist)."},
      pmq_option{.name = "auto_create_table", .type = PMQ_OPTION_BOOL, .flags = 0, .default_json = "true",
                 .allowed = nullptr,
                 .help = "Create a topic's table (CREATE TABLE IF NOT EXISTS) on its first batch. Off: a missing "
                         "table stops the sink in Error naming it."},
      pmq_option{.name = "payload_mode", .type = PMQ_OPTION_STRING, .flags = 0, .default_json = "\"jsonb\"",
                 .allowed = "jsonb|text|bytea|columns",
                 .help = "The payload column: jsonb (schema json), text (schema text or json) or bytea (any schema); "
                         "columns (schema json): top-level fields of JSON objects as typed columns, declared in "
                         "`columns` or inferred from a topic's first batch."},
      pmq_option{.name = "columns", .type = PMQ_OPTION_TABLE, .flags = 0, .default_json = nullptr, .allowed = nullptr,
                 .help = "payload_mode columns: the declared columns, in table order as an array "
                         "[{ name = \"id\", type = \"text\" }, ...], or as a table { id = \"text\", ... } (created in "
                         "name order). Types: text, int4, int8, float8, boolean, jsonb, bytea, timestamptz (from epoch "
                         "ms). Unset: inferred from each topic's first batch (or read from its existing table)."},
      pmq_option{.name = "auto_add_columns", .type = PMQ_OPTION_BOOL, .flags = 0, .default_json = "false",
                 .allowed = nullptr,
                 .help = "payload_mode columns with inferred columns: a field first seen in a later batch adds a "
                         "nullable column (ALTER TABLE ... ADD COLUMN IF NOT EXISTS). Off: such fields are not written."},
      pmq_option{.name = "include_metadata", .type = PMQ_OPTION_BOOL, .flags = 0, .default_json = "true",
                 .allowed = nullptr,
                 .help = "Add the columns pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key (bytea) "
                         "and pico_headers (jsonb)."},
      pmq_option{.name = "write_mode", .type = PMQ_OPTION_STRING, .flags = 0, .default_json = "\"insert\"",
                 .allowed = "insert|upsert|append",
                 .help = "insert: pico_id (topic:partition:offset) is the primary key and a replayed record is "
                         "skipped; upsert: upsert_key is the primary key and the last record per key wins; append: "
                         "plain COPY into the table, a replay writes rows again."},
      pmq_option{.name = "upsert_key", .type = PMQ_OPTION_STRING_LIST, .flags = 0, .default_json = "[]",
                 .allowed = nullptr,
                 .help = "write_mode upsert (required there, refused elsewhere): the key columns, e.g. [\"pico_key\"] "
                         "or payload columns [\"id\"] in columns mode. A record with a missing or null key is rejected."},
  };

  void open(const sdk::Config& config) {
    conninfo_ = config.string("connection_string");
    reconnect_timeout_ = config.duration("reconnect_timeout");
    check_connection_string();
    auto tmpl = dest::NameTemplate::parse(config.string("target_table"));
    if (!tmpl) throw sdk::FatalError("target_table: " + tmpl.error());
    template_.emplace(std::move(tmpl).value());
    schema_ = config.string("schema");
    if (schema_.empty()) throw sdk::FatalError("schema: must not be empty");
    if (auto q = pg::quote_identifier(schema_); !q) throw sdk::FatalError("schema: " + q.error());
    auto_create_ = config.boolean("auto_create_table");

    const std::string payload_mode = config.string("payload_mode"), write_mode = config.string("write_mode");
    auto pm = pg::parse_payload_mode(payload_mode);
    if (!pm) throw sdk::FatalError("payload_mode '" + payload_mode + "' is not supported (jsonb, text, bytea, columns)");
    auto wm = pg::parse_write_mode(write_mode);
    if (!wm) throw sdk::FatalError("write_mode '" + write_mode + "' is not supported (insert, upsert, append)");
    pg::LayoutOptions& lo = options_;
    lo.payload_mode = *pm;
    lo.write_mode = *wm;
    lo.include_metadata = config.boolean("include_metadata");
    if (!lo.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);  // pico_headers is their only use
    lo.upsert_key = config.strings("upsert_key");
    if (*wm == pg::WriteMode::Upsert && lo.upsert_key.empty())
      throw sdk::FatalError("write_mode 'upsert' needs upsert_key (the key columns, e.g. [\"pico_key\"])");
    if (*wm != pg::WriteMode::Upsert && !lo.upsert_key.empty())
      throw sdk::FatalError("upsert_key is only for write_mode 'upsert' (write_mode is '" + write_mode + "')");
    auto_add_ = config.boolean("auto_add_columns");
    commit_interval_ = config.duration("commit_interval");
    streaming_ = commit_interval_.count() > 0 && *wm != pg::WriteMode::Upsert;
    // Writes that complete at once must still be taken one at a time: a failed batch retried
    // after a later one landed would undo last-record-wins.
    if (!streaming_) declare_max_in_flight(1);
    const bool declared = config.has("columns");
    if (*pm != pg::PayloadMode::Columns && declared)
      throw sdk::FatalError("columns is only for payload_mode 'columns'");
    if (*pm != pg::PayloadMode::Columns && auto_add_)
      throw sdk::FatalError("auto_add_columns is only for payload_mode 'columns'");
    if (declared && auto_add_)
      throw sdk::FatalError("auto_add_columns is for inferred columns; it cannot be combined with declared columns");
    if (*pm == pg::PayloadMode::Columns) {
      if (declared) {
        lo.payload_columns = parse_declared_columns(config.json("columns"));
      } else {
        infer_ = true;
        // Check the options now; the payload columns come with each topic's first batch.
        pg::LayoutOptions probe = lo;
        const auto reserved = pg::reserved_column_names(lo.write_mode, lo.include_metadata);
        for (const auto& k : lo.upsert_key)
          if (std::find(reserved.begin(), reserved.end(), k) == reserved.end())
            probe.payload_columns.push_back(pg::Column{k, pg::ColumnType::Text, pg::Source::Field, k, false});
        if (probe.payload_columns.empty())
          probe.payload_columns.push_back(pg::Column{"payload", pg::ColumnType::Text, pg::Source::Field, "payload", false});
        if (auto l = pg::make_layout(probe); !l) throw sdk::FatalError("table layout: " + l.error());
      }
    }
    if (!infer_) {
      auto layout = pg::make_layout(lo);
      if (!layout) throw sdk::FatalError("table layout: " + layout.error());
      encoder_ = std::make_unique<pg::RowEncoder>(std::move(layout).value());
    }
    staging_.emplace(pg::TableName::temp(pg::kStagingTable).value());

    log(sdk::LogLevel::Info, "postgres sink: tables " + schema_ + "." + std::string(template_->source()) +
                                 ", payload_mode " + payload_mode + (infer_ ? " (inferred)" : "") +
                                 ", write_mode " + write_mode +
                                 (lo.include_metadata ? ", with metadata" : ", without metadata"));
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending done = pending();
    std::lock_guard lock(mutex_);
    if (write_raw(batch.raw(), done)) return done;  // in the open COPY: completes when it commits
    done.done();
    return done;
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    if (committer_.joinable()) committer_.join();
    std::lock_guard lock(mutex_);
    end_stream();
    disconnect();
  }

 private:
  // Writes one batch (mutex_ held); its rejected records go to `write`. In a mode that allows it
  // the rows join the table's open COPY and the call returns true: `write` completes at that
  // COPY's commit. Otherwise the batch is committed before the call returns false. A failure
  // throws (the batch's own outcome); a stream it breaks fails every write in it.
  bool write_raw(const pmq_batch& batch, sdk::Pending& write) {
    if (batch.record_count == 0) return false;
    check_format(batch);
    TopicTable& target = table_for(batch.topic);
    // A COPY whose connection broke cannot commit; schema changes and lookups run outside one.
    if (open_ && (!conn_ || PQstatus(conn_) != CONNECTION_OK))
      fail_stream("the connection to PostgreSQL was lost during the COPY into " + open_->target->display);
    if (open_ && (open_->target != &target || !target.ready || (infer_ && auto_add_))) end_stream();
    connect();
    if (infer_) prepare_inferred(target, batch);
    else if (!target.ready) prepare_table(target);
    pg::RowEncoder& encoder = encoder_for(target);

    pg::EncodeResult encoded = encoder.encode(batch);
    if (!encoded.ok()) throw sdk::FatalError("topic '" + std::string(batch.topic) + "': " + encoded.error);
    for (const auto& r : encoded.rejected) write.reject(r.record_index, r.reason);
    if (encoded.rows == 0) return false;

    const pg::WriteMode mode = encoder.layout().write_mode;
    if (streaming_ && (mode == pg::WriteMode::Append || (mode == pg::WriteMode::Insert && !target.replaying))) {
      stream_batch(target, encoder, encoded, write);
      return true;
    }
    end_stream();

    // Insert mode: straight COPY into the table, as append mode does. Its primary key still
    // guarantees each record once: a batch holding records already written (a replay after a
    // crash or a rebalance) fails on it (23505), and is then written through the staging table,
    // which skips them; the table stays on that path until a batch merges without a conflict.
    if (encoder.layout().write_mode == pg::WriteMode::Insert && !target.replaying) {
      run("BEGIN", "BEGIN");
      try {
        copy(pg::copy_sql(target.table, encoder.layout()), encoded.copy_data, target.display);
      } catch (const sdk::FatalError&) {
        rollback();
        if (last_sqlstate_ != "23505") throw;
        start_replay(target);
      } catch (...) {
        rollback();
        throw;
      }
      if (!target.replaying) {
        commit(target.display);
        return false;
      }
    }
    const pg::WriteStatements st = pg::write_statements(target.table, *staging_, encoder.layout());
    run("BEGIN", "BEGIN");
    try {
      if (!st.create_staging.empty()) run(st.create_staging, "creating the staging table");
      copy(st.copy, encoded.copy_data, target.display);
      if (!st.merge.empty()) {
        const size_t inserted = run_counting(st.merge, "writing into " + target.display);
        if (target.replaying && inserted == encoded.rows) target.replaying = false;  // past the replay
      }
    } catch (...) {
      rollback();
      throw;
    }
    commit(target.display);
    return false;
  }

  // Adds the batch's rows to the table's open COPY, opening one (BEGIN, COPY) if there is none.
  void stream_batch(TopicTable& target, pg::RowEncoder& encoder, const pg::EncodeResult& encoded, sdk::Pending& write) {
    const std::string& data = encoded.copy_data;  // header, tuples, 2-byte trailer
    if (!open_) {
      run("BEGIN", "BEGIN");
      try {
        begin_copy(pg::copy_sql(target.table, encoder.layout()), "COPY into " + target.display);
      } catch (...) {
        rollback();
        throw;
      }
      open_.emplace();
      open_->target = &target;
      open_->opened = Clock::now();
      if (!committer_.joinable()) committer_ = std::thread([this] { committer_main(); });
      wake_.notify_all();  // the committer sleeps while no COPY is open
    }
    // The header goes once, at the start of the stream; each batch adds its tuples.
    const size_t from = open_->rows == 0 ? 0 : pg::kCopyHeaderBytes;
    if (!put_copy_data(std::string_view(data).substr(from, data.size() - from - 2))) {
      const std::string message = "COPY into " + target.display + " failed: " + trim(PQerrorMessage(conn_));
      fail_stream(message);
      throw sdk::RetryableError(message);
    }
    open_->rows += encoded.rows;
    open_->last_write = Clock::now();
    open_->writes.push_back(write);
    if (open_->writes.size() >= max_in_flight) end_stream();
  }

  // Ends the open COPY (mutex_ held): trailer, end of COPY, COMMIT; then completes every write in
  // it with the outcome. A replay (23505 in insert mode) sends the table through staging, and
  // the writes are retried there.
  void end_stream() {
    if (!open_) return;
    OpenCopy stream = std::move(*open_);
    open_.reset();
    const std::string what = "COPY into " + stream.target->display;
    try {
      try {
        end_copy(put_copy_data(std::string_view("\xff\xff", 2)), what);  // the trailer, then the end
      } catch (...) {
        rollback();
        throw;
      }
      commit(stream.target->display);
    } catch (const sdk::FatalError& e) {
      if (last_sqlstate_ == "23505" && encoder_for(*stream.target).layout().write_mode == pg::WriteMode::Insert) {
        start_replay(*stream.target);
        for (auto& w : stream.writes) w.retry(std::string(e.what()) + " (a replay: retried through the staging table)");
        return;
      }
      for (auto& w : stream.writes) w.fatal(e.what());
      return;
    } catch (const sdk::PartialWriteError& e) {
      for (auto& w : stream.writes) w.partial(e.what());
      return;
    } catch (const std::exception& e) {
      for (auto& w : stream.writes) w.retry(e.what());
      return;
    }
    for (auto& w : stream.writes) w.done();
    auto ms = [](Clock::duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
    log(sdk::LogLevel::Debug, "table " + stream.target->display + ": committed " + std::to_string(stream.rows) +
                                  " rows of " + std::to_string(stream.writes.size()) + " batches in one COPY (batches for " +
                                  ms(stream.last_write - stream.opened) + " ms, commit after " +
                                  ms(Clock::now() - stream.last_write) + " ms more)");
  }

  // The open COPY can no longer commit (the connection broke while sending): every write in it
  // is retried.
  void fail_stream(const std::string& message) {
    if (!open_) return;
    OpenCopy stream = std::move(*open_);
    open_.reset();
    disconnect();
    for (auto& w : stream.writes) w.retry(message);
  }

  // Insert mode met records written before (23505): the table's batches go through the staging
  // table, which skips them, until one merges without a conflict.
  void start_replay(TopicTable& target) {
    target.replaying = true;
    log(sdk::LogLevel::Info, "table " + target.display +
                                 ": the rows hold records written before (a replay); writing through the staging "
                                 "table, which skips those");
  }

  pg::RowEncoder& encoder_for(TopicTable& target) { return target.encoder ? *target.encoder : *encoder_; }

  // Commits the open COPY when it has been idle for kStreamIdle or open for commit_interval.
  void committer_main() {
    std::unique_lock lock(mutex_);
    while (!closing_) {
      if (!open_) {
        wake_.wait_for(lock, commit_interval_);
        continue;
      }
      const auto due = std::min(open_->last_write + kStreamIdle, open_->opened + commit_interval_);
      if (Clock::now() >= due) {
        end_stream();
        continue;
      }
      wake_.wait_until(lock, due);
    }
  }

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

  // The declared `columns` option: [{name, type}, ...] in order, or {name = type, ...} (the
  // runtime hands tables over with their keys in name order).
  static std::vector<pg::Column> parse_declared_columns(const std::string& json) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json).get(root)) throw sdk::FatalError("columns: not readable as JSON");
    std::vector<pg::Column> out;
    auto add = [&](std::string_view name, simdjson::dom::element type) {
      std::string_view t;
      if (type.get_string().get(t))
        throw sdk::FatalError("columns: the type of '" + std::string(name) + "' must be a string");
      auto ct = pg::parse_column_type(t);
      if (!ct)
        throw sdk::FatalError("columns: '" + std::string(name) + "' has unknown type '" + std::string(t) +
                              "' (text, int4, int8, float8, boolean, jsonb, bytea, timestamptz)");
      out.push_back(pg::Column{std::string(name), *ct, pg::Source::Field, std::string(name), false});
    };
    simdjson::dom::array array;
    simdjson::dom::object object;
    if (!root.get_array().get(array)) {
      for (simdjson::dom::element item : array) {
        simdjson::dom::object obj;
        std::string_view name;
        simdjson::dom::element type;
        if (item.get_object().get(obj) || obj["name"].get_string().get(name) || obj["type"].get(type))
          throw sdk::FatalError("columns: each item must be a table { name = \"...\", type = \"...\" }");
        add(name, type);
      }
    } else if (!root.get_object().get(object)) {
      for (auto member : object) add(member.key, member.value);
    }
    if (out.empty()) throw sdk::FatalError("columns: no columns declared");
    return out;
  }

  // The table's columns (name, type) in order; nullopt when it does not exist. Columns of a type
  // the sink does not write are left out (logged).
  std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing_columns(const TopicTable& target) {
    const char* params[1] = {target.table.sql().c_str()};
    ResultPtr res(PQexecParams(conn_,
                               "SELECT a.attname, format_type(a.atttypid, a.atttypmod), c.oid IS NOT NULL "
                               "FROM (SELECT to_regclass($1) AS oid) c LEFT JOIN pg_attribute a ON a.attrelid = c.oid "
                               "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                               1, nullptr, params, nullptr, nullptr, 0),
                  &PQclear);
    check(res.get(), PGRES_TUPLES_OK, "looking up table " + target.display);
    if (PQntuples(res.get()) == 0 || std::strcmp(PQgetvalue(res.get(), 0, 2), "t") != 0) return std::nullopt;
    std::vector<std::pair<std::string, pg::ColumnType>> out;
    for (int i = 0; i < PQntuples(res.get()); ++i) {
      if (PQgetisnull(res.get(), i, 0)) continue;
      const std::string name = PQgetvalue(res.get(), i, 0), type = PQgetvalue(res.get(), i, 1);
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
  void prepare_inferred(TopicTable& target, const pmq_batch& batch) {
    if (target.ready && !auto_add_) return;
    const auto reserved = pg::reserved_column_names(options_.write_mode, options_.include_metadata);
    auto is_reserved = [&](const std::string& n) { return std::find(reserved.begin(), reserved.end(), n) != reserved.end(); };
    const pg::InferResult inferred = pg::infer_columns(batch, reserved);
    for (const auto& note : inferred.notes)
      log(sdk::LogLevel::Warn, "topic '" + std::string(batch.topic) + "': " + note);

    std::optional<std::vector<std::pair<std::string, pg::ColumnType>>> existing;
    std::vector<pg::Column> payload;
    if (!target.ready) {
      existing = existing_columns(target);
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
      run_ddl(pg::create_table_sql(target.table, target.encoder->layout()), "creating table " + target.display);
    } else if (!added.empty()) {
      auto sql = pg::add_columns_sql(target.table, added);
      if (!sql) throw sdk::FatalError("table " + target.display + ": " + sql.error());
      run_ddl(sql.value(), "adding columns to " + target.display);
      std::string names;
      for (const auto& c : added) names += (names.empty() ? "" : ", ") + c.name + " " + std::string(pg::sql_type(c.type));
      log(sdk::LogLevel::Info, "table " + target.display + ": added columns " + names);
    }
    target.ready = true;
  }

  void prepare_table(TopicTable& target) {
    if (auto_create_) {
      run_ddl(pg::create_table_sql(target.table, encoder_->layout()), "creating table " + target.display);
    } else {
      const char* params[1] = {target.table.sql().c_str()};
      ResultPtr res(PQexecParams(conn_, "SELECT to_regclass($1) IS NOT NULL", 1, nullptr, params, nullptr, nullptr, 0),
                    &PQclear);
      check(res.get(), PGRES_TUPLES_OK, "looking up table " + target.display);
      if (std::strcmp(PQgetvalue(res.get(), 0, 0), "t") != 0)
        throw sdk::FatalError("table " + target.display +
                              " does not exist and auto_create_table is off (create it, or turn auto_create_table on)");
    }
    target.ready = true;
  }

  // The connection_string, before anything connects: its syntax and option names
  // (PQconninfoParse), then the option values libpq checks only when it connects (a port that
  // is not a number...), so that such a mistake stops the sink at once instead of being retried
  // like a server that is down. Messages never show the password.
  void check_connection_string() {
    char* err = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(conninfo_.c_str(), &err);
    if (!parsed) {
      std::string message = err ? trim(err) : "out of memory";
      if (err) PQfreemem(err);
      throw sdk::FatalError("connection_string is not a valid libpq connection string: " +
                            pg::redact_secrets(message, conninfo_));
    }
    conn_options_.clear();
    for (const PQconninfoOption* o = parsed; o->keyword; ++o)
      if (o->val) conn_options_.emplace_back(o->keyword, o->val);
    PQconninfoFree(parsed);
    if (auto problem = pg::check_connection_options(conn_options_))
      throw sdk::FatalError("connection_string: " + pg::redact_secrets(*problem, conninfo_, &conn_options_));
  }

  // Connects unless connected. An unreachable server is tried again for up to reconnect_timeout:
  // a server restart takes longer than the runtime's own retries (about 3 s in all) would wait.
  void connect() {
    if (conn_ && PQstatus(conn_) == CONNECTION_OK) return;
    const auto deadline = std::chrono::steady_clock::now() + reconnect_timeout_;
    auto pause = std::chrono::milliseconds(250);
    for (int attempt = 1;; ++attempt) {
      disconnect();
      conn_ = PQconnectdb(conninfo_.c_str());
      if (conn_ && PQstatus(conn_) == CONNECTION_OK) {
        if (attempt > 1) log(sdk::LogLevel::Info, "reconnected to PostgreSQL after " + std::to_string(attempt) + " attempts");
        break;
      }
      const std::string raw = conn_ ? trim(PQerrorMessage(conn_)) : "out of memory";
      const std::string message = pg::redact_secrets(raw, conninfo_, &conn_options_);
      disconnect();
      // A bad option value libpq found before contacting any server: no retry can mend it.
      if (pg::is_connection_option_error(raw))
        throw sdk::FatalError("connection_string: " + message + " (a configuration error, not retried)");
      // libpq has no SQLSTATE for a failed connection: tell auth and missing-database problems
      // (retrying cannot help) from an unreachable server by the message.
      if (raw.find("authentication failed") != std::string::npos || raw.find("password") != std::string::npos ||
          (raw.find("database") != std::string::npos && raw.find("does not exist") != std::string::npos) ||
          raw.find("no pg_hba.conf entry") != std::string::npos)
        throw sdk::FatalError("cannot connect to PostgreSQL: " + message);
      if (std::chrono::steady_clock::now() + pause > deadline)
        throw sdk::RetryableError("cannot connect to PostgreSQL: " + message);
      if (attempt == 1) log(sdk::LogLevel::Warn, "cannot connect to PostgreSQL (" + message + "); trying again");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
    if (PQsetClientEncoding(conn_, "UTF8") != 0) {
      const std::string message = trim(PQerrorMessage(conn_));
      disconnect();
      throw sdk::RetryableError("cannot set client_encoding to UTF8: " + message);
    }
  }

  void disconnect() {
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
  }

  // Throws the outcome of a failed statement; drops the connection when it is gone.
  [[noreturn]] void fail(const PGresult* res, const std::string& what, bool maybe_committed = false) {
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    std::string sqlstate = state ? state : "";
    std::string message = res ? trim(PQresultErrorMessage(res)) : "";
    if (message.empty() && conn_) message = trim(PQerrorMessage(conn_));
    const bool bad = !conn_ || PQstatus(conn_) != CONNECTION_OK;
    Failure kind = classify(sqlstate, bad);
    // CREATE TABLE / ADD COLUMN IF NOT EXISTS racing another session (another block, another
    // runtime) for the same name fails on the catalog's unique index instead of waiting; the
    // retry finds the object and goes on.
    if (in_ddl_ && (sqlstate == "23505" || sqlstate == "42P07" || sqlstate == "42701" || sqlstate == "42710"))
      kind = Failure::Retry;
    if (bad || sqlstate.starts_with("57P0")) disconnect();
    last_sqlstate_ = sqlstate;
    const std::string text =
        what + " failed" + (sqlstate.empty() ? std::string() : " (SQLSTATE " + sqlstate + ")") + ": " + message;
    if (kind == Failure::Fatal) throw sdk::FatalError(text);
    if (maybe_committed) throw sdk::PartialWriteError(text + " (the batch may have been committed)");
    throw sdk::RetryableError(text);
  }

  void check(const PGresult* res, ExecStatusType expected, const std::string& what) {
    if (!res || PQresultStatus(res) != expected) fail(res, what);
  }

  void run(const std::string& sql, const std::string& what) {
    ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
    check(res.get(), PGRES_COMMAND_OK, what);
  }

  // run(), returning the number of rows the statement affected.
  size_t run_counting(const std::string& sql, const std::string& what) {
    ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
    check(res.get(), PGRES_COMMAND_OK, what);
    return std::strtoull(PQcmdTuples(res.get()), nullptr, 10);
  }

  // Schema changes the sink makes on its own (IF NOT EXISTS), where losing a race is retryable.
  void run_ddl(const std::string& sql, const std::string& what) {
    in_ddl_ = true;
    try {
      run(sql, what);
    } catch (...) {
      in_ddl_ = false;
      throw;
    }
    in_ddl_ = false;
  }

  // One whole COPY: statement, data, end.
  void copy(const std::string& sql, const std::string& data, const std::string& table) {
    const std::string what = "COPY into " + table;
    begin_copy(sql, what);
    end_copy(put_copy_data(data), what);
  }

  void begin_copy(const std::string& sql, const std::string& what) {
    ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
    check(res.get(), PGRES_COPY_IN, what);
  }

  bool put_copy_data(std::string_view data) {
    constexpr size_t kChunk = 1 << 20;
    for (size_t pos = 0; pos < data.size(); pos += kChunk)
      if (PQputCopyData(conn_, data.data() + pos, static_cast<int>(std::min(kChunk, data.size() - pos))) != 1)
        return false;
    return true;
  }

  // Ends the COPY in progress (`sent`: all its data went out) and throws its failure, after
  // draining what the server says (its error, if it sent one).
  void end_copy(bool sent, const std::string& what) {
    if (sent) sent = PQputCopyEnd(conn_, nullptr) == 1;
    ResultPtr res(PQgetResult(conn_), &PQclear);
    while (PGresult* more = PQgetResult(conn_)) PQclear(more);
    if (!sent) fail(res.get(), what);
    check(res.get(), PGRES_COMMAND_OK, what);
  }

  void commit(const std::string& table) {
    ResultPtr res(PQexec(conn_, "COMMIT"), &PQclear);
    if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
      // Lost while committing: the server may or may not have committed.
      fail(res.get(), "COMMIT of the batch into " + table, /*maybe_committed=*/true);
    }
  }

  void rollback() {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return;
    ResultPtr res(PQexec(conn_, "ROLLBACK"), &PQclear);
    if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) disconnect();
  }

  std::string conninfo_;  // secret: never logged
  pg::ConnOptions conn_options_;  // conninfo_ parsed (holds the password too: never logged)
  std::chrono::milliseconds commit_interval_{1000};
  bool streaming_ = true;  // batches may share a COPY (insert and append modes, commit_interval > 0)
  // The connection and everything below it: write calls and the committer thread.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<OpenCopy> open_;
  std::thread committer_;
  bool closing_ = false;
  std::chrono::milliseconds reconnect_timeout_{15000};
  bool in_ddl_ = false;  // run_ddl() is running
  std::string last_sqlstate_;  // of the last failed statement
  std::optional<dest::NameTemplate> template_;
  std::string schema_;
  bool auto_create_ = true;
  pg::LayoutOptions options_;
  bool infer_ = false;     // columns mode without declared columns: a layout per topic
  bool auto_add_ = false;
  std::unique_ptr<pg::RowEncoder> encoder_;  // the shared layout (all modes but inferred columns)
  std::optional<pg::TableName> staging_;
  std::unordered_map<std::string, TopicTable> tables_;
  PGconn* conn_ = nullptr;
};

PICOMQ_SINK_PLUGIN(PostgresSink)
