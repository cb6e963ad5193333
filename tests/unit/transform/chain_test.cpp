// The transform chain, end to end: TOML definition -> parse_sink_definition -> Chain -> apply.
#include "transform/chain.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "test_support.h"

namespace picomq::transform {
namespace {

using testing::chain_of;
using testing::Record;
using testing::transformed;

constexpr std::string_view kOrder =
    R"({"id":"eu-000000001","customer":4711,"status":"paid","channel":"web","amount":12.50,"ccy":"EUR",)"
    R"("items":["SKU-00001","SKU-00002"],"qty":3,"ship_to":{"city":"Lyon","zip":"69001"},"express":false,)"
    R"("ts":1735689600123})";

// ---- the chain as a whole ----

TEST(Chain, EmptyChainKeepsTheBytes) {
  Chain chain;
  EXPECT_TRUE(chain.empty());
  EXPECT_EQ(transformed(chain, " { \"a\" : 1 } "), " { \"a\" : 1 } ");
  EXPECT_EQ(transformed(chain, "not json"), "not json");
}

TEST(Chain, UnchangedRecordsKeepTheirBytes) {
  auto chain = chain_of(R"([[transforms]]
type = "delete_fields"
fields = ["missing"]
)");
  // Nothing was deleted: the input is handed on as it was, whitespace and all.
  EXPECT_EQ(transformed(chain, "{ \"a\" : 1.50 }"), "{ \"a\" : 1.50 }");
}

TEST(Chain, AppliesTransformsInFileOrder) {
  auto rename_then_add = chain_of(R"([[transforms]]
type = "rename_fields"
fields = [ { from = "a", to = "b" } ]
[[transforms]]
type = "add_fields"
overwrite = false
fields = [ { path = "b", value = "added" } ]
)");
  EXPECT_EQ(transformed(rename_then_add, R"({"a":1})"), R"({"b":1})");
  auto add_then_rename = chain_of(R"([[transforms]]
type = "add_fields"
overwrite = false
fields = [ { path = "b", value = "added" } ]
[[transforms]]
type = "rename_fields"
fields = [ { from = "a", to = "b" } ]
)");
  EXPECT_EQ(transformed(add_then_rename, R"({"a":1})"), R"({"b":1})");
  auto add_then_delete = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "x", value = 1 } ]
[[transforms]]
type = "delete_fields"
fields = ["x"]
[[transforms]]
type = "add_fields"
fields = [ { path = "y", value = 2 } ]
)");
  EXPECT_EQ(transformed(add_then_delete, R"({"a":1})"), R"({"a":1,"y":2})");
}

TEST(Chain, FiveTransformChainOnAnOrder) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { field = "status", equals = "cancelled" }
[[transforms]]
type = "rename_fields"
fields = [ { from = "ccy", to = "currency" } ]
[[transforms]]
type = "delete_fields"
fields = ["channel", "items"]
[[transforms]]
type = "add_fields"
fields = [ { path = "source", value = "kafka" }, { path = "topic", compute = "topic" } ]
[[transforms]]
type = "cast"
fields = [ { path = "customer", to = "string" } ]
)");
  EXPECT_EQ(transformed(chain, std::string(kOrder)),
            R"({"id":"eu-000000001","customer":"4711","status":"paid","amount":12.50,"currency":"EUR","qty":3,)"
            R"("ship_to":{"city":"Lyon","zip":"69001"},"express":false,"ts":1735689600123,"source":"kafka",)"
            R"("topic":"orders.eu"})");
  EXPECT_EQ(transformed(chain, R"({"status":"cancelled"})"), "DROP");
}

TEST(Chain, InvalidJsonFailsNamingTheFirstTransformThatNeedsIt) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { metadata = "topic", equals = "other" }
[[transforms]]
type = "cast"
fields = [ { path = "a", to = "string" } ]
)");
  EXPECT_EQ(transformed(chain, "{\"a\":1"),
            "FAIL: transforms[1] (cast): payload is not valid JSON: unexpected end of input in an object at byte 6");
  EXPECT_EQ(transformed(chain, "{\"a\":01}"),
            "FAIL: transforms[1] (cast): payload is not valid JSON: expected ',' or '}' at byte 6");
  // A metadata filter that drops decides before anything parses the payload.
  Record other;
  other.topic = "other";
  EXPECT_EQ(transformed(chain, "not json", other), "DROP");
}

TEST(Chain, IsSafeToShareBetweenThreads) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "n", compute = "offset" } ]
)");
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        Record r;
        r.offset = t * 100000 + i;
        if (transformed(chain, R"({"a":1})", r) != R"({"a":1,"n":)" + std::to_string(r.offset) + "}") ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- add_fields ----

TEST(AddFields, StaticValuesOfEveryTomlType) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [
  { path = "s", value = "text with \"quotes\" and é" },
  { path = "i", value = -42 },
  { path = "f", value = 2.5 },
  { path = "b", value = true },
  { path = "arr", value = [1, "two", [3]] },
  { path = "obj", value = { x = 1, y = { z = "deep" } } },
  { path = "day", value = 2025-01-31 },
  { path = "at", value = 2025-01-31T10:00:00Z },
]
)");
  EXPECT_EQ(transformed(chain, "{}"),
            R"({"s":"text with \"quotes\" and é","i":-42,"f":2.5,"b":true,"arr":[1,"two",[3]],)"
            R"("obj":{"x":1,"y":{"z":"deep"}},"day":"2025-01-31","at":"2025-01-31T10:00:00Z"})");
}

