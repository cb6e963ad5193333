// Redshift sink: each batch is staged in S3 as a gzip CSV file plus a manifest, under keys of
// that load's own (the range and a random token: a key is written once, so a killed run's staged
// file that lands late can never replace the one a live load's manifest names), then loaded in
// ONE transaction over the PostgreSQL wire protocol (libpq):
//   BEGIN;
//   CREATE TEMP TABLE <stage> (LIKE <target>);
//   COPY <stage> FROM 's3://bucket/<manifest>' <credentials> MANIFEST CSV GZIP [MAXERROR n];
//   MERGE INTO <target> USING <stage> ON <target>.pico_id = <stage>.pico_id
//     WHEN MATCHED THEN UPDATE SET ... WHEN NOT MATCHED THEN INSERT ...;
//   INSERT INTO <offsets_table> (sink, topic, partition, first_offset, last_offset) VALUES (...);
//   COMMIT;
// then the staged objects are deleted. The row id pico_id is the record id topic:partition:offset
// (or the record key, merge_key = "key"), so a replay merges to the same rows; the offsets table
// says what was loaded, so records at or below a partition's loaded offset are never staged
// again (a replay after a crash loads nothing twice, and with merge_key = "key" an older record
// never overwrites a newer one).
//
// dialect = "postgres_shim" (PostgreSQL 15 as the SQL stand-in, for tests): PostgreSQL has no
// COPY FROM 's3://...'. The shim replaces that one statement: it reads the manifest from S3,
// fetches every file it lists (SigV4), gunzips it and sends it with COPY <stage> FROM STDIN
// (FORMAT csv) in the same transaction. Every other statement is the same text in both dialects.
// Docs: docs/sinks/redshift.md.
#include <simdjson.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "picomq/kit/compression.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/postgres/connection.hpp"
#include "picomq/kit/random_token.hpp"
#include "picomq/kit/record_id.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/s3.hpp"
#include "picomq/sdk.hpp"
#include "redshift/config.h"
#include "redshift/staging_text.h"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using picomq::redshift::csv_field;
using picomq::redshift::Dialect;
using picomq::redshift::last_part;
using picomq::redshift::MergeKey;
using picomq::redshift::option_table;
using picomq::redshift::plan;
using picomq::redshift::Settings;
using picomq::redshift::sql_literal;

constexpr const char* kColumns =
    "pico_id, pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key, pico_headers, payload";

// COPY refused one line of the staged data (PostgreSQL's COPY stops at it; the shim's case): its
// line (1-based) and the database's reason.
struct CopyRefused : std::runtime_error {
  int64_t line;
  CopyRefused(const std::string& what, int64_t copy_line) : std::runtime_error(what), line(copy_line) {}
};

}  // namespace

