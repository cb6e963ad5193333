#pragma once
// The inferred payload columns of a JSON batch built as its records are read, in one pass: the
// fast path for batches whose fields keep one kind (the usual case). A batch it cannot take
// exactly (a field of two kinds other than integer and float, a duplicate key, a field named
// like a metadata column) makes add_object() return false, and the caller exports the batch
// through the general two-pass reading, which gives the same columns for every batch this one
// takes (tests compare the two, cell by cell).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arrow/array_builder.h"
#include "arrow/arrow_export.h"
#include "arrow/json_payload.h"

namespace picomq::arrow::detail {

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

  size_t column_of(size_t position, std::string_view key);  // npos: a field the path cannot take
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
  std::vector<size_t> at_position_;  // the column of the key last seen at each member position
};

}  // namespace picomq::arrow::detail
