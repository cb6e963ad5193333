#include "picomq/kit/arrow_export.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <set>
#include <unordered_map>

#include "arrow/array_builder.h"
#include "arrow/c_export.h"
#include "arrow/json_payload.h"
#include "arrow/one_pass_columns.h"
#include "picomq/kit/metadata.hpp"

namespace picomq::arrow {
namespace {

using detail::ArrayBuilder;
using detail::BuiltColumn;
using detail::ExportError;
using detail::is_metadata_column;
using detail::JsonKind;
using detail::JsonPayloadReader;
using detail::JsonValue;
using detail::Layout;
using detail::ParsedPayload;

constexpr std::string_view kPayloadColumn = "payload";

std::string_view as_text(const pmq_bytes& bytes) { return {reinterpret_cast<const char*>(bytes.data), bytes.size}; }

bool is_utf8(std::string_view text) { return simdjson::validate_utf8(text.data(), text.size()); }

// Totals for reserve_bytes: saturate instead of wrapping, so an absurd total still fails the
// int32 offset check rather than passing it.
size_t saturating_add(size_t a, size_t b) {
  size_t sum;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}
size_t saturating_mul(size_t a, size_t b) {
  size_t product;
  return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}

class Records {
 public:
  explicit Records(const pmq_batch& batch) : batch_(batch) {}
  size_t size() const { return batch_.record_count; }
  const pmq_record& operator[](size_t index) const { return *pmq_batch_record(&batch_, index); }

 private:
  const pmq_batch& batch_;
};

bool is_tombstone(const pmq_record& record) { return record.payload.data == nullptr; }

// A record with several problems gets one rejection listing all of them, in the order found.
class Rejections {
 public:
  void add(size_t record_index, std::string_view reason) {
    std::string& reasons = by_record_[record_index];
    if (!reasons.empty()) reasons.append("; ");
    reasons.append(reason);
  }
  bool empty() const { return by_record_.empty(); }
  std::vector<RecordRejection> take() {
    std::vector<RecordRejection> out;
    out.reserve(by_record_.size());
    for (auto& [index, reason] : by_record_) out.push_back({index, std::move(reason)});
    by_record_.clear();
    return out;
  }

 private:
  std::map<size_t, std::string> by_record_;  // ordered: rejections come out in record order
};

// Which member gives each payload column its value in the current record: the last one of a
// duplicated key (stamps avoid clearing the table for every record).
class RecordSlots {
 public:
  void start_record() {
    ++stamp_;
    touched_.clear();
  }
  void set(size_t column, size_t member) {
    if (column >= member_.size()) {
      member_.resize(column + 1);
      stamp_of_.resize(column + 1, 0);
    }
    if (stamp_of_[column] != stamp_) touched_.push_back(column);
    member_[column] = member;
    stamp_of_[column] = stamp_;
  }
  // The member index for `column` in this record, or npos when the record lacks it.
  size_t get(size_t column) const {
    return column < member_.size() && stamp_of_[column] == stamp_ ? member_[column] : npos;
  }
  const std::vector<size_t>& touched() const { return touched_; }  // in order of first appearance
  static constexpr size_t npos = static_cast<size_t>(-1);

 private:
  std::vector<size_t> member_;
  std::vector<uint64_t> stamp_of_;
  std::vector<size_t> touched_;
  uint64_t stamp_ = 0;
};

// Field name -> column index. Records usually list their fields in the same order, so the key
// last seen at each member position is remembered with its answer and checked first; a miss
// falls back to a hash table.
class FieldLookup {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);

  // The column of `key`, found at member `position` of a record, or npos.
  size_t find(size_t position, std::string_view key) {
    if (position < cached_.size() && cached_[position].valid && cached_[position].key == key) {
      return cached_[position].column;
    }
    const auto it = columns_.find(key);
    const size_t column = it == columns_.end() ? npos : it->second;
    if (position < kMaxCached) {
      if (position >= cached_.size()) cached_.resize(position + 1);
      Cached& entry = cached_[position];
      entry.key.assign(key);
      entry.column = column;
      entry.valid = true;
    }
    return column;
  }

  void add(std::string_view key, size_t column) {
    columns_.emplace(std::string(key), column);
    for (Cached& entry : cached_) entry.valid = false;  // a cached miss may be this key
  }

