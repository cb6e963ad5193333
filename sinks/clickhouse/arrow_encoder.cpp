#include "clickhouse/arrow_encoder.h"

#include <simdjson.h>

#include <cstring>
#include <optional>

#include "clickhouse/native.h"
#include "picomq/arrow_view.hpp"
#include "picomq/kit/headers.hpp"
#include "picomq/kit/metadata.hpp"

namespace picomq::clickhouse {
namespace {

using sdk::ColumnType;

constexpr std::string_view kPayloadColumn = "payload";

// One Arrow column of the batch, read by row without checks (the exporter's arrays: docs/arrow.md).
struct Cells {
  const ArrowSchema* schema = nullptr;
  const ArrowArray* array = nullptr;
  ColumnType type = ColumnType::Null;
  bool json = false;
  int64_t base = 0;  // the physical index of row 0
  const uint8_t* validity = nullptr;

  Cells() = default;
  Cells(const ArrowSchema* s, const ArrowArray* a, int64_t parent_offset)
      : schema(s),
        array(a),
        type(sdk::column_type_of_format(s->format ? s->format : "")),
        base(parent_offset + a->offset) {
    for (const auto& [key, value] : sdk::decode_metadata(s->metadata))
      if (key == "ARROW:extension:name" && value == "arrow.json") json = true;
    if (a->null_count != 0 && a->n_buffers > 0) validity = static_cast<const uint8_t*>(a->buffers[0]);
  }
  bool null(size_t row) const {
    if (type == ColumnType::Null) return true;
    if (!validity) return false;
    const int64_t i = base + static_cast<int64_t>(row);
    return !((validity[i >> 3] >> (i & 7)) & 1);
  }
  template <class T>
  T value(size_t row) const {
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(array->buffers[1]) + (base + static_cast<int64_t>(row)) * sizeof(T),
                sizeof(T));
    return v;
  }
  bool boolean(size_t row) const {
    const int64_t i = base + static_cast<int64_t>(row);
    return (static_cast<const uint8_t*>(array->buffers[1])[i >> 3] >> (i & 7)) & 1;
  }
  std::string_view text(size_t row) const {
    const int64_t i = base + static_cast<int64_t>(row);
    int64_t begin, end;
    if (type == ColumnType::LargeUtf8 || type == ColumnType::LargeBinary) {
      begin = static_cast<const int64_t*>(array->buffers[1])[i];
      end = static_cast<const int64_t*>(array->buffers[1])[i + 1];
    } else {
      begin = static_cast<const int32_t*>(array->buffers[1])[i];
      end = static_cast<const int32_t*>(array->buffers[1])[i + 1];
    }
    if (end <= begin) return {};
    return {static_cast<const char*>(array->buffers[2]) + begin, static_cast<size_t>(end - begin)};
  }
};

std::optional<size_t> child_named(const ArrowSchema* schema, std::string_view name) {
  for (int64_t i = 0; i < schema->n_children; ++i)
    if (schema->children[i]->name && name == schema->children[i]->name) return static_cast<size_t>(i);
  return std::nullopt;
}

Cells cells_of(const ArrowInput& in, size_t child) {
  return Cells(in.schema->children[child], in.array->children[child], in.array->offset);
}

// Where one table column's values come from in one batch, and whether they are copied as they
// are (Native) or converted cell by cell.
struct Binding {
  const Column* column = nullptr;
  enum class From { Missing, Topic, Partition, Offset, Cells } from = From::Missing;
  Cells cells;
  bool copy = false;         // Native: the column's values copied without a per-cell conversion
  bool nested_json = false;  // a JSON column whose every value is an object or an array
};

enum class Copy { None, Int64, Int32, Float64, Text, Bool, NestedJson, Headers };

// The type a column's values are written as, past Nullable and LowCardinality (its inner type
// on the wire).
const Type& value_type(const Type& t) { return t.nullable() ? t.inner->wire() : t.wire(); }

// How a column is copied into a Native block. Only Native encoders copy, and a table with a
// LowCardinality column has none (ArrowEncoder).
Copy copy_kind(const Binding& b) {
  const Type& t = value_type(b.column->type);
  switch (b.from) {
    case Binding::From::Missing: return Copy::None;
    case Binding::From::Topic: return t.kind == Kind::String ? Copy::Text : Copy::None;
    case Binding::From::Partition: return t.kind == Kind::Int32 ? Copy::Int32 : Copy::None;
    case Binding::From::Offset: return t.kind == Kind::Int64 ? Copy::Int64 : Copy::None;
    case Binding::From::Cells: break;
  }
  if (b.cells.json) return b.nested_json && t.kind == Kind::String ? Copy::NestedJson : Copy::None;
  const Source source = b.column->source;
  switch (b.cells.type) {
    case ColumnType::Int64: return t.kind == Kind::Int64 && source != Source::Timestamp ? Copy::Int64 : Copy::None;
    case ColumnType::Int32: return t.kind == Kind::Int32 ? Copy::Int32 : Copy::None;
    case ColumnType::Float64: return t.kind == Kind::Float64 ? Copy::Float64 : Copy::None;
    case ColumnType::TimestampMs: return t.kind == Kind::Int64 ? Copy::Int64 : Copy::None;  // epoch ms
    case ColumnType::Bool: return t.kind == Kind::Bool || t.kind == Kind::UInt8 ? Copy::Bool : Copy::None;
    case ColumnType::Utf8:
    case ColumnType::LargeUtf8:
    case ColumnType::Binary:
    case ColumnType::LargeBinary: return t.kind == Kind::String ? Copy::Text : Copy::None;
    case ColumnType::Map: return t.kind == Kind::String && source == Source::Headers ? Copy::Headers : Copy::None;
    default: return Copy::None;
  }
}

// The columns of `columns` bound to the batch; "" or why the batch cannot be encoded.
std::string bind_columns(const std::vector<Column>& columns, const ArrowInput& in, bool native,
                         std::vector<Binding>& out) {
  out.clear();
  out.reserve(columns.size());
  for (const Column& c : columns) {
    if (std::string why = check_column(c); !why.empty()) return why;
    Binding b;
    b.column = &c;
    std::string_view name = c.field;
    switch (c.source) {
      case Source::Topic: b.from = Binding::From::Topic; break;
      case Source::Partition: b.from = Binding::From::Partition; break;
      case Source::Offset:
      case Source::Version: b.from = Binding::From::Offset; break;
      case Source::Deleted: name = {}; break;  // no such Arrow column: the default, 0 (records, not changes)
      case Source::Timestamp: name = kit::kTimestampField; break;
      case Source::Key: name = kit::kKeyField; break;
      case Source::Headers: name = kit::kHeadersField; break;
      case Source::Payload: return "payload_mode 'string' is written from the batches plane";
      case Source::Field: break;
    }
    if (b.from == Binding::From::Missing) {
      if (auto i = child_named(in.schema, name)) {
        b.from = Binding::From::Cells;
        b.cells = cells_of(in, *i);
        switch (b.cells.type) {
          case ColumnType::Null:
          case ColumnType::Bool:
          case ColumnType::Int32:
          case ColumnType::Int64:
          case ColumnType::Float64:
          case ColumnType::Utf8:
          case ColumnType::LargeUtf8:
          case ColumnType::Binary:
          case ColumnType::LargeBinary:
          case ColumnType::TimestampMs:
          case ColumnType::Map: break;
          default:
            return "Arrow column '" + std::string(name) + "' has the type '" + std::string(b.cells.schema->format) +
                   "', which the sink does not write";
        }
      }
    }
    if (b.from == Binding::From::Cells && b.cells.json) {
      // Objects and arrays go into a String as their text: nothing to refuse, nothing to parse.
      b.nested_json = true;
      for (size_t r = 0; r < in.rows && b.nested_json; ++r) {
        if (b.cells.null(r)) continue;
        const std::string_view text = b.cells.text(r);
        b.nested_json = !text.empty() && (text[0] == '{' || text[0] == '[');
      }
    }
    b.copy = native && copy_kind(b) != Copy::None;
    out.push_back(b);
  }
  return {};
}

// JSON text without the whitespace between its tokens (the exporter keeps each value's original
// text; the batches plane writes nested values minified). Numbers and escapes stay as sent.
std::string_view without_whitespace(std::string_view text, std::string& scratch) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  // Any whitespace at all? Most values have none. glibc's memchr is vectorised: its four passes
  // over a 37-byte array cost 15 ns against 54 for one scalar pass (which GCC does not vectorise;
  // the scan was 12 % of the delivery thread on the ClickHouse bench).
  bool blank = false;
  for (const char c : {' ', '\n', '\t', '\r'})
    if (!text.empty() && std::memchr(text.data(), c, text.size()) != nullptr) {
      blank = true;
      break;
    }
  if (!blank) return text;
  scratch.clear();  // whitespace inside strings stays, between tokens it goes
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (space(c)) {
      continue;
    }
    scratch += c;
  }
  return scratch;
}

