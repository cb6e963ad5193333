#pragma once
// PostgreSQL binary COPY encoder (COPY ... FROM STDIN (FORMAT binary)), see
// https://www.postgresql.org/docs/15/sql-copy.html "Binary Format" and
// docs/sinks/postgres-encoding.md. Pure: no libpq, no server.
//
//   CopyBinaryWriter w;               // the 19-byte header is written by the constructor
//   w.begin_row();
//   w.int8(42); w.text("a"); w.null();
//   w.commit_row();                   // or abandon_row(): nothing of the row is kept
//   std::string data = w.finish();    // appends the trailer (int16 -1)
//
// A row is written straight into the output, and cut off again by abandon_row() (or the next
// begin_row()), so a record whose value turns out not to be encodable never leaves half a
// tuple behind.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace picomq::postgres {

// PGCOPY\n\377\r\n\0, flags (int32 0), header extension length (int32 0).
inline constexpr std::string_view kCopySignature{"PGCOPY\n\377\r\n\0", 11};
inline constexpr std::size_t kCopyHeaderBytes = 19;

// Largest value PostgreSQL stores in one field (a varlena is at most 1 GiB - 1).
inline constexpr std::size_t kMaxFieldBytes = 0x3FFFFFFF;

// microseconds between 1970-01-01 and 2000-01-01 (the PostgreSQL timestamp epoch) / 1000.
inline constexpr int64_t kPostgresEpochMs = 946684800000;

// Whether PostgreSQL's timestamptz can hold this epoch-millisecond instant: from 4714-11-24
// 00:00:00 UTC BC (the Julian day 0) to before 294277-01-01 00:00:00 UTC. Outside that range
// the server refuses the whole COPY ("timestamp out of range").
bool timestamptz_in_range(int64_t epoch_ms);

// True when a JSON text contains the escape \u0000: PostgreSQL's jsonb (and text) cannot
// hold U+0000, so such a value fails the whole COPY. Only real escapes count ("\\u0000",
// an escaped backslash followed by "u0000", does not).
bool json_has_nul_escape(std::string_view json);

class CopyBinaryWriter {
 public:
  CopyBinaryWriter();  // writes the header

  // Starts a row; an unfinished row is dropped first.
  void begin_row();
  // Appends the row (int16 field count + fields) to the output. Throws std::logic_error
  // without a begin_row(), std::length_error beyond 32767 fields.
  void commit_row();
  // Drops the fields appended since begin_row().
  void abandon_row();
  bool in_row() const { return in_row_; }

  // Field appenders (throw std::logic_error outside a row). Variable-length values above
  // kMaxFieldBytes throw std::length_error before anything is appended.
  void null();
  void int2(int16_t value);
  void int4(int32_t value);
  void int8(int64_t value);
  void float8(double value);  // IEEE 754 bits as they are: NaN, +-inf, -0.0 kept
  void boolean(bool value);
  void text(std::string_view utf8);  // UTF-8 bytes (the connection's client_encoding must be UTF8)
  void bytea(std::span<const uint8_t> bytes);
  void bytea(std::string_view bytes);
  void jsonb(std::string_view json_text);  // version byte 1 + the JSON text
  // int64 microseconds since 2000-01-01 UTC; throws std::out_of_range unless
  // timestamptz_in_range(epoch_ms).
  void timestamptz_from_epoch_ms(int64_t epoch_ms);

  // Appends the trailer and hands the buffer over; the writer then starts a new stream
  // (header written again, row count 0) in the buffer last given to recycle(), if any.
  std::string finish();
  // A buffer finish() handed out and its user is done with: its capacity is reused by the
  // stream after next, so a steady flow of batches allocates (and page-faults) nothing.
  void recycle(std::string buffer) {
    buffer.clear();
    spare_ = std::move(buffer);
  }

  // The bytes so far (header and committed rows; no trailer, nor the row being built).
  std::string_view data() const { return std::string_view(out_).substr(0, in_row_ ? row_start_ : out_.size()); }
  std::size_t row_count() const { return rows_; }

 private:
  void field_header(int32_t length);
  void check_row() const;

  std::string out_;
  std::string spare_;          // see recycle()
  std::size_t row_start_ = 0;  // where the row being built starts in out_
  std::size_t fields_ = 0;
  std::size_t rows_ = 0;
  bool in_row_ = false;
};

}  // namespace picomq::postgres