 private:
  static constexpr size_t kMaxCached = 1024;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  struct Cached {
    std::string key;
    size_t column = npos;
    bool valid = false;
  };
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> columns_;
  std::vector<Cached> cached_;
};

// A payload column being built. `type` is nullopt for an inferred field that is null in every
// record (Arrow's null type).
struct PayloadColumn {
  PayloadColumn(std::string column_name, std::optional<ColumnType> column_type, bool is_nullable)
      : name(column_name),
        type(column_type),
        nullable(is_nullable),
        builder(detail::layout_of(column_type), std::move(column_name)) {}

  BuiltColumn finish() {
    const int64_t flags = nullable ? ARROW_FLAG_NULLABLE : 0;
    if (!type) return builder.finish("n", flags);
    switch (*type) {
      case ColumnType::Bool: return builder.finish("b", flags);
      case ColumnType::Int64: return builder.finish("l", flags);
      case ColumnType::Float64: return builder.finish("g", flags);
      case ColumnType::Utf8: return builder.finish("u", flags);
      case ColumnType::Binary: return builder.finish("z", flags);
      case ColumnType::TimestampMs: return builder.finish("tsm:UTC", flags);
      case ColumnType::Json: return builder.finish("u", flags, detail::json_extension_metadata());
    }
    throw ExportError("unknown column type");
  }

  std::string name;
  std::optional<ColumnType> type;
  bool nullable;
  ArrayBuilder builder;
};

std::vector<BuiltColumn> finish_all(std::vector<PayloadColumn>& columns) {
  std::vector<BuiltColumn> built;
  built.reserve(columns.size());
  for (PayloadColumn& column : columns) built.push_back(column.finish());
  return built;
}

// ---- metadata columns -------------------------------------------------------------------------

void check_header_names(const Records& records, Rejections& rejections) {
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    for (size_t h = 0; h < record.header_count; ++h) {
      if (!is_utf8(as_text(record.headers[h].name))) {
        rejections.add(i, "header " + std::to_string(h) + " has a name that is not valid UTF-8");
      }
    }
  }
}

std::vector<BuiltColumn> metadata_columns(const pmq_batch& batch, const Records& records) {
  const size_t n = records.size();
  const std::string_view topic = batch.topic;

  ArrayBuilder topics(Layout::Bytes, std::string(kit::kTopicField));
  ArrayBuilder partitions(Layout::Int32, std::string(kit::kPartitionField));
  ArrayBuilder offsets(Layout::Int64, std::string(kit::kOffsetField));
  ArrayBuilder timestamps(Layout::Int64, std::string(kit::kTimestampField));
  ArrayBuilder keys(Layout::Bytes, std::string(kit::kKeyField));
  detail::HeadersBuilder headers;

  size_t key_bytes = 0, header_count = 0, name_bytes = 0, value_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const pmq_record& record = records[i];
    key_bytes = saturating_add(key_bytes, record.key.size);
    header_count = saturating_add(header_count, record.header_count);
    for (size_t h = 0; h < record.header_count; ++h) {
      name_bytes = saturating_add(name_bytes, record.headers[h].name.size);
      value_bytes = saturating_add(value_bytes, record.headers[h].value.size);
    }
  }
  topics.reserve_bytes(saturating_mul(topic.size(), n));
  keys.reserve_bytes(key_bytes);
  for (ArrayBuilder* column : {&topics, &partitions, &offsets, &timestamps, &keys}) column->reserve_rows(n);
  headers.reserve(header_count, name_bytes, value_bytes);

  for (size_t i = 0; i < n; ++i) {
    const pmq_record& record = records[i];
    topics.append_bytes(topic);
    partitions.append_int32(batch.partition);
    offsets.append_int64(record.offset);
    if (record.timestamp_ms == -1) {
      timestamps.append_null();  // the broker had no timestamp
    } else {
      timestamps.append_int64(record.timestamp_ms);
    }
    if (record.key.data == nullptr) {
      keys.append_null();
    } else {
      keys.append_bytes(record.key.data, record.key.size);
    }
    headers.append(record.headers, record.header_count);
  }

  std::vector<BuiltColumn> columns;
  columns.push_back(topics.finish("u", 0));
  columns.push_back(partitions.finish("i", 0));
  columns.push_back(offsets.finish("l", 0));
  columns.push_back(timestamps.finish("tsm:UTC", ARROW_FLAG_NULLABLE));
  columns.push_back(keys.finish("z", ARROW_FLAG_NULLABLE));
  columns.push_back(headers.finish(std::string(kit::kHeadersField)));
  return columns;
}

// ---- TEXT and RAW batches ----------------------------------------------------------------------