TEST(AddFields, ComputedValues) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [
  { path = "now", compute = "now_ms" },
  { path = "now_text", compute = "now_rfc3339" },
  { path = "topic", compute = "topic" },
  { path = "partition", compute = "partition" },
  { path = "offset", compute = "offset" },
  { path = "ts", compute = "timestamp_ms" },
  { path = "ts_text", compute = "timestamp_rfc3339" },
  { path = "key", compute = "key" },
  { path = "key64", compute = "key_base64" },
  { path = "trace", compute = "header", header = "trace-id" },
  { path = "nothing", compute = "header", header = "absent" },
  { path = "id", compute = "record_id" },
]
)");
  Record r;
  r.headers = {{"trace-id", "old"}, {"other", "x"}, {"trace-id", "t-2"}};  // the last one counts
  EXPECT_EQ(transformed(chain, "{}", r),
            R"({"now":1735689600123,"now_text":"2025-01-01T00:00:00.123Z","topic":"orders.eu","partition":3,)"
            R"("offset":42,"ts":1735689600000,"ts_text":"2025-01-01T00:00:00.000Z","key":"k-1","key64":"ay0x",)"
            R"("trace":"t-2","nothing":null,"id":"orders.eu:3:42"})");

  Record bare;
  bare.key.reset();
  bare.timestamp_ms = -1;
  bare.headers = {{"trace-id", std::nullopt}};
  EXPECT_EQ(transformed(chain, "{}", bare),
            R"({"now":1735689600123,"now_text":"2025-01-01T00:00:00.123Z","topic":"orders.eu","partition":3,)"
            R"("offset":42,"ts":null,"ts_text":null,"key":null,"key64":null,"trace":null,"nothing":null,)"
            R"("id":"orders.eu:3:42"})");

  Record binary;
  binary.key = std::string("\xff\x00k", 3);
  binary.headers = {{"trace-id", std::string("\xc3\x28")}};  // invalid UTF-8: base64
  EXPECT_EQ(transformed(chain, "{}", binary).find(R"("key":"/wBr","key64":"/wBr","trace":"wyg=")") != std::string::npos,
            true)
      << transformed(chain, "{}", binary);
}

TEST(AddFields, TimestampsOutsideRfc3339AreNull) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "ts", compute = "timestamp_rfc3339" }, { path = "ms", compute = "timestamp_ms" } ]
)");
  Record r;
  r.timestamp_ms = INT64_MAX;
  EXPECT_EQ(transformed(chain, "{}", r), R"({"ts":null,"ms":9223372036854775807})");
}

TEST(AddFields, NestedPathsCreateObjects) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "meta.source.name", value = "kafka" }, { path = "ship_to.country", value = "FR" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"ship_to":{"city":"Lyon"}})"),
            R"({"ship_to":{"city":"Lyon","country":"FR"},"meta":{"source":{"name":"kafka"}}})");
  EXPECT_EQ(
      transformed(chain, R"({"meta":"flat","ship_to":{}})"),
      R"(FAIL: transforms[0] (add_fields): field "meta.source.name": cannot set it: "meta" is a string, not an object)");
}

TEST(AddFields, OverwriteOrKeep) {
  auto overwrite = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "a", value = 2 } ]
)");
  EXPECT_EQ(transformed(overwrite, R"({"a":1,"b":0})"), R"({"a":2,"b":0})");  // in place
  auto keep = chain_of(R"([[transforms]]
type = "add_fields"
overwrite = false
fields = [ { path = "a", value = 2 }, { path = "c", value = 3 } ]
)");
  EXPECT_EQ(transformed(keep, R"({"a":1})"), R"({"a":1,"c":3})");
  EXPECT_EQ(transformed(keep, R"({"a":null})"), R"({"a":null,"c":3})");  // null is a value
}

TEST(AddFields, ArrayElementsByIndex) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "items.1", value = "replaced" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"items":["a","b","c"]})"), R"({"items":["a","replaced","c"]})");
  EXPECT_EQ(transformed(chain, R"({"items":["a"]})"),
            R"(FAIL: transforms[0] (add_fields): field "items.1": cannot set it: the array has no element 1)");
}

TEST(AddFields, NonObjectPayloadsFail) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "a", value = 1 } ]
)");
  EXPECT_EQ(transformed(chain, "[1,2]"),
            R"(FAIL: transforms[0] (add_fields): field "a": cannot set it: an array has no field "a")");
  EXPECT_EQ(transformed(chain, R"("text")"),
            R"(FAIL: transforms[0] (add_fields): field "a": cannot set it: the payload is a string, not an object)");
  EXPECT_EQ(transformed(chain, "12"),
            R"(FAIL: transforms[0] (add_fields): field "a": cannot set it: the payload is a number, not an object)");
  EXPECT_EQ(transformed(chain, "null"),
            R"(FAIL: transforms[0] (add_fields): field "a": cannot set it: the payload is null, not an object)");
}

TEST(AddFields, WhenLimitsTheTransform) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
when = { field = "region", equals = "eu" }
fields = [ { path = "gdpr", value = true } ]
)");
  EXPECT_EQ(transformed(chain, R"({"region":"eu"})"), R"({"region":"eu","gdpr":true})");
  EXPECT_EQ(transformed(chain, R"({"region":"us"})"), R"({"region":"us"})");
  EXPECT_EQ(transformed(chain, R"(["eu"])"), R"(["eu"])");  // a field condition on an array sees no field
}