// A headers map's row as the JSON object the batches plane writes (kit::append_headers_json).
std::string_view headers_json(const Cells& c, size_t row, std::string& scratch) {
  const int64_t i = c.base + static_cast<int64_t>(row);
  const auto* offsets = static_cast<const int32_t*>(c.array->buffers[1]);
  if (offsets[i] == offsets[i + 1]) return "{}";  // no headers, the usual case
  std::vector<pmq_header> headers;
  for (const auto& [name, value] :
       sdk::ColumnView(c.schema, c.array, c.base - c.array->offset, static_cast<int64_t>(row) + 1).entries(row))
    headers.push_back({{reinterpret_cast<const uint8_t*>(name.data()), name.size()},
                       {value ? value->data : nullptr, value ? value->size : 0}});
  scratch.clear();
  kit::append_headers_json(scratch, headers);
  return scratch;
}

// The JSON text of a JSON column's cell into `type`: objects and arrays into a String column as
// their text without whitespace, anything else as the JSON value it is (append_value's rules).
std::string append_json_cell(const Type& type, std::string_view text, std::string& out, simdjson::dom::parser& parser,
                             std::string& scratch) {
  if (!text.empty() && (text[0] == '{' || text[0] == '[') && value_type(type).kind == Kind::String)
    return append_string(type, without_whitespace(text, scratch), out);
  simdjson::dom::element value;
  if (parser.parse(text.data(), text.size()).get(value))
    return "expected " + value_type(type).name() + ", found a number beyond 64 bits";
  return append_value(type, value, out, scratch);
}