std::vector<BuiltColumn> bytes_payload_column(const Records& records, ColumnType type, Rejections& rejections) {
  PayloadColumn column(std::string(kPayloadColumn), type, true);
  size_t total = 0;
  for (size_t i = 0; i < records.size(); ++i) total = saturating_add(total, records[i].payload.size);
  column.builder.reserve_bytes(total);
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    if (is_tombstone(record)) {
      column.builder.append_null();
      continue;
    }
    if (type == ColumnType::Utf8 && !is_utf8(as_text(record.payload))) {
      rejections.add(i, "payload is not valid UTF-8");
    }
    column.builder.append_bytes(record.payload.data, record.payload.size);
  }
  std::vector<PayloadColumn> columns;
  columns.push_back(std::move(column));
  return finish_all(columns);
}

// ---- JSON batches, inferred columns ------------------------------------------------------------

// The type the non-null values of one field make across the batch (kit/inferred_type.hpp).
struct FieldKinds {
  kit::InferredType type = kit::InferredType::None;

  void add(JsonKind kind) { type = kit::join(type, detail::value_kind(kind)); }
  std::optional<ColumnType> column_type() const { return detail::column_type(type); }
};

// One field's value in one record, kept from the single parse of the payload for the fill.
struct InferredCell {
  size_t column;
  size_t member;  // index among the record's top-level members (for its original text)
  JsonKind kind;
  union {
    bool boolean;
    int64_t integer;
    double floating;
  } scalar{};
  size_t text_begin = 0;  // String: the unescaped bytes in the string arena
  size_t text_size = 0;
  bool has_raw = false;  // read in one pass: the original text is at raw_begin / raw_size of the payload
  size_t raw_begin = 0;
  size_t raw_size = 0;
};

void append_inferred(PayloadColumn& column, const InferredCell& cell, const std::string& strings,
                     const std::vector<detail::RawMember>& raw, std::string_view payload) {
  ArrayBuilder& out = column.builder;
  if (cell.kind == JsonKind::Null || !column.type) {
    out.append_null();
    return;
  }
  switch (*column.type) {
    case ColumnType::Bool: out.append_bool(cell.scalar.boolean); return;
    case ColumnType::Int64: out.append_int64(cell.scalar.integer); return;
    case ColumnType::Float64:
      out.append_double(cell.kind == JsonKind::Int64 ? static_cast<double>(cell.scalar.integer) : cell.scalar.floating);
      return;
    case ColumnType::Utf8: out.append_bytes(strings.data() + cell.text_begin, cell.text_size); return;
    case ColumnType::Json:
      out.append_bytes(cell.has_raw ? payload.substr(cell.raw_begin, cell.raw_size) : raw[cell.member].value);
      return;
    case ColumnType::Binary:
    case ColumnType::TimestampMs: break;  // never inferred
  }
  throw ExportError("inferred an unsupported column type");
}

// One `payload` column of JSON text: the payloads exactly as received.
std::vector<BuiltColumn> json_text_payload_column(const Records& records) {
  PayloadColumn column(std::string(kPayloadColumn), ColumnType::Json, true);
  size_t total = 0;
  for (size_t i = 0; i < records.size(); ++i) total = saturating_add(total, records[i].payload.size);
  column.builder.reserve_bytes(total);
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    if (is_tombstone(record)) {
      column.builder.append_null();
    } else {
      column.builder.append_bytes(record.payload.data, record.payload.size);
    }
  }
  std::vector<PayloadColumn> columns;
  columns.push_back(std::move(column));
  return finish_all(columns);
}

// The members of a payload the validating reader read, as the one-pass reader gives them (raw
// text offsets when the read kept the texts).
void flatten_members(const ParsedPayload& parsed, std::string_view payload, std::vector<detail::FlatMember>& out) {
  out.resize(parsed.members.size());
  for (size_t m = 0; m < parsed.members.size(); ++m) {
    const JsonValue& value = parsed.members[m].value;
    detail::FlatMember& f = out[m];
    f = detail::FlatMember{};
    f.key = parsed.members[m].key;
    f.kind = value.kind;
    switch (value.kind) {
      case JsonKind::Bool: f.boolean = value.element.get_bool().value_unsafe(); break;
      case JsonKind::Int64: f.integer = value.element.get_int64().value_unsafe(); break;
      case JsonKind::Uint64: f.unsigned_integer = value.element.get_uint64().value_unsafe(); break;
      case JsonKind::Double: f.floating = value.element.get_double().value_unsafe(); break;
      case JsonKind::String: f.text = value.element.get_string().value_unsafe(); break;
      default: break;  // exported as original text only
    }
    if (value.raw.data() != nullptr) {
      f.raw_begin = static_cast<size_t>(value.raw.data() - payload.data());
      f.raw_size = value.raw.size();
    }
  }
}

