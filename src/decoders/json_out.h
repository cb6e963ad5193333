#pragma once
// Compact JSON output shared by the schema decoders (proto, avro, flatbuffer): they write each
// payload in one pass straight from the wire bytes into a std::string, no DOM in between.
//
// Conventions common to every decoder (docs/decoders.md):
//  - integers are JSON numbers, exactly (64-bit values included);
//  - finite floats are the shortest decimal that reads back to the same value; NaN and the
//    infinities, which JSON cannot hold, are the strings "NaN", "Infinity", "-Infinity";
//  - binary data is standard base64 with padding (RFC 4648 section 4);
//  - strings must be valid UTF-8 (an invalid one makes the record bad); '"', '\' and control
//    characters are escaped, everything else is copied as is.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace picomq::decoders {

class JsonOut {
 public:
  std::string& str() { return s_; }
  void clear() { s_.clear(); }

  void raw(std::string_view v) { s_.append(v); }
  void ch(char c) { s_.push_back(c); }
  void null() { s_.append("null", 4); }
  void boolean(bool b) { b ? s_.append("true", 4) : s_.append("false", 5); }
  // Drops a trailing ',' (after the last member of an object or array).
  void close(char c) {
    if (!s_.empty() && s_.back() == ',') s_.back() = c;
    else s_.push_back(c);
  }

  template <typename Int>
  void integer(Int v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    s_.append(buf, static_cast<size_t>(r.ptr - buf));
  }
  template <typename Int>
  void quoted_integer(Int v) {
    s_.push_back('"');
    integer(v);
    s_.push_back('"');
  }
  template <typename Float>
  void real(Float v) {
    if (std::isnan(v)) {
      s_.append("\"NaN\"", 5);
    } else if (std::isinf(v)) {
      v > 0 ? s_.append("\"Infinity\"", 10) : s_.append("\"-Infinity\"", 11);
    } else if (std::fabs(v) < Float(1e15) && v == static_cast<Float>(static_cast<int64_t>(v)) && !std::signbit(v)) {
      integer(static_cast<int64_t>(v));  // whole values: the same text as to_chars gives, cheaper ("2", not "2.0")
    } else {
      char buf[32];
      // Shortest round-trip form; from 1e15 on in scientific notation, so a large whole value
      // never reads as an integer beyond 64 bits (float 2^65 -> 3.689349e+19, not 36893488147419103232).
      auto r = std::fabs(v) < Float(1e15) ? std::to_chars(buf, buf + sizeof buf, v)
                                          : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
      s_.append(buf, static_cast<size_t>(r.ptr - buf));
    }
  }

  // A JSON string of `v`, which the caller has checked to be valid UTF-8.
  void string(std::string_view v) {
    s_.push_back('"');
    escaped(v);
    s_.push_back('"');
  }
  // The escaped body of a string, without quotes.
  void escaped(std::string_view v) {
    const char* p = v.data();
    const char* end = p + v.size();
    const char* run = p;
    for (; p != end; ++p) {
      const auto c = static_cast<unsigned char>(*p);
      if (c >= 0x20 && c != '"' && c != '\\') [[likely]]
        continue;
      s_.append(run, static_cast<size_t>(p - run));
      escape_char(c);
      run = p + 1;
    }
    s_.append(run, static_cast<size_t>(end - run));
  }
  // `"name":` for a member name already escaped (or plain ASCII).
  void key(std::string_view quoted_with_colon) { s_.append(quoted_with_colon); }

  void base64(const uint8_t* data, size_t size);
  void quoted_base64(const uint8_t* data, size_t size) {
    s_.push_back('"');
    base64(data, size);
    s_.push_back('"');
  }

 private:
  void escape_char(unsigned char c);
  std::string s_;
};

// "\"name\":" with the name escaped, for pre-rendering member names once per schema.
std::string quoted_key(std::string_view name);

bool valid_utf8_simd(const char* data, size_t size);
// Short ASCII strings (most member values) skip the SIMD validator's dispatch.
inline bool valid_utf8(const char* data, size_t size) {
  if (size <= 32) {
    unsigned char any = 0;
    for (size_t i = 0; i < size; ++i) any |= static_cast<unsigned char>(data[i]);
    if (any < 0x80) return true;
  }
  return valid_utf8_simd(data, size);
}
inline bool valid_utf8(std::string_view s) { return valid_utf8(s.data(), s.size()); }

// Civil date from days since 1970-01-01 (proleptic Gregorian), and the RFC 3339 renderings the
// decoders use. Each returns false when the year falls outside 0001..9999.
bool format_date(int64_t days, std::string& out);                                   // 2024-01-31
bool format_timestamp(int64_t seconds, uint32_t nanos, int frac_digits, bool zulu,  // 2024-01-31T12:34:56.789Z
                      std::string& out);
// Time of day from a count of units since midnight; digits: 3 (millis) or 6 (micros).
void format_time_of_day(int64_t units, int digits, std::string& out);  // 12:34:56.789
// Fraction digits proto3 JSON uses for nanos: 0, 3, 6 or 9.
int canonical_fraction_digits(uint32_t nanos);

// Decimal text of a big-endian two's-complement integer with `scale` digits after the point
// (Avro decimal). Exact for any length.
std::string decimal_from_twos_complement(const uint8_t* data, size_t size, int scale);

}  // namespace picomq::decoders
