// kit::parse_datetime / parse_date: the ISO 8601 / RFC 3339 forms sinks accept, and what they refuse.
#include "picomq/kit/datetime.hpp"

#include <gtest/gtest.h>

namespace kit = picomq::kit;

namespace {

int64_t seconds_of(std::string_view s, uint32_t* nanos_out = nullptr, int* digits_out = nullptr) {
  int64_t seconds = 0;
  uint32_t nanos = 0;
  int digits = 0;
  EXPECT_TRUE(kit::parse_datetime(s, seconds, nanos, digits)) << s;
  if (nanos_out) *nanos_out = nanos;
  if (digits_out) *digits_out = digits;
  return seconds;
}

TEST(DateTime, FormsWithAndWithoutOffsetsAndFractions) {
  EXPECT_EQ(seconds_of("1970-01-01"), 0);
  EXPECT_EQ(seconds_of("2026-12-01T15:04:05Z"), 1796137445);
  EXPECT_EQ(seconds_of("2026-12-01 15:04:05"), 1796137445);
  EXPECT_EQ(seconds_of("2026-12-01T16:04:05+01:00"), 1796137445);
  EXPECT_EQ(seconds_of("2026-12-01T09:34:05-0530"), 1796137445);
  uint32_t nanos = 0;
  int digits = 0;
  EXPECT_EQ(seconds_of("2026-12-01T15:04:05.123Z", &nanos, &digits), 1796137445);
  EXPECT_EQ(nanos, 123000000u);
  EXPECT_EQ(digits, 3);
  EXPECT_EQ(seconds_of("1969-12-31T23:59:59Z"), -1);
  EXPECT_EQ(seconds_of("2024-02-29"), 1709164800);
}

TEST(DateTime, RefusesWhatIsNotADate) {
  int64_t s = 0, days = 0;
  uint32_t n = 0;
  int d = 0;
  for (std::string_view bad :
       {"", "2026-13-01", "2023-02-29", "2026-12-01T25:00:00", "2026-12-01T15:04:60", "2026-12-01T15:04",
        "2026-12-01T15:04:05.", "2026-12-01T15:04:05+1", "yesterday", "2026-12-01Z", "2026-12-01T15:04:05.1234567890Z"})
    EXPECT_FALSE(kit::parse_datetime(bad, s, n, d)) << bad;
  EXPECT_TRUE(kit::parse_date("2026-12-01", days));
  EXPECT_EQ(days, 20788);
  EXPECT_FALSE(kit::parse_date("2026-12-01T00:00:00", days));
}

}  // namespace
