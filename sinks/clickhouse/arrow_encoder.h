#pragma once
// The ClickHouse sink's inserts made from the Arrow plane (docs/arrow.md columns): the runtime
// has already parsed each payload once and laid the batch out in columns, so a Native block is
// mostly copies of those columns (fixed-width values back to back, strings as length + bytes,
// a null map before a Nullable column), with no second JSON parse and no RowBinary in between.
//
// The conversions are the RowBinary encoder's (row_binary.h: append_integer, append_string...),
// applied per cell where a column's Arrow type is not the table column's own (an int64 column
// into UInt32, a utf8 column into DateTime, a JSON column into a String); a cell that does not
// convert rejects its record with the same reason the batches plane gives. Exact matches
// (int64 -> Int64, float64 -> Float64, utf8 -> String, bool -> Bool/UInt8, the metadata
// columns) are copied without a per-cell conversion.
//
// Batches the columns cannot describe — whole payloads (some payload of the batch is not a JSON
// object, so the export has one `payload` column), TEXT or RAW payloads — are rebuilt as records
// and encoded by the RowBinary encoder itself, so they behave exactly as on the batches plane.
// Pure: no server.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "clickhouse/row_binary.h"
#include "clickhouse/schema.h"
#include "picomq/arrow_c_data.h"
#include "picomq/sink_abi.h"

namespace picomq::clickhouse {

// One Arrow batch as the sink was handed it (valid until its write completes).
struct ArrowInput {
  const ArrowSchema* schema = nullptr;
  const ArrowArray* array = nullptr;
  std::string_view topic;
  int32_t partition = 0;
  int32_t payload_format = PMQ_PAYLOAD_JSON;
  const char* schema_name = "";
  const int64_t* offsets = nullptr;  // offsets[i]: row i's Kafka offset
  size_t rows = 0;
};
ArrowInput arrow_input(const pmq_arrow_batch& batch);

struct ArrowEncoded {
  // native: one Native block of the accepted rows (Row::end unused); else RowBinary rows, as
  // RowBinaryEncoder::encode gives them (Row::end set).
  bool native = false;
  std::string data;
  std::vector<Row> rows;            // accepted rows, in batch order (record_index: the row)
  std::vector<Rejection> rejected;  // refused rows, in batch order
  std::string error;                // the batch cannot be encoded at all
  bool ok() const { return error.empty(); }
};

// Not thread-safe for encode() (the RowBinary encoder it falls back on owns a parser);
// native_block() is const and may run on any thread.
class ArrowEncoder {
 public:
  // `native`: encode Native blocks where the columns allow it (no LowCardinality); else RowBinary.
  ArrowEncoder(std::vector<Column> columns, bool native);

  ArrowEncoded encode(const ArrowInput& batch);
  // Rows `rows` of a batch encode() took in columns (ArrowEncoded::native) as one Native block:
  // the smaller inserts of a bisection.
  std::string native_block(const ArrowInput& batch, std::span<const uint32_t> rows) const;

  const std::vector<Column>& columns() const { return columns_; }
  bool native() const { return native_; }

 private:
  std::vector<Column> columns_;
  bool native_;
  bool has_payload_field_ = false;  // a field column named `payload` (see whole_payloads())
  RowBinaryEncoder records_;        // batches encoded as records
};

// The batch's records rebuilt from its columns (payload = the `payload` column's cell, key,
// timestamp and headers from the pico_* columns), when the batch exports whole payloads; the
// ClickHouse sink infers and encodes those as the batches plane does.
class ArrowRecords {
 public:
  explicit ArrowRecords(const ArrowInput& batch);
  const pmq_batch& batch() const { return batch_; }

 private:
  std::vector<pmq_record> records_;
  std::vector<std::vector<pmq_header>> headers_;
  std::string topic_;
  pmq_batch batch_{};
};

// Whether the batch holds whole payloads, not fields: TEXT / RAW, or a JSON batch exported as
// one `payload` JSON column (some payload is not an object). A batch of objects whose only field
// is `payload` looks the same; `payload_is_field` (the table has a `payload` field column) says
// which it is.
bool whole_payloads(const ArrowInput& batch, bool payload_is_field);

// Columns for a table created from an Arrow batch, by the exporter's own inference (docs/arrow.md):
// bool -> Bool (UInt8 before 21.12), int64 -> Int64, float64 -> Float64, utf8 and JSON columns
// -> String, a column with only nulls -> String, binary -> String, timestamp -> DateTime64(3)
// (Int64 before 20.1); all Nullable. pico_* columns are left to the metadata columns.
Inferred infer_arrow_columns(const ArrowInput& batch, ServerVersion version);

}  // namespace picomq::clickhouse
