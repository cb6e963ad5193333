/*
 * picomq sink SDK: a read-only C++ view over an Arrow record batch held in C Data Interface
 * structs (picomq/arrow_c_data.h), such as the ones the picomq Arrow exporter produces, or
 * pyarrow, or any other producer. Header only, C++17, no libarrow.
 *
 * The view borrows: it neither copies nor releases anything, so the ArrowSchema and ArrowArray
 * must outlive it (and every string_view or ByteView it returned). Accessors check the column type,
 * the row bounds and nullness, and throw std::logic_error / std::out_of_range when they fail.
 * Array offsets and validity bitmaps are honoured at every level.
 *
 *     picomq::sdk::ArrowBatchView batch(&schema, &array);
 *     auto offsets = batch.column("pico_offset");
 *     for (size_t row = 0; row < batch.num_rows(); ++row) use(offsets.as_int64(row));
 */
#ifndef PICOMQ_ARROW_VIEW_HPP
#define PICOMQ_ARROW_VIEW_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/arrow_c_data.h"

// The throwing paths of the accessors stay out of line, so the checks that guard them inline
// into a sink's loop over rows (they were most of a counting sink's time).
#if defined(__GNUC__) || defined(__clang__)
#define PICOMQ_ARROW_VIEW_COLD __attribute__((noinline, cold))
#else
#define PICOMQ_ARROW_VIEW_COLD
#endif

namespace picomq::sdk {

enum class ColumnType {
  Null,         // "n"
  Bool,         // "b"
  Int32,        // "i"
  Int64,        // "l"
  Float64,      // "g"
  Utf8,         // "u"
  LargeUtf8,    // "U"
  Binary,       // "z"
  LargeBinary,  // "Z"
  TimestampMs,  // "tsm:<timezone>"
  Map,          // "+m"
  Struct,       // "+s"
  Other         // anything else: name(), format() and is_null() still work
};

inline std::string_view to_string(ColumnType type) {
  switch (type) {
    case ColumnType::Null: return "null";
    case ColumnType::Bool: return "bool";
    case ColumnType::Int32: return "int32";
    case ColumnType::Int64: return "int64";
    case ColumnType::Float64: return "float64";
    case ColumnType::Utf8: return "utf8";
    case ColumnType::LargeUtf8: return "large_utf8";
    case ColumnType::Binary: return "binary";
    case ColumnType::LargeBinary: return "large_binary";
    case ColumnType::TimestampMs: return "timestamp_ms";
    case ColumnType::Map: return "map";
    case ColumnType::Struct: return "struct";
    case ColumnType::Other: return "other";
  }
  return "other";
}

inline ColumnType column_type_of_format(std::string_view format) {
  if (format == "n") return ColumnType::Null;
  if (format == "b") return ColumnType::Bool;
  if (format == "i") return ColumnType::Int32;
  if (format == "l") return ColumnType::Int64;
  if (format == "g") return ColumnType::Float64;
  if (format == "u") return ColumnType::Utf8;
  if (format == "U") return ColumnType::LargeUtf8;
  if (format == "z") return ColumnType::Binary;
  if (format == "Z") return ColumnType::LargeBinary;
  if (format.substr(0, 4) == "tsm:") return ColumnType::TimestampMs;
  if (format == "+m") return ColumnType::Map;
  if (format == "+s") return ColumnType::Struct;
  return ColumnType::Other;
}

// ByteView borrowed from the array.
struct ByteView {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string_view as_string_view() const { return {reinterpret_cast<const char*>(data), size}; }
};

// The key/value pairs of the C Data Interface binary metadata encoding (int32 count, then an
// int32 length and the bytes of each key and value, native byte order). Empty for NULL.
inline std::vector<std::pair<std::string_view, std::string_view>> decode_metadata(const char* metadata) {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  if (metadata == nullptr) return pairs;
  auto read_int32 = [&metadata]() {
    int32_t value;
    std::memcpy(&value, metadata, sizeof value);  // no alignment is promised
    metadata += sizeof value;
    return value;
  };
  const int32_t count = read_int32();
  for (int32_t i = 0; i < count; ++i) {
    const int32_t key_size = read_int32();
    const std::string_view key(metadata, static_cast<size_t>(key_size));
    metadata += key_size;
    const int32_t value_size = read_int32();
    const std::string_view value(metadata, static_cast<size_t>(value_size));
    metadata += value_size;
    pairs.emplace_back(key, value);
  }
  return pairs;
}

class ColumnView {
 public:
  // `parent_offset` is the enclosing arrays' offset that applies to this child, `length` the
  // number of rows the parent sees; both come from the parent, since a child array may be longer.
  ColumnView(const ArrowSchema* schema, const ArrowArray* array, int64_t parent_offset, int64_t length)
      : schema_(schema), array_(array), parent_offset_(parent_offset), length_(length) {
    if (schema_ == nullptr || array_ == nullptr) throw std::invalid_argument("column view of a NULL schema or array");
    type_ = column_type_of_format(format());
    const int64_t needed = array_->offset + parent_offset_ + length_;
    if (array_->offset < 0 || array_->length < 0 || needed > array_->offset + array_->length) {
      throw std::invalid_argument("column '" + std::string(name()) + "': its array is shorter than its parent");
    }
    base_ = array_->offset + parent_offset_;
    // A null count of 0 promises no nulls; -1 (unknown) or more: the bitmap, when there is one.
    if (array_->null_count != 0 && array_->n_buffers >= 1) validity_ = static_cast<const uint8_t*>(array_->buffers[0]);
    if (array_->n_buffers >= 2) values_ = array_->buffers[1];
    if (array_->n_buffers >= 3) data_ = array_->buffers[2];
  }

