#pragma once
// SQL text of the PostgreSQL sink: identifier quoting, the table layout (which column comes
// from where), and the DDL / DML generators. Pure: no libpq, no server.
//
// Injection rule: every identifier goes through quote_identifier (double quotes, inner quotes
// doubled, NUL refused) and no value ever appears in SQL text (values travel in COPY data).
// So no topic, field name or value can change the statements that run. Names should be
// sanitised first (destination/sanitize.h, NamePolicy::SqlIdentifier: <= 63 bytes with a
// stable hash suffix): make_layout refuses longer names rather than let the server truncate
// them. See docs/sinks/postgres-encoding.md.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/result.hpp"

namespace picomq::postgres {

using kit::Result;

enum class ColumnType : uint8_t { Text, Int4, Int8, Float8, Bool, Jsonb, Bytea, Timestamptz };

// The DDL type name: text, int4, int8, float8, boolean, jsonb, bytea, timestamptz.
std::string_view sql_type(ColumnType type);
// Accepts the DDL names and "bool", "integer", "bigint", "double precision".
std::optional<ColumnType> parse_column_type(std::string_view name);

// jsonb: the payload in one jsonb column; columns: top-level fields of JSON objects as typed
// columns; text / bytea: the payload in one text / bytea column.
enum class PayloadMode : uint8_t { Jsonb, Columns, Text, Bytea };
// insert: pico_id primary key, replays do nothing; upsert: primary key on configured columns,
// last record wins; append: no key, plain COPY into the target.
enum class WriteMode : uint8_t { Insert, Upsert, Append };

std::string_view to_string(PayloadMode mode);
std::string_view to_string(WriteMode mode);
std::optional<PayloadMode> parse_payload_mode(std::string_view text);
std::optional<WriteMode> parse_write_mode(std::string_view text);

// Where a column's value comes from.
enum class Source : uint8_t {
  RecordId,   // pico_id: kit::record_id(topic, partition, offset)
  Topic,      // pico_topic
  Partition,  // pico_partition
  Offset,     // pico_offset
  Timestamp,  // pico_timestamp (NULL when the record has none)
  Key,        // pico_key (NULL when the record has no key)
  Headers,    // pico_headers: kit::append_headers_json (a repeated name: an array)
  Payload,    // the whole payload (jsonb / text / bytea modes)
  Field,      // one top-level field of a JSON object payload (columns mode)
  Deleted,    // the staging-only pico_deleted of change events: the record deletes its key
  Absent      // the staging-only pico_absent of change events: a patch's columns it keeps (jsonb array)
};

struct Column {
  std::string name;  // column name in the table (sanitised; quoted when used)
  ColumnType type = ColumnType::Text;
  Source source = Source::Field;
  std::string field;      // Source::Field: the JSON member name (as in the payload)
  bool not_null = false;  // NOT NULL in the table (metadata that is always there, key columns)

  bool operator==(const Column&) const = default;
};

inline constexpr std::string_view kIdColumn = "pico_id";
inline constexpr std::string_view kPayloadColumn = "payload";
inline constexpr std::string_view kStagingTable = "pico_staging";
inline constexpr std::string_view kDeletedColumn = "pico_deleted";
inline constexpr std::string_view kAbsentColumn = "pico_absent";

struct LayoutOptions {
  PayloadMode payload_mode = PayloadMode::Jsonb;
  WriteMode write_mode = WriteMode::Insert;
  bool include_metadata = true;
  // Columns mode: the payload columns (Source::Field; declared, or from infer_columns).
  std::vector<Column> payload_columns;
  // Upsert: the conflict key, column names of the layout (e.g. {"id"} or {"pico_key"}).
  std::vector<std::string> upsert_key;
  // Upsert: the records are change events (docs/changes.md): deletes by key, truncates.
  bool changes = false;
};

struct TableLayout {
  PayloadMode payload_mode = PayloadMode::Jsonb;
  WriteMode write_mode = WriteMode::Insert;
  bool include_metadata = true;
  std::vector<Column> columns;   // the target table's columns, in order
  std::vector<std::string> key;  // primary key / conflict target; empty for append
  bool changes = false;          // upsert of change events: staging carries pico_deleted
};

// Order: pico_id (insert mode), the metadata columns (include_metadata), then the payload
// column(s). Key columns are NOT NULL. Errors: empty / NUL / > 63-byte / duplicate names, a
// payload column named like a pico_* column, payload columns outside columns mode (or none in
// it), a Source other than Field among them, upsert without a key or with a key that is not a
// column, a key on a mode other than upsert.
Result<TableLayout> make_layout(const LayoutOptions& options);

// The columns a COPY carries: the layout's, plus, in upsert mode without metadata, a
// staging-only pico_offset (the last-wins order needs it; it never reaches the target), and
// under changes the staging-only pico_deleted and pico_absent.
std::vector<Column> copy_columns(const TableLayout& layout);

// "name" with inner quotes doubled; refuses an empty name and NUL (the only byte PostgreSQL
// cannot hold in a quoted identifier). Quoting keeps case, spaces, ';', '\' and unicode as data.
Result<std::string> quote_identifier(std::string_view name);

// A quoted, optionally schema-qualified table name.
class TableName {
 public:
  // schema empty: unqualified (resolved through the search_path).
  static Result<TableName> make(std::string_view schema, std::string_view table);
  // pg_temp."name": a temporary table of the session.
  static Result<TableName> temp(std::string_view table);