// ---- delete_fields ----

TEST(DeleteFields, TopNestedIndexedAndMissing) {
  auto chain = chain_of(R"([[transforms]]
type = "delete_fields"
fields = ["channel", "ship_to.zip", "items.0", "nope", "nope.deeper", "status.x"]
)");
  EXPECT_EQ(
      transformed(chain,
                  R"({"channel":"web","status":"paid","ship_to":{"city":"Lyon","zip":"69001"},"items":["a","b"]})"),
      R"({"status":"paid","ship_to":{"city":"Lyon"},"items":["b"]})");
}

TEST(DeleteFields, EveryDuplicateGoes) {
  auto chain = chain_of("[[transforms]]\ntype = \"delete_fields\"\nfields = [\"a\"]\n");
  EXPECT_EQ(transformed(chain, R"({"a":1,"b":2,"a":3})"), R"({"b":2})");
}

TEST(DeleteFields, KeysWithDotsAndUnicode) {
  auto chain = chain_of(R"([[transforms]]
type = "delete_fields"
fields = ['a\.b', "ключ", 'x.y\\z']
)");
  EXPECT_EQ(transformed(chain, R"({"a.b":1,"a":{"b":2},"ключ":3,"x":{"y\\z":4,"k":5}})"),
            R"({"a":{"b":2},"x":{"k":5}})");
}

TEST(DeleteFields, NonObjectPayloadsPassUnchanged) {
  auto chain = chain_of("[[transforms]]\ntype = \"delete_fields\"\nfields = [\"a\"]\n");
  EXPECT_EQ(transformed(chain, "[{\"a\":1}]"), "[{\"a\":1}]");
  EXPECT_EQ(transformed(chain, "\"a\""), "\"a\"");
  EXPECT_EQ(transformed(chain, "true"), "true");
}

// ---- rename_fields ----

TEST(RenameFields, InPlaceMoveAndOverwrite) {
  auto chain = chain_of(R"([[transforms]]
type = "rename_fields"
fields = [
  { from = "ccy", to = "currency" },
  { from = "customer", to = "buyer.id" },
  { from = "ship_to.city", to = "city" },
  { from = "missing", to = "whatever" },
]
)");
  EXPECT_EQ(transformed(chain, R"({"id":1,"ccy":"EUR","customer":7,"ship_to":{"city":"Lyon"},"z":0})"),
            R"({"id":1,"currency":"EUR","ship_to":{},"z":0,"buyer":{"id":7},"city":"Lyon"})");
  auto overwrite = chain_of(R"([[transforms]]
type = "rename_fields"
fields = [ { from = "a", to = "b" } ]
)");
  EXPECT_EQ(transformed(overwrite, R"({"b":0,"a":1,"c":2})"), R"({"b":1,"c":2})");
}

TEST(RenameFields, IntoANonObjectFails) {
  auto chain = chain_of(R"([[transforms]]
type = "rename_fields"
fields = [ { from = "a", to = "b.c" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"a":1,"b":[]})"),
            R"(FAIL: transforms[0] (rename_fields): field "a" -> "b.c": cannot move it: an array has no field "c")");
  EXPECT_EQ(
      transformed(chain, R"({"a":1,"b":5})"),
      R"(FAIL: transforms[0] (rename_fields): field "a" -> "b.c": cannot move it: "b" is a number, not an object)");
}

// ---- keep_fields ----

TEST(KeepFields, KeepsListedFieldsInRecordOrder) {
  auto chain = chain_of(R"([[transforms]]
type = "keep_fields"
fields = ["amount", "id", "ship_to.city", "missing", "status.x"]
)");
  EXPECT_EQ(transformed(chain, std::string(kOrder)),
            R"({"id":"eu-000000001","amount":12.50,"ship_to":{"city":"Lyon"}})");
  EXPECT_EQ(transformed(chain, "[1,2]"), "[1,2]");  // not an object: left alone
  EXPECT_EQ(transformed(chain, "7"), "7");
}

TEST(KeepFields, AWholeObjectWinsOverItsParts) {
  auto chain = chain_of(R"([[transforms]]
type = "keep_fields"
fields = ["ship_to.city", "ship_to", "items.1"]
)");
  EXPECT_EQ(transformed(chain, std::string(kOrder)),
            R"({"items":["SKU-00002"],"ship_to":{"city":"Lyon","zip":"69001"}})");
}

// ---- update_fields ----

