#include "transform/time.h"

#include <cstdio>

#include "transform/json.h"

namespace picomq::transform::time {
namespace {

using i128 = __int128;
constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

// Howard Hinnant's civil-calendar algorithms (proleptic Gregorian).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned days_in_month(std::int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t unit_nanos(Unit unit) {
  switch (unit) {
    case Unit::Seconds: return kNanosPerSecond;
    case Unit::Millis: return 1'000'000;
    case Unit::Micros: return 1'000;
    case Unit::Nanos: return 1;
  }
  return 1;
}

std::optional<Instant> from_total_nanos(i128 total, std::string& error) {
  i128 seconds = total / kNanosPerSecond;
  i128 nanos = total % kNanosPerSecond;
  if (nanos < 0) {
    nanos += kNanosPerSecond;
    --seconds;
  }
  if (seconds < kMinSeconds || seconds > kMaxSeconds) {
    error = "is outside the years 0000-9999";
    return std::nullopt;
  }
  return Instant{static_cast<std::int64_t>(seconds), static_cast<std::int32_t>(nanos)};
}

std::string i128_text(i128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u = neg ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string out;
  while (u > 0) {
    out += static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  }
  if (neg) out += '-';
  return std::string(out.rbegin(), out.rend());
}

bool two(std::string_view s, std::size_t at, unsigned& out) {
  if (at + 2 > s.size() || s[at] < '0' || s[at] > '9' || s[at + 1] < '0' || s[at + 1] > '9') return false;
  out = static_cast<unsigned>((s[at] - '0') * 10 + (s[at + 1] - '0'));
  return true;
}

}  // namespace

Instant from_millis(std::int64_t ms) {
  return Instant{floor_div(ms, 1000), static_cast<std::int32_t>((ms - floor_div(ms, 1000) * 1000) * 1'000'000)};
}

std::optional<Instant> from_number(std::string_view number, Unit unit, std::string& error) {
  if (!json::is_number(number)) {
    error = "is not a number";
    return std::nullopt;
  }
  // value = digits * 10^scale, then * unit -> nanoseconds.
  bool negative = number[0] == '-';
  std::string digits;
  std::int64_t scale = 0;
  std::size_t i = negative ? 1 : 0;
  for (; i < number.size() && number[i] >= '0' && number[i] <= '9'; ++i) digits += number[i];
  if (i < number.size() && number[i] == '.') {
    for (++i; i < number.size() && number[i] >= '0' && number[i] <= '9'; ++i) {
      digits += number[i];
      --scale;
    }
  }
  if (i < number.size() && (number[i] == 'e' || number[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < number.size() && (number[i] == '+' || number[i] == '-')) neg = number[i++] == '-';
    std::int64_t exp = 0;
    for (; i < number.size(); ++i)
      if (exp < 100000) exp = exp * 10 + (number[i] - '0');
    scale += neg ? -exp : exp;
  }
  std::size_t first = digits.find_first_not_of('0');
  digits = first == std::string::npos ? "" : digits.substr(first);
  for (std::int64_t u = unit_nanos(unit); u > 1; u /= 10) ++scale;
  if (scale < 0) {
    const auto drop = static_cast<std::size_t>(-scale);
    digits = drop >= digits.size() ? "" : digits.substr(0, digits.size() - drop);
    scale = 0;
  }
  // Years 0000-9999 are below 3e20 ns: anything with more than 21 digits is out of range.
  if (!digits.empty() && static_cast<std::int64_t>(digits.size()) + scale > 22) {
    error = "is outside the years 0000-9999";
    return std::nullopt;
  }
  i128 total = 0;
  for (char c : digits) total = total * 10 + (c - '0');
  for (std::int64_t s = 0; s < scale && !digits.empty(); ++s) total *= 10;
  if (negative) total = -total;
  return from_total_nanos(total, error);
}

std::optional<Instant> parse_rfc3339(std::string_view s, std::string& error) {
  auto fail = [&]() -> std::optional<Instant> {
    error = "is not an RFC 3339 timestamp such as \"2025-01-01T10:00:00Z\"";
    return std::nullopt;
  };
  unsigned y1, y2, month, day;
  if (s.size() < 10 || !two(s, 0, y1) || !two(s, 2, y2) || s[4] != '-' || !two(s, 5, month) || s[7] != '-' ||
      !two(s, 8, day))
    return fail();
  const std::int64_t year = y1 * 100 + y2;
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return fail();
  std::int64_t seconds = days_from_civil(year, month, day) * 86400;
  std::int64_t nanos = 0;
  std::size_t i = 10;
  if (i < s.size()) {
    if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return fail();
    unsigned hh, mm, ss;
    if (!two(s, i + 1, hh) || i + 3 >= s.size() || s[i + 3] != ':' || !two(s, i + 4, mm) || i + 6 >= s.size() ||
        s[i + 6] != ':' || !two(s, i + 7, ss))
      return fail();
    if (hh > 23 || mm > 59 || ss > 60) return fail();
    seconds += hh * 3600 + mm * 60 + ss;
    i += 9;
    if (i < s.size() && s[i] == '.') {
      ++i;
      std::size_t start = i;
      std::int64_t scale = 100'000'000;
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        nanos += (s[i] - '0') * scale;
        scale /= 10;
      }
      if (i == start) return fail();
    }
    if (i < s.size()) {
      if (s[i] == 'Z' || s[i] == 'z') {
        ++i;
      } else if (s[i] == '+' || s[i] == '-') {
        unsigned oh, om;
        if (!two(s, i + 1, oh) || i + 3 >= s.size() || s[i + 3] != ':' || !two(s, i + 4, om) || oh > 23 || om > 59)
          return fail();
        const std::int64_t offset = oh * 3600 + om * 60;
        seconds += s[i] == '+' ? -offset : offset;
        i += 6;
      } else {
        return fail();
      }
    }
    if (i != s.size()) return fail();
  }
  return from_total_nanos(static_cast<i128>(seconds) * kNanosPerSecond + nanos, error);
}

