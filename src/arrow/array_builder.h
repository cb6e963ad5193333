#pragma once
// Builders for the arrays of one export, and the tree they produce before c_export.h hands it
// over as C Data Interface structs.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::arrow::detail {

using Buffer = std::vector<uint8_t>;

// A batch that cannot be exported at all (as opposed to a rejected record).
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One array and its field, built but not exported yet. Buffers are in the C Data Interface
// order of the format; std::nullopt is an omitted validity bitmap.
struct BuiltColumn {
  std::string format;
  std::string name;
  std::string metadata;  // already in the C Data Interface binary encoding; empty = none
  int64_t flags = 0;
  int64_t length = 0;
  int64_t null_count = 0;
  std::vector<std::optional<Buffer>> buffers;
  std::vector<BuiltColumn> children;
};

// The C Data Interface binary metadata encoding: int32 pair count, then for each pair an int32
// length and the bytes of the key, the same for the value (native byte order).
std::string encode_metadata(const std::vector<std::pair<std::string, std::string>>& pairs);

// The canonical extension that marks a utf8 column as JSON text.
const std::string& json_extension_metadata();

// Validity bits (LSB first), materialised at the first null: a column without nulls exports no
// bitmap and never allocates one.
class ValidityBuilder {
 public:
  void append(bool valid);
  int64_t length() const { return length_; }
  int64_t null_count() const { return null_count_; }
  std::optional<Buffer> finish();

 private:
  Buffer bits_;
  bool materialised_ = false;
  int64_t length_ = 0;
  int64_t null_count_ = 0;
};

// How an array's values are laid out; the format string is the caller's (utf8 and binary, or
// int64 and timestamp, share a layout).
enum class Layout { Null, Bool, Int32, Int64, Float64, Bytes };

class ArrayBuilder {
 public:
  // `name` is the column's, for error messages.
  ArrayBuilder(Layout layout, std::string name);

  Layout layout() const { return layout_; }
  int64_t length() const { return validity_.length(); }

  void append_null();
  void append_bool(bool value);
  void append_int32(int32_t value);
  void append_int64(int64_t value);
  void append_double(double value);
  void append_bytes(const void* data, size_t size);
  void append_bytes(std::string_view bytes) { append_bytes(bytes.data(), bytes.size()); }

  // Bytes layout: reserves room for `total` more bytes of values, or throws ExportError when
  // int32 offsets could not address them (checked before anything is copied).
  void reserve_bytes(size_t total);

  BuiltColumn finish(std::string format, int64_t flags, std::string metadata = {});

 private:
  void check_bytes_fit(size_t more) const;

  Layout layout_;
  std::string name_;
  ValidityBuilder validity_;
  Buffer values_;   // fixed-width values, bool bits, or the bytes of variable-size values
  Buffer offsets_;  // Bytes layout: int32 offsets, length + 1 of them
};

// pico_headers: map<utf8, binary>, every header in order, duplicates and null values kept.
class HeadersBuilder {
 public:
  HeadersBuilder();
  void reserve(size_t total_headers, size_t total_name_bytes, size_t total_value_bytes);
  void append(const pmq_header* headers, size_t count);
  BuiltColumn finish(std::string name);

 private:
  Buffer offsets_;
  int64_t rows_ = 0;
  int32_t entries_ = 0;
  ArrayBuilder keys_;
  ArrayBuilder values_;
};

}  // namespace picomq::arrow::detail