TEST(UpdateFields, OnlyExistingFieldsUnlessCreate) {
  auto chain = chain_of(R"([[transforms]]
type = "update_fields"
fields = [ { path = "status", value = "void" }, { path = "note", value = "n" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"status":"paid"})"), R"({"status":"void"})");
  EXPECT_EQ(transformed(chain, R"({})"), R"({})");
  auto create = chain_of(R"([[transforms]]
type = "update_fields"
create = true
fields = [ { path = "note.text", value = "n" } ]
)");
  EXPECT_EQ(transformed(create, R"({})"), R"({"note":{"text":"n"}})");
}

TEST(UpdateFields, ConditionsPerFieldAndCopies) {
  auto chain = chain_of(R"([[transforms]]
type = "update_fields"
fields = [
  { path = "amount", value = 0, when = { field = "status", in = ["cancelled", "refunded"] } },
  { path = "status", copy_from = "ship_to.city", when = { field = "express", equals = true } },
  { path = "qty", copy_from = "missing" },
  { path = "seen", compute = "now_ms", when = { metadata = "partition", equals = 3 } },
]
)");
  EXPECT_EQ(transformed(chain, R"({"status":"refunded","amount":9.99,"qty":1,"seen":0})"),
            R"({"status":"refunded","amount":0,"qty":1,"seen":1735689600123})");
  EXPECT_EQ(transformed(chain, R"({"status":"paid","amount":9.99,"express":true,"ship_to":{"city":"Lyon"}})"),
            R"({"status":"Lyon","amount":9.99,"express":true,"ship_to":{"city":"Lyon"}})");
}

// ---- filter and conditions ----

TEST(Filter, DropWhenAndKeepWhen) {
  auto drop = chain_of(R"([[transforms]]
type = "filter"
drop_when = { field = "status", equals = "cancelled" }
)");
  EXPECT_EQ(transformed(drop, R"({"status":"cancelled"})"), "DROP");
  EXPECT_EQ(transformed(drop, R"({"status":"paid"})"), R"({"status":"paid"})");
  EXPECT_EQ(transformed(drop, R"({})"), R"({})");
  auto keep = chain_of(R"([[transforms]]
type = "filter"
keep_when = { field = "amount", gte = 10 }
)");
  EXPECT_EQ(transformed(keep, R"({"amount":10})"), R"({"amount":10})");
  EXPECT_EQ(transformed(keep, R"({"amount":9.999})"), "DROP");
  EXPECT_EQ(transformed(keep, R"({"amount":"12"})"), "DROP");  // a string is not a number
  EXPECT_EQ(transformed(keep, R"({})"), "DROP");
}

TEST(Filter, MetadataHeadersAndKeys) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { any = [
  { metadata = "topic", matches = '.*\.test' },
  { header = "replay", exists = true },
  { header = "source", equals = "legacy" },
  { metadata = "key", matches = "tmp-.*" },
  { metadata = "offset", lt = 10 },
  { metadata = "timestamp", exists = false },
] }
)");
  auto verdict = [&](const Record& r) { return transformed(chain, "{}", r); };
  EXPECT_EQ(verdict(Record()), "{}");
  Record r;
  r.topic = "orders.test";
  EXPECT_EQ(verdict(r), "DROP");
  r = Record();
  r.headers = {{"replay", std::nullopt}};  // a null value still exists
  EXPECT_EQ(verdict(r), "DROP");
  r = Record();
  r.headers = {{"source", "legacy"}, {"source", "new"}};  // the last one counts
  EXPECT_EQ(verdict(r), "{}");
  r.headers = {{"source", "new"}, {"source", "legacy"}};
  EXPECT_EQ(verdict(r), "DROP");
  r = Record();
  r.key = "tmp-1";
  EXPECT_EQ(verdict(r), "DROP");
  r.key.reset();
  EXPECT_EQ(verdict(r), "{}");
  r = Record();
  r.offset = 9;
  EXPECT_EQ(verdict(r), "DROP");
  r = Record();
  r.timestamp_ms = -1;
  EXPECT_EQ(verdict(r), "DROP");
}

TEST(Filter, AllAnyNot) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
keep_when = { all = [
  { field = "region", in = ["eu", "uk"] },
  { not = { field = "test", equals = true } },
  { any = [ { field = "amount", gt = 100 }, { field = "vip", exists = true } ] },
] }
)");
  EXPECT_EQ(transformed(chain, R"({"region":"eu","amount":150})"), R"({"region":"eu","amount":150})");
  EXPECT_EQ(transformed(chain, R"({"region":"eu","amount":50})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"region":"uk","amount":50,"vip":null})"),
            R"({"region":"uk","amount":50,"vip":null})");
  EXPECT_EQ(transformed(chain, R"({"region":"uk","amount":150,"test":true})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"region":"us","amount":150})"), "DROP");
}

TEST(Filter, NumbersCompareExactly) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
keep_when = { field = "n", gt = 9007199254740992 }
)");
  // Beyond 2^53 a double cannot tell these apart; the chain compares digits.
  EXPECT_EQ(transformed(chain, R"({"n":9007199254740993})"), R"({"n":9007199254740993})");
  EXPECT_EQ(transformed(chain, R"({"n":9007199254740992})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"n":9007199254740992.5})"), R"({"n":9007199254740992.5})");
  EXPECT_EQ(transformed(chain, R"({"n":123456789012345678901234567890})"), R"({"n":123456789012345678901234567890})");
  EXPECT_EQ(transformed(chain, R"({"n":-123456789012345678901234567890})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"n":1e400})"), R"({"n":1e400})");
  auto equals = chain_of(R"([[transforms]]
type = "filter"
keep_when = { field = "n", equals = 2.5 }
)");
  EXPECT_EQ(transformed(equals, R"({"n":2.50})"), R"({"n":2.50})");
  EXPECT_EQ(transformed(equals, R"({"n":25e-1})"), R"({"n":25e-1})");
  EXPECT_EQ(transformed(equals, R"({"n":2.51})"), "DROP");
  EXPECT_EQ(transformed(equals, R"({"n":"2.5"})"), "DROP");
}