  const std::string& sql() const { return sql_; }

 private:
  explicit TableName(std::string sql) : sql_(std::move(sql)) {}
  std::string sql_;
};

// "schema"."table" (or "table" without a schema).
Result<std::string> qualified(std::string_view schema, std::string_view table);

// CREATE TABLE IF NOT EXISTS target (col type [NOT NULL], ..., PRIMARY KEY (key)).
std::string create_table_sql(const TableName& target, const TableLayout& layout);

// CREATE TEMP TABLE staging (copy_columns, no constraints) ON COMMIT DROP. Explicit columns,
// not LIKE target: the staging table needs no catalog read of the target, carries the
// staging-only pico_offset of upsert-without-metadata, and has no constraints or defaults
// that could fire before the merge. Created once per transaction.
std::string create_staging_sql(const TableName& staging, const TableLayout& layout);

// COPY table (copy_columns) FROM STDIN (FORMAT binary).
std::string copy_sql(const TableName& table, const TableLayout& layout);

// Moves the staged rows into the target:
//   insert: INSERT INTO t (cols) SELECT cols FROM s ON CONFLICT ("pico_id") DO NOTHING
//   upsert: INSERT INTO t (cols) SELECT DISTINCT ON (key) cols FROM s
//           ORDER BY key, "pico_offset" DESC ON CONFLICT (key) DO UPDATE SET c = EXCLUDED.c, ...
//           (the last record per key in the batch wins; DO NOTHING when every column is key)
//   append: INSERT INTO t (cols) SELECT cols FROM s
std::string merge_sql(const TableName& target, const TableName& staging, const TableLayout& layout);

// Change events (layout.changes), after the COPY into staging, in the batch's transaction:
//   truncate (when the batch truncates; the rows staged are those after its last truncate):
//           TRUNCATE t
//   remove: DELETE FROM t USING (the last change per key) last WHERE last."pico_deleted" AND t.key = last.key
//   upsert: INSERT INTO t (cols) SELECT cols FROM (the last change per key) last
//           WHERE NOT last."pico_deleted" AND last."pico_absent" IS NULL ON CONFLICT (key) DO UPDATE SET ...
//   patch:  UPDATE t SET c = CASE WHEN last."pico_absent" ? 'c' THEN t.c ELSE last.c END, ... FROM
//           (the last change per key) last WHERE last."pico_absent" IS NOT NULL AND t.key = last.key
//   patch_missing: the patches of rows not there, inserted with what they name (INSERT ... WHERE
//           last."pico_absent" IS NOT NULL AND NOT EXISTS (the row) ON CONFLICT (key) DO NOTHING)
struct ChangeStatements {
  std::string truncate;
  std::string remove;
  std::string upsert;
  std::string patch;
  std::string patch_missing;
};
ChangeStatements change_statements(const TableName& target, const TableName& staging, const TableLayout& layout,
                                   bool truncate);

// The statements of one batch write, in order, in one transaction (empty ones are skipped):
// append copies straight into the target (no staging, no merge).
struct WriteStatements {
  std::string create_staging;
  std::string copy;
  std::string merge;
};
WriteStatements write_statements(const TableName& target, const TableName& staging, const TableLayout& layout);

// ALTER TABLE target ADD COLUMN IF NOT EXISTS "c" type, ADD COLUMN IF NOT EXISTS ...
// (auto_add_columns; added columns are nullable). Fails on an empty list or a bad name.
Result<std::string> add_columns_sql(const TableName& target, const std::vector<Column>& columns);

}  // namespace picomq::postgres
