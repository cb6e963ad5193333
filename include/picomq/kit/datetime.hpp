#pragma once
// ISO 8601 / RFC 3339 dates and date-times as sinks read them from JSON strings (ClickHouse
// Date/DateTime columns, MongoDB's timestamp_fields as BSON Date...):
// "2026-12-01", "2026-12-01T15:04:05", "2026-12-01 15:04:05.123", "...Z", "...+02:00",
// "...-0530". No offset: UTC. No leap seconds. Returns false on anything else. `nanos`: the
// fraction (0-999999999); `fraction_digits`: how many digits it had.
#include <cstdint>
#include <string_view>

namespace picomq::kit {

bool parse_datetime(std::string_view text, int64_t& seconds, uint32_t& nanos, int& fraction_digits);
// Days since 1970-01-01 of a "YYYY-MM-DD" date (proleptic Gregorian).
bool parse_date(std::string_view text, int64_t& days);

}  // namespace picomq::kit