// Validated payloads whose fields keep their kinds: columns built as the records are read, in one
// pass. nullopt when the batch needs the general reading below.
std::optional<std::vector<BuiltColumn>> one_pass_json_columns(const Records& records, bool include_metadata) {
  detail::OnePassColumns columns(include_metadata, records.size());
  detail::FlatObjectReader reader;
  std::vector<detail::FlatMember> members;
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    if (is_tombstone(record)) {
      columns.add_null_row();
      continue;
    }
    const std::string_view payload = as_text(record.payload);
    if (!reader.read(payload, members) || !columns.add_object(members, payload)) return std::nullopt;
  }
  return columns.finish();
}

std::vector<BuiltColumn> inferred_json_columns(const Records& records, bool include_metadata, bool validated_input,
                                               JsonPayloadReader& reader, Rejections& rejections) {
  std::vector<std::string> names;  // in order of first appearance across the batch
  std::vector<FieldKinds> kinds;
  FieldLookup column_of;
  std::vector<std::pair<size_t, std::string>> collisions;
  RecordSlots slots;
  ParsedPayload parsed;
  bool all_objects = true;

  // Each payload is parsed once: its values are kept (cells; strings unescaped into `strings`)
  // for the fill, once the column types are known.
  std::vector<InferredCell> cells;
  std::vector<size_t> cells_of(records.size() + 1, 0);  // record i: cells [cells_of[i], cells_of[i + 1])
  std::vector<bool> validated(records.size(), true);
  std::string strings;
  detail::FlatObjectReader flat_reader;
  bool reserved = false;
  std::vector<detail::FlatMember> flat;
  std::vector<detail::FlatMember> from_dom;

  // Pass 1: the fields, their order, their kinds and their values.
  for (size_t i = 0; i < records.size(); ++i) {
    cells_of[i] = cells.size();
    const pmq_record& record = records[i];
    if (is_tombstone(record)) continue;
    // Validated payloads in one On-Demand pass (values and original texts); others, and what
    // that pass does not read plainly, through the DOM reader (texts split again in pass 2).
    const bool one_pass = validated_input && flat_reader.read(as_text(record.payload), flat);
    if (!one_pass) {
      if (std::string error = reader.read(as_text(record.payload), false, parsed); !error.empty()) {
        rejections.add(i, error);
        continue;
      }
      if (parsed.kind != JsonKind::Object) {
        all_objects = false;
        continue;
      }
      validated[i] = parsed.validated;
      flatten_members(parsed, as_text(record.payload), from_dom);
    }
    const std::vector<detail::FlatMember>& members = one_pass ? flat : from_dom;
    if (!reserved) {
      reserved = true;
      // Records of a batch mostly share their fields: room for all cells at once, instead of
      // growing (and copying) the vector through the batch.
      cells.reserve(records.size() * (members.size() + 1));
      size_t payload_bytes = 0;
      for (size_t r = i; r < records.size(); ++r) payload_bytes += records[r].payload.size;
      strings.reserve(payload_bytes);  // unescaped strings are never longer than their payload
    }
    slots.start_record();
    for (size_t m = 0; m < members.size(); ++m) {
      const std::string_view key = members[m].key;
      if (include_metadata && is_metadata_column(key)) {
        std::string reason = "field '" + std::string(key) + "' collides with a metadata column";
        const bool reported = std::any_of(collisions.begin(), collisions.end(),
                                          [&](const auto& c) { return c.first == i && c.second == reason; });
        if (!reported) collisions.emplace_back(i, std::move(reason));
        continue;
      }
      size_t column = column_of.find(m, key);
      if (column == FieldLookup::npos) {
        column = names.size();
        column_of.add(key, column);
        names.emplace_back(key);
        kinds.emplace_back();
      }
      slots.set(column, m);
    }
    if (!all_objects) continue;  // whole payloads are exported: the values are not needed
    for (size_t column : slots.touched()) {
      const size_t member = slots.get(column);
      const detail::FlatMember& value = members[member];
      kinds[column].add(value.kind);
      InferredCell cell{column, member, value.kind};
      switch (value.kind) {
        case JsonKind::Bool: cell.scalar.boolean = value.boolean; break;
        case JsonKind::Int64: cell.scalar.integer = value.integer; break;
        case JsonKind::Double: cell.scalar.floating = value.floating; break;
        case JsonKind::String:
          cell.text_begin = strings.size();
          cell.text_size = value.text.size();
          strings.append(value.text);
          break;
        default: break;  // exported as original text only
      }
      if (one_pass) {
        cell.has_raw = true;
        cell.raw_begin = value.raw_begin;
        cell.raw_size = value.raw_size;
      }
      cells.push_back(cell);
    }
  }
  cells_of[records.size()] = cells.size();
  // A batch that is not all objects exports whole payloads: field names cannot collide then.
  if (all_objects) {
    for (const auto& [index, reason] : collisions) rejections.add(index, reason);
  }
  if (!rejections.empty()) return {};
  if (!all_objects) return json_text_payload_column(records);

  std::vector<PayloadColumn> columns;
  columns.reserve(names.size());
  for (size_t c = 0; c < names.size(); ++c) columns.emplace_back(names[c], kinds[c].column_type(), true);

  // Pass 2: the values.
  std::vector<detail::RawMember> raw;
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    if (is_tombstone(record)) {
      for (PayloadColumn& column : columns) column.builder.append_null();
      continue;
    }
    slots.start_record();
    for (size_t k = cells_of[i]; k < cells_of[i + 1]; ++k) slots.set(cells[k].column, k);
    bool raw_ready = false;
    for (size_t c = 0; c < columns.size(); ++c) {
      const size_t k = slots.get(c);
      if (k == RecordSlots::npos) {
        columns[c].builder.append_null();  // absent from this record
        continue;
      }
      const InferredCell& cell = cells[k];
      if (columns[c].type == ColumnType::Json && cell.kind != JsonKind::Null && !cell.has_raw) {
        if (!raw_ready) raw_ready = JsonPayloadReader::split(as_text(record.payload), validated[i], raw);
        if (!raw_ready || cell.member >= raw.size()) {
          throw ExportError("record " + std::to_string(i) +
                            " read differently on the second pass: payload is not valid JSON");
        }
      }
      append_inferred(columns[c], cell, strings, raw, as_text(record.payload));
    }
  }
  return finish_all(columns);
}

