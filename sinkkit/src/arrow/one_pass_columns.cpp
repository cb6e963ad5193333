#include "arrow/one_pass_columns.h"

#include <algorithm>
#include <cstring>

#include "picomq/arrow_c_data.h"
#include "picomq/kit/metadata.hpp"

namespace picomq::arrow::detail {

bool is_metadata_column(std::string_view name) {
  return name == kit::kTopicField || name == kit::kPartitionField || name == kit::kOffsetField ||
         name == kit::kTimestampField || name == kit::kKeyField || name == kit::kHeadersField;
}

OnePassColumns::Column::Column(std::string column_name, size_t rows_before)
    : name(column_name), builder(Layout::Null, std::move(column_name)) {
  builder.append_nulls(rows_before);  // a field first seen in a later record: null before it
}

OnePassColumns::OnePassColumns(bool include_metadata, size_t expected_rows)
    : include_metadata_(include_metadata), expected_rows_(expected_rows) {}

size_t OnePassColumns::find_column(size_t position, std::string_view key) {
  size_t column;
  if (const auto it = by_name_.find(key); it != by_name_.end()) {
    column = it->second;
  } else {
    // The general path reports the collision as a rejection of this record.
    if (include_metadata_ && is_metadata_column(key)) return npos;
    column = columns_.size();
    columns_.emplace_back(std::string(key), rows_);
    by_name_.emplace(std::string(key), column);
  }
  if (position >= at_position_.size()) at_position_.resize(position + 1);
  at_position_[position] = {column, std::string(key)};
  return column;
}

// The kit's inference lattice (kit/inferred_type.hpp), decided as values come: a column takes the
// type of its first non-null value; an integer column meeting a float widens to float64 in place;
// any other join is JSON text of every value, which only the general path keeps.
bool OnePassColumns::append(Column& column, const FlatMember& value, std::string_view payload) {
  ArrayBuilder& out = column.builder;
  // The usual case first, without the lattice: a value of its column's own type.
  if (column.type) {
    switch (value.kind) {
      case JsonKind::Null: out.append_null(); return true;
      case JsonKind::Bool:
        if (*column.type != ColumnType::Bool) break;
        out.append_bool(value.boolean);
        return true;
      case JsonKind::Int64:
        if (*column.type == ColumnType::Int64) out.append_int64(value.integer);
        else if (*column.type == ColumnType::Float64) out.append_double(static_cast<double>(value.integer));
        else break;
        return true;
      case JsonKind::Double:
        if (*column.type != ColumnType::Float64) break;
        out.append_double(value.floating);
        return true;
      case JsonKind::String:
        if (*column.type != ColumnType::Utf8) break;
        out.append_bytes(value.text);
        return true;
      case JsonKind::Object:
      case JsonKind::Array:
        if (*column.type != ColumnType::Json) break;
        out.append_bytes(payload.substr(value.raw_begin, value.raw_size));
        return true;
      case JsonKind::Uint64:
      case JsonKind::BigNumber: return false;  // JSON text of every value: the general path
    }
  } else if (value.kind == JsonKind::Null) {
    out.append_null();
    return true;
  }
  if (value.kind == JsonKind::Uint64 || value.kind == JsonKind::BigNumber) return false;
  const std::optional<ColumnType> joined = column_type(kit::join(inferred_type(column.type), value_kind(value.kind)));
  if (column.type) {
    // Only an integer column meeting a float stays here: it widens in place.
    if (*column.type != ColumnType::Int64 || joined != ColumnType::Float64) return false;
    out.widen_to_double();
    column.type = joined;
    out.append_double(value.floating);
    return true;
  }
  // The column's first value: it takes the value's type.
  column.type = joined;
  const Layout layout = layout_of(*joined);
  out.retype(layout);
  if (layout == Layout::Bytes) {
    // Room for as many values of this one's size (bounded: a hint, untouched until written).
    const size_t size = value.kind == JsonKind::String ? value.text.size() : value.raw_size;
    out.reserve_bytes(std::min<size_t>((size + 1) * expected_rows_, size_t{8} << 20));
  }
  out.reserve_rows(expected_rows_);
  return append(column, value, payload);
}

bool OnePassColumns::add_member(size_t position, const FlatMember& member, std::string_view payload, int64_t row) {
  const size_t c = column_of(position, member.key);
  if (c == npos) return false;
  Column& column = columns_[c];
  if (column.builder.length() != row) return false;  // a duplicate key: the last one wins there
  return append(column, member, payload);
}

void OnePassColumns::end_row(size_t members) {
  const auto row = static_cast<int64_t>(rows_);
  ++rows_;
  // Every member went to its own column (a duplicate key left): when there are as many members
  // as columns, none is absent.
  if (members == columns_.size()) return;
  for (Column& column : columns_) {
    if (column.builder.length() != row + 1) column.builder.append_null();  // absent from this record
  }
}

bool OnePassColumns::add_object(const std::vector<FlatMember>& members, std::string_view payload) {
  const auto row = static_cast<int64_t>(rows_);
  for (size_t m = 0; m < members.size(); ++m)
    if (!add_member(m, members[m], payload, row)) return false;
  end_row(members.size());
  return true;
}

bool OnePassColumns::add_parsed(const simdjson::dom::parser& parser, std::string_view payload) {
  const auto row = static_cast<int64_t>(rows_);
  size_t position = 0;
  // A row left half-appended on false is of no consequence: the caller drops the whole state.
  if (!for_each_parsed_member(parser, payload,
                              [&](const FlatMember& m) { return add_member(position++, m, payload, row); }))
    return false;
  end_row(position);
  return true;
}

void OnePassColumns::add_null_row() {
  ++rows_;
  for (Column& column : columns_) column.builder.append_null();
}

std::vector<BuiltColumn> OnePassColumns::finish() {
  std::vector<BuiltColumn> built;
  built.reserve(columns_.size());
  for (Column& column : columns_) {
    const int64_t flags = ARROW_FLAG_NULLABLE;
    if (!column.type) {
      built.push_back(column.builder.finish("n", flags));
      continue;
    }
    switch (*column.type) {
      case ColumnType::Bool: built.push_back(column.builder.finish("b", flags)); break;
      case ColumnType::Int64: built.push_back(column.builder.finish("l", flags)); break;
      case ColumnType::Float64: built.push_back(column.builder.finish("g", flags)); break;
      case ColumnType::Utf8: built.push_back(column.builder.finish("u", flags)); break;
      case ColumnType::Json: built.push_back(column.builder.finish("u", flags, json_extension_metadata())); break;
      case ColumnType::Binary:
      case ColumnType::TimestampMs: throw ExportError("inferred an unsupported column type");  // never inferred
    }
  }
  return built;
}

}  // namespace picomq::arrow::detail