TEST(Filter, EqualityOfStructuredValues) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { field = "tags", equals = { a = 1, b = [true, "x"] } }
)");
  EXPECT_EQ(transformed(chain, R"({"tags":{"b":[true,"x"],"a":1.0}})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"tags":{"b":["x",true],"a":1}})"), R"({"tags":{"b":["x",true],"a":1}})");
}

TEST(Filter, RegexIsAWholeMatchOnStrings) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { field = "email", matches = '[^@]+@example\.com' }
)");
  EXPECT_EQ(transformed(chain, R"({"email":"a@example.com"})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"email":"a@example.com.evil"})"), R"({"email":"a@example.com.evil"})");
  EXPECT_EQ(transformed(chain, R"({"email":42})"), R"({"email":42})");
}

// Found by fuzz_transform_config: nested repeats made libstdc++'s backtracking matcher take
// exponential time (minutes on a topic name). Matching is breadth-first now (config/regex.h).
TEST(Filter, NestedRepeatsMatchInPolynomialTime) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { any = [ { field = "a", matches = '(a*)*b' }, { field = "t", matches = 'orders\*****************************..*x' } ] }
)");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(transformed(chain, R"({"a":")" + std::string(1000, 'a') + R"(c"})"),
            R"({"a":")" + std::string(1000, 'a') + R"(c"})");
  EXPECT_EQ(transformed(chain, R"({"a":")" + std::string(1000, 'a') + R"(b"})"), "DROP");
  EXPECT_EQ(transformed(chain, R"({"t":"orders.eu"})"), R"({"t":"orders.eu"})");
  EXPECT_EQ(transformed(chain, R"({"t":"orders***.eux"})"), "DROP");
  // Backtracking took longer than any CI run on the first one; breadth-first, milliseconds.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

// Topic conditions remember their last answer per thread (chain.cpp, topic_matches): topics that
// alternate, and two chains whose patterns differ, each get their own answer.
TEST(Filter, TopicMatchesAreRememberedPerConditionAndTopic) {
  auto orders = chain_of(R"([[transforms]]
type = "filter"
drop_when = { metadata = "topic", matches = 'orders\..*' }
)");
  auto others = chain_of(R"([[transforms]]
type = "filter"
drop_when = { metadata = "topic", matches = 'other' }
)");
  Record in_orders, in_other;
  in_orders.topic = "orders.eu";
  in_other.topic = "other";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(transformed(orders, "{}", in_orders), "DROP");
    EXPECT_EQ(transformed(others, "{}", in_orders), "{}");
    EXPECT_EQ(transformed(orders, "{}", in_other), "{}");
    EXPECT_EQ(transformed(others, "{}", in_other), "DROP");
  }
  // A chain rebuilt (a reload) with another pattern answers by its own.
  orders = chain_of(R"([[transforms]]
type = "filter"
drop_when = { metadata = "topic", matches = 'nothing' }
)");
  EXPECT_EQ(transformed(orders, "{}", in_orders), "{}");
}

TEST(Filter, MatchesReadsAtMost1024Bytes) {
  auto chain = chain_of(R"([[transforms]]
type = "filter"
drop_when = { any = [ { field = "id", equals = 0 }, { field = "note", matches = '.*spam.*' } ] }
)");
  EXPECT_EQ(transformed(chain, R"({"note":")" + std::string(1018, 'x') + R"(spam"})"), "DROP");
  // libstdc++'s regex would need a deep recursion (a crash from ~8 KB): a bad record instead.
  EXPECT_EQ(transformed(chain, R"({"note":")" + std::string(100000, 'x') + R"("})"),
            "FAIL: transforms[0] (filter): condition transforms[0].drop_when.any[1]: field \"note\" is 100000 bytes "
            "long; 'matches' reads at most 1024");
  auto header = chain_of(R"([[transforms]]
type = "add_fields"
when = { header = "h", matches = "a+" }
fields = [ { path = "x", value = 1 } ]
[[transforms]]
type = "filter"
keep_when = { header = "h", matches = "a+" }
)");
  Record r;
  r.headers = {{"h", std::string(2000, 'a')}};
  EXPECT_EQ(transformed(header, "{}", r),
            "FAIL: transforms[0] (add_fields): condition transforms[0].when: header \"h\" is 2000 bytes long; "
            "'matches' reads at most 1024");
  RecordMeta meta;
  std::vector<pmq_header> headers(1);
  headers[0].name = {reinterpret_cast<const uint8_t*>("h"), 1};
  headers[0].value = {reinterpret_cast<const uint8_t*>(r.headers[0].second->data()), 2000};
  meta.headers = headers;
  std::string error;
  EXPECT_EQ(header.apply_without_payload(meta, error), Verdict::Fail);
  EXPECT_EQ(error,
            "transforms[1] (filter): condition transforms[1].keep_when: header \"h\" is 2000 bytes long; "
            "'matches' reads at most 1024");
}

TEST(Filter, WithoutPayloadOnlyFiltersRun) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "a", value = 1 } ]
[[transforms]]
type = "filter"
drop_when = { any = [ { header = "skip", exists = true }, { field = "x", exists = false } ] }
)");
  std::string error;
  Record r;
  RecordMeta meta;
  meta.topic = r.topic;
  EXPECT_EQ(chain.apply_without_payload(meta, error), Verdict::Drop);  // field "x" is missing
  auto metadata_only = chain_of(R"([[transforms]]
type = "filter"
drop_when = { header = "skip", exists = true }
)");
  EXPECT_EQ(metadata_only.apply_without_payload(meta, error), Verdict::Keep);
  pmq_header h{};
  h.name = {reinterpret_cast<const uint8_t*>("skip"), 4};
  meta.headers = {&h, 1};
  EXPECT_EQ(metadata_only.apply_without_payload(meta, error), Verdict::Drop);
}