// Row `row`'s value of a bound column as RowBinary; the reason it does not convert, or "".
std::string append_cell(const Binding& b, const ArrowInput& in, size_t row, std::string& out,
                        simdjson::dom::parser& parser, std::string& scratch) {
  const Type& type = b.column->type;
  auto or_default = [&](size_t start, std::string reason) {  // metadata: out of range writes the default
    if (reason.empty()) return reason;
    out.resize(start);
    append_default(type, out);
    return std::string();
  };
  switch (b.from) {
    case Binding::From::Missing: append_default(type, out); return {};
    case Binding::From::Topic: return append_string(type, in.topic, out);
    case Binding::From::Partition: return or_default(out.size(), append_integer(type, in.partition, out));
    case Binding::From::Offset: return or_default(out.size(), append_integer(type, in.offsets[row], out));
    case Binding::From::Cells: break;
  }
  const Cells& c = b.cells;
  if (c.null(row)) {
    append_default(type, out);
    return {};
  }
  if (b.column->source == Source::Timestamp && (c.type == ColumnType::TimestampMs || c.type == ColumnType::Int64))
    return or_default(out.size(), append_timestamp_ms(type, c.value<int64_t>(row), out));
  if (c.json) return append_json_cell(type, c.text(row), out, parser, scratch);
  switch (c.type) {
    case ColumnType::Bool: return append_bool(type, c.boolean(row), out);
    case ColumnType::Int32: return append_integer(type, c.value<int32_t>(row), out);
    case ColumnType::Int64: return append_integer(type, c.value<int64_t>(row), out);
    case ColumnType::Float64: return append_float(type, c.value<double>(row), out, true);
    case ColumnType::TimestampMs: return append_timestamp_ms(type, c.value<int64_t>(row), out);
    case ColumnType::Utf8:
    case ColumnType::LargeUtf8:
    case ColumnType::Binary:
    case ColumnType::LargeBinary: return append_string(type, c.text(row), out);
    case ColumnType::Map: return append_string(type, headers_json(c, row, scratch), out);
    default: append_default(type, out); return {};
  }
}