// ---- JSON batches, declared columns ------------------------------------------------------------

// Rejection reasons name the field, the expected type and what was found.
std::string expected(const PayloadColumn& column, std::string_view found) {
  return "field '" + column.name + "': expected " + std::string(to_string(*column.type)) + ", found " +
         std::string(found);
}

// Exactly int64 when the double has no fractional part and lies in int64's range.
std::optional<int64_t> integral_double(double value) {
  // 2^63 is exact as a double; every double below it (and >= -2^63) converts without overflow.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!std::isfinite(value) || std::trunc(value) != value || value < -kTwoTo63 || value >= kTwoTo63) {
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

// Appends `value` (nullptr: the field is absent) converted to the declared type; returns the
// rejection reason when it cannot (a null is appended then, to keep the column aligned).
std::string append_declared(PayloadColumn& column, const detail::FlatMember* value, std::string_view payload) {
  ArrayBuilder& out = column.builder;
  if (value == nullptr || value->kind == JsonKind::Null) {
    out.append_null();
    if (column.nullable) return {};
    return value == nullptr ? "field '" + column.name + "': missing, and the column is not nullable"
                            : expected(column, "null (the column is not nullable)");
  }
  const JsonKind kind = value->kind;
  switch (*column.type) {
    case ColumnType::Bool:
      if (kind != JsonKind::Bool) break;
      out.append_bool(value->boolean);
      return {};
    case ColumnType::Int64:
      if (kind == JsonKind::Int64) {
        out.append_int64(value->integer);
        return {};
      }
      if (kind == JsonKind::Double) {
        const double d = value->floating;
        if (auto integral = integral_double(d)) {
          out.append_int64(*integral);
          return {};
        }
        out.append_null();
        return expected(column, std::trunc(d) == d ? "floating-point number out of int64 range"
                                                   : "floating-point number with a fractional part");
      }
      break;
    case ColumnType::Float64:
      if (kind == JsonKind::Int64) {
        out.append_double(static_cast<double>(value->integer));
        return {};
      }
      if (kind == JsonKind::Uint64) {
        out.append_double(static_cast<double>(value->unsigned_integer));
        return {};
      }
      if (kind == JsonKind::Double) {
        out.append_double(value->floating);
        return {};
      }
      break;
    case ColumnType::Utf8:
    case ColumnType::Binary:  // a string's UTF-8 bytes
      if (kind != JsonKind::String) break;
      out.append_bytes(value->text);
      return {};
    case ColumnType::TimestampMs:  // integer epoch milliseconds only
      if (kind != JsonKind::Int64) break;
      out.append_int64(value->integer);
      return {};
    case ColumnType::Json: out.append_bytes(payload.substr(value->raw_begin, value->raw_size)); return {};
  }
  out.append_null();
  return expected(column, detail::describe(kind));
}

void check_declared(const std::vector<DeclaredColumn>& declared, bool include_metadata) {
  std::set<std::string_view> seen;
  for (const DeclaredColumn& column : declared) {
    if (column.name.empty()) throw ExportError("a declared column has an empty name");
    if (!parse_column_type(to_string(column.type))) {
      throw ExportError("declared column '" + column.name + "' has an unknown type");
    }
    if (!seen.insert(column.name).second) throw ExportError("column '" + column.name + "' is declared twice");
    if (include_metadata && is_metadata_column(column.name)) {
      throw ExportError("declared column '" + column.name + "' collides with a metadata column");
    }
  }
}

std::vector<BuiltColumn> declared_json_columns(const Records& records, const std::vector<DeclaredColumn>& declared,
                                               bool include_metadata, bool validated_input, JsonPayloadReader& reader,
                                               Rejections& rejections) {
  check_declared(declared, include_metadata);
  std::vector<PayloadColumn> columns;
  columns.reserve(declared.size());
  FieldLookup column_of;
  bool want_raw = false;
  for (const DeclaredColumn& d : declared) {
    column_of.add(d.name, columns.size());
    columns.emplace_back(d.name, d.type, d.nullable);
    want_raw = want_raw || d.type == ColumnType::Json;
  }

  RecordSlots slots;
  ParsedPayload parsed;
  detail::FlatObjectReader flat_reader;
  std::vector<detail::FlatMember> flat;
  std::vector<detail::FlatMember> from_dom;
  for (size_t i = 0; i < records.size(); ++i) {
    const pmq_record& record = records[i];
    std::string problem;
    if (is_tombstone(record)) {
      for (PayloadColumn& column : columns) {
        column.builder.append_null();
        if (!column.nullable) rejections.add(i, "tombstone: field '" + column.name + "' is not nullable");
      }
      continue;
    }
    // Validated payloads in one On-Demand pass; others (and what it does not read plainly)
    // through the validating reader.
    const bool one_pass = validated_input && flat_reader.read(as_text(record.payload), flat);
    if (!one_pass) {
      problem = reader.read(as_text(record.payload), want_raw, parsed);
      if (problem.empty() && parsed.kind != JsonKind::Object) {
        problem = "payload is not a JSON object (found " + std::string(detail::describe(parsed.kind)) + ")";
      }
      if (!problem.empty()) {
        rejections.add(i, problem);
        for (PayloadColumn& column : columns) column.builder.append_null();
        continue;
      }
      flatten_members(parsed, as_text(record.payload), from_dom);
    }
    const std::vector<detail::FlatMember>& members = one_pass ? flat : from_dom;
    slots.start_record();
    for (size_t m = 0; m < members.size(); ++m) {
      // Undeclared fields are dropped.
      if (const size_t column = column_of.find(m, members[m].key); column != FieldLookup::npos) {
        slots.set(column, m);
      }
    }
    for (size_t c = 0; c < columns.size(); ++c) {
      const size_t member = slots.get(c);
      const detail::FlatMember* value = member == RecordSlots::npos ? nullptr : &members[member];
      if (std::string reason = append_declared(columns[c], value, as_text(record.payload)); !reason.empty())
        rejections.add(i, reason);
    }
  }
  if (!rejections.empty()) return {};
  return finish_all(columns);
}

// ---- the batch ---------------------------------------------------------------------------------

void check_batch(const pmq_batch& batch, const ExportOptions& options) {
  if (batch.struct_size < offsetof(pmq_batch, record_size) + sizeof(batch.record_size)) {
    throw ExportError("pmq_batch is too small (struct_size " + std::to_string(batch.struct_size) + ")");
  }
  if (batch.record_count > 0 && batch.records == nullptr) throw ExportError("batch has records but no record array");
  if (batch.record_count > 0 && batch.record_size < sizeof(pmq_record)) {
    throw ExportError("batch record_size " + std::to_string(batch.record_size) + " is smaller than pmq_record");
  }
  if (batch.topic == nullptr) throw ExportError("batch has no topic");
  if (!is_utf8(batch.topic)) throw ExportError("batch topic is not valid UTF-8");
  if (batch.payload_format != PMQ_PAYLOAD_JSON && batch.payload_format != PMQ_PAYLOAD_TEXT &&
      batch.payload_format != PMQ_PAYLOAD_RAW) {
    throw ExportError("unknown payload format " + std::to_string(batch.payload_format));
  }
  if (options.declared && batch.payload_format != PMQ_PAYLOAD_JSON) {
    throw ExportError("a declared schema applies to JSON batches only");
  }
}

// The record batch: the metadata columns (when asked for) and then the payload's.
void assemble(const pmq_batch& batch, const ExportOptions& options, const Records& records,
              std::vector<BuiltColumn> payload, ArrowSchema* schema, ArrowArray* array) {
  BuiltColumn root;
  root.format = "+s";
  root.length = static_cast<int64_t>(records.size());
  root.buffers.emplace_back(std::nullopt);  // a record batch has no null rows
  if (options.include_metadata) root.children = metadata_columns(batch, records);
  for (BuiltColumn& column : payload) root.children.push_back(std::move(column));
  detail::export_column(std::move(root), schema, array);
}

ExportResult export_checked(const pmq_batch& batch, const ExportOptions& options, ArrowSchema* schema,
                            ArrowArray* array) {
  check_batch(batch, options);
  const Records records(batch);
  Rejections rejections;
  if (options.include_metadata) check_header_names(records, rejections);

  std::vector<BuiltColumn> payload;
  switch (batch.payload_format) {
    case PMQ_PAYLOAD_TEXT: payload = bytes_payload_column(records, ColumnType::Utf8, rejections); break;
    case PMQ_PAYLOAD_RAW: payload = bytes_payload_column(records, ColumnType::Binary, rejections); break;
    default: {
      JsonPayloadReader reader;  // one parser for the whole batch
      std::optional<std::vector<BuiltColumn>> one_pass;
      if (!options.declared && ParsedBatchExport::applies(options)) {
        one_pass = one_pass_json_columns(records, options.include_metadata);
      }
      if (one_pass) {
        payload = std::move(*one_pass);
      } else {
        payload = options.declared ? declared_json_columns(records, *options.declared, options.include_metadata,
                                                           options.payloads_validated, reader, rejections)
                                   : inferred_json_columns(records, options.include_metadata,
                                                           options.payloads_validated, reader, rejections);
      }
    }
  }
  ExportResult result;
  if (!rejections.empty()) {
    result.rejected = rejections.take();
    return result;
  }
  assemble(batch, options, records, std::move(payload), schema, array);
  result.ok = true;
  return result;
}

// export_batch's failures as results.
template <class Export>
ExportResult guarded(Export&& run) noexcept {
  ExportResult result;
  try {
    return run();
  } catch (const ExportError& e) {
    result.error = e.what();
  } catch (const std::bad_alloc&) {
    result.error = "out of memory while exporting the batch";
  } catch (const std::exception& e) {
    result.error = std::string("unexpected error while exporting the batch: ") + e.what();
  } catch (...) {
    result.error = "unexpected error while exporting the batch";
  }
  return result;
}

}  // namespace