TEST(Filter, RecordMetaFromAnAbiRecord) {
  pmq_header h{};
  h.name = {reinterpret_cast<const uint8_t*>("h"), 1};
  h.value = {reinterpret_cast<const uint8_t*>("v"), 1};
  pmq_record record{};
  record.offset = 7;
  record.timestamp_ms = 99;
  record.key = {reinterpret_cast<const uint8_t*>("key"), 3};
  record.headers = &h;
  record.header_count = 1;
  RecordMeta meta = record_meta("t", 2, record);
  EXPECT_EQ(meta.topic, "t");
  EXPECT_EQ(meta.partition, 2);
  EXPECT_EQ(meta.offset, 7);
  EXPECT_EQ(meta.timestamp_ms, 99);
  EXPECT_EQ(meta.key, "key");
  ASSERT_EQ(meta.headers.size(), 1u);
  record.key = {nullptr, 0};
  EXPECT_FALSE(record_meta("t", 2, record).key);
}

// ---- mask_fields ----

TEST(MaskFields, ReplacementByDefault) {
  auto chain = chain_of(R"([[transforms]]
type = "mask_fields"
fields = ["card", "cvv", "address", "none", "missing"]
)");
  EXPECT_EQ(transformed(chain, R"({"card":"4111111111111111","cvv":123,"address":{"street":"x"},"none":null})"),
            R"({"card":"****","cvv":"****","address":"****","none":null})");
  auto typed = chain_of(R"([[transforms]]
type = "mask_fields"
fields = ["cvv"]
replacement = 0
)");
  EXPECT_EQ(transformed(typed, R"({"cvv":123})"), R"({"cvv":0})");
}

TEST(MaskFields, KeepFirstAndLastCountCharacters) {
  auto chain = chain_of(R"([[transforms]]
type = "mask_fields"
fields = ["card", "name", "short", "n", "flag"]
keep_last = 4
keep_first = 1
mask_char = "•"
)");
  EXPECT_EQ(
      transformed(chain, R"({"card":"4111111111111111","name":"Zoë Ünal","short":"abcde","n":123456,"flag":true})"),
      R"({"card":"4•••••••••••1111","name":"Z•••Ünal","short":"•••••","n":"1•3456","flag":"****"})");
}

// ---- flatten ----

TEST(Flatten, NestedObjectsWithSeparator) {
  auto chain = chain_of("[[transforms]]\ntype = \"flatten\"\n");
  EXPECT_EQ(
      transformed(chain,
                  R"({"id":1,"ship_to":{"city":"Lyon","geo":{"lat":45.76,"lon":4.83}},"items":[{"a":1}],"e":{}})"),
      R"({"id":1,"ship_to_city":"Lyon","ship_to_geo_lat":45.76,"ship_to_geo_lon":4.83,"items":[{"a":1}],"e":{}})");
  auto dotted = chain_of("[[transforms]]\ntype = \"flatten\"\nseparator = \".\"\n");
  EXPECT_EQ(transformed(dotted, R"({"a":{"b":{"c":1}}})"), R"({"a.b.c":1})");
  EXPECT_EQ(transformed(dotted, R"({"a":1})"), R"({"a":1})");
  EXPECT_EQ(transformed(dotted, R"([{"a":{"b":1}}])"), R"([{"a":{"b":1}}])");
}

TEST(Flatten, ACollisionIsABadRecord) {
  auto chain = chain_of("[[transforms]]\ntype = \"flatten\"\n");
  EXPECT_EQ(transformed(chain, R"({"a_b":1,"a":{"b":2}})"),
            R"(FAIL: transforms[0] (flatten): flattened name "a_b" is also the name of another field)");
  EXPECT_EQ(transformed(chain, R"({"a":1,"a":2,"b":{"c":3}})"), R"({"a":1,"a":2,"b_c":3})");  // duplicates as they were
}

TEST(Flatten, ThenAddressTheFlatNames) {
  auto chain = chain_of(R"([[transforms]]
type = "flatten"
separator = "."
[[transforms]]
type = "delete_fields"
fields = ['ship_to\.zip']
)");
  EXPECT_EQ(transformed(chain, R"({"ship_to":{"city":"Lyon","zip":"1"}})"), R"({"ship_to.city":"Lyon"})");
}

// ---- cast ----

TEST(Cast, ToEveryType) {
  auto chain = chain_of(R"([[transforms]]
type = "cast"
fields = [
  { path = "customer", to = "string" },
  { path = "amount", to = "string" },
  { path = "flag", to = "string" },
  { path = "obj", to = "string" },
  { path = "qty", to = "integer" },
  { path = "price", to = "integer" },
  { path = "neg", to = "integer" },
  { path = "sci", to = "integer" },
  { path = "f1", to = "float" },
  { path = "f2", to = "float" },
  { path = "b1", to = "boolean" },
  { path = "b2", to = "boolean" },
  { path = "b3", to = "boolean" },
  { path = "j", to = "json" },
  { path = "n", to = "integer" },
]
)");
  EXPECT_EQ(
      transformed(
          chain,
          R"({"customer":4711,"amount":2.50,"flag":true,"obj":{"a":[1,"x"]},"qty":"12","price":"9.99",)"
          R"("neg":-0.5,"sci":1.5e3,"f1":3,"f2":" 2.50 ","b1":0,"b2":"true","b3":0.1,"j":"{\"k\":[1,2]}","n":null})"),
      R"({"customer":"4711","amount":"2.50","flag":"true","obj":"{\"a\":[1,\"x\"]}","qty":12,"price":9,)"
      R"("neg":0,"sci":1500,"f1":3.0,"f2":2.50,"b1":false,"b2":true,"b3":true,"j":{"k":[1,2]},"n":null})");
}