// A copied column's Native data for `rows`: the null map of a Nullable column, then the values
// (a default where NULL).
void append_copied(const Binding& b, const ArrowInput& in, std::span<const uint32_t> rows, std::string& out) {
  const Cells& c = b.cells;
  const bool cells = b.from == Binding::From::Cells;
  if (b.column->type.wire().nullable()) {
    const size_t at = out.size();
    out.resize(at + rows.size());
    char* nulls = out.data() + at;
    for (size_t i = 0; i < rows.size(); ++i) nulls[i] = cells && c.null(rows[i]) ? 1 : 0;
  }
  auto fixed = [&](auto zero, auto read) {
    using T = decltype(zero);
    const size_t at = out.size();
    out.resize(at + rows.size() * sizeof(T));
    char* p = out.data() + at;
    for (size_t i = 0; i < rows.size(); ++i, p += sizeof(T)) {
      const T v = cells && c.null(rows[i]) ? zero : read(rows[i]);
      std::memcpy(p, &v, sizeof(T));
    }
  };
  switch (copy_kind(b)) {
    case Copy::Int64:
      if (b.from == Binding::From::Offset) return fixed(int64_t{0}, [&](size_t r) { return in.offsets[r]; });
      return fixed(int64_t{0}, [&](size_t r) { return c.value<int64_t>(r); });
    case Copy::Int32:
      if (b.from == Binding::From::Partition) return fixed(int32_t{0}, [&](size_t) { return in.partition; });
      return fixed(int32_t{0}, [&](size_t r) { return c.value<int32_t>(r); });
    case Copy::Float64: return fixed(0.0, [&](size_t r) { return c.value<double>(r); });
    case Copy::Bool: return fixed(uint8_t{0}, [&](size_t r) { return static_cast<uint8_t>(c.boolean(r)); });
    case Copy::Text:
      for (uint32_t r : rows) {
        append_sized(out, b.from == Binding::From::Topic ? in.topic : c.null(r) ? std::string_view() : c.text(r));
      }
      return;
    case Copy::NestedJson:
    case Copy::Headers: {
      std::string scratch;
      const bool headers = copy_kind(b) == Copy::Headers;
      for (uint32_t r : rows) {
        std::string_view s;
        if (!c.null(r)) s = headers ? headers_json(c, r, scratch) : without_whitespace(c.text(r), scratch);
        append_sized(out, s);
      }
      return;
    }
    case Copy::None: return;
  }
}

// One column's values for every row, converted cell by cell (RowBinary, each row's end kept).
struct Converted {
  std::string data;
  std::vector<uint32_t> ends;
  std::string_view row(size_t r) const {
    const uint32_t from = r == 0 ? 0 : ends[r - 1];
    return std::string_view(data).substr(from, ends[r] - from);
  }
};

// The Native block of `rows`: copied columns straight from the batch, the others from their
// converted cells (`converted[i]`, indexed by batch row).
std::string native_of(const std::vector<Binding>& bound, const std::vector<Converted>& converted, const ArrowInput& in,
                      std::span<const uint32_t> rows, bool every_row) {
  std::string out;
  size_t guess = 64 * bound.size();
  for (const Converted& c : converted) guess += c.data.size();
  out.reserve(guess + rows.size() * 8 * bound.size());
  append_varint(out, bound.size());
  append_varint(out, rows.size());
  std::string values;
  for (size_t i = 0; i < bound.size(); ++i) {
    const Binding& b = bound[i];
    append_sized(out, b.column->name);
    append_sized(out, b.column->type.name());
    if (b.copy) {
      append_copied(b, in, rows, out);
      continue;
    }
    std::string_view data = converted[i].data;
    if (!every_row) {
      values.clear();
      for (uint32_t r : rows) values += converted[i].row(r);
      data = values;
    }
    if (std::string why = append_native_column(b.column->type, data, rows.size(), out); !why.empty())
      throw std::logic_error("column " + b.column->name + ": " + why);
  }
  return out;
}

}  // namespace

