#include "decoders/json_out.h"

#include <simdjson.h>

#include <algorithm>
#include <vector>

namespace picomq::decoders {

void JsonOut::escape_char(unsigned char c) {
  switch (c) {
    case '"': s_.append("\\\"", 2); return;
    case '\\': s_.append("\\\\", 2); return;
    case '\n': s_.append("\\n", 2); return;
    case '\r': s_.append("\\r", 2); return;
    case '\t': s_.append("\\t", 2); return;
    case '\b': s_.append("\\b", 2); return;
    case '\f': s_.append("\\f", 2); return;
    default: {
      static constexpr char hex[] = "0123456789abcdef";
      char buf[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      s_.append(buf, 6);
    }
  }
}

void JsonOut::base64(const uint8_t* data, size_t size) {
  static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t at = s_.size();
  s_.resize(at + (size + 2) / 3 * 4);
  char* out = s_.data() + at;
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    *out++ = table[v >> 18];
    *out++ = table[(v >> 12) & 63];
    *out++ = table[(v >> 6) & 63];
    *out++ = table[v & 63];
  }
  if (i < size) {
    uint32_t v = uint32_t{data[i]} << 16;
    if (i + 1 < size) v |= uint32_t{data[i + 1]} << 8;
    *out++ = table[v >> 18];
    *out++ = table[(v >> 12) & 63];
    *out++ = i + 1 < size ? table[(v >> 6) & 63] : '=';
    *out++ = '=';
  }
}

std::string quoted_key(std::string_view name) {
  JsonOut out;
  out.string(name);
  out.ch(':');
  return std::move(out.str());
}

bool valid_utf8_simd(const char* data, size_t size) { return simdjson::validate_utf8(data, size); }

namespace {

// Howard Hinnant's civil_from_days: days since 1970-01-01 -> (y, m, d), proleptic Gregorian.
void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

void put_digits(std::string& out, uint64_t v, int width) {
  char buf[20];
  for (int i = width - 1; i >= 0; --i) {
    buf[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  out.append(buf, static_cast<size_t>(width));
}

// Days since 1970-01-01 of 0001-01-01 and 9999-12-31.
constexpr int64_t kMinDays = -719162;
constexpr int64_t kMaxDays = 2932896;

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

bool format_date(int64_t days, std::string& out) {
  if (days < kMinDays || days > kMaxDays) return false;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  put_digits(out, static_cast<uint64_t>(y), 4);
  out.push_back('-');
  put_digits(out, m, 2);
  out.push_back('-');
  put_digits(out, d, 2);
  return true;
}

void format_time_of_day(int64_t units, int digits, std::string& out) {
  const int64_t per_second = digits == 3 ? 1000 : digits == 6 ? 1000000 : 1000000000;
  const int64_t secs = units / per_second, frac = units % per_second;
  put_digits(out, static_cast<uint64_t>(secs / 3600), 2);
  out.push_back(':');
  put_digits(out, static_cast<uint64_t>(secs / 60 % 60), 2);
  out.push_back(':');
  put_digits(out, static_cast<uint64_t>(secs % 60), 2);
  out.push_back('.');
  put_digits(out, static_cast<uint64_t>(frac), digits);
}

int canonical_fraction_digits(uint32_t nanos) {
  if (nanos == 0) return 0;
  if (nanos % 1000000 == 0) return 3;
  if (nanos % 1000 == 0) return 6;
  return 9;
}

bool format_timestamp(int64_t seconds, uint32_t nanos, int frac_digits, bool zulu, std::string& out) {
  const int64_t days = floor_div(seconds, 86400);
  const int64_t in_day = seconds - days * 86400;
  if (!format_date(days, out)) return false;
  out.push_back('T');
  put_digits(out, static_cast<uint64_t>(in_day / 3600), 2);
  out.push_back(':');
  put_digits(out, static_cast<uint64_t>(in_day / 60 % 60), 2);
  out.push_back(':');
  put_digits(out, static_cast<uint64_t>(in_day % 60), 2);
  if (frac_digits > 0) {
    out.push_back('.');
    uint64_t frac = nanos;
    for (int i = frac_digits; i < 9; ++i) frac /= 10;
    put_digits(out, frac, frac_digits);
  }
  if (zulu) out.push_back('Z');
  return true;
}

std::string decimal_from_twos_complement(const uint8_t* data, size_t size, int scale) {
  // Magnitude as base-256 digits, big-endian.
  const bool negative = size > 0 && (data[0] & 0x80);
  std::vector<uint8_t> mag(data, data + size);
  if (negative) {  // two's complement negation
    for (auto& b : mag) b = static_cast<uint8_t>(~b);
    for (size_t i = mag.size(); i-- > 0;)
      if (++mag[i] != 0) break;
  }
  // Repeated division by 10^9 gives base-1e9 limbs, least significant first.
  std::vector<uint32_t> limbs;
  size_t start = 0;
  while (start < mag.size() && mag[start] == 0) ++start;
  while (start < mag.size()) {
    uint64_t rem = 0;
    for (size_t i = start; i < mag.size(); ++i) {
      const uint64_t cur = (rem << 8) | mag[i];
      mag[i] = static_cast<uint8_t>(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    limbs.push_back(static_cast<uint32_t>(rem));
    while (start < mag.size() && mag[start] == 0) ++start;
  }
  // Made, not assigned: GCC 12 takes a std::string assigned a literal here for an overlapping copy
  // (-Wrestrict, a false positive of its inliner; the quickstart's build printed it).
  std::string digits = limbs.empty() ? std::string(1, '0') : std::to_string(limbs.back());
  if (!limbs.empty()) {
    for (size_t i = limbs.size() - 1; i-- > 0;) {
      std::string part = std::to_string(limbs[i]);
      digits.append(9 - part.size(), '0');
      digits += part;
    }
  }
  if (scale > 0) {
    if (digits.size() <= static_cast<size_t>(scale))
      digits.insert(0, static_cast<size_t>(scale) + 1 - digits.size(), '0');
    digits.insert(digits.size() - static_cast<size_t>(scale), 1, '.');
  }
  if (negative && digits.find_first_not_of("0.") != std::string::npos) digits.insert(0, 1, '-');
  return digits;
}

}  // namespace picomq::decoders