ExportResult export_batch(const pmq_batch& batch, const ExportOptions& options, ArrowSchema* schema,
                          ArrowArray* array) noexcept {
  if (schema == nullptr || array == nullptr) {
    ExportResult result;
    result.error = "export_batch needs an ArrowSchema and an ArrowArray to fill";
    return result;
  }
  *schema = ArrowSchema{};  // released: nothing to release until the export succeeds
  *array = ArrowArray{};
  return guarded([&] { return export_checked(batch, options, schema, array); });
}

// ---- a batch parsed by the caller ------------------------------------------------------------------

namespace {

// Declared columns filled as records come, from members read elsewhere (the decoder's parse).
// false: a record needs the general export (which rejects it, naming why).
class DeclaredRows {
 public:
  DeclaredRows(const std::vector<DeclaredColumn>& declared, bool include_metadata, size_t expected_rows) {
    check_declared(declared, include_metadata);
    columns_.reserve(declared.size());
    for (const DeclaredColumn& d : declared) {
      column_of_.add(d.name, columns_.size());
      columns_.emplace_back(d.name, d.type, d.nullable);
      columns_.back().builder.reserve_rows(expected_rows);
    }
  }
  bool add_object(const std::vector<detail::FlatMember>& members, std::string_view payload) {
    slots_.start_record();
    for (size_t m = 0; m < members.size(); ++m) {
      if (const size_t column = column_of_.find(m, members[m].key); column != FieldLookup::npos) slots_.set(column, m);
    }
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t member = slots_.get(c);
      if (!append_declared(columns_[c], member == RecordSlots::npos ? nullptr : &members[member], payload).empty())
        return false;
    }
    ++rows_;
    return true;
  }
  bool add_null_row() {
    for (PayloadColumn& column : columns_) {
      if (!column.nullable) return false;
      column.builder.append_null();
    }
    ++rows_;
    return true;
  }
  size_t rows() const { return rows_; }
  std::vector<BuiltColumn> finish() { return finish_all(columns_); }

