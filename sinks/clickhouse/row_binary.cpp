#include "clickhouse/row_binary.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "picomq/kit/headers.hpp"
#include "picomq/kit/metadata.hpp"

namespace picomq::clickhouse {
namespace {

using simdjson::dom::element_type;

template <class T>
void put(std::string& out, T value) {  // little-endian (x86-64, aarch64: the host's order)
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

std::string_view as_view(pmq_bytes b) { return {reinterpret_cast<const char*>(b.data), b.data ? b.size : 0}; }

std::string_view found(simdjson::dom::element v) {
  switch (v.type()) {
    case element_type::ARRAY: return "array";
    case element_type::OBJECT: return "object";
    case element_type::INT64: return "integer";
    case element_type::UINT64: return "integer";
    case element_type::DOUBLE: return "floating-point number";
    case element_type::STRING: return "string";
    case element_type::BOOL: return "bool";
    case element_type::NULL_VALUE: return "null";
  }
  return "value";
}

std::string expected(const Type& t, simdjson::dom::element v, std::string_view detail = {}) {
  std::string out = "expected " + t.name() + ", found ";
  if (detail.empty()) out += found(v);
  else out += detail;
  return out;
}

size_t width(Kind k) {
  switch (k) {
    case Kind::Int8:
    case Kind::UInt8:
    case Kind::Bool: return 1;
    case Kind::Int16:
    case Kind::UInt16:
    case Kind::Date: return 2;
    case Kind::Int32:
    case Kind::UInt32:
    case Kind::Float32:
    case Kind::DateTime: return 4;
    case Kind::Int64:
    case Kind::UInt64:
    case Kind::Float64:
    case Kind::DateTime64: return 8;
    case Kind::UUID: return 16;
    default: return 0;
  }
}

bool is_integer_kind(Kind k) { return k >= Kind::Int8 && k <= Kind::UInt64; }

// An integer into an integer column, range-checked. false: out of range.
bool put_integer(std::string& out, Kind k, bool negative, uint64_t magnitude_or_value, int64_t signed_value) {
  auto fits_signed = [&](int64_t lo, int64_t hi) {
    if (negative) return signed_value >= lo;
    return magnitude_or_value <= static_cast<uint64_t>(hi);
  };
  auto fits_unsigned = [&](uint64_t hi) { return !negative && magnitude_or_value <= hi; };
  switch (k) {
    case Kind::Int8:
      if (!fits_signed(INT8_MIN, INT8_MAX)) return false;
      put(out, static_cast<int8_t>(negative ? signed_value : static_cast<int64_t>(magnitude_or_value)));
      return true;
    case Kind::Int16:
      if (!fits_signed(INT16_MIN, INT16_MAX)) return false;
      put(out, static_cast<int16_t>(negative ? signed_value : static_cast<int64_t>(magnitude_or_value)));
      return true;
    case Kind::Int32:
      if (!fits_signed(INT32_MIN, INT32_MAX)) return false;
      put(out, static_cast<int32_t>(negative ? signed_value : static_cast<int64_t>(magnitude_or_value)));
      return true;
    case Kind::Int64:
      if (!fits_signed(INT64_MIN, INT64_MAX)) return false;
      put(out, negative ? signed_value : static_cast<int64_t>(magnitude_or_value));
      return true;
    case Kind::UInt8:
      if (!fits_unsigned(UINT8_MAX)) return false;
      put(out, static_cast<uint8_t>(magnitude_or_value));
      return true;
    case Kind::UInt16:
      if (!fits_unsigned(UINT16_MAX)) return false;
      put(out, static_cast<uint16_t>(magnitude_or_value));
      return true;
    case Kind::UInt32:
      if (!fits_unsigned(UINT32_MAX)) return false;
      put(out, static_cast<uint32_t>(magnitude_or_value));
      return true;
    case Kind::UInt64:
      if (negative) return false;
      put(out, magnitude_or_value);
      return true;
    default: return false;
  }
}

bool put_int64(std::string& out, Kind k, int64_t v) {
  return put_integer(out, k, v < 0, v < 0 ? 0 : static_cast<uint64_t>(v), v);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// 8-4-4-4-12 hex -> ClickHouse's UUID in RowBinary: the first 8 bytes of the UUID as one
// little-endian UInt64, then the last 8 the same way.
bool put_uuid(std::string& out, std::string_view s) {
  if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-') return false;
  uint64_t half[2] = {0, 0};
  int nibbles = 0;
  for (char c : s) {
    if (c == '-') continue;
    const int d = hex_digit(c);
    if (d < 0) return false;
    uint64_t& h = half[nibbles / 16];
    h = (h << 4) | static_cast<uint64_t>(d);
    ++nibbles;
  }
  put(out, half[0]);
  put(out, half[1]);
  return true;
}

constexpr int64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

}  // namespace

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>(static_cast<uint8_t>(value) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void append_sized(std::string& out, std::string_view bytes) {
  append_varint(out, bytes.size());
  out.append(bytes);
}

void append_default(const Type& type, std::string& out) {
  const Type& t = type.wire();
  switch (t.kind) {
    case Kind::Nullable: out += '\x01'; return;
    case Kind::String:
    case Kind::Array: out += '\x00'; return;
    case Kind::FixedString: out.append(t.size, '\0'); return;
    default: out.append(width(t.kind), '\0'); return;
  }
}

namespace {

std::string expected_found(const Type& t, std::string_view what) {
  return "expected " + t.name() + ", found " + std::string(what);
}

// A present value of `type`: the Nullable flag first, then the inner type (LowCardinality is
// its inner type on the wire).
const Type& open_value(const Type& type, std::string& out) {
  const Type& t = type.wire();
  if (t.kind != Kind::Nullable) return t;
  out += '\x00';
  return t.inner->wire();
}

std::string put_date_days(const Type& t, int64_t days, std::string& out) {
  if (days < 0 || days > UINT16_MAX) return expected_found(t, "a date outside 1970-01-01..2149-06-06");
  put(out, static_cast<uint16_t>(days));
  return {};
}

std::string put_epoch_seconds(const Type& t, int64_t seconds, std::string& out) {
  if (seconds < 0 || seconds > UINT32_MAX) return expected_found(t, "a time outside 1970-01-01..2106-02-07");
  put(out, static_cast<uint32_t>(seconds));
  return {};
}

// A scalar into a String column: its JSON text (1, 2.5, true), as ClickHouse's own JSON input
// reads numbers and bools into String columns. A column inferred from conflicting kinds is a
// String (kit/inferred_type.hpp: JSON), and every value of it is written.
template <typename T>
std::string put_text(T value, std::string& out) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  append_sized(out, std::string_view(text, static_cast<size_t>(end - text)));
  return {};
}

std::string put_double(const Type& t, double d, std::string& out) {
  if (t.kind == Kind::Float64) {
    put(out, d);
    return {};
  }
  if (std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max()))
    return expected_found(t, "a number out of its range");
  put(out, static_cast<float>(d));
  return {};
}

}  // namespace

std::string append_integer(const Type& type, int64_t v, std::string& out) {
  const Type& t = open_value(type, out);
  switch (t.kind) {
    case Kind::Int8:
    case Kind::Int16:
    case Kind::Int32:
    case Kind::Int64:
    case Kind::UInt8:
    case Kind::UInt16:
    case Kind::UInt32:
    case Kind::UInt64:
      if (!put_int64(out, t.kind, v)) return expected_found(t, "an integer out of its range");
      return {};
    case Kind::Float32:
    case Kind::Float64: return put_double(t, static_cast<double>(v), out);
    case Kind::Date: return put_date_days(t, v, out);
    case Kind::DateTime: return put_epoch_seconds(t, v, out);  // epoch seconds
    case Kind::DateTime64: put(out, v); return {};             // in the column's unit: epoch ms for DateTime64(3)
    case Kind::String: return put_text(v, out);
    default: return expected_found(t, "integer");
  }
}

std::string append_unsigned(const Type& type, uint64_t v, std::string& out) {
  const Type& t = open_value(type, out);
  switch (t.kind) {
    case Kind::Int8:
    case Kind::Int16:
    case Kind::Int32:
    case Kind::Int64:
    case Kind::UInt8:
    case Kind::UInt16:
    case Kind::UInt32:
    case Kind::UInt64:
      if (!put_integer(out, t.kind, false, v, 0)) return expected_found(t, "an integer out of its range");
      return {};
    case Kind::Float32:
    case Kind::Float64: return put_double(t, static_cast<double>(v), out);
    case Kind::String: return put_text(v, out);
    default: return expected_found(t, "integer");
  }
}

std::string append_float(const Type& type, double v, std::string& out, bool integral_as_integer) {
  const Type& t = open_value(type, out);
  switch (t.kind) {
    case Kind::Float32:
    case Kind::Float64: return put_double(t, v, out);
    case Kind::Int8:
    case Kind::Int16:
    case Kind::Int32:
    case Kind::Int64:
    case Kind::UInt8:
    case Kind::UInt16:
    case Kind::UInt32:
    case Kind::UInt64:
      if (!integral_as_integer) return expected_found(t, "floating-point number");
      if (std::trunc(v) != v) return expected_found(t, "floating-point number with a fractional part");
      // [-2^63, 2^63) as int64, [2^63, 2^64) as uint64; the range check is put_integer's.
      if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) {
        if (!put_int64(out, t.kind, static_cast<int64_t>(v))) return expected_found(t, "an integer out of its range");
        return {};
      }
      if (v >= 0 && v < 18446744073709551616.0) {
        if (!put_integer(out, t.kind, false, static_cast<uint64_t>(v), 0))
          return expected_found(t, "an integer out of its range");
        return {};
      }
      return expected_found(t, "an integer out of its range");
    case Kind::String:
      if (!std::isfinite(v)) return expected_found(t, "a number JSON cannot write");
      return put_text(v, out);
    default: return expected_found(t, "floating-point number");
  }
}

std::string append_bool(const Type& type, bool v, std::string& out) {
  const Type& t = open_value(type, out);
  if (t.kind == Kind::String) {
    append_sized(out, v ? "true" : "false");
    return {};
  }
  if (t.kind != Kind::Bool && t.kind != Kind::UInt8) return expected_found(t, "bool");  // 18.16's booleans are UInt8
  out += v ? '\x01' : '\x00';
  return {};
}

std::string append_string(const Type& type, std::string_view s, std::string& out) {
  const Type& t = open_value(type, out);
  switch (t.kind) {
    case Kind::String: append_sized(out, s); return {};
    case Kind::FixedString:
      if (s.size() > t.size) return expected_found(t, "a string of " + std::to_string(s.size()) + " bytes");
      out.append(s);
      out.append(t.size - s.size(), '\0');
      return {};
    case Kind::Date: {
      int64_t days = 0;
      if (!parse_date(s, days)) return expected_found(t, "a string that is not YYYY-MM-DD");
      return put_date_days(t, days, out);
    }
    case Kind::DateTime: {
      int64_t seconds = 0;
      uint32_t nanos;
      int fd;
      if (!parse_datetime(s, seconds, nanos, fd))
        return expected_found(t, "a string that is not an ISO 8601 date-time");
      if (nanos != 0) return expected_found(t, "a time with fractional seconds (DateTime holds whole seconds)");
      return put_epoch_seconds(t, seconds, out);
    }
    case Kind::DateTime64: {
      int64_t seconds, ticks;
      uint32_t nanos;
      int fd;
      if (!parse_datetime(s, seconds, nanos, fd))
        return expected_found(t, "a string that is not an ISO 8601 date-time");
      const int64_t unit = kPow10[9 - t.size];
      if (nanos % unit != 0)
        return expected_found(t, "a time more precise than its " + std::to_string(t.size) + " fraction digits");
      if (__builtin_mul_overflow(seconds, kPow10[t.size], &ticks) ||
          __builtin_add_overflow(ticks, static_cast<int64_t>(nanos / unit), &ticks))
        return expected_found(t, "a time out of its range");
      put(out, ticks);
      return {};
    }
    case Kind::UUID:
      if (!put_uuid(out, s)) return expected_found(t, "a string that is not a UUID");
      return {};
    default: return expected_found(t, "string");
  }
}

std::string append_timestamp_ms(const Type& type, int64_t ms, std::string& out) {
  const Type& t = open_value(type, out);
  switch (t.kind) {
    case Kind::DateTime: put(out, static_cast<uint32_t>(std::clamp<int64_t>(ms / 1000, 0, UINT32_MAX))); return {};
    case Kind::DateTime64: {
      const int64_t p = t.size;
      put(out, p >= 3 ? ms * kPow10[p - 3] : ms / kPow10[3 - p]);
      return {};
    }
    case Kind::Int64:
    case Kind::UInt64:
      if (!put_int64(out, t.kind, ms)) return expected_found(t, "a time before 1970 (epoch ms)");
      return {};
    default: return expected_found(t, "timestamp");
  }
}

std::string append_value(const Type& type, simdjson::dom::element v, std::string& out, std::string& scratch) {
  switch (v.type()) {
    case element_type::NULL_VALUE: append_default(type, out); return {};
    case element_type::BOOL: return append_bool(type, v.get_bool().value_unsafe(), out);
    case element_type::INT64: return append_integer(type, v.get_int64().value_unsafe(), out);
    case element_type::UINT64: return append_unsigned(type, v.get_uint64().value_unsafe(), out);
    case element_type::DOUBLE: return append_float(type, v.get_double().value_unsafe(), out, false);
    case element_type::STRING: return append_string(type, v.get_string().value_unsafe(), out);
    case element_type::ARRAY:
    case element_type::OBJECT: break;
  }
  const Type& t = open_value(type, out);
  if (t.kind == Kind::String) {  // nested JSON as its text
    scratch = simdjson::minify(v);
    append_sized(out, scratch);
    return {};
  }
  if (t.kind != Kind::Array || v.type() != element_type::ARRAY) return expected(t, v);
  simdjson::dom::array a = v.get_array().value_unsafe();
  append_varint(out, a.size());
  size_t i = 0;
  for (simdjson::dom::element item : a) {
    std::string why = append_value(*t.inner, item, out, scratch);
    if (!why.empty()) return "item " + std::to_string(i) + ": " + why;
    ++i;
  }
  return {};
}

Source metadata_source(std::string_view name) {
  if (name == kit::kTopicField) return Source::Topic;
  if (name == kit::kPartitionField) return Source::Partition;
  if (name == kit::kOffsetField) return Source::Offset;
  if (name == kit::kTimestampField) return Source::Timestamp;
  if (name == kit::kKeyField) return Source::Key;
  if (name == kit::kHeadersField) return Source::Headers;
  if (name == kVersionColumn) return Source::Version;
  if (name == kDeletedColumn) return Source::Deleted;
  return Source::Field;
}

std::string check_column(const Column& c) {
  const Type& outer = c.type.wire();
  const Type& t = outer.nullable() ? outer.inner->wire() : outer;
  auto bad = [&](std::string_view wants) {
    return "column " + c.name + " is " + c.type.name() + "; " + std::string(wants);
  };
  switch (c.source) {
    case Source::Field: return {};
    case Source::Topic:
    case Source::Headers:
    case Source::Payload:
    case Source::Key:
      if (t.kind != Kind::String) return bad("it takes a String (or Nullable(String))");
      return {};
    case Source::Partition:
    case Source::Offset:
      if (!is_integer_kind(t.kind)) return bad("it takes an integer type (Int64)");
      return {};
    case Source::Timestamp:
      if (t.kind != Kind::Int64 && t.kind != Kind::UInt64 && t.kind != Kind::DateTime && t.kind != Kind::DateTime64)
        return bad("it takes Int64 / UInt64 (epoch ms), DateTime or DateTime64");
      return {};
    case Source::Version:
      if (t.kind != Kind::UInt64 && t.kind != Kind::Int64) return bad("it takes UInt64 (the record's offset)");
      return {};
    case Source::Deleted:
      if (t.kind != Kind::UInt8 && t.kind != Kind::Bool && t.kind != Kind::Int8)
        return bad("it takes UInt8 (1 for a delete)");
      return {};
  }
  return {};
}

RowBinaryEncoder::RowBinaryEncoder(std::vector<Column> columns) : columns_(std::move(columns)) {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].source == Source::Field) by_field_.emplace(columns_[i].field, i);
  values_.resize(columns_.size());
  present_.resize(columns_.size());
}

