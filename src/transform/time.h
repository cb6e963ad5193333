// Timestamps for convert_timestamp and the computed values (now, record timestamp): exact
// conversions between epoch numbers (as JSON number text) and RFC 3339 text, in UTC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace picomq::transform::time {

// An instant: seconds since the Unix epoch (floor) and nanoseconds within that second.
struct Instant {
  std::int64_t seconds = 0;
  std::int32_t nanos = 0;  // [0, 1e9)
  bool operator==(const Instant&) const = default;
};

enum class Unit { Seconds, Millis, Micros, Nanos };

// Years 0000-9999: the range RFC 3339 can write.
inline constexpr std::int64_t kMinSeconds = -62167219200;  // 0000-01-01T00:00:00Z
inline constexpr std::int64_t kMaxSeconds = 253402300799;  // 9999-12-31T23:59:59Z

Instant from_millis(std::int64_t ms);

// A JSON number (any form: 1735689600123, 1735689600.5, 1.7e12) in `unit` since the epoch,
// exactly (digits below a nanosecond are truncated). nullopt with `error` set when it is not
// a number or lies outside years 0000-9999.
std::optional<Instant> from_number(std::string_view number, Unit unit, std::string& error);

// RFC 3339: "2025-01-01T10:00:00Z", "2025-01-01t10:00:00.123+02:00", "2025-01-01 10:00:00Z";
// a missing offset means UTC; a bare date ("2025-01-01") means midnight UTC. At most 9
// fraction digits are kept (more are truncated).
std::optional<Instant> parse_rfc3339(std::string_view text, std::string& error);

// Integer text in `unit` (floored), or for Seconds a decimal with the exact fraction when
// there is one ("1735689600.123").
std::string to_number(Instant t, Unit unit);
// "2025-01-01T10:00:00.123Z": 3 fraction digits, 6 or 9 when the instant needs them.
std::string to_rfc3339(Instant t);
// "2025-01-01"
std::string to_date(Instant t);

}  // namespace picomq::transform::time
