// The JSON writing helpers every schema decoder shares.
#include "decoders/json_out.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace picomq::decoders {
namespace {

TEST(DecodersJsonOut, NumbersStringsAndBase64) {
  JsonOut o;
  o.integer(INT64_MIN);
  o.ch(' ');
  o.integer(UINT64_MAX);
  o.ch(' ');
  o.real(0.1f);
  o.ch(' ');
  o.real(1e300);
  o.ch(' ');
  o.real(36893488147419103232.0f);  // 2^65: found by fuzz_decoder_proto, was printed as a 20-digit "integer"
  o.ch(' ');
  o.real(123456789012345.0);
  o.ch(' ');
  o.real(std::numeric_limits<double>::quiet_NaN());
  o.ch(' ');
  o.real(-std::numeric_limits<float>::infinity());
  o.ch(' ');
  o.string("a\"b\\c\n\x01\x7f\xc3\xa9");
  EXPECT_EQ(o.str(),
            "-9223372036854775808 18446744073709551615 0.1 1e+300 3.689349e+19 123456789012345 \"NaN\" \"-Infinity\" "
            "\"a\\\"b\\\\c\\n\\u0001\x7f\xc3\xa9\"");
  for (auto [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"\xff\xfe\xfd", "//79"}}) {
    JsonOut b;
    b.base64(reinterpret_cast<const uint8_t*>(in.data()), in.size());
    EXPECT_EQ(b.str(), out) << in;
  }
  JsonOut c;
  c.ch('[');
  c.close(']');
  c.ch('[');
  c.integer(1);
  c.ch(',');
  c.close(']');
  EXPECT_EQ(c.str(), "[][1]");
}

TEST(DecodersJsonOut, DatesTimesAndDecimals) {
  std::string s;
  EXPECT_TRUE(format_timestamp(0, 0, 0, true, s));
  EXPECT_EQ(s, "1970-01-01T00:00:00Z");
  s.clear();
  EXPECT_TRUE(format_timestamp(253402300799, 999999999, 9, true, s));
  EXPECT_EQ(s, "9999-12-31T23:59:59.999999999Z");
  s.clear();
  EXPECT_TRUE(format_timestamp(-62135596800, 0, 3, false, s));
  EXPECT_EQ(s, "0001-01-01T00:00:00.000");
  s.clear();
  EXPECT_FALSE(format_timestamp(253402300800, 0, 0, true, s));
  s.clear();
  EXPECT_TRUE(format_date(11016, s));  // leap day
  EXPECT_EQ(s, "2000-02-29");
  s.clear();
  format_time_of_day(86399999999, 6, s);
  EXPECT_EQ(s, "23:59:59.999999");
  EXPECT_EQ(canonical_fraction_digits(0), 0);
  EXPECT_EQ(canonical_fraction_digits(5000000), 3);
  EXPECT_EQ(canonical_fraction_digits(5000), 6);
  EXPECT_EQ(canonical_fraction_digits(5), 9);
  const uint8_t minus_one[] = {0xff, 0xff};
  EXPECT_EQ(decimal_from_twos_complement(minus_one, 2, 3), "-0.001");
  const uint8_t big[] = {0x00, 0xff};
  EXPECT_EQ(decimal_from_twos_complement(big, 2, 0), "255");
  EXPECT_EQ(decimal_from_twos_complement(big, 2, 5), "0.00255");
  EXPECT_EQ(decimal_from_twos_complement(nullptr, 0, 2), "0.00");
}

}  // namespace
}  // namespace picomq::decoders
