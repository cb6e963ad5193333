#include "picomq/kit/record_json.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "picomq/kit/testing/fake_host.hpp"

namespace kit = picomq::kit;
using kit::testing::TestBatch;
using kit::testing::TestRecord;

namespace {
std::string render(const kit::RecordJsonWriter& w, const TestBatch& b, size_t i = 0) {
  std::string out;
  w.append(out, b.raw(), *pmq_batch_record(&b.raw(), i));
  return out;
}
TestBatch one(TestRecord r, int32_t format = PMQ_PAYLOAD_JSON) {
  return TestBatch("orders.eu", 3, {std::move(r)}, format, format == PMQ_PAYLOAD_JSON ? "json" : "raw");
}
}  // namespace

TEST(KitRecordJson, TheEnvelopeCarriesEveryMetadataFieldAndThePayloadAsItArrived) {
  kit::RecordJsonWriter w;
  auto b = one({.offset = 42,
                .payload = "{\"id\": 1,\n \"n\": [1,2]}",
                .key = std::string("k\x01", 2),
                .headers = {{"h", "v"}, {"h", std::nullopt}, {"bin", std::string("\xff\xfe", 2)}},
                .timestamp_ms = 1234});
  const std::string text = render(w, b);
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line";
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["pico_topic"], "orders.eu");
  EXPECT_EQ(j["pico_partition"], 3);
  EXPECT_EQ(j["pico_offset"], 42);
  EXPECT_EQ(j["pico_timestamp"], 1234);
  EXPECT_EQ(j["pico_key"], "awE=");
  EXPECT_EQ(j["pico_headers"]["h"], nlohmann::json::parse(R"(["v", null])"));
  EXPECT_EQ(j["pico_headers"]["bin"], "//4=");
  EXPECT_EQ(j["payload"], nlohmann::json::parse(R"({"id":1,"n":[1,2]})"));
}

TEST(KitRecordJson, FlatSplicesMetadataIntoObjectsAndFallsBackToTheEnvelopeForAnythingElse) {
  kit::RecordJsonWriter w({.layout = kit::JsonLayout::Flat, .include_headers = false});
  auto j = nlohmann::json::parse(render(w, one({.offset = 1, .payload = R"(  { "id" : 7 })"})));
  EXPECT_EQ(j["id"], 7);
  EXPECT_EQ(j["pico_offset"], 1);
  EXPECT_FALSE(j.contains("payload"));
  EXPECT_EQ(nlohmann::json::parse(render(w, one({.offset = 1, .payload = "{}"}))).size(), 4u) << "empty object";
  auto arr = nlohmann::json::parse(render(w, one({.offset = 2, .payload = "[1,2]"})));
  EXPECT_EQ(arr["payload"], nlohmann::json::parse("[1,2]"));
  auto tomb = nlohmann::json::parse(render(w, one({.offset = 3, .payload = std::nullopt})));
  EXPECT_TRUE(tomb["payload"].is_null()) << "a tombstone is kept, as null";
  auto raw = nlohmann::json::parse(render(w, one({.offset = 4, .payload = std::string("\0\1", 2)}, PMQ_PAYLOAD_RAW)));
  EXPECT_EQ(raw["payload"], "AAE=");
}

TEST(KitRecordJson, KeysAsTextWhenValidUtf8TextPayloadsAsStringsAndPayloadOnly) {
  kit::RecordJsonWriter text_keys({.key = kit::KeyRendering::Text});
  auto j = nlohmann::json::parse(render(text_keys, one({.offset = 1, .payload = "1", .key = "user-7"})));
  EXPECT_EQ(j["pico_key"], "user-7");
  auto binary =
      nlohmann::json::parse(render(text_keys, one({.offset = 1, .payload = "1", .key = std::string("\xc3", 1)})));
  EXPECT_EQ(binary["pico_key"], "ww==") << "invalid UTF-8 keys stay base64";
  kit::RecordJsonWriter only({.layout = kit::JsonLayout::PayloadOnly});
  TestBatch text("t", 0, {{.offset = 0, .payload = "line \"one\"\n"}}, PMQ_PAYLOAD_TEXT, "text");
  EXPECT_EQ(render(only, text), R"("line \"one\"\n")");
  EXPECT_EQ(render(only, one({.offset = 0, .payload = "{\"a\":\r\n1}"})), "{\"a\":  1}");
}

TEST(KitRecordJson, AnIdMemberGoesFirstInTheObjectWhateverWhitespaceThePayloadKept) {
  auto with_id = [](const std::string& prefix, const std::string& document) {
    std::string out = prefix + document;
    const bool ok = kit::insert_first_member(out, prefix.size(), R"("id":"t-0-1")");
    return ok ? out : "not an object: " + out;
  };
  EXPECT_EQ(with_id("", R"({"a":1})"), R"({"id":"t-0-1","a":1})");
  EXPECT_EQ(with_id("x\n", "  { \"a\":1}"), "x\n  {\"id\":\"t-0-1\", \"a\":1}") << "after what was there";
  EXPECT_EQ(with_id("", "{}"), R"({"id":"t-0-1"})");
  EXPECT_EQ(with_id("", " { } "), R"( {"id":"t-0-1" } )");
  EXPECT_EQ(with_id("", "[1]"), "not an object: [1]");
  EXPECT_EQ(with_id("", "  "), "not an object:   ");
}