TEST(Cast, BigNumbersStayExact) {
  auto chain = chain_of(R"([[transforms]]
type = "cast"
fields = [ { path = "a", to = "string" }, { path = "b", to = "integer" }, { path = "c", to = "float" } ]
)");
  EXPECT_EQ(
      transformed(chain,
                  R"({"a":123456789012345678901234567890,"b":"98765432109876543210.99","c":18446744073709551617})"),
      R"({"a":"123456789012345678901234567890","b":98765432109876543210,"c":18446744073709551617.0})");
}

TEST(Cast, Errors) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "x", value = 1 } ]
[[transforms]]
type = "cast"
fields = [ { path = "amount", to = "integer" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"amount":"abc"})"),
            R"(FAIL: transforms[1] (cast): field "amount": "abc" is not a number)");
  EXPECT_EQ(transformed(chain, R"({"amount":[1]})"),
            R"(FAIL: transforms[1] (cast): field "amount": cannot cast an array [1] to a number)");
  EXPECT_EQ(transformed(chain, R"({"amount":1e500})"),
            R"(FAIL: transforms[1] (cast): field "amount": 1e500 is too large for an integer)");
  std::string long_text(100, 'x');
  EXPECT_EQ(transformed(chain, R"({"amount":")" + long_text + "\"}"),
            "FAIL: transforms[1] (cast): field \"amount\": \"" + std::string(56, 'x') + "... is not a number");
  auto boolean = chain_of(R"([[transforms]]
type = "cast"
fields = [ { path = "a", to = "boolean" } ]
)");
  EXPECT_EQ(transformed(boolean, R"({"a":"yes"})"),
            R"(FAIL: transforms[0] (cast): field "a": "yes" is not true or false)");
  auto json = chain_of(R"([[transforms]]
type = "cast"
fields = [ { path = "a", to = "json" } ]
)");
  EXPECT_EQ(transformed(json, R"({"a":"{bad"})"),
            R"(FAIL: transforms[0] (cast): field "a": "{bad" is not valid JSON: expected a member name at byte 1)");
}

// ---- convert_timestamp ----

TEST(ConvertTimestamp, BetweenFormats) {
  auto to_text = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["ms", "text", "numeric_text", "micro"]
)");
  EXPECT_EQ(
      transformed(to_text,
                  R"({"ms":1735689600123,"text":"2025-01-01T01:00:00+01:00","numeric_text":"0","micro":null})"),
      R"({"ms":"2025-01-01T00:00:00.123Z","text":"2025-01-01T00:00:00.000Z","numeric_text":"1970-01-01T00:00:00.000Z","micro":null})");
  auto to_ms = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["a", "b", "c", "d"]
to = "unix_ms"
)");
  EXPECT_EQ(
      transformed(
          to_ms,
          R"({"a":"2025-01-01T00:00:00.123456Z","b":"1969-12-31T23:59:59.999Z","c":"2025-01-01","d":"2024-02-29 12:00:00"})"),
      R"({"a":1735689600123,"b":-1,"c":1735689600000,"d":1709208000000})");
  auto seconds = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["s", "frac", "us"]
from = "unix_s"
to = "rfc3339"
)");
  EXPECT_EQ(transformed(seconds, R"({"s":1735689600,"frac":1735689600.000001,"us":"1.5"})"),
            R"({"s":"2025-01-01T00:00:00.000Z","frac":"2025-01-01T00:00:00.000001Z","us":"1970-01-01T00:00:01.500Z"})");
  auto to_s = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["a", "b", "c"]
from = "unix_ms"
to = "unix_s"
)");
  EXPECT_EQ(transformed(to_s, R"({"a":1735689600123,"b":-1500,"c":1735689600000})"),
            R"({"a":1735689600.123,"b":-1.5,"c":1735689600})");
  auto ns = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["a"]
from = "unix_ns"
to = "date"
)");
  EXPECT_EQ(transformed(ns, R"({"a":1735689600123456789})"), R"({"a":"2025-01-01"})");
  auto to_us = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["a"]
to = "unix_us"
)");
  EXPECT_EQ(transformed(to_us, R"({"a":"2025-01-01T00:00:00.123456789Z"})"), R"({"a":1735689600123456})");
}

