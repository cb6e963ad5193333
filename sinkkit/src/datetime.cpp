#include "picomq/kit/datetime.hpp"

#include <cstddef>

namespace picomq::kit {
namespace {

// Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

bool valid_date(int y, int m, int d) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return d <= kDays[m - 1] + (m == 2 && leap ? 1 : 0);
}

constexpr int64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

}  // namespace

bool parse_date(std::string_view s, int64_t& days) {
  int y, m, d;
  if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !digits(s, 0, 4, y) || !digits(s, 5, 2, m) ||
      !digits(s, 8, 2, d) || !valid_date(y, m, d))
    return false;
  days = days_from_civil(y, static_cast<unsigned>(m), static_cast<unsigned>(d));
  return true;
}

bool parse_datetime(std::string_view s, int64_t& seconds, uint32_t& nanos, int& fraction_digits) {
  int64_t days;
  if (s.size() < 10 || !parse_date(s.substr(0, 10), days)) return false;
  int hh = 0, mm = 0, ss = 0;
  nanos = 0;
  fraction_digits = 0;
  size_t pos = 10;
  if (pos < s.size()) {
    if (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ') return false;
    if (!digits(s, pos + 1, 2, hh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, mm) ||
        pos + 6 >= s.size() || s[pos + 6] != ':' || !digits(s, pos + 7, 2, ss))
      return false;
    if (hh > 23 || mm > 59 || ss > 59) return false;  // no leap seconds (ClickHouse, BSON Date have none)
    pos += 9;
    if (pos < s.size() && s[pos] == '.') {
      ++pos;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
        if (fraction_digits == 9) return false;
        nanos = nanos * 10 + static_cast<uint32_t>(s[pos] - '0');
        ++fraction_digits;
        ++pos;
      }
      if (fraction_digits == 0) return false;
      nanos *= static_cast<uint32_t>(kPow10[9 - fraction_digits]);
    }
  }
  int64_t offset = 0;
  if (pos < s.size()) {
    if (s.size() == 10) return false;
    const char c = s[pos];
    if ((c == 'Z' || c == 'z') && pos + 1 == s.size()) {
      pos += 1;
    } else if (c == '+' || c == '-') {
      int oh, om;
      const std::string_view rest = s.substr(pos + 1);
      if (rest.size() == 5 && rest[2] == ':' && digits(rest, 0, 2, oh) && digits(rest, 3, 2, om)) {
      } else if (rest.size() == 4 && digits(rest, 0, 2, oh) && digits(rest, 2, 2, om)) {
      } else {
        return false;
      }
      if (oh > 23 || om > 59) return false;
      offset = (c == '+' ? 1 : -1) * (oh * 3600 + om * 60);
      pos = s.size();
    } else {
      return false;
    }
  }
  seconds = days * 86400 + hh * 3600 + mm * 60 + ss - offset;
  return true;
}

}  // namespace picomq::kit
