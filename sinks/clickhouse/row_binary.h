#pragma once
// RowBinary for ClickHouse's `INSERT INTO t (cols) FORMAT RowBinary`: each row is its columns'
// values back to back, little-endian, strings as LEB128 length + bytes, Nullable as a 0/1 byte
// before the value, Array as LEB128 count + elements (ClickHouse docs, "Formats: RowBinary").
// The encoder turns one pmq_batch into rows for a list of columns, converting JSON values
// strictly to the column types and rejecting the records that do not convert (their rows are
// not written; the reason names the field and the types). Pure: no server. The conversion
// rules are in docs/sinks/clickhouse.md ("Type mapping").
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "clickhouse/types.h"
#include "picomq/kit/datetime.hpp"
#include "picomq/sink_abi.h"

namespace picomq::clickhouse {

// The columns of a table of change events (docs/changes.md): ReplacingMergeTree(pico_version)
// keeps each key's row of the highest offset, and pico_deleted marks a deleted key.
inline constexpr std::string_view kVersionColumn = "pico_version";
inline constexpr std::string_view kDeletedColumn = "pico_deleted";

// Where a column's value comes from.
enum class Source {
  Field,      // the top-level field `field` of a JSON object payload
  Payload,    // the payload's bytes (payload_mode string); a tombstone is NULL
  Topic,      // pico_topic
  Partition,  // pico_partition
  Offset,     // pico_offset
  Timestamp,  // pico_timestamp: epoch ms (Int64/UInt64), seconds (DateTime), ticks (DateTime64)
  Key,        // pico_key: the key's bytes; no key is NULL
  Headers,    // pico_headers: JSON text (kit::append_headers_json)
  Version,    // pico_version: the record's offset (UInt64): a change table's ReplacingMergeTree version
  Deleted,    // pico_deleted: 1 for a delete change, else 0 (docs/changes.md)
};

struct Column {
  std::string name;
  Type type;
  Source source = Source::Field;
  std::string field;  // Source::Field: the JSON member
};

// A metadata column name's source (pico_topic -> Topic...), or Field for any other name.
Source metadata_source(std::string_view column_name);
// Why `column`'s type cannot take its source's values ("" when it can): checked once per layout,
// so a metadata column of a wrong type fails the batch, not each record.
std::string check_column(const Column& column);

// One encoded row: where it ends in the data and which record it is.
struct Row {
  uint64_t end = 0;           // byte offset in Encoded::data just past the row
  uint32_t record_index = 0;  // the record's index in its batch
};

struct Rejection {
  size_t record_index = 0;
  std::string reason;  // "field 'n': expected Int64, found string"
};

struct Encoded {
  std::string data;
  std::vector<Row> rows;            // accepted records, in batch order
  std::vector<Rejection> rejected;  // refused records, in batch order
  std::string error;                // the batch cannot be encoded at all (nothing else is set)
  bool ok() const { return error.empty(); }
};

// Not thread-safe (it owns a simdjson parser): one per writer.
class RowBinaryEncoder {
 public:
  explicit RowBinaryEncoder(std::vector<Column> columns);

  // Every record as a row. Field columns need JSON object payloads: a record whose payload is
  // not an object is rejected (a tombstone writes NULL / the default in every field column).
  // Change events (pmq_batch_has_changes): an upsert is its row; a delete is a row of its key's
  // fields (key_json) with pico_deleted 1; a truncate writes no row (the sink applies it); a
  // patch is written as an upsert of what it names (the sink merges it with the row first).
  // A field missing from the object, or null, writes NULL into a Nullable column and the type's
  // default (0, '', [], 1970-01-01) otherwise, as ClickHouse's own JSON input does
  // (input_format_null_as_default). Errors (the whole batch): a column whose type cannot take
  // its source, a field column without JSON payloads.
  Encoded encode(const pmq_batch& batch);

  const std::vector<Column>& columns() const { return columns_; }

 private:
  std::vector<Column> columns_;
  std::unordered_map<std::string_view, size_t> by_field_;
  std::vector<simdjson::dom::element> values_;
  std::vector<char> present_;
  simdjson::dom::parser parser_;
  simdjson::dom::parser key_parser_;  // change events: an upsert's key, beside its row
  std::string scratch_;
};

// One JSON value into `type`, appended to `out`; the reason it does not convert, or "" (out is
// then unchanged only up to the caller: truncate on failure). Exposed for the unit tests.
std::string append_value(const Type& type, simdjson::dom::element value, std::string& out, std::string& scratch);
// The same conversions for a value whose kind is already known (append_value dispatches to
// them; the Arrow plane's cells go through them directly). The reason, or "".
// `integral_as_integer`: a float with an integral value goes into an integer column (the Arrow
// plane: a float64 column widened from integers cannot tell 5 from 5.0); off for JSON values.
std::string append_integer(const Type& type, int64_t value, std::string& out);
std::string append_unsigned(const Type& type, uint64_t value, std::string& out);
std::string append_float(const Type& type, double value, std::string& out, bool integral_as_integer);
std::string append_bool(const Type& type, bool value, std::string& out);
std::string append_string(const Type& type, std::string_view value, std::string& out);
// Epoch milliseconds into Int64 / UInt64 (ms), DateTime (seconds), DateTime64 (its ticks).
std::string append_timestamp_ms(const Type& type, int64_t ms, std::string& out);
// The type's default (what a missing field writes): NULL for Nullable.
void append_default(const Type& type, std::string& out);
void append_varint(std::string& out, uint64_t value);
// A String's bytes as RowBinary and Native both write them: LEB128 length, then the bytes.
void append_sized(std::string& out, std::string_view bytes);

// ISO 8601 / RFC 3339 date-times and dates, as the encoder reads them: the kit's (picomq/kit/datetime.hpp).
using kit::parse_date;
using kit::parse_datetime;

}  // namespace picomq::clickhouse
