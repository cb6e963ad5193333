#pragma once
// Turns one pmq_batch into PostgreSQL binary COPY data for a table layout (sql.h), with
// per-record rejections instead of silent casts; and infers a columns-mode layout from a batch.
// Pure: no libpq, no server. Rules: docs/sinks/postgres-encoding.md.
#include <simdjson.h>

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "picomq/kit/inferred_type.hpp"
#include "picomq/sink_abi.h"
#include "postgres/copy_binary.h"
#include "postgres/sql.h"

namespace picomq::postgres {

struct Rejection {
  std::size_t record_index = 0;  // index in the batch
  std::string reason;            // e.g. "field 'amount': expected float8, found string"
};

struct EncodeResult {
  std::string copy_data;            // header, one tuple per accepted record, trailer
  std::size_t rows = 0;             // accepted records
  std::vector<Rejection> rejected;  // every refused record, in batch order
  std::string error;                // the batch cannot be encoded at all (nothing else is set)
  // Change events: the batch truncates its table; only the records after its last truncate are
  // encoded (what comes before it is wiped by it).
  bool truncate = false;

  bool ok() const { return error.empty(); }
};

// One per sink instance (or thread); not thread-safe (it owns a simdjson parser).
class RowEncoder {
 public:
  // The layout comes from make_layout; its copy_columns() fix the tuple layout.
  explicit RowEncoder(TableLayout layout);

  // jsonb: the payload JSON as it is (refused: a \u0000 escape); text: the payload text
  // (refused: a NUL byte); bytea: the payload bytes; columns: each JSON object's top-level
  // fields converted strictly to the column types (missing or null -> NULL). Tombstones are
  // NULL in every payload column. A NULL in a NOT NULL (key) column rejects the record.
  // Errors (whole batch): a payload format the mode cannot take (jsonb / columns need JSON,
  // text needs TEXT or JSON, bytea takes any), a topic that is not valid UTF-8, a bad pmq_batch.
  // Change events (layout.changes, docs/changes.md): an upsert is its row; a delete has its key
  // object's fields in the columns they name (the other payload columns NULL) and pico_deleted.
  EncodeResult encode(const pmq_batch& batch);
  // Hands back an EncodeResult::copy_data that was sent: later encodes reuse its memory.
  void recycle(std::string copy_data) { writer_.recycle(std::move(copy_data)); }

  const TableLayout& layout() const { return layout_; }
  const std::vector<Column>& columns() const { return columns_; }

 private:
  // Appends the record's fields to writer_'s open row; returns the rejection reason or "".
  std::string encode_record(const pmq_batch& batch, const pmq_record& record);
  std::string encode_field(const Column& column, simdjson::dom::element value);

  TableLayout layout_;
  std::vector<Column> columns_;                            // copy_columns(layout_)
  std::unordered_map<std::string, std::size_t> by_field_;  // JSON member -> index in columns_
  std::vector<simdjson::dom::element> values_;             // per column, for one record
  std::vector<bool> present_;
  simdjson::dom::parser parser_;
  CopyBinaryWriter writer_;
  std::string scratch_;
  std::string record_id_;  // "topic:partition:" of the batch, then each record's offset
  std::size_t record_id_prefix_ = 0;
};

struct InferResult {
  std::vector<Column> columns;     // Source::Field columns, in first-appearance order
  std::vector<std::string> notes;  // fields left out and why
};

// The column type of a type the kit's inference lattice gives (kit/inferred_type.hpp): bool ->
// boolean, int64 -> int8, float64 -> float8, string -> text; JSON (objects, arrays, integers
// beyond int64, conflicting kinds) and none (null in every record) -> jsonb.
ColumnType column_type(kit::InferredType type);

// Columns for a JSON batch (payload mode 'columns' without declared columns): each top-level
// field's non-null values joined on the kit's lattice, through column_type(). Column names are
// the field names sanitised with NamePolicy::SqlIdentifier; a field whose name sanitises to one
// already taken (another field or, in `reserved`, a metadata column) is left out with a note.
// Payloads that are not JSON objects (and tombstones) add nothing; a non-JSON batch gives no
// columns and a note.
InferResult infer_columns(const pmq_batch& batch, const std::vector<std::string>& reserved = {});

// The reserved names for infer_columns: the non-payload columns of a layout with these modes.
std::vector<std::string> reserved_column_names(WriteMode write_mode, bool include_metadata);

}  // namespace picomq::postgres