TEST(ConvertTimestamp, Errors) {
  auto chain = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["ts"]
)");
  EXPECT_EQ(
      transformed(chain, R"({"ts":"yesterday"})"),
      R"(FAIL: transforms[0] (convert_timestamp): field "ts": "yesterday" is not an RFC 3339 timestamp such as "2025-01-01T10:00:00Z")");
  EXPECT_EQ(
      transformed(chain, R"({"ts":"2025-02-30T00:00:00Z"})"),
      R"(FAIL: transforms[0] (convert_timestamp): field "ts": "2025-02-30T00:00:00Z" is not an RFC 3339 timestamp such as "2025-01-01T10:00:00Z")");
  EXPECT_EQ(transformed(chain, R"({"ts":true})"),
            R"(FAIL: transforms[0] (convert_timestamp): field "ts": a boolean true is not a timestamp)");
  EXPECT_EQ(transformed(chain, R"({"ts":1e30})"),
            R"(FAIL: transforms[0] (convert_timestamp): field "ts": 1e30 is outside the years 0000-9999)");
  auto from_s = chain_of(R"([[transforms]]
type = "convert_timestamp"
fields = ["ts"]
from = "unix_s"
)");
  EXPECT_EQ(transformed(from_s, R"({"ts":"2025-01-01"})"),
            R"(FAIL: transforms[0] (convert_timestamp): field "ts": "2025-01-01" is not a number of unix_s)");
}

// ---- extract_field ----

TEST(ExtractField, ReplacesThePayload) {
  auto chain = chain_of(R"([[transforms]]
type = "extract_field"
field = "payload.after"
)");
  EXPECT_EQ(transformed(chain, R"({"payload":{"before":null,"after":{"id":1,"name":"x"},"op":"c"}})"),
            R"({"id":1,"name":"x"})");
  EXPECT_EQ(transformed(chain, R"({"payload":{"after":null}})"), "null");
  EXPECT_EQ(transformed(chain, R"({"payload":{"after":[1,2]}})"), "[1,2]");
  EXPECT_EQ(transformed(chain, R"({"other":1})"), R"({"other":1})");  // on_missing = "skip"
}

TEST(ExtractField, MergeIntoTheRoot) {
  auto chain = chain_of(R"([[transforms]]
type = "extract_field"
field = "after"
merge = true
)");
  EXPECT_EQ(transformed(chain, R"({"op":"u","id":0,"after":{"id":1,"name":"x"},"ts":5})"),
            R"({"op":"u","id":1,"ts":5,"name":"x"})");
  EXPECT_EQ(
      transformed(chain, R"({"after":"text"})"),
      R"(FAIL: transforms[0] (extract_field): field "after": cannot merge a string "text" into an object payload: only an object's fields merge into an object)");
}

TEST(ExtractField, OnMissing) {
  auto fail = chain_of("[[transforms]]\ntype = \"extract_field\"\nfield = \"after\"\non_missing = \"fail\"\n");
  EXPECT_EQ(transformed(fail, R"({"before":{}})"), R"(FAIL: transforms[0] (extract_field): field "after": is missing)");
  auto drop = chain_of("[[transforms]]\ntype = \"extract_field\"\nfield = \"after\"\non_missing = \"drop\"\n");
  EXPECT_EQ(transformed(drop, R"({"before":{}})"), "DROP");
  EXPECT_EQ(transformed(drop, R"("scalar")"), "DROP");
}

// ---- payload text: unicode, escapes, numbers ----

TEST(Payload, UnicodeAndEscapesRoundTrip) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "k", value = "✓" } ]
)");
  EXPECT_EQ(transformed(chain, R"({"s":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t \u0001","ключ":"значение"})"),
            "{\"s\":\"café 😀 \\\"q\\\" \\\\ / \\b\\f\\n\\r\\t \\u0001\",\"ключ\":\"значение\",\"k\":\"✓\"}");
  EXPECT_EQ(
      transformed(chain, R"({"s":"\ud83d"})"),
      "FAIL: transforms[0] (add_fields): payload is not valid JSON: unpaired surrogate in a \\u escape at byte 12");
  EXPECT_EQ(transformed(chain, "{\"s\":\"\xff\"}"),
            "FAIL: transforms[0] (add_fields): payload is not valid JSON: invalid UTF-8 in a string at byte 6");
}

TEST(Payload, NumbersKeepTheirText) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "x", value = 1 } ]
)");
  EXPECT_EQ(
      transformed(
          chain,
          R"({"a":2.50,"b":1E+2,"c":-0.0,"d":123456789012345678901234567890,"e":1e400,"f":[0.1000000000000000055511151231257827]})"),
      R"({"a":2.50,"b":1E+2,"c":-0.0,"d":123456789012345678901234567890,"e":1e400,"f":[0.1000000000000000055511151231257827],"x":1})");
}

TEST(Payload, WhitespaceIsDroppedWhenRewritten) {
  auto chain = chain_of(R"([[transforms]]
type = "add_fields"
fields = [ { path = "x", value = 1 } ]
)");
  EXPECT_EQ(transformed(chain, " {\n \"a\" : [ 1 , { } ] ,\t\"b\":{ } }\r\n"), R"({"a":[1,{}],"b":{},"x":1})");
}

TEST(Payload, DeepNestingIsRefusedNotACrash) {
  auto chain = chain_of(R"([[transforms]]
type = "flatten"
)");
  std::string ok = std::string(1000, '[') + std::string(1000, ']');
  EXPECT_EQ(transformed(chain, ok), ok);
  std::string deep = "{\"a\":" + std::string(2000, '[') + std::string(2000, ']') + "}";
  EXPECT_EQ(transformed(chain, deep).substr(0, 80),
            "FAIL: transforms[0] (flatten): payload is not valid JSON: nesting deeper than 10");
}

}  // namespace
}  // namespace picomq::transform
