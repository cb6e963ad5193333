#include "postgres/copy_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "test_util.h"

namespace picomq::postgres {
namespace {

using test::hex;
using test::kHeaderHex;
using test::kTrailerHex;

// One committed row of one field, as hex: "<count> <length> <bytes>" between header and trailer.
template <class F>
std::string one_field(F&& append) {
  CopyBinaryWriter w;
  w.begin_row();
  append(w);
  w.commit_row();
  const std::string data = w.finish();
  const std::string all = hex(data);
  const std::string head(kHeaderHex);
  EXPECT_EQ(all.substr(0, head.size()), head);
  EXPECT_EQ(all.substr(all.size() - kTrailerHex.size()), kTrailerHex);
  // between "header " and " trailer"
  return all.substr(head.size() + 1, all.size() - head.size() - kTrailerHex.size() - 2);
}

TEST(CopyBinary, HeaderAndTrailerOfAnEmptyStream) {
  CopyBinaryWriter w;
  EXPECT_EQ(w.data().size(), kCopyHeaderBytes);
  EXPECT_EQ(hex(w.data()), kHeaderHex);
  const std::string data = w.finish();
  EXPECT_EQ(hex(data), std::string(kHeaderHex) + " ff ff");
  EXPECT_EQ(data.size(), 21u);
  EXPECT_EQ(data.substr(0, 11), std::string("PGCOPY\n\377\r\n\0", 11));
}

TEST(CopyBinary, Null) {
  EXPECT_EQ(one_field([](auto& w) { w.null(); }), "00 01 ff ff ff ff");
}

TEST(CopyBinary, Int2) {
  EXPECT_EQ(one_field([](auto& w) { w.int2(1); }), "00 01 00 00 00 02 00 01");
  EXPECT_EQ(one_field([](auto& w) { w.int2(-2); }), "00 01 00 00 00 02 ff fe");
}

TEST(CopyBinary, Int4) {
  EXPECT_EQ(one_field([](auto& w) { w.int4(0x01020304); }), "00 01 00 00 00 04 01 02 03 04");
  EXPECT_EQ(one_field([](auto& w) { w.int4(-1); }), "00 01 00 00 00 04 ff ff ff ff");
  EXPECT_EQ(one_field([](auto& w) { w.int4(std::numeric_limits<int32_t>::min()); }), "00 01 00 00 00 04 80 00 00 00");
}

TEST(CopyBinary, Int8) {
  EXPECT_EQ(one_field([](auto& w) { w.int8(42); }), "00 01 00 00 00 08 00 00 00 00 00 00 00 2a");
  EXPECT_EQ(one_field([](auto& w) { w.int8(-42); }), "00 01 00 00 00 08 ff ff ff ff ff ff ff d6");
  EXPECT_EQ(one_field([](auto& w) { w.int8(std::numeric_limits<int64_t>::min()); }),
            "00 01 00 00 00 08 80 00 00 00 00 00 00 00");
}

TEST(CopyBinary, Float8IncludingNanInfAndNegativeZero) {
  EXPECT_EQ(one_field([](auto& w) { w.float8(1.5); }), "00 01 00 00 00 08 3f f8 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.float8(-2.25); }), "00 01 00 00 00 08 c0 02 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.float8(std::numeric_limits<double>::quiet_NaN()); }),
            "00 01 00 00 00 08 7f f8 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.float8(std::numeric_limits<double>::infinity()); }),
            "00 01 00 00 00 08 7f f0 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.float8(-std::numeric_limits<double>::infinity()); }),
            "00 01 00 00 00 08 ff f0 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.float8(-0.0); }), "00 01 00 00 00 08 80 00 00 00 00 00 00 00");
}

TEST(CopyBinary, Bool) {
  EXPECT_EQ(one_field([](auto& w) { w.boolean(true); }), "00 01 00 00 00 01 01");
  EXPECT_EQ(one_field([](auto& w) { w.boolean(false); }), "00 01 00 00 00 01 00");
}

TEST(CopyBinary, TextEmptyAsciiAndUnicode) {
  EXPECT_EQ(one_field([](auto& w) { w.text(""); }), "00 01 00 00 00 00");  // empty, not NULL
  EXPECT_EQ(one_field([](auto& w) { w.text("ab"); }), "00 01 00 00 00 02 61 62");
  EXPECT_EQ(one_field([](auto& w) { w.text("é€😀"); }), "00 01 00 00 00 09 c3 a9 e2 82 ac f0 9f 98 80");
}

TEST(CopyBinary, ByteaRawBytes) {
  const uint8_t raw[] = {0x00, 0xff, 0x10};
  EXPECT_EQ(one_field([&](auto& w) { w.bytea(std::span<const uint8_t>(raw, 3)); }), "00 01 00 00 00 03 00 ff 10");
  EXPECT_EQ(one_field([](auto& w) { w.bytea(std::string_view()); }), "00 01 00 00 00 00");
}

TEST(CopyBinary, JsonbHasVersionByte) {
  EXPECT_EQ(one_field([](auto& w) { w.jsonb("{}"); }), "00 01 00 00 00 03 01 7b 7d");
  EXPECT_EQ(one_field([](auto& w) { w.jsonb("1"); }), "00 01 00 00 00 02 01 31");
}

TEST(CopyBinary, TimestamptzMicrosecondsSince2000) {
  EXPECT_EQ(one_field([](auto& w) { w.timestamptz_from_epoch_ms(kPostgresEpochMs); }),
            "00 01 00 00 00 08 00 00 00 00 00 00 00 00");
  EXPECT_EQ(one_field([](auto& w) { w.timestamptz_from_epoch_ms(kPostgresEpochMs + 1); }),
            "00 01 00 00 00 08 00 00 00 00 00 00 03 e8");
  // 1970-01-01, before 2000: negative.
  EXPECT_EQ(one_field([](auto& w) { w.timestamptz_from_epoch_ms(0); }), "00 01 00 00 00 08 ff fc a2 fe c4 c8 20 00");
  EXPECT_EQ(one_field([](auto& w) { w.timestamptz_from_epoch_ms(-1); }), "00 01 00 00 00 08 ff fc a2 fe c4 c8 1c 18");
  EXPECT_EQ(one_field([](auto& w) { w.timestamptz_from_epoch_ms(1700000000123); }),
            "00 01 00 00 00 08 00 02 ad 22 dc e8 40 78");
}

TEST(CopyBinary, TimestampRange) {
  EXPECT_TRUE(timestamptz_in_range(0));
  EXPECT_TRUE(timestamptz_in_range(-210866803200000));  // 4714-11-24 BC
  EXPECT_FALSE(timestamptz_in_range(-210866803200001));
  EXPECT_TRUE(timestamptz_in_range(9224318015999999));  // last ms before 294277-01-01
  EXPECT_FALSE(timestamptz_in_range(9224318016000000));
  EXPECT_FALSE(timestamptz_in_range(std::numeric_limits<int64_t>::max()));
  EXPECT_FALSE(timestamptz_in_range(std::numeric_limits<int64_t>::min()));
  CopyBinaryWriter w;
  w.begin_row();
  EXPECT_THROW(w.timestamptz_from_epoch_ms(std::numeric_limits<int64_t>::max()), std::out_of_range);
  w.commit_row();  // nothing was appended
  EXPECT_EQ(hex(w.finish()), std::string(kHeaderHex) + " 00 00 ff ff");
}

TEST(CopyBinary, SeveralFieldsAndRows) {
  CopyBinaryWriter w;
  w.begin_row();
  w.int4(7);
  w.null();
  w.text("x");
  w.commit_row();
  w.begin_row();
  w.boolean(true);
  w.commit_row();
  EXPECT_EQ(w.row_count(), 2u);
  EXPECT_EQ(hex(w.finish()), std::string(kHeaderHex) +
                                 " 00 03 00 00 00 04 00 00 00 07 ff ff ff ff 00 00 00 01 78"
                                 " 00 01 00 00 00 01 01 ff ff");
}

TEST(CopyBinary, AbandonedRowLeavesNothing) {
  CopyBinaryWriter w;
  w.begin_row();
  w.int4(1);
  w.commit_row();
  const std::string before(w.data());
  w.begin_row();
  w.int8(99);
  w.text("half");
  w.abandon_row();
  EXPECT_EQ(w.data(), before);
  EXPECT_FALSE(w.in_row());
  // begin_row over an unfinished row drops it too.
  w.begin_row();
  w.text("dropped");
  w.begin_row();
  w.int2(2);
  w.commit_row();
  EXPECT_EQ(w.row_count(), 2u);
  EXPECT_EQ(hex(w.finish()), std::string(kHeaderHex) + " 00 01 00 00 00 04 00 00 00 01 00 01 00 00 00 02 00 02 ff ff");
}

TEST(CopyBinary, FinishStartsANewStream) {
  CopyBinaryWriter w;
  w.begin_row();
  w.int2(1);
  w.commit_row();
  (void)w.finish();
  EXPECT_EQ(w.row_count(), 0u);
  EXPECT_EQ(hex(w.data()), kHeaderHex);
  w.begin_row();
  w.int2(3);  // unfinished: finish() drops it
  EXPECT_EQ(hex(w.finish()), std::string(kHeaderHex) + " ff ff");
}

TEST(CopyBinary, FieldsOutsideARowAreABug) {
  CopyBinaryWriter w;
  EXPECT_THROW(w.int4(1), std::logic_error);
  EXPECT_THROW(w.commit_row(), std::logic_error);
  EXPECT_EQ(hex(w.data()), kHeaderHex);
}

TEST(CopyBinary, JsonNulEscapeDetection) {
  EXPECT_TRUE(json_has_nul_escape(R"({"a":"x\u0000y"})"));
  EXPECT_TRUE(json_has_nul_escape(R"("\u0000")"));
  EXPECT_FALSE(json_has_nul_escape(R"({"a":"x\\u0000y"})"));  // escaped backslash, then text
  EXPECT_TRUE(json_has_nul_escape(R"({"a":"x\\\u0000y"})"));
  EXPECT_TRUE(json_has_nul_escape(R"({"a":"\u00001"})"));
  EXPECT_FALSE(json_has_nul_escape(R"({"a":"\u0001"})"));
  EXPECT_FALSE(json_has_nul_escape(R"("\u000)"));
  EXPECT_FALSE(json_has_nul_escape("\\"));
}

}  // namespace
}  // namespace picomq::postgres
