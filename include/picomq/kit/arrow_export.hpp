#pragma once
// Turns one batch of decoded records into an Arrow record batch, handed over through the Arrow
// C Data Interface (picomq/arrow_c_data.h), so sinks that speak Arrow need no libarrow. Column
// rules, inference and ownership: docs/arrow.md.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/arrow_c_data.h"
#include "picomq/sink_abi.h"

namespace simdjson::dom {
class parser;
}

namespace picomq::arrow {

// Json is utf8 holding one JSON value's text, tagged with the arrow.json extension.
enum class ColumnType { Bool, Int64, Float64, Utf8, Binary, TimestampMs, Json };

struct DeclaredColumn {
  std::string name;
  ColumnType type;
  bool nullable = true;
};

struct ExportOptions {
  bool include_metadata = true;                         // the pico_* columns first
  std::optional<std::vector<DeclaredColumn>> declared;  // payload columns; absent = infer
  // The JSON payloads were validated already (the runtime's JSON decoder did): inferred columns
  // are then read in one On-Demand pass that does not validate nested values again. Off: every
  // payload is validated here, and an invalid one is a rejected record.
  bool payloads_validated = false;
  // With validated payloads and inferred columns: a batch whose fields keep their kinds is built
  // as it is read (one pass, no cells kept); others take the general two-pass reading. Off: the
  // general reading always, and ParsedBatchExport does not apply (tests compare the two).
  bool one_pass_columns = true;
};

struct RecordRejection {
  size_t record_index;  // index in the batch
  std::string reason;   // every problem of that record, joined with "; "
};

struct ExportResult {
  bool ok = false;
  std::vector<RecordRejection> rejected;  // non-empty => ok == false and nothing was exported
  std::string error;                      // set when ok == false for another reason
};

// An export held until a write hands it over: what was not moved out is released here.
struct HeldExport {
  ExportResult result;
  ArrowSchema schema{};
  ArrowArray array{};

  HeldExport() = default;
  HeldExport(const HeldExport&) = delete;
  HeldExport& operator=(const HeldExport&) = delete;
  ~HeldExport() {
    if (schema.release) schema.release(&schema);
    if (array.release) array.release(&array);
  }
};

// A copy of a held export for one more consumer: new ArrowSchema / ArrowArray structs (each
// node, child and dictionary its own, as the C Data Interface lets a consumer move children out
// and release them alone) over the same buffers and strings, which `held` keeps alive until the
// last copy is released. What a write retry hands the sink again instead of exporting again.
void lend_export(const std::shared_ptr<const HeldExport>& held, ArrowSchema* schema, ArrowArray* array);

// On success fills *schema and *array (a struct array, one row per record, in record order);
// the caller owns them and calls their release callbacks (C Data Interface move semantics).
// On failure both are left released (release == NULL) and own nothing.
ExportResult export_batch(const pmq_batch& batch, const ExportOptions& options, ArrowSchema* schema,
                          ArrowArray* array) noexcept;

// The export of a JSON batch (inferred or declared columns), built while the caller parses its payloads:
// the runtime's JSON decoder validates each payload with a simdjson DOM parse, and the export
// reads that parse (values from the DOM, texts from stage 1's positions) instead of parsing the
// payload again. Records are added in the batch's order. A batch the one-pass columns cannot
// take, or a record without a parse, makes finish() export the batch with export_batch(), so
// the result is the same either way.
class ParsedBatchExport {
 public:
  // Whether the options allow it (validated payloads, one pass).
  static bool applies(const ExportOptions& options);

  ParsedBatchExport(const ExportOptions& options, size_t expected_rows);
  ~ParsedBatchExport();
  ParsedBatchExport(const ParsedBatchExport&) = delete;
  ParsedBatchExport& operator=(const ParsedBatchExport&) = delete;

  // The next record: `parser` holds `payload` parsed (its last parse); null when the caller has
  // no parse of it.
  void add_parsed(std::string_view payload, const simdjson::dom::parser* parser) noexcept;
  void add_tombstone() noexcept;
  // As export_batch(); `batch` holds exactly the records added, in order.
  ExportResult finish(const pmq_batch& batch, ArrowSchema* schema, ArrowArray* array) noexcept;

 private:
  struct State;
  const ExportOptions& options_;
  std::unique_ptr<State> state_;  // null once the batch left the path
};

// "bool", "int64", "float64", "utf8", "binary", "timestamp_ms", "json"; nullopt for anything else.
std::optional<ColumnType> parse_column_type(std::string_view name);
std::string_view to_string(ColumnType type);

}  // namespace picomq::arrow