 private:
  std::vector<PayloadColumn> columns_;
  FieldLookup column_of_;
  RecordSlots slots_;
  size_t rows_ = 0;
};

}  // namespace

struct ParsedBatchExport::State {
  std::optional<detail::OnePassColumns> inferred;
  std::optional<DeclaredRows> declared;
  std::vector<detail::FlatMember> members;

  bool add_object(std::string_view payload) {
    return inferred ? inferred->add_object(members, payload) : declared->add_object(members, payload);
  }
  bool add_null_row() {
    if (inferred) {
      inferred->add_null_row();
      return true;
    }
    return declared->add_null_row();
  }
  size_t rows() const { return inferred ? inferred->rows() : declared->rows(); }
  std::vector<BuiltColumn> finish() { return inferred ? inferred->finish() : declared->finish(); }
};

bool ParsedBatchExport::applies(const ExportOptions& options) {
  return options.payloads_validated && options.one_pass_columns;
}

ParsedBatchExport::ParsedBatchExport(const ExportOptions& options, size_t expected_rows) : options_(options) {
  if (!applies(options)) return;
  try {
    auto state = std::make_unique<State>();
    if (options.declared) {
      state->declared.emplace(*options.declared, options.include_metadata, expected_rows);
    } else {
      state->inferred.emplace(options.include_metadata, expected_rows);
    }
    state_ = std::move(state);
  } catch (...) {
    // finish() exports the batch the general way (which names a schema error)
  }
}

