#pragma once
// The inferred payload columns of a JSON batch built as its records are read, in one pass: the
// fast path for batches whose fields keep one kind (the usual case). A batch it cannot take
// exactly (a field of two kinds other than integer and float, a duplicate key, a field named
// like a metadata column) makes add_object() return false, and the caller exports the batch
// through the general two-pass reading, which gives the same columns for every batch this one
// takes (tests compare the two, cell by cell).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arrow/array_builder.h"
#include "arrow/json_payload.h"
#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/inferred_type.hpp"

namespace picomq::arrow::detail {

// The exporter's value kinds and column types on the kit's inference lattice (one answer for
// every plane and sink).
constexpr kit::JsonValueKind value_kind(JsonKind kind) {
  switch (kind) {
    case JsonKind::Null: return kit::JsonValueKind::Null;
    case JsonKind::Bool: return kit::JsonValueKind::Bool;
    case JsonKind::Int64: return kit::JsonValueKind::Integer;
    case JsonKind::Double: return kit::JsonValueKind::Float;
    case JsonKind::String: return kit::JsonValueKind::String;
    case JsonKind::Object:
    case JsonKind::Array: return kit::JsonValueKind::Container;
    case JsonKind::Uint64:
    case JsonKind::BigNumber: return kit::JsonValueKind::OutOfRange;
  }
  return kit::JsonValueKind::OutOfRange;
}

// nullopt: no non-null value at all (Arrow's null type).
constexpr std::optional<ColumnType> column_type(kit::InferredType type) {
  switch (type) {
    case kit::InferredType::None: return std::nullopt;
    case kit::InferredType::Bool: return ColumnType::Bool;
    case kit::InferredType::Int64: return ColumnType::Int64;
    case kit::InferredType::Float64: return ColumnType::Float64;
    case kit::InferredType::String: return ColumnType::Utf8;
    case kit::InferredType::Json: return ColumnType::Json;
  }
  return ColumnType::Json;
}

// Where a column's type stands on the lattice: the exporter only infers the types above.
constexpr kit::InferredType inferred_type(std::optional<ColumnType> type) {
  if (!type) return kit::InferredType::None;
  switch (*type) {
    case ColumnType::Bool: return kit::InferredType::Bool;
    case ColumnType::Int64: return kit::InferredType::Int64;
    case ColumnType::Float64: return kit::InferredType::Float64;
    case ColumnType::Utf8: return kit::InferredType::String;
    case ColumnType::Binary:
    case ColumnType::TimestampMs:
    case ColumnType::Json: break;
  }
  return kit::InferredType::Json;
}

// The builder layout of a column type (nullopt: Arrow's null type).
constexpr Layout layout_of(std::optional<ColumnType> type) {
  if (!type) return Layout::Null;
  switch (*type) {
    case ColumnType::Bool: return Layout::Bool;
    case ColumnType::Int64:
    case ColumnType::TimestampMs: return Layout::Int64;
    case ColumnType::Float64: return Layout::Float64;
    case ColumnType::Utf8:
    case ColumnType::Binary:
    case ColumnType::Json: return Layout::Bytes;
  }
  return Layout::Null;
}

// a == b for short keys without a call to memcmp (a dozen per record): whole words, the last
// one overlapping.
inline bool same_key(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  const auto word = [](const char* at) {
    uint64_t w;
    std::memcpy(&w, at, sizeof w);
    return w;
  };
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8)
      if (word(p + i) != word(q + i)) return false;
    return word(p + n - 8) == word(q + n - 8);
  }
  if (n >= 4) {
    uint32_t x, y, u, v;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, q, 4);
    std::memcpy(&u, p + n - 4, 4);
    std::memcpy(&v, q + n - 4, 4);
    return x == y && u == v;
  }
  for (size_t i = 0; i < n; ++i)
    if (p[i] != q[i]) return false;
  return true;
}

// A field named like a pico_* metadata column.
bool is_metadata_column(std::string_view name);

class OnePassColumns {
 public:
  // `expected_rows` sizes the buffers once; it is a hint, not a limit.
  OnePassColumns(bool include_metadata, size_t expected_rows);

  // The next row from an object payload's top-level members (as FlatObjectReader gives them:
  // strings and keys are copied here, so they need to live only for this call). `payload` is
  // the text the members' raw offsets point into. false: leave the one-pass path (the state is
  // then of no use).
  bool add_object(const std::vector<FlatMember>& members, std::string_view payload);
  // The same row from the object payload `parser` holds parsed (read_parsed_object's reading),
  // each member appended as it is read, with no list of members in between.
  bool add_parsed(const simdjson::dom::parser& parser, std::string_view payload);
  // A tombstone: null in every column.
  void add_null_row();

  size_t rows() const { return rows_; }
  std::vector<BuiltColumn> finish();

 private:
  struct Column {
    Column(std::string column_name, size_t rows_before);
    std::string name;
    std::optional<ColumnType> type;  // nullopt while every value so far was null
    ArrayBuilder builder;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };

  // npos: a field the path cannot take. Records of a batch mostly list the same fields in the
  // same order: the key last seen at this position is checked first, inline; the rest out of line.
  size_t column_of(size_t position, std::string_view key) {
    if (position < at_position_.size()) {
      const Slot& slot = at_position_[position];
      if (slot.column != npos && same_key(slot.name, key)) return slot.column;
    }
    return find_column(position, key);
  }
  size_t find_column(size_t position, std::string_view key);
  bool append(Column& column, const FlatMember& value, std::string_view payload);
  // Member `position` of row `row`; false: leave the path.
  bool add_member(size_t position, const FlatMember& member, std::string_view payload, int64_t row);
  // After a row's `members` members went in: null in the columns the row did not have.
  void end_row(size_t members);

  static constexpr size_t npos = static_cast<size_t>(-1);
  bool include_metadata_;
  size_t expected_rows_;
  size_t rows_ = 0;
  std::vector<Column> columns_;  // in order of first appearance
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> by_name_;
  // The column (and its name, kept beside it so the check reads one place) of the key last seen
  // at each member position.
  struct Slot {
    size_t column = npos;
    std::string name;
  };
  std::vector<Slot> at_position_;
};

}  // namespace picomq::arrow::detail
