// The scanner that finds values' original text (and reads what simdjson refuses).
#include "arrow/json_scan.h"

#include <gtest/gtest.h>

namespace picomq::arrow::detail {
namespace {

TEST(ArrowJsonScan, FindsTheEndOfEachKindOfValue) {
  EXPECT_EQ(scan_value(R"("a\"b" ,)", 0), 6u);
  EXPECT_EQ(scan_value("  -12.5e+3]", 0), 10u);
  EXPECT_EQ(scan_value("true ", 0), 4u) << "trailing space is not part of the value";
  EXPECT_EQ(scan_value(R"({"a":[1,{"b":"}"}],"c":null} x)", 0), 28u);
  EXPECT_EQ(scan_value("[ ]", 0), 3u);
  EXPECT_EQ(scan_value("123456789012345678901234567890", 0), 30u);
}

TEST(ArrowJsonScan, RefusesMalformedText) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\"1}", "{\"a\":}", "1.", "-", "1e", "tru", "\"\\x\"", "\"\\u12g4\"",
                          "\"a", "{\"a\":1,}", "[1 2]", "{1:2}", "\"\x01\""}) {
    EXPECT_EQ(scan_value(bad, 0), kScanFailed) << bad;
  }
}

TEST(ArrowJsonScan, NumberGrammar) {
  for (const char* good : {"0", "-0", "1e400", "-1.25E-7", "18446744073709551616"})
    EXPECT_TRUE(is_json_number(good)) << good;
  for (const char* bad : {"", "+1", "01", ".5", "1.e3", "0x10", "1 "}) EXPECT_FALSE(is_json_number(bad)) << bad;
}

TEST(ArrowJsonScan, SplitsTopLevelMembersKeepingDuplicatesAndRawText) {
  std::vector<RawMember> members;
  ASSERT_TRUE(split_object(R"( { "a" : { "x" : 1 } , "b\"" :[1e400] ,"a":"s"} )", members));
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].key, "\"a\"");
  EXPECT_EQ(members[0].value, R"({ "x" : 1 })");
  EXPECT_EQ(members[1].key, R"("b\"")");
  EXPECT_EQ(members[1].value, "[1e400]");
  EXPECT_EQ(members[2].value, "\"s\"");
  EXPECT_TRUE(split_object("{}", members));
  EXPECT_TRUE(members.empty());
  EXPECT_FALSE(split_object("[1]", members));
  EXPECT_FALSE(split_object("{} {}", members));
  EXPECT_FALSE(split_object("{\"a\":1", members));
}

}  // namespace
}  // namespace picomq::arrow::detail