ParsedBatchExport::~ParsedBatchExport() = default;

void ParsedBatchExport::add_parsed(std::string_view payload, const simdjson::dom::parser* parser) noexcept {
  if (!state_) return;
  try {
    if (parser) {
      if (state_->inferred) {  // each member straight into its column
        if (state_->inferred->add_parsed(*parser, payload)) return;
      } else if (detail::read_parsed_object(*parser, payload, state_->members) && state_->add_object(payload)) {
        return;
      }
    }
  } catch (...) {}
  state_.reset();  // not a path this batch can take: finish() exports it the general way
}

void ParsedBatchExport::add_tombstone() noexcept {
  try {
    if (state_ && state_->add_null_row()) return;
  } catch (...) {}
  state_.reset();
}

ExportResult ParsedBatchExport::finish(const pmq_batch& batch, ArrowSchema* schema, ArrowArray* array) noexcept {
  const bool built = state_ && batch.payload_format == PMQ_PAYLOAD_JSON && state_->rows() == batch.record_count &&
                     schema != nullptr && array != nullptr;
  if (!built) return export_batch(batch, options_, schema, array);
  *schema = ArrowSchema{};
  *array = ArrowArray{};
  ExportResult result = guarded([&] {
    check_batch(batch, options_);
    const Records records(batch);
    Rejections rejections;
    if (options_.include_metadata) check_header_names(records, rejections);
    ExportResult done;
    if (!rejections.empty()) return done;  // the general export reports them
    assemble(batch, options_, records, state_->finish(), schema, array);
    done.ok = true;
    return done;
  });
  state_.reset();
  if (!result.ok) return export_batch(batch, options_, schema, array);
  return result;
}

std::optional<ColumnType> parse_column_type(std::string_view name) {
  for (ColumnType type : {ColumnType::Bool, ColumnType::Int64, ColumnType::Float64, ColumnType::Utf8,
                          ColumnType::Binary, ColumnType::TimestampMs, ColumnType::Json}) {
    if (to_string(type) == name) return type;
  }
  return std::nullopt;
}

std::string_view to_string(ColumnType type) {
  switch (type) {
    case ColumnType::Bool: return "bool";
    case ColumnType::Int64: return "int64";
    case ColumnType::Float64: return "float64";
    case ColumnType::Utf8: return "utf8";
    case ColumnType::Binary: return "binary";
    case ColumnType::TimestampMs: return "timestamp_ms";
    case ColumnType::Json: return "json";
  }
  return "unknown";
}

}  // namespace picomq::arrow