std::string to_number(Instant t, Unit unit) {
  const i128 total = static_cast<i128>(t.seconds) * kNanosPerSecond + t.nanos;
  if (unit == Unit::Seconds) {
    std::string out = i128_text(t.seconds);
    if (t.nanos == 0) return out;
    // Exact decimal: -1.5 s is seconds = -2, nanos = 5e8.
    const bool negative = total < 0;
    const i128 magnitude = negative ? -total : total;
    out = (negative ? "-" : "") + i128_text(magnitude / kNanosPerSecond);
    char frac[16];
    std::snprintf(frac, sizeof frac, "%09d", static_cast<int>(magnitude % kNanosPerSecond));
    std::string f(frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    return out + "." + f;
  }
  const std::int64_t u = unit_nanos(unit);
  i128 q = total / u;
  if (total % u != 0 && total < 0) --q;
  return i128_text(q);
}

std::string to_rfc3339(Instant t) {
  std::int64_t days = floor_div(t.seconds, 86400);
  std::int64_t rem = t.seconds - days * 86400;
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(y), m, d,
                        static_cast<int>(rem / 3600), static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60));
  std::string out(buf, static_cast<std::size_t>(n));
  if (t.nanos % 1'000'000 == 0) n = std::snprintf(buf, sizeof buf, ".%03dZ", t.nanos / 1'000'000);
  else if (t.nanos % 1'000 == 0) n = std::snprintf(buf, sizeof buf, ".%06dZ", t.nanos / 1'000);
  else n = std::snprintf(buf, sizeof buf, ".%09dZ", t.nanos);
  out.append(buf, static_cast<std::size_t>(n));
  return out;
}

std::string to_date(Instant t) {
  std::int64_t y;
  unsigned m, d;
  civil_from_days(floor_div(t.seconds, 86400), y, m, d);
  char buf[24];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(y), m, d);
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace picomq::transform::time