ArrowInput arrow_input(const pmq_arrow_batch& batch) {
  ArrowInput in;
  in.schema = batch.arrow_schema;
  in.array = batch.arrow_array;
  in.topic = batch.topic ? batch.topic : "";
  in.partition = batch.partition;
  in.payload_format = batch.payload_format;
  in.schema_name = batch.schema ? batch.schema : "";
  in.offsets = batch.offsets;
  in.rows = batch.record_count;
  return in;
}

bool whole_payloads(const ArrowInput& in, bool payload_is_field) {
  if (in.payload_format != PMQ_PAYLOAD_JSON) return true;
  if (payload_is_field) return false;
  size_t payload_columns = 0;
  bool payload_json = false;
  for (int64_t i = 0; i < in.schema->n_children; ++i) {
    const char* name = in.schema->children[i]->name;
    const std::string_view n = name ? name : "";
    if (metadata_source(n) != Source::Field) continue;
    ++payload_columns;
    if (n == kPayloadColumn) payload_json = Cells(in.schema->children[i], in.array->children[i], 0).json;
  }
  return payload_columns == 1 && payload_json;
}

ArrowRecords::ArrowRecords(const ArrowInput& in) : topic_(in.topic) {
  records_.resize(in.rows);
  headers_.resize(in.rows);
  std::optional<Cells> payload, key, timestamp;
  std::optional<size_t> headers_child;
  if (auto i = child_named(in.schema, kPayloadColumn)) payload = cells_of(in, *i);
  if (auto i = child_named(in.schema, kit::kKeyField)) key = cells_of(in, *i);
  if (auto i = child_named(in.schema, kit::kTimestampField)) timestamp = cells_of(in, *i);
  headers_child = child_named(in.schema, kit::kHeadersField);
  std::optional<sdk::ColumnView> headers;
  if (headers_child)
    headers.emplace(in.schema->children[*headers_child], in.array->children[*headers_child], in.array->offset,
                    static_cast<int64_t>(in.rows));
  for (size_t r = 0; r < in.rows; ++r) {
    pmq_record& rec = records_[r];
    rec.offset = in.offsets[r];
    rec.timestamp_ms = timestamp && !timestamp->null(r) ? timestamp->value<int64_t>(r) : -1;
    auto bytes = [](std::string_view s) {
      return pmq_bytes{reinterpret_cast<const uint8_t*>(s.data() ? s.data() : ""), s.size()};
    };
    if (key && !key->null(r)) rec.key = bytes(key->text(r));
    if (payload && !payload->null(r)) rec.payload = bytes(payload->text(r));
    if (headers && headers->type() == ColumnType::Map) {
      for (const auto& [name, value] : headers->entries(r))
        headers_[r].push_back(
            {bytes(name), value
                              ? pmq_bytes{value->data ? value->data : reinterpret_cast<const uint8_t*>(""), value->size}
                              : pmq_bytes{nullptr, 0}});
      rec.headers = headers_[r].data();
      rec.header_count = headers_[r].size();
    }
  }
  batch_.struct_size = sizeof(pmq_batch);
  batch_.topic = topic_.c_str();
  batch_.partition = in.partition;
  batch_.payload_format = in.payload_format;
  batch_.schema = in.schema_name;
  batch_.records = records_.data();
  batch_.record_count = records_.size();
  batch_.record_size = sizeof(pmq_record);
}

ArrowEncoder::ArrowEncoder(std::vector<Column> columns, bool native)
    : columns_(columns), native_(native && native_unsupported(columns).empty()), records_(std::move(columns)) {
  for (const Column& c : columns_)
    if (c.source == Source::Field && c.field == kPayloadColumn) has_payload_field_ = true;
}

