// The DOM reading of a payload parsed already (read_parsed_object) against the one-pass
// On-Demand reading (FlatObjectReader): the same members, values and original texts.
#include "arrow/json_payload.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

namespace picomq::arrow::detail {
namespace {

// The reader's views last until its next read: the members point into copies kept in `keep` (a
// deque: its strings stay where they are as it grows).
std::vector<FlatMember> read_flat(const std::string& payload, bool& ok, std::deque<std::string>& keep) {
  FlatObjectReader reader;
  std::vector<FlatMember> out;
  ok = reader.read(payload, out);
  for (FlatMember& m : out) {
    m.key = keep.emplace_back(m.key);
    if (m.kind == JsonKind::String) m.text = keep.emplace_back(m.text);
  }
  return out;
}

void expect_same_members(const std::string& payload) {
  SCOPED_TRACE(payload);
  bool flat_ok = false;
  std::deque<std::string> keep;
  const std::vector<FlatMember> flat = read_flat(payload, flat_ok, keep);
  simdjson::dom::parser parser;
  ASSERT_FALSE(parser.parse(payload).error());
  std::vector<FlatMember> dom;
  const bool dom_ok = read_parsed_object(parser, payload, dom);
  ASSERT_EQ(flat_ok, dom_ok);
  if (!dom_ok) return;
  ASSERT_EQ(flat.size(), dom.size());
  for (size_t m = 0; m < dom.size(); ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    EXPECT_EQ(flat[m].key, dom[m].key);
    EXPECT_EQ(flat[m].kind, dom[m].kind);
    EXPECT_EQ(payload.substr(flat[m].raw_begin, flat[m].raw_size), payload.substr(dom[m].raw_begin, dom[m].raw_size));
    switch (dom[m].kind) {
      case JsonKind::Bool: EXPECT_EQ(flat[m].boolean, dom[m].boolean); break;
      case JsonKind::Int64: EXPECT_EQ(flat[m].integer, dom[m].integer); break;
      case JsonKind::Double: EXPECT_EQ(flat[m].floating, dom[m].floating); break;
      case JsonKind::String: EXPECT_EQ(flat[m].text, dom[m].text); break;
      default: break;
    }
  }
}

TEST(ReadParsedObject, GivesTheMembersTheOnePassReaderGivesWithTheirOriginalText) {
  for (
      const std::string payload : {
          R"({"id": 1, "name": "a\"b\\c\u00e9\ud83d\ude00", "price": 12.50, "ok": true, "none": null,
               "items": [ {"sku": "x]}", "qty": 2} , [1, 2.0e3, "s{"] ],   "ship_to": {"city" : "Z\u00fcrich", "zip": "8000"}})",
          R"(  { "id" : -9223372036854775808 , "name" : "" , "price" : -0.0 , "ok" : false , "items" : [ ] , "ship_to" : { } }  )",
          R"({"id": 3, "price": 1e-300, "extra": {"deep": [[[]]]}, "zero": -0, "negzero": -0.0, "e": 1E2})",
          "{}",
          " {\n\t} ",
          R"({"k":1,"k":"dup","k":[{}]})",
          R"({"last": [1,2,3]})",
          R"({"s":"}","t":"]"})",
      }) {
    expect_same_members(payload);
  }
}

TEST(ReadParsedObject, LeavesWhatItDoesNotReadToTheGeneralReading) {
  simdjson::dom::parser parser;
  std::vector<FlatMember> out;
  for (const std::string payload : {"[1, 2]", "\"text\"", "12", "null", R"({"big": 18446744073709551615})"}) {
    ASSERT_FALSE(parser.parse(payload).error()) << payload;
    EXPECT_FALSE(read_parsed_object(parser, payload, out)) << payload;
  }
  const simdjson::dom::parser unused;
  EXPECT_FALSE(read_parsed_object(unused, "{}", out)) << "a parser that parsed nothing";
}

}  // namespace
}  // namespace picomq::arrow::detail