namespace {

// A metadata value into its column (types checked by check_column).
void append_metadata(const Column& c, const pmq_batch& batch, const pmq_record& r, std::string& out) {
  const Type* t = &c.type.wire();
  auto null_or_default = [&] { append_default(*t, out); };
  auto open = [&] {  // a present value: the Nullable flag, then the inner type
    if (t->nullable()) {
      out += '\x00';
      t = &t->inner->wire();
    }
  };
  switch (c.source) {
    case Source::Field: return;
    case Source::Topic:
      open();
      append_sized(out, batch.topic);
      return;
    case Source::Partition:
      open();
      if (!put_int64(out, t->kind, batch.partition)) append_default(*t, out);
      return;
    case Source::Offset:
    case Source::Version:
      open();
      if (!put_int64(out, t->kind, r.offset)) append_default(*t, out);
      return;
    case Source::Deleted:
      open();
      out += pmq_record_op(&batch, &r) == PMQ_OP_DELETE ? '\x01' : '\x00';
      return;
    case Source::Timestamp: {
      if (r.timestamp_ms < 0) return null_or_default();
      open();
      const int64_t ms = r.timestamp_ms;
      switch (t->kind) {
        case Kind::DateTime: put(out, static_cast<uint32_t>(std::min<int64_t>(ms / 1000, UINT32_MAX))); return;
        case Kind::DateTime64: {
          const int64_t p = t->size;
          put(out, p >= 3 ? ms * kPow10[p - 3] : ms / kPow10[3 - p]);
          return;
        }
        default: put_int64(out, t->kind, ms); return;
      }
    }
    case Source::Key:
      if (!r.key.data) return null_or_default();
      open();
      append_sized(out, as_view(r.key));
      return;
    case Source::Headers: {
      open();
      std::string json;
      kit::append_headers_json(json, std::span<const pmq_header>(r.headers, r.headers ? r.header_count : 0));
      append_sized(out, json);
      return;
    }
    case Source::Payload:
      if (!r.payload.data) return null_or_default();
      open();
      append_sized(out, as_view(r.payload));
      return;
  }
}

}  // namespace