  std::string_view name() const { return schema_->name ? schema_->name : ""; }
  std::string_view format() const { return schema_->format ? schema_->format : ""; }
  ColumnType type() const { return type_; }
  bool nullable() const { return (schema_->flags & ARROW_FLAG_NULLABLE) != 0; }
  size_t size() const { return static_cast<size_t>(length_); }
  const ArrowSchema* schema() const { return schema_; }
  const ArrowArray* array() const { return array_; }

  // The field's metadata value for `key`, if any.
  std::optional<std::string_view> metadata(std::string_view key) const {
    for (const auto& [k, v] : decode_metadata(schema_->metadata)) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
  // A utf8 column tagged with the canonical arrow.json extension: each value is JSON text.
  bool is_json() const { return metadata("ARROW:extension:name") == std::optional<std::string_view>("arrow.json"); }
  // The timezone of a timestamp column ("UTC"), empty when it has none.
  std::string_view timezone() const {
    require(ColumnType::TimestampMs);
    return format().substr(4);
  }

  bool is_null(size_t row) const {
    const int64_t i = index(row);
    if (type_ == ColumnType::Null) return true;
    return validity_ != nullptr && !bit(validity_, i);
  }

  bool as_bool(size_t row) const {
    require(ColumnType::Bool);
    return bit(values(), valid_index(row));
  }
  int32_t as_int32(size_t row) const {
    require(ColumnType::Int32);
    return load<int32_t>(values(), valid_index(row));
  }
  int64_t as_int64(size_t row) const {
    require(ColumnType::Int64);
    return load<int64_t>(values(), valid_index(row));
  }
  double as_double(size_t row) const {
    require(ColumnType::Float64);
    return load<double>(values(), valid_index(row));
  }
  int64_t as_timestamp_ms(size_t row) const {
    require(ColumnType::TimestampMs);
    return load<int64_t>(values(), valid_index(row));
  }
  std::string_view as_string(size_t row) const {
    if (type_ != ColumnType::Utf8 && type_ != ColumnType::LargeUtf8) type_error("a utf8");
    return bytes_at(valid_index(row)).as_string_view();
  }
  // Any utf8 or binary column.
  ByteView as_bytes(size_t row) const {
    if (type_ != ColumnType::Binary && type_ != ColumnType::LargeBinary && type_ != ColumnType::Utf8 &&
        type_ != ColumnType::LargeUtf8) {
      type_error("a binary or utf8");
    }
    return bytes_at(valid_index(row));
  }

  // Map columns with string keys: the row's entries in order (a null value is nullopt). A null
  // map row has no entries.
  std::vector<std::pair<std::string_view, std::optional<ByteView>>> entries(size_t row) const {
    require(ColumnType::Map);
    std::vector<std::pair<std::string_view, std::optional<ByteView>>> out;
    if (is_null(row)) return out;
    const int64_t i = index(row);
    const auto begin = load<int32_t>(values(), i);
    const auto end = load<int32_t>(values(), i + 1);
    if (begin == end && begin >= 0) return out;  // no entries (most records have no headers): no child views to build
    const ColumnView entries_column = child(0);
    if (entries_column.num_children() != 2)
      throw std::logic_error("map column '" + std::string(name()) + "' has malformed entries");
    if (begin < 0 || end < begin || static_cast<size_t>(end) > entries_column.size()) {
      throw std::out_of_range("map column '" + std::string(name()) + "' has offsets beyond its entries");
    }
    const ColumnView keys = entries_column.child(0);
    const ColumnView values = entries_column.child(1);
    for (int32_t e = begin; e < end; ++e) {
      const auto entry = static_cast<size_t>(e);
      std::optional<ByteView> value;
      if (!values.is_null(entry)) value = values.as_bytes(entry);
      out.emplace_back(keys.as_bytes(entry).as_string_view(), value);
    }
    return out;
  }

  // Children of nested columns (struct fields, a map's entries). Their rows are the parent's
  // array rows: a map's child has as many rows as the map has entries.
  size_t num_children() const { return static_cast<size_t>(schema_->n_children); }
  ColumnView child(size_t i) const {
    if (i >= num_children() || static_cast<int64_t>(i) >= array_->n_children) {
      throw std::out_of_range("column '" + std::string(name()) + "' has no child " + std::to_string(i));
    }
    // The parent's own offset (and the one it inherited) shifts the child.
    const int64_t shift = array_->offset + parent_offset_;
    const int64_t rows = type_ == ColumnType::Map ? child_rows_of_map() : length_;
    return ColumnView(schema_->children[i], array_->children[i], type_ == ColumnType::Map ? 0 : shift, rows);
  }

 private:
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void type_error(std::string_view wanted) const {
    throw std::logic_error("column '" + std::string(name()) + "' is " + std::string(to_string(type_)) + " (format '" +
                           std::string(format()) + "'), not " + std::string(wanted) + " column");
  }
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void wrong_type(ColumnType wanted) const {
    type_error(std::string("a ") + std::string(to_string(wanted)));
  }
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void row_out_of_range(size_t row) const {
    throw std::out_of_range("column '" + std::string(name()) + "': row " + std::to_string(row) + " is out of range (" +
                            std::to_string(length_) + " rows)");
  }
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void null_row(size_t row) const {
    throw std::logic_error("column '" + std::string(name()) + "': row " + std::to_string(row) + " is null");
  }
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void missing_buffer(int64_t i) const {
    throw std::logic_error("column '" + std::string(name()) + "' lacks buffer " + std::to_string(i));
  }
  [[noreturn]] PICOMQ_ARROW_VIEW_COLD void malformed_offsets() const {
    throw std::logic_error("column '" + std::string(name()) + "' has malformed offsets");
  }
  void require(ColumnType wanted) const {
    if (type_ != wanted) wrong_type(wanted);
  }
  // Physical index of `row` in this array's buffers.
  int64_t index(size_t row) const {
    if (row >= static_cast<size_t>(length_)) row_out_of_range(row);
    return base_ + static_cast<int64_t>(row);
  }
  int64_t valid_index(size_t row) const {
    const int64_t i = index(row);
    if (type_ == ColumnType::Null || (validity_ != nullptr && !bit(validity_, i))) null_row(row);
    return i;
  }
  // Buffer 1: fixed-width values, bits, or offsets.
  const void* values() const {
    if (values_ == nullptr) missing_buffer(1);
    return values_;
  }
  static bool bit(const void* bits, int64_t i) { return (static_cast<const uint8_t*>(bits)[i / 8] >> (i % 8)) & 1; }
  template <class T>
  static T load(const void* buffer, int64_t i) {
    T value;
    std::memcpy(&value, static_cast<const uint8_t*>(buffer) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return value;
  }
  ByteView bytes_at(int64_t i) const {
    int64_t begin, end;
    if (type_ == ColumnType::LargeUtf8 || type_ == ColumnType::LargeBinary) {
      begin = load<int64_t>(values(), i);
      end = load<int64_t>(values(), i + 1);
    } else {
      begin = load<int32_t>(values(), i);
      end = load<int32_t>(values(), i + 1);
    }
    if (begin < 0 || end < begin) malformed_offsets();
    if (end == begin) return {nullptr, 0};  // the data buffer may be NULL when every value is empty
    if (data_ == nullptr) missing_buffer(2);
    return {static_cast<const uint8_t*>(data_) + begin, static_cast<size_t>(end - begin)};
  }
  // A map's offsets index its entries child directly (the map's offset does not shift it): the
  // child has as many rows as the last offset of the rows this view sees.
  int64_t child_rows_of_map() const { return load<int32_t>(values(), array_->offset + parent_offset_ + length_); }

  const ArrowSchema* schema_;
  const ArrowArray* array_;
  int64_t parent_offset_;
  int64_t length_;
  int64_t base_ = 0;                   // array offset + the parent's: row 0's physical index
  const uint8_t* validity_ = nullptr;  // the bitmap, when the array may hold nulls
  const void* values_ = nullptr;       // buffer 1, when there is one
  const void* data_ = nullptr;         // buffer 2 (variable-size values), when there is one
  ColumnType type_ = ColumnType::Other;
};

class ArrowBatchView {
 public:
  // Borrows a struct array (format "+s") with one child per column, as a record batch is
  // exported. Both structs must be alive (not released) and outlive the view.
  ArrowBatchView(const ArrowSchema* schema, const ArrowArray* array) : schema_(schema), array_(array) {
    if (schema_ == nullptr || array_ == nullptr)
      throw std::invalid_argument("ArrowBatchView of a NULL schema or array");
    if (schema_->release == nullptr || array_->release == nullptr) {
      throw std::invalid_argument("ArrowBatchView of a released schema or array");
    }
    if (schema_->format == nullptr || std::string_view(schema_->format) != "+s") {
      throw std::invalid_argument("ArrowBatchView needs a struct array (format '+s'), not '" +
                                  std::string(schema_->format ? schema_->format : "") + "'");
    }
    if (schema_->n_children != array_->n_children) {
      throw std::invalid_argument("ArrowBatchView: the schema and the array have different numbers of columns");
    }
  }

  size_t num_rows() const { return static_cast<size_t>(array_->length); }
  size_t num_columns() const { return static_cast<size_t>(schema_->n_children); }

  ColumnView column(size_t i) const {
    if (i >= num_columns()) {
      throw std::out_of_range("column " + std::to_string(i) + " is out of range (" + std::to_string(num_columns()) +
                              " columns)");
    }
    return ColumnView(schema_->children[i], array_->children[i], array_->offset, array_->length);
  }
  ColumnView column(std::string_view name) const {
    if (auto i = find(name)) return column(*i);
    throw std::out_of_range("no column named '" + std::string(name) + "'");
  }
  std::optional<size_t> find(std::string_view name) const {
    for (size_t i = 0; i < num_columns(); ++i) {
      const char* n = schema_->children[i]->name;
      if (n != nullptr && name == n) return i;
    }
    return std::nullopt;
  }

 private:
  const ArrowSchema* schema_;
  const ArrowArray* array_;
};

}  // namespace picomq::sdk

#endif  // PICOMQ_ARROW_VIEW_HPP
