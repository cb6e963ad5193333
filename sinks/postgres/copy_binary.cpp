#include "postgres/copy_binary.h"

#include <bit>
#include <cstring>
#include <stdexcept>

namespace picomq::postgres {
namespace {

// The timestamp range PostgreSQL accepts (src/include/datatype/timestamp.h: MIN_TIMESTAMP
// and END_TIMESTAMP, microseconds since 2000-01-01), converted to epoch milliseconds.
constexpr int64_t kMinTimestampUs = -211813488000000000;  // 4714-11-24 00:00:00 UTC BC
constexpr int64_t kEndTimestampUs = 9223371331200000000;  // 294277-01-01 00:00:00 UTC, exclusive
constexpr int64_t kMinEpochMs = kMinTimestampUs / 1000 + kPostgresEpochMs;
constexpr int64_t kEndEpochMs = kEndTimestampUs / 1000 + kPostgresEpochMs;

template <class U>
void store_be(char* at, U value) {
  for (std::size_t i = 0; i < sizeof(U); ++i)
    at[i] = static_cast<char>(static_cast<uint8_t>(value >> (8 * (sizeof(U) - 1 - i))));
}

template <class U>
void put_be(std::string& out, U value) {
  char bytes[sizeof(U)];
  store_be(bytes, value);
  out.append(bytes, sizeof(U));
}

// A fixed-size field: its length header and its big-endian value in one append (a per-field
// cost: one capacity check instead of two).
template <class U>
void put_fixed_field(std::string& out, U value) {
  char bytes[4 + sizeof(U)];
  store_be<uint32_t>(bytes, sizeof(U));
  store_be(bytes + 4, value);
  out.append(bytes, sizeof bytes);
}

}  // namespace

bool timestamptz_in_range(int64_t epoch_ms) { return epoch_ms >= kMinEpochMs && epoch_ms < kEndEpochMs; }

bool json_has_nul_escape(std::string_view json) {
  // From backslash to backslash: most values have none at all.
  for (std::size_t i = 0; i < json.size(); ++i) {
    const void* next = std::memchr(json.data() + i, '\\', json.size() - i);
    if (!next) return false;
    i = static_cast<std::size_t>(static_cast<const char*>(next) - json.data());
    if (i + 1 < json.size() && json[i + 1] == 'u' && json.substr(i + 2, 4) == "0000") return true;
    ++i;  // skip the escaped character ("\\" must not start another escape)
  }
  return false;
}

CopyBinaryWriter::CopyBinaryWriter() {
  out_.append(kCopySignature);
  put_be<uint32_t>(out_, 0);  // flags: no OIDs
  put_be<uint32_t>(out_, 0);  // header extension length
}

void CopyBinaryWriter::begin_row() {
  if (in_row_) out_.resize(row_start_);
  row_start_ = out_.size();
  put_be<uint16_t>(out_, 0);  // the field count, set by commit_row()
  fields_ = 0;
  in_row_ = true;
}

void CopyBinaryWriter::commit_row() {
  check_row();
  if (fields_ > 32767) throw std::length_error("COPY binary: more than 32767 fields in a row");
  out_[row_start_] = static_cast<char>(static_cast<uint8_t>(fields_ >> 8));
  out_[row_start_ + 1] = static_cast<char>(static_cast<uint8_t>(fields_));
  fields_ = 0;
  in_row_ = false;
  ++rows_;
}

void CopyBinaryWriter::abandon_row() {
  if (in_row_) out_.resize(row_start_);
  fields_ = 0;
  in_row_ = false;
}

void CopyBinaryWriter::check_row() const {
  if (!in_row_) throw std::logic_error("COPY binary: field or commit outside a row (begin_row first)");
}

void CopyBinaryWriter::field_header(int32_t length) {
  check_row();
  put_be<uint32_t>(out_, static_cast<uint32_t>(length));
  ++fields_;
}

void CopyBinaryWriter::null() { field_header(-1); }

void CopyBinaryWriter::int2(int16_t value) {
  field_header(2);
  put_be<uint16_t>(out_, static_cast<uint16_t>(value));
}

void CopyBinaryWriter::int4(int32_t value) {
  check_row();
  put_fixed_field<uint32_t>(out_, static_cast<uint32_t>(value));
  ++fields_;
}

void CopyBinaryWriter::int8(int64_t value) {
  check_row();
  put_fixed_field<uint64_t>(out_, static_cast<uint64_t>(value));
  ++fields_;
}

void CopyBinaryWriter::float8(double value) {
  field_header(8);
  put_be<uint64_t>(out_, std::bit_cast<uint64_t>(value));
}

void CopyBinaryWriter::boolean(bool value) {
  field_header(1);
  out_.push_back(value ? '\1' : '\0');
}

void CopyBinaryWriter::text(std::string_view utf8) {
  if (utf8.size() > kMaxFieldBytes) throw std::length_error("COPY binary: text value above 1 GiB");
  field_header(static_cast<int32_t>(utf8.size()));
  out_.append(utf8);
}

void CopyBinaryWriter::bytea(std::span<const uint8_t> bytes) {
  bytea(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void CopyBinaryWriter::bytea(std::string_view bytes) {
  if (bytes.size() > kMaxFieldBytes) throw std::length_error("COPY binary: bytea value above 1 GiB");
  field_header(static_cast<int32_t>(bytes.size()));
  out_.append(bytes);
}

void CopyBinaryWriter::jsonb(std::string_view json_text) {
  if (json_text.size() + 1 > kMaxFieldBytes) throw std::length_error("COPY binary: jsonb value above 1 GiB");
  check_row();
  char head[5];
  store_be<uint32_t>(head, static_cast<uint32_t>(json_text.size() + 1));
  head[4] = '\1';  // jsonb binary format version
  out_.append(head, sizeof head);
  out_.append(json_text);
  ++fields_;
}

void CopyBinaryWriter::timestamptz_from_epoch_ms(int64_t epoch_ms) {
  if (!timestamptz_in_range(epoch_ms)) throw std::out_of_range("COPY binary: timestamp outside PostgreSQL's range");
  check_row();
  // In range, (epoch_ms - kPostgresEpochMs) * 1000 fits int64 (checked by the range).
  put_fixed_field<uint64_t>(out_, static_cast<uint64_t>((epoch_ms - kPostgresEpochMs) * 1000));
  ++fields_;
}

std::string CopyBinaryWriter::finish() {
  abandon_row();
  put_be<uint16_t>(out_, 0xFFFF);  // trailer: int16 -1
  std::string done = std::move(out_);
  out_ = std::move(spare_);
  out_.clear();
  spare_ = std::string();
  out_.append(kCopySignature);
  put_be<uint32_t>(out_, 0);
  put_be<uint32_t>(out_, 0);
  rows_ = 0;
  return done;
}

}  // namespace picomq::postgres