ArrowEncoded ArrowEncoder::encode(const ArrowInput& in) {
  ArrowEncoded result;
  if (in.schema == nullptr || in.array == nullptr || in.schema->n_children != in.array->n_children ||
      static_cast<size_t>(in.array->length) != in.rows || (in.rows > 0 && in.offsets == nullptr)) {
    result.error = "malformed Arrow batch";
    return result;
  }
  if (whole_payloads(in, has_payload_field_)) {  // as records, exactly as the batches plane
    ArrowRecords records(in);
    Encoded e = records_.encode(records.batch());
    result.data = std::move(e.data);
    result.rows = std::move(e.rows);
    result.rejected = std::move(e.rejected);
    result.error = std::move(e.error);
    return result;
  }
  std::vector<Binding> bound;
  if (result.error = bind_columns(columns_, in, native_, bound); !result.error.empty()) return result;

  // Converted columns first: a cell that does not convert rejects its row, and a row is rejected
  // by its first such column in table order (as RowBinaryEncoder reports it).
  std::vector<Converted> converted(bound.size());
  std::vector<std::string> reasons(in.rows);
  std::vector<char> refused(in.rows, 0);
  simdjson::dom::parser parser;
  std::string scratch;
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i].copy) continue;
    Converted& conv = converted[i];
    conv.ends.resize(in.rows);
    for (size_t r = 0; r < in.rows; ++r) {
      const size_t start = conv.data.size();
      if (!refused[r]) {
        std::string why = append_cell(bound[i], in, r, conv.data, parser, scratch);
        if (!why.empty()) {
          conv.data.resize(start);
          refused[r] = 1;
          reasons[r] = "field '" + bound[i].column->field + "': " + why;
        }
      }
      conv.ends[r] = static_cast<uint32_t>(conv.data.size());
    }
  }
  std::vector<uint32_t> accepted;
  accepted.reserve(in.rows);
  for (size_t r = 0; r < in.rows; ++r) {
    if (refused[r]) result.rejected.push_back({r, std::move(reasons[r])});
    else accepted.push_back(static_cast<uint32_t>(r));
  }
  for (uint32_t r : accepted) result.rows.push_back({0, r});
  if (accepted.empty()) return result;
  if (native_) {
    result.native = true;
    result.data = native_of(bound, converted, in, accepted, accepted.size() == in.rows);
    return result;
  }
  // RowBinary: every column was converted; the rows are their cells side by side.
  for (Row& row : result.rows) {
    for (const Converted& c : converted) result.data += c.row(row.record_index);
    row.end = result.data.size();
  }
  return result;
}

std::string ArrowEncoder::native_block(const ArrowInput& in, std::span<const uint32_t> rows) const {
  std::vector<Binding> bound;
  if (std::string why = bind_columns(columns_, in, true, bound); !why.empty()) throw std::logic_error(why);
  std::vector<Converted> converted(bound.size());
  simdjson::dom::parser parser;
  std::string scratch;
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i].copy) continue;
    Converted& conv = converted[i];
    for (uint32_t r : rows) {
      if (std::string why = append_cell(bound[i], in, r, conv.data, parser, scratch); !why.empty())
        throw std::logic_error("row " + std::to_string(r) + " was accepted and now does not convert: " + why);
    }
  }
  return native_of(bound, converted, in, rows, true);
}

Inferred infer_arrow_columns(const ArrowInput& in, ServerVersion version) {
  if (whole_payloads(in, false)) return infer_columns(ArrowRecords(in).batch(), version);
  Inferred out;
  for (int64_t i = 0; i < in.schema->n_children; ++i) {
    const Cells c = cells_of(in, static_cast<size_t>(i));
    const std::string name = c.schema->name ? c.schema->name : "";
    if (metadata_source(name) != Source::Field) continue;
    if (name.empty()) {
      out.notes.emplace_back("an Arrow column without a name is left out");
      continue;
    }
    // The exporter's inferred columns are the kit's lattice types; Int32 and timestamps come
    // from a declared schema.
    Type t = column_type(kit::InferredType::Json, version);
    switch (c.json ? ColumnType::Utf8 : c.type) {
      case ColumnType::Bool: t = column_type(kit::InferredType::Bool, version); break;
      case ColumnType::Int32: t = nullable(make(Kind::Int32)); break;
      case ColumnType::Int64: t = column_type(kit::InferredType::Int64, version); break;
      case ColumnType::Float64: t = column_type(kit::InferredType::Float64, version); break;
      case ColumnType::TimestampMs:
        if (version.at_least(20, 1)) {
          t = make(Kind::DateTime64);
          t.size = 3;
          t = nullable(std::move(t));
        } else {
          t = nullable(make(Kind::Int64));
        }
        break;
      default: break;  // utf8, JSON, binary, only nulls: String
    }
    out.columns.push_back({name, std::move(t), Source::Field, name});
  }
  return out;
}

}  // namespace picomq::clickhouse
