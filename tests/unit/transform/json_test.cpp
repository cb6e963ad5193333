// The transform chain's JSON document and timestamp helpers, on their own.
#include "transform/json.h"

#include <gtest/gtest.h>

#include "transform/time.h"

namespace picomq::transform {
namespace {

std::string round_trip(std::string_view text) {
  json::Value v;
  std::string error;
  if (!json::parse(text, v, error)) return "ERROR: " + error;
  return json::to_string(v);
}

TEST(Json, RoundTripsCompactly) {
  EXPECT_EQ(round_trip(R"( { "a" : [ 1 , 2.50 , -0 , 1E+2 , true , false , null , "" , { } , [ ] ] } )"),
            R"({"a":[1,2.50,-0,1E+2,true,false,null,"",{},[]]})");
  EXPECT_EQ(round_trip("\"\\u0041\\u00e9\\u20ac\\ud83d\\ude00\""), "\"Aé€😀\"");
  EXPECT_EQ(round_trip("\"\\u001f\\u007f\""), "\"\\u001f\x7f\"");
  EXPECT_EQ(round_trip(R"({"a":1,"a":2})"), R"({"a":1,"a":2})");
  EXPECT_EQ(round_trip("123456789012345678901234567890.000"), "123456789012345678901234567890.000");
}

TEST(Json, RejectsWhatRfc8259Rejects) {
  for (std::string_view bad : {"",
                               " ",
                               "{",
                               "[1,]",
                               "{\"a\":1,}",
                               "01",
                               "1.",
                               ".5",
                               "+1",
                               "1e",
                               "-",
                               "tru",
                               "nul",
                               "\"abc",
                               "\"\\x\"",
                               "\"\\u12\"",
                               "\"\\udc00\"",
                               "\"\\ud800x\"",
                               "{1:2}",
                               "[1 2]",
                               "1 2",
                               "\"a\nb\"",
                               "NaN",
                               "Infinity",
                               "'a'",
                               "\"\xc0\xaf\"",
                               "\"\xed\xa0\x80\""}) {
    json::Value v;
    std::string error;
    EXPECT_FALSE(json::parse(bad, v, error)) << "accepted: " << bad;
    EXPECT_FALSE(error.empty());
  }
}

TEST(Json, ObjectHelpers) {
  json::Value v = json::Value::object();
  v.set("a", json::Value::number("1"));
  v.set("b", json::Value::string("x"));
  v.set("a", json::Value::from_bool(true));
  EXPECT_EQ(json::to_string(v), R"({"a":true,"b":"x"})");
  EXPECT_EQ(v.erase("a"), 1u);
  EXPECT_EQ(v.erase("a"), 0u);
  EXPECT_EQ(json::to_string(v), R"({"b":"x"})");
  ASSERT_NE(v.find("b"), nullptr);
  EXPECT_EQ(v.find("zz"), nullptr);
}

TEST(Json, NumbersCompareExactly) {
  EXPECT_EQ(json::compare_numbers("1", "1.0"), 0);
  EXPECT_EQ(json::compare_numbers("100", "1e2"), 0);
  EXPECT_EQ(json::compare_numbers("0.05", "5E-2"), 0);
  EXPECT_EQ(json::compare_numbers("-0", "0.0"), 0);
  EXPECT_LT(json::compare_numbers("-1", "0"), 0);
  EXPECT_LT(json::compare_numbers("-2", "-1"), 0);
  EXPECT_GT(json::compare_numbers("0.1", "0.09999999999999999999"), 0);
  EXPECT_GT(json::compare_numbers("9007199254740993", "9007199254740992"), 0);
  EXPECT_LT(json::compare_numbers("1e-400", "1e-399"), 0);
  EXPECT_GT(json::compare_numbers("1e400", "9999999999"), 0);
  EXPECT_LT(json::compare_numbers("-1e400", "-9999999999"), 0);
}

TEST(Json, IntegerHelpers) {
  EXPECT_EQ(json::truncate_to_integer("2.99"), "2");
  EXPECT_EQ(json::truncate_to_integer("-2.99"), "-2");
  EXPECT_EQ(json::truncate_to_integer("-0.5"), "0");
  EXPECT_EQ(json::truncate_to_integer("1.5e3"), "1500");
  EXPECT_EQ(json::truncate_to_integer("12e-1"), "1");
  EXPECT_EQ(json::truncate_to_integer("120"), "120");
  EXPECT_EQ(json::truncate_to_integer("1e-999"), "0");
  EXPECT_FALSE(json::truncate_to_integer("1e401"));
  EXPECT_EQ(json::to_int64("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(json::to_int64("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(json::to_int64("9223372036854775808"));
  EXPECT_FALSE(json::to_int64("1.0"));
  EXPECT_TRUE(json::is_zero("-0.000e5"));
  EXPECT_FALSE(json::is_zero("0.001"));
  EXPECT_TRUE(json::is_number("-1.5E+3"));
  EXPECT_FALSE(json::is_number("1.5 "));
  EXPECT_FALSE(json::is_number("\"1\""));
}

TEST(Time, Rfc3339BothWays) {
  std::string error;
  auto t = time::parse_rfc3339("2025-01-01T01:30:00.5+01:30", error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->seconds, 1735689600);
  EXPECT_EQ(t->nanos, 500'000'000);
  EXPECT_EQ(time::to_rfc3339(*t), "2025-01-01T00:00:00.500Z");
  EXPECT_EQ(time::to_rfc3339(time::Instant{-1, 999'999'999}), "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(time::to_rfc3339(time::Instant{time::kMinSeconds, 0}), "0000-01-01T00:00:00.000Z");
  EXPECT_EQ(time::to_rfc3339(time::Instant{time::kMaxSeconds, 0}), "9999-12-31T23:59:59.000Z");
  EXPECT_EQ(time::to_date(time::Instant{951782400, 0}), "2000-02-29");
  for (std::string_view bad :
       {"2025-13-01", "2025-02-29", "2025-01-01T24:00:00Z", "2025-01-01T00:00Z", "2025-01-01T00:00:00.Z",
        "2025-01-01T00:00:00+1:00", "2025-01-01T00:00:00ZZ", "20250101", "2025-01-01X00:00:00Z"}) {
    EXPECT_FALSE(time::parse_rfc3339(bad, error)) << bad;
  }
  EXPECT_TRUE(time::parse_rfc3339("2024-02-29", error));
  EXPECT_TRUE(time::parse_rfc3339("2016-12-31T23:59:60Z", error));  // a leap second
}

TEST(Time, EpochNumbersExactly) {
  std::string error;
  auto t = time::from_number("1735689600123", time::Unit::Millis, error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(*t, (time::Instant{1735689600, 123'000'000}));
  EXPECT_EQ(time::to_number(*t, time::Unit::Seconds), "1735689600.123");
  EXPECT_EQ(time::to_number(*t, time::Unit::Micros), "1735689600123000");
  EXPECT_EQ(time::to_number(*t, time::Unit::Nanos), "1735689600123000000");
  EXPECT_EQ(*time::from_number("1.7356896001234567891e9", time::Unit::Seconds, error),
            (time::Instant{1735689600, 123'456'789}));
  EXPECT_EQ(*time::from_number("-1", time::Unit::Nanos, error), (time::Instant{-1, 999'999'999}));
  EXPECT_EQ(time::to_number(time::Instant{-1, 999'999'999}, time::Unit::Millis), "-1");
  EXPECT_EQ(time::to_number(time::Instant{-2, 500'000'000}, time::Unit::Seconds), "-1.5");
  EXPECT_EQ(time::from_millis(-1), (time::Instant{-1, 999'000'000}));
  EXPECT_FALSE(time::from_number("253402300800", time::Unit::Seconds, error));
  EXPECT_FALSE(time::from_number("1e99999999", time::Unit::Nanos, error));
  EXPECT_EQ(*time::from_number("1e-99999999", time::Unit::Nanos, error), (time::Instant{0, 0}));
  EXPECT_FALSE(time::from_number("abc", time::Unit::Nanos, error));
}

}  // namespace
}  // namespace picomq::transform
