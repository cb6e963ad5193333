#pragma once
// Builders for the arrays of one export, and the tree they produce before c_export.h hands it
// over as C Data Interface structs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::arrow::detail {

// An allocator whose value-initialisation leaves bytes as they are: a buffer grows without
// zero-filling what is written next anyway (every byte an array exports is written first; the
// buffers that need zeros ask for them: assign, assign_zeros).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-, not value-initialised
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using Buffer = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

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
  void append(bool valid) {
    if (valid && !materialised_) {
      ++length_;  // the common case: no bitmap yet
      return;
    }
    append_slow(valid);
  }
  int64_t length() const { return length_; }
  int64_t null_count() const { return null_count_; }
  std::optional<Buffer> finish();

 private:
  void append_slow(bool valid);

  Buffer bits_;
  bool materialised_ = false;
  int64_t length_ = 0;
  int64_t null_count_ = 0;
};

// A byte buffer appended to in place: grown ahead (geometrically, once per doubling) and cut to
// what was written at the end, so an append is a bounds check and a copy.
class GrowingBuffer {
 public:
  uint8_t* extend(size_t n) {
    if (n > bytes_.size() - used_) grow(n);
    uint8_t* at = bytes_.data() + used_;
    used_ += n;
    return at;
  }
  void reserve(size_t more) {
    if (more > bytes_.size() - used_) grow(more);
  }
  // Replaces the contents with n zero bytes.
  void assign_zeros(size_t n) {
    bytes_.assign(n, 0);
    used_ = n;
  }
  size_t size() const { return used_; }
  uint8_t* data() { return bytes_.data(); }
  Buffer take() {
    bytes_.resize(used_);
    used_ = 0;
    return std::move(bytes_);
  }

 private:
  void grow(size_t n);

  Buffer bytes_;
  size_t used_ = 0;
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
  void append_nulls(size_t count);
  void append_bool(bool value) {
    const int64_t row = length();
    validity_.append(true);
    if (row % 8 == 0) *values_.extend(1) = 0;
    if (value) values_.data()[row / 8] |= static_cast<uint8_t>(1u << (row % 8));
  }
  void append_int32(int32_t value) { append_fixed(value); }
  void append_int64(int64_t value) { append_fixed(value); }
  void append_double(double value) { append_fixed(value); }
  void append_bytes(const void* data, size_t size) {
    check_bytes_fit(size);
    validity_.append(true);
    if (size > 0) std::memcpy(values_.extend(size), data, size);
    const auto end = static_cast<int32_t>(values_.size());
    std::memcpy(offsets_.extend(sizeof end), &end, sizeof end);
  }
  void append_bytes(std::string_view bytes) { append_bytes(bytes.data(), bytes.size()); }

  // Bytes layout: reserves room for `total` more bytes of values, or throws ExportError when
  // int32 offsets could not address them (checked before anything is copied).
  void reserve_bytes(size_t total);

  // Room for `rows` more fixed-width values (or offsets) without growing.
  void reserve_rows(size_t rows);

  // A Null-layout builder (every value so far null) takes another layout; the nulls so far get
  // zeroed slots in it.
  void retype(Layout layout);
  // An Int64 builder becomes Float64, its values converted (nulls stay null).
  void widen_to_double();

  BuiltColumn finish(std::string format, int64_t flags, std::string metadata = {});

 private:
  template <class T>
  void append_fixed(T value) {
    validity_.append(true);
    std::memcpy(values_.extend(sizeof value), &value, sizeof value);
  }
  void check_bytes_fit(size_t more) const {
    if (more > kMaxBytes - values_.size()) too_many_bytes();
  }
  [[noreturn]] void too_many_bytes() const;

  static constexpr size_t kMaxBytes = 0x7FFFFFFF;  // what int32 offsets address
  Layout layout_;
  std::string name_;
  ValidityBuilder validity_;
  GrowingBuffer values_;   // fixed-width values, bool bits, or the bytes of variable-size values
  GrowingBuffer offsets_;  // Bytes layout: int32 offsets, length + 1 of them
};

// pico_headers: map<utf8, binary>, every header in order, duplicates and null values kept.
class HeadersBuilder {
 public:
  HeadersBuilder();
  void reserve(size_t total_headers, size_t total_name_bytes, size_t total_value_bytes);
  void append(const pmq_header* headers, size_t count);
  BuiltColumn finish(std::string name);

 private:
  GrowingBuffer offsets_;
  int64_t rows_ = 0;
  int32_t entries_ = 0;
  ArrayBuilder keys_;
  ArrayBuilder values_;
};

}  // namespace picomq::arrow::detail