class RedshiftSink : public sdk::BaseSink<RedshiftSink> {
 public:
  static constexpr std::string_view sink_name = "redshift";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Stages batches in S3 (gzip CSV + manifest) and loads them into Amazon Redshift in one transaction: COPY into a "
      "temporary table, MERGE into the target on the record id, the offset range recorded; replays merge to the same "
      "rows.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  // Change events (docs/changes.md): a row per key (pico_id), deleted and truncated in the load's
  // transaction. Patches are not applied (the row is one JSON text): the runtime refuses them.
  static constexpr uint32_t change_ops = PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE);
  static inline const kit::OptionTable<Settings>& options = option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto s = plan(config, problems);
    problems.throw_if_any();
    s_ = std::move(*s);
    sink_ = sink_key().empty() ? std::string("sink") : std::string(sink_key());
    s3_ = std::make_unique<kit::s3::Client>(kit::s3::ClientOptions{
        .bucket = s_.stage,
        .request_timeout = 120s,
        .retry_timeout = s_.retry_timeout,
        .max_response_body = 256u << 20,  // the shim reads staged files back
        .credentials_hint = "check aws_access_key_id / aws_secret_access_key",
        .log_warn = [this](const std::string& m) { log(sdk::LogLevel::Warn, m); },
        .count = [this](const char* name, uint64_t n) { count((std::string("s3_") + name).c_str(), n); }});
    try {
      connect();
      if (s_.create_tables) create_tables();
    } catch (const sdk::RetryableError& e) {
      log(sdk::LogLevel::Warn,
          "the database is not reachable now (the sink starts and retries with each write): " + std::string(e.what()));
      disconnect();
      return;
    } catch (const sdk::FatalError& e) {
      throw sdk::FatalError(std::string("opening the database: ") + e.what());
    }
    log(sdk::LogLevel::Info, "connected: target " + s_.target_table + ", offsets " + s_.offsets_table +
                                 ", staging s3://" + s_.s3_bucket + "/" + s_.s3_prefix +
                                 (s_.dialect == Dialect::PostgresShim ? " (postgres_shim)" : ""));
  }

  void close() {
    if (s3_) s3_->close();
    disconnect();
  }

  void write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    if (raw.record_count == 0) return;
    kit::RetryWait retry(stopping(), s_.retry_timeout);
    std::vector<bool> refused(raw.record_count, false);
    while (true) {
      try {
        return load(raw, refused);
      } catch (const CopyRefused& e) {
        // Reject the refused line's record, load the rest.
        const auto pos = line_record(raw, refused, e.line);
        if (!pos) throw sdk::FatalError(where(raw) + ": " + e.what());
        refused[*pos] = true;
        reject(*pos, std::string("the database refused the row: ") + e.what());
        count("rejected_records");
      } catch (const sdk::FatalError& e) {
        disconnect();
        throw sdk::FatalError(where(raw) + ": " + e.what());
      } catch (const sdk::RetryableError& e) {
        // Connection loss, serialization conflicts, deadlocks, a server restarting (the kit's
        // connection says which), or S3 past the staging client's own resends.
        disconnect();
        const bool waited = retry.wait({}, [&](std::chrono::milliseconds d) {
          count("retries");
          log(sdk::LogLevel::Debug, where(raw) + ": retrying in " + std::to_string(d.count()) + " ms: " + e.what());
        });
        if (!waited) throw sdk::RetryableError(where(raw) + (retry.stopped() ? " (stopping): " : ": ") + e.what());
      }
    }
  }

 private:
  std::string where(const pmq_batch& raw) const {
    return "loading " + std::string(raw.topic) + "[" + std::to_string(raw.partition) + "] into " + s_.target_table;
  }

  // The record of the n-th staged line (1-based) given the records refused so far.
  std::optional<size_t> line_record(const pmq_batch& raw, const std::vector<bool>& refused, int64_t line) {
    (void)raw;
    int64_t n = 0;
    for (size_t i : staged_)
      if (!refused[i] && ++n == line) return i;
    return std::nullopt;
  }

  // ------------------------------------------------------------------ database

  void connect() {
    if (conn_ && conn_->ok()) return;
    if (!conn_) {
      kit::pg::ConnectionExtras extras{.parameters = {{"application_name", "picomq-redshift"}},
                                       .retryable = [](std::string_view, std::string_view message) {
                                         // Redshift's error 1023 (SQLSTATE XX000): another transaction won.
                                         return message.find("Serializable isolation violation") !=
                                                std::string_view::npos;
                                       }};
      if (s_.password) extras.parameters.emplace_back("password", *s_.password);
      conn_ = std::make_unique<kit::pg::Connection>(
          s_.connection_string, s_.conn_options, [this](sdk::LogLevel level, const std::string& m) { log(level, m); },
          std::move(extras));
    }
    // One attempt of up to 10 s (or the string's connect_timeout), ended at once by a stop.
    if (auto error = conn_->connect(kit::pg::Clock::now() + 10s, stopping())) {
      const std::string message = "connecting: " + error->message;
      if (error->kind == kit::pg::ConnectFailure::Refused || error->kind == kit::pg::ConnectFailure::BadOption)
        throw sdk::FatalError(message);
      throw sdk::RetryableError(message);
    }
    loaded_.clear();  // read again from the offsets table
  }

  void disconnect() {
    if (conn_) conn_->disconnect();
  }

  void exec(const std::string& sql, const std::string& what) { conn_->run(sql, what); }

  void create_tables() {
    conn_->run_ddl(
        "CREATE TABLE IF NOT EXISTS " + s_.target_table +
            " (pico_id VARCHAR(1024) NOT NULL, pico_topic VARCHAR(512) NOT NULL, pico_partition INTEGER NOT NULL, "
            "pico_offset BIGINT NOT NULL, pico_timestamp BIGINT, pico_key VARCHAR(65535), pico_headers "
            "VARCHAR(65535), payload VARCHAR(65535), PRIMARY KEY (pico_id))",
        "creating " + s_.target_table);
    conn_->run_ddl(
        "CREATE TABLE IF NOT EXISTS " + s_.offsets_table +
            " (sink VARCHAR(256) NOT NULL, topic VARCHAR(512) NOT NULL, partition INTEGER NOT NULL, first_offset "
            "BIGINT NOT NULL, "
            "last_offset BIGINT NOT NULL)",
        "creating " + s_.offsets_table);
  }

  // The highest offset loaded for this partition (offsets table), -1 when none.
  int64_t loaded_offset(const pmq_batch& raw) {
    const std::string k = std::string(raw.topic) + "\x1f" + std::to_string(raw.partition);
    auto it = loaded_.find(k);
    if (it != loaded_.end()) return it->second;
    const std::string sql = "SELECT COALESCE(MAX(last_offset), -1) FROM " + s_.offsets_table +
                            " WHERE sink = $1 AND topic = $2 AND partition = $3";
    const std::string partition = std::to_string(raw.partition);
    const auto rows = conn_->query(sql, {sink_, raw.topic, partition}, "reading " + s_.offsets_table);
    const int64_t v = rows.empty() || rows[0].empty() || !rows[0][0] ? -1 : std::atoll(rows[0][0]->c_str());
    loaded_[k] = v;
    if (!s_.keep_staged_files) delete_leftovers(raw);
    return v;
  }

  // A crash leaves staged files behind: between a load's COMMIT and their deletion (the replay
  // skips those records as loaded), or before the COMMIT (the replay stages them again under new
  // keys). Each load's keys are its own, so no later load reads a file staged before it: when a
  // partition is first loaded, every staged file of it goes (counter deleted_leftover_staged_files).
  // One a previous owner is still loading during a rebalance makes that load fail and its records
  // come again to the new owner. A killed run's upload the store applies after this stays until
  // the next start.
  void delete_leftovers(const pmq_batch& raw) {
    const std::string prefix = stage_prefix(raw);
    try {
      for (const std::string& key : s3_->list_keys(prefix)) {
        delete_object(key);
        count("deleted_leftover_staged_files");
      }
    } catch (const std::exception& e) {
      log(sdk::LogLevel::Warn,
          std::string("staged files left by an earlier run stay (a lifecycle rule can remove them): ") + e.what());
    }
  }

  std::string stage_prefix(const pmq_batch& raw) const {
    return s_.s3_prefix + "/" + kit::url_safe(sink_) + "/" + kit::url_safe(raw.topic) + "/" +
           std::to_string(raw.partition) + "/";
  }

  // ------------------------------------------------------------------ one load

  void load(const pmq_batch& raw, std::vector<bool>& refused) {
    connect();
    const int64_t done = loaded_offset(raw);
    // The CSV file: records above the loaded offset, not refused; for merge_key = key the last
    // record of each key only (MERGE takes one source row per target row).
    std::string csv;
    staged_.clear();
    std::map<std::string, size_t> last_of_key;
    std::vector<std::pair<size_t, std::string>> rows;  // position, pico_id
    int64_t first = -1, last = -1;
    std::string headers;
    // Change events: the last truncate above the loaded offset empties the topic's rows, and the
    // changes before it are not staged; a delete is staged as its key with a NULL payload.
    const bool changes = pmq_batch_has_changes(&raw);
    size_t truncate_at = SIZE_MAX;
    for (size_t i = 0; changes && i < raw.record_count; ++i) {
      const pmq_record* r = pmq_batch_record(&raw, i);
      if (r->offset > done && pmq_record_op(&raw, r) == PMQ_OP_TRUNCATE) truncate_at = i;
    }
    for (size_t i = 0; i < raw.record_count; ++i) {
      const pmq_record& r = *pmq_batch_record(&raw, i);
      if (r.offset <= done) {
        count("already_written_records");
        continue;
      }
      if (first < 0) first = r.offset;
      last = r.offset;
      if (changes && truncate_at != SIZE_MAX && i <= truncate_at) continue;
      const bool erase = changes && pmq_record_op(&raw, &r) == PMQ_OP_DELETE;
      if (refused[i] || (r.payload.data == nullptr && !erase)) continue;
      const std::string_view payload(reinterpret_cast<const char*>(r.payload.data), r.payload.size);
      std::string key64 = r.key.data ? kit::base64_encode({r.key.data, r.key.size}) : std::string();
      if (payload.size() > s_.max_field_bytes.bytes || key64.size() > s_.max_field_bytes.bytes) {
        refused[i] = true;
        reject(i, "payload or key longer than max_field_bytes (" + std::to_string(s_.max_field_bytes.bytes) + ")");
        count("rejected_records");
        continue;
      }
      std::string id;
      if (changes) {
        const pmq_bytes key = pmq_record_key_json(&raw, &r);
        if (!key.data || key.size > 1024) {
          refused[i] = true;
          reject(i, key.data ? "the change's key is longer than 1024 bytes (pico_id)" : "the change has no key");
          count("rejected_records");
          continue;
        }
        id.assign(reinterpret_cast<const char*>(key.data), key.size);
        last_of_key[id] = i;
      } else if (s_.merge_key == MergeKey::Key) {
        if (!r.key.data) {
          refused[i] = true;
          reject(i, "merge_key = \"key\" and the record has no key");
          count("rejected_records");
          continue;
        }
        id = key64;
        last_of_key[id] = i;
      } else {
        auto rid = kit::url_safe_record_id(raw.topic, raw.partition, r.offset, 1024);
        if (!rid) {
          refused[i] = true;
          reject(i, "the record id of topic " + std::string(raw.topic) + " is longer than 1024 bytes");
          continue;
        }
        id = *rid;
      }
      rows.emplace_back(i, std::move(id));
    }
    if (first < 0) return;  // all loaded already
    for (const auto& [i, id] : rows) {
      if ((changes || s_.merge_key == MergeKey::Key) && last_of_key[id] != i) continue;
      const pmq_record& r = *pmq_batch_record(&raw, i);
      staged_.insert(i);
      csv_field(csv, id);
      csv += ',';
      csv_field(csv, raw.topic);
      csv += ',' + std::to_string(raw.partition) + ',' + std::to_string(r.offset) + ',';
      if (r.timestamp_ms >= 0) csv += std::to_string(r.timestamp_ms);
      csv += ',';
      if (r.key.data) csv_field(csv, kit::base64_encode({r.key.data, r.key.size}));
      csv += ',';
      if (r.header_count) {
        headers.clear();
        kit::append_headers_json(headers, {r.headers, r.header_count});
        csv_field(csv, headers);
      }
      csv += ',';
      if (r.payload.data) csv_field(csv, {reinterpret_cast<const char*>(r.payload.data), r.payload.size});
      csv += '\n';  // a delete: no payload (NULL)
    }
    // Stage under keys of this load's own: <first>-<last>.<token>. A key is written once, so no
    // other upload (a killed run's, applied late by the store) can change what this load's
    // manifest names between its PUT and the COPY; a late one only leaves a file no manifest
    // names, which the sweep at the next start removes once its range is loaded.
    const std::string base =
        stage_prefix(raw) + std::to_string(first) + "-" + std::to_string(last) + "." + kit::random_token();
    const std::string file_key = base + ".csv.gz", manifest_key = base + ".manifest";
    const bool any = !staged_.empty();
    auto drop_staged = [&] {
      if (any && !s_.keep_staged_files) {
        delete_object(file_key);
        delete_object(manifest_key);
      }
    };
    if (any) {
      put_object(file_key, kit::compress(kit::Compression::Gzip, csv), "application/gzip");
      std::string manifest =
          "{\"entries\":[{\"url\":\"s3://" + s_.s3_bucket + "/" + file_key + "\",\"mandatory\":true}]}";
      try {
        put_object(manifest_key, manifest, "application/json");
      } catch (...) {
        drop_staged();  // the next attempt stages under new keys
        throw;
      }
    }
    // One transaction: stage table, COPY, MERGE, the offsets row.
    const std::string stage = "picomq_stage_" + std::to_string(raw.partition);
    const std::string target = last_part(s_.target_table);
    exec("BEGIN", "BEGIN");
    try {
      // Redshift's TRUNCATE commits the transaction it is in: a DELETE keeps it one unit.
      if (truncate_at != SIZE_MAX) {
        exec("DELETE FROM " + s_.target_table + " WHERE pico_topic = " + sql_literal(raw.topic),
             "emptying " + s_.target_table + " of topic " + raw.topic + " (a truncate)");
        count("truncates");
      }
      if (any) {
        exec("CREATE TEMP TABLE " + stage + " (LIKE " + s_.target_table + ")", "creating the stage table");
        copy(stage, manifest_key);
        if (changes) {  // the keys whose last change is a delete go, and the rest is merged
          exec("DELETE FROM " + s_.target_table + " USING " + stage + " WHERE " + target + ".pico_id = " + stage +
                   ".pico_id AND " + stage + ".payload IS NULL",
               "deleting from " + s_.target_table);
          exec("DELETE FROM " + stage + " WHERE payload IS NULL", "leaving the deletes out of the MERGE");
        }
        exec("MERGE INTO " + s_.target_table + " USING " + stage + " ON " + target + ".pico_id = " + stage +
                 ".pico_id WHEN MATCHED THEN UPDATE SET pico_topic = " + stage +
                 ".pico_topic, pico_partition = " + stage + ".pico_partition, pico_offset = " + stage +
                 ".pico_offset, pico_timestamp = " + stage + ".pico_timestamp, pico_key = " + stage +
                 ".pico_key, pico_headers = " + stage + ".pico_headers, payload = " + stage +
                 ".payload WHEN NOT MATCHED THEN INSERT (" + kColumns + ") VALUES (" + stage + ".pico_id, " + stage +
                 ".pico_topic, " + stage + ".pico_partition, " + stage + ".pico_offset, " + stage +
                 ".pico_timestamp, " + stage + ".pico_key, " + stage + ".pico_headers, " + stage + ".payload)",
             "MERGE into " + s_.target_table);
        exec("DROP TABLE " + stage, "dropping the stage table");
      }
      exec("INSERT INTO " + s_.offsets_table + " (sink, topic, partition, first_offset, last_offset) VALUES (" +
               sql_literal(sink_) + ", " + sql_literal(raw.topic) + ", " + std::to_string(raw.partition) + ", " +
               std::to_string(first) + ", " + std::to_string(last) + ")",
           "recording the offsets in " + s_.offsets_table);
      exec("COMMIT", "COMMIT");
    } catch (...) {
      if (conn_) conn_->rollback();
      drop_staged();  // the next attempt stages under new keys
      throw;
    }
    loaded_[std::string(raw.topic) + "\x1f" + std::to_string(raw.partition)] = last;
    count("loads");
    count("written_records", staged_.size());
    drop_staged();
  }

  std::string credentials() const {
    if (s_.iam_role) return "IAM_ROLE " + sql_literal(*s_.iam_role);
    return "ACCESS_KEY_ID " + sql_literal(*s_.aws_access_key_id) + " SECRET_ACCESS_KEY " +
           sql_literal(*s_.aws_secret_access_key);
  }

  // COPY of the staged files into the stage table; a refused line is thrown as CopyRefused.
  void copy(const std::string& stage, const std::string& manifest_key) {
    try {
      copy_staged(stage, manifest_key);
    } catch (const sdk::FatalError& e) {
      if (conn_->last_copy_line() > 0) throw CopyRefused(e.what(), conn_->last_copy_line());
      throw;
    }
  }

  void copy_staged(const std::string& stage, const std::string& manifest_key) {
    if (s_.dialect == Dialect::Redshift) {
      exec("COPY " + stage + " (" + kColumns + ") FROM " + sql_literal("s3://" + s_.s3_bucket + "/" + manifest_key) +
               " " + credentials() + " REGION " + sql_literal(s_.s3_region) + " MANIFEST CSV GZIP" +
               (s_.max_errors > 0 ? " MAXERROR " + std::to_string(s_.max_errors) : std::string()),
           "COPY from s3://" + s_.s3_bucket + "/" + manifest_key);
      if (s_.max_errors > 0) reject_load_errors();
      return;
    }
    // postgres_shim: the manifest and its files from S3, COPY FROM STDIN.
    const std::string manifest = s3_->get_object(manifest_key);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    simdjson::dom::array entries;
    if (parser.parse(manifest).get(root) || root["entries"].get_array().get(entries))
      throw sdk::FatalError("shim: the manifest s3://" + s_.s3_bucket + "/" + manifest_key + " is not a manifest");
    std::string data;
    for (auto e : entries) {
      std::string_view url;
      if (e["url"].get_string().get(url) || url.rfind("s3://" + s_.s3_bucket + "/", 0) != 0)
        throw sdk::FatalError("shim: manifest entry without an s3:// url of the bucket");
      data +=
          kit::decompress(kit::Compression::Gzip, s3_->get_object(std::string(url.substr(6 + s_.s3_bucket.size()))));
    }
    const std::string what = "COPY (shim of COPY ... FROM 's3://...' MANIFEST)";
    conn_->begin_copy("COPY " + stage + " (" + kColumns + ") FROM STDIN WITH (FORMAT csv)", what);
    conn_->end_copy(conn_->put_copy_data(data), what);
  }

  // Redshift with MAXERROR: the lines COPY skipped, from STL_LOAD_ERRORS, rejected.
  void reject_load_errors() {
    const auto rows = conn_->query(
        "SELECT line_number, TRIM(err_reason) FROM stl_load_errors WHERE query = pg_last_copy_id() ORDER BY "
        "line_number",
        {}, "reading STL_LOAD_ERRORS");
    for (const auto& row : rows) {
      if (row.size() < 2 || !row[0]) continue;
      const int64_t line = std::atoll(row[0]->c_str());
      int64_t n = 0;
      for (size_t i : staged_)
        if (++n == line) {
          reject(i, "COPY refused the row: " + row[1].value_or(""));
          count("rejected_records");
        }
    }
  }

  // ------------------------------------------------------------------ S3

  void put_object(const std::string& key, std::string_view body, const std::string& type) {
    s3_->put_object(key, body, type);
    count("staged_files");
  }
  // Best effort: a file left behind is swept at the next start (delete_leftovers).
  void delete_object(const std::string& key) {
    try {
      s3_->delete_object(key);
    } catch (const std::exception& e) {
      log(sdk::LogLevel::Warn, std::string("the staged file stays (a lifecycle rule can remove it): ") + e.what());
    }
  }

  Settings s_;
  std::string sink_;
  std::unique_ptr<kit::pg::Connection> conn_;
  std::map<std::string, int64_t> loaded_;
  std::set<size_t> staged_;
  std::unique_ptr<kit::s3::Client> s3_;
};

PICOMQ_SINK_PLUGIN(RedshiftSink)
