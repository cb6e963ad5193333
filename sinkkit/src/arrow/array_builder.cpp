#include "arrow/array_builder.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "picomq/arrow_c_data.h"

namespace picomq::arrow::detail {
namespace {

constexpr size_t kMaxOffset = static_cast<size_t>(std::numeric_limits<int32_t>::max());

template <class T>
void append_pod(GrowingBuffer& buffer, T value) {
  std::memcpy(buffer.extend(sizeof value), &value, sizeof value);
}

void append_int32_length(std::string& out, size_t size) {
  const auto n = static_cast<int32_t>(size);
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
}

}  // namespace

std::string encode_metadata(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string out;
  append_int32_length(out, pairs.size());
  for (const auto& [key, value] : pairs) {
    append_int32_length(out, key.size());
    out.append(key);
    append_int32_length(out, value.size());
    out.append(value);
  }
  return out;
}

const std::string& json_extension_metadata() {
  static const std::string encoded = encode_metadata({{"ARROW:extension:name", "arrow.json"}});
  return encoded;
}

void ValidityBuilder::append_slow(bool valid) {
  if (!valid && !materialised_) {
    // Every earlier value was valid; bits past the length may be anything, so set whole bytes.
    bits_.assign(static_cast<size_t>((length_ + 7) / 8), 0xFF);
    materialised_ = true;
  }
  const auto byte = static_cast<size_t>(length_ / 8);
  if (byte == bits_.size()) bits_.push_back(0);
  const auto mask = static_cast<uint8_t>(1u << (length_ % 8));
  if (valid) {
    bits_[byte] |= mask;
  } else {
    bits_[byte] &= static_cast<uint8_t>(~mask);
    ++null_count_;
  }
  ++length_;
}

std::optional<Buffer> ValidityBuilder::finish() {
  if (null_count_ == 0) return std::nullopt;
  return std::move(bits_);
}

void GrowingBuffer::grow(size_t n) {
  // Doubling keeps appends amortised O(1); the new bytes are not zero-filled (Buffer).
  bytes_.resize(std::max(bytes_.size() * 2, used_ + n));
}

ArrayBuilder::ArrayBuilder(Layout layout, std::string name) : layout_(layout), name_(std::move(name)) {
  if (layout_ == Layout::Bytes) append_pod<int32_t>(offsets_, 0);
}

void ArrayBuilder::append_null() {
  const int64_t row = length();
  validity_.append(false);
  switch (layout_) {
    case Layout::Null: break;
    case Layout::Bool:
      if (row % 8 == 0) *values_.extend(1) = 0;
      break;
    case Layout::Int32: append_pod<int32_t>(values_, 0); break;
    case Layout::Int64: append_pod<int64_t>(values_, 0); break;
    case Layout::Float64: append_pod<double>(values_, 0); break;
    case Layout::Bytes: append_pod(offsets_, static_cast<int32_t>(values_.size())); break;
  }
}

void ArrayBuilder::append_nulls(size_t count) {
  for (size_t i = 0; i < count; ++i) append_null();
}

void ArrayBuilder::reserve_rows(size_t rows) {
  switch (layout_) {
    case Layout::Null: break;
    case Layout::Bool: values_.reserve(rows / 8 + 1); break;
    case Layout::Int32: values_.reserve(rows * sizeof(int32_t)); break;
    case Layout::Int64:
    case Layout::Float64: values_.reserve(rows * sizeof(int64_t)); break;
    case Layout::Bytes: offsets_.reserve(rows * sizeof(int32_t)); break;
  }
}

void ArrayBuilder::retype(Layout layout) {
  if (layout_ != Layout::Null) throw ExportError("column '" + name_ + "' changed its layout after holding values");
  layout_ = layout;
  const auto rows = static_cast<size_t>(length());
  switch (layout_) {
    case Layout::Null: break;
    case Layout::Bool: values_.assign_zeros((rows + 7) / 8); break;
    case Layout::Int32: values_.assign_zeros(rows * sizeof(int32_t)); break;
    case Layout::Int64:
    case Layout::Float64: values_.assign_zeros(rows * sizeof(int64_t)); break;
    case Layout::Bytes: offsets_.assign_zeros((rows + 1) * sizeof(int32_t)); break;
  }
}

void ArrayBuilder::widen_to_double() {
  if (layout_ != Layout::Int64) throw ExportError("column '" + name_ + "' cannot widen to float64");
  for (size_t at = 0; at + sizeof(int64_t) <= values_.size(); at += sizeof(int64_t)) {
    int64_t integer;
    std::memcpy(&integer, values_.data() + at, sizeof integer);
    const auto floating = static_cast<double>(integer);
    std::memcpy(values_.data() + at, &floating, sizeof floating);
  }
  layout_ = Layout::Float64;
}

void ArrayBuilder::too_many_bytes() const {
  throw ExportError("column '" + name_ +
                    "' would hold more than 2 GiB of string data, beyond what int32 offsets address");
}

void ArrayBuilder::reserve_bytes(size_t total) {
  check_bytes_fit(total);
  values_.reserve(total);
}

BuiltColumn ArrayBuilder::finish(std::string format, int64_t flags, std::string metadata) {
  BuiltColumn column;
  column.format = std::move(format);
  column.name = name_;
  column.metadata = std::move(metadata);
  column.flags = flags;
  column.length = validity_.length();
  column.null_count = validity_.null_count();
  switch (layout_) {
    case Layout::Null: break;  // the null type has no buffers at all
    case Layout::Bytes:
      column.buffers.emplace_back(validity_.finish());
      column.buffers.emplace_back(offsets_.take());
      column.buffers.emplace_back(values_.take());
      break;
    default:
      column.buffers.emplace_back(validity_.finish());
      column.buffers.emplace_back(values_.take());
      break;
  }
  return column;
}

HeadersBuilder::HeadersBuilder()
    : keys_(Layout::Bytes, "pico_headers.key"), values_(Layout::Bytes, "pico_headers.value") {
  append_pod<int32_t>(offsets_, 0);
}

void HeadersBuilder::reserve(size_t total_headers, size_t total_name_bytes, size_t total_value_bytes) {
  if (total_headers > kMaxOffset) throw ExportError("column 'pico_headers' would hold more than 2^31 headers");
  keys_.reserve_bytes(total_name_bytes);
  values_.reserve_bytes(total_value_bytes);
}

void HeadersBuilder::append(const pmq_header* headers, size_t count) {
  if (count > kMaxOffset - static_cast<size_t>(entries_)) {
    throw ExportError("column 'pico_headers' would hold more than 2^31 headers");
  }
  for (size_t i = 0; i < count; ++i) {
    const pmq_header& header = headers[i];
    keys_.append_bytes(header.name.data, header.name.size);
    if (header.value.data == nullptr) {
      values_.append_null();
    } else {
      values_.append_bytes(header.value.data, header.value.size);
    }
  }
  entries_ += static_cast<int32_t>(count);
  append_pod(offsets_, entries_);
  ++rows_;
}

BuiltColumn HeadersBuilder::finish(std::string name) {
  BuiltColumn entries;
  entries.format = "+s";
  entries.name = "entries";
  entries.length = entries_;
  entries.buffers.emplace_back(std::nullopt);
  entries.children.push_back(keys_.finish("u", 0));
  entries.children.back().name = "key";
  entries.children.push_back(values_.finish("z", ARROW_FLAG_NULLABLE));
  entries.children.back().name = "value";

  BuiltColumn map;
  map.format = "+m";
  map.name = std::move(name);
  map.length = rows_;
  map.buffers.emplace_back(std::nullopt);  // never null: a record without headers has an empty map
  map.buffers.emplace_back(offsets_.take());
  map.children.push_back(std::move(entries));
  return map;
}

}  // namespace picomq::arrow::detail