Encoded RowBinaryEncoder::encode(const pmq_batch& batch) {
  Encoded result;
  if (batch.topic == nullptr || (batch.record_count > 0 && batch.records == nullptr)) {
    result.error = "malformed pmq_batch";
    return result;
  }
  bool fields = false;
  for (const Column& c : columns_) {
    if (auto why = check_column(c); !why.empty()) {
      result.error = why;
      return result;
    }
    fields = fields || c.source == Source::Field;
  }
  if (fields && batch.payload_format != PMQ_PAYLOAD_JSON) {
    result.error = "payload_mode 'columns' needs JSON payloads (the topic's schema is '" +
                   std::string(batch.schema ? batch.schema : "") + "')";
    return result;
  }
  std::string& out = result.data;
  result.rows.reserve(batch.record_count);
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const size_t start = out.size();
    std::string reason;
    simdjson::dom::object object;
    const int32_t op = pmq_record_op(&batch, &r);
    if (op == PMQ_OP_TRUNCATE) continue;  // no row: the sink truncates the table
    // A delete's row is its key's fields (and pico_deleted).
    const pmq_bytes fields_from = op == PMQ_OP_DELETE ? pmq_record_key_json(&batch, &r) : r.payload;
    const bool tombstone = fields_from.data == nullptr;
    if (fields && !tombstone) {
      simdjson::dom::element root;
      if (parser_.parse(reinterpret_cast<const char*>(fields_from.data), fields_from.size).get(root) ||
          root.get_object().get(object)) {
        result.rejected.push_back({i, "payload is not a JSON object (payload_mode 'columns' writes its fields)"});
        continue;
      }
      std::fill(present_.begin(), present_.end(), 0);
      for (auto member : object) {
        auto it = by_field_.find(member.key);
        if (it == by_field_.end()) continue;  // not a column: not written
        values_[it->second] = member.value;
        present_[it->second] = 1;
      }
      // An upsert's key fields that its row lacks (a key from the record key): from its key.
      const pmq_bytes key = pmq_record_key_json(&batch, &r);
      simdjson::dom::object key_object;
      if (op == PMQ_OP_UPSERT && key.data &&
          !key_parser_.parse(reinterpret_cast<const char*>(key.data), key.size).get_object().get(key_object)) {
        for (auto member : key_object) {
          auto it = by_field_.find(member.key);
          if (it == by_field_.end() || present_[it->second]) continue;
          values_[it->second] = member.value;
          present_[it->second] = 1;
        }
      }
    }
    for (size_t c = 0; c < columns_.size() && reason.empty(); ++c) {
      const Column& col = columns_[c];
      if (col.source != Source::Field) {
        append_metadata(col, batch, r, out);
      } else if (tombstone || !present_[c]) {
        append_default(col.type, out);
      } else {
        reason = append_value(col.type, values_[c], out, scratch_);
        if (!reason.empty()) reason.insert(0, "field '" + col.field + "': ");
      }
    }
    if (!reason.empty()) {
      out.resize(start);
      result.rejected.push_back({i, std::move(reason)});
      continue;
    }
    result.rows.push_back({out.size(), static_cast<uint32_t>(i)});
  }
  return result;
}

}  // namespace picomq::clickhouse
