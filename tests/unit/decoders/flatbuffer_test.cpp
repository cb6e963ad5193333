// flatbuffer: buffers built by flatc from JSON (tests/decoders_data/make_payloads.py), decoded
// through inventory.fbs and checked field by field; corrupted buffers must fail verification.
#include <gtest/gtest.h>

#include "decoders/flatbuffer_decoder.h"
#include "payloads.h"

namespace picomq::decoders::test {
namespace {

using nlohmann::json;

std::shared_ptr<const FlatbufferSchema> schema(const std::string& file = data_file("inventory.fbs").string(),
                                               const std::string& root = "") {
  FlatbufferOptions o;
  o.schema = file;
  o.root_type = root;
  std::string error;
  auto s = compile_flatbuffer(o, error);
  EXPECT_TRUE(s) << error;
  return s;
}

Result item(const std::string& name) { return run(*make_flatbuffer_decoder(schema()), payload("flatbuffer", name)); }

TEST(DecodersFlatbuffer, EveryFieldOfAFullBuffer) {
  auto r = item("item_full");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["id"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(v["name"], "sword \u00e9");
  EXPECT_EQ(v["color"], "Minus") << "enums by name (negative value)";
  EXPECT_EQ(v["pos"], json::parse(R"({"x":1.5,"y":-2,"z":0})")) << "struct";
  EXPECT_EQ(v["bounds"], json::parse(R"({"min":{"x":0,"y":0,"z":0},"max":{"x":1,"y":2,"z":3},"tags":[1,2,255]})"))
      << "nested structs and a fixed array";
  EXPECT_FALSE(v.contains("legacy")) << "deprecated fields are left out";
  EXPECT_EQ(v["count"], 0) << "stored value equal to zero, not the default 7";
  EXPECT_EQ(v["ratio"], 0.25);
  EXPECT_EQ(v["big"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(v["huge"].get<uint64_t>(), 9007199254740993u);
  EXPECT_EQ(v["maybe"], 0) << "optional scalar set to 0";
  EXPECT_EQ(v["active"], false);
  EXPECT_EQ(v["tiny"], -128);
  EXPECT_EQ(v["equipped_type"], "Weapon") << "union: the _type field by name";
  EXPECT_EQ(v["equipped"], json::parse(R"({"name":"axe","damage":-3})")) << "union: the table";
  ASSERT_EQ(v["parts"].size(), 2u) << "vector of tables";
  EXPECT_EQ(v["parts"][0]["name"], "hilt");
  EXPECT_EQ(v["parts"][0]["count"], 7) << "defaults inside nested tables";
  EXPECT_EQ(v["parts"][1]["count"], 2);
  EXPECT_EQ(v["points"], json::parse(R"([{"x":1,"y":2,"z":3},{"x":-1,"y":-2,"z":-3}])")) << "vector of structs";
  EXPECT_EQ(v["labels"], json::parse(R"(["a","","\u00fc"])"));
  EXPECT_EQ(v["colors"], json::parse(R"(["Red","Blue"])"));
  EXPECT_EQ(v["loot_type"], json::parse(R"(["Armor","Weapon"])"));
  EXPECT_EQ(v["loot"], json::parse(R"([{"defense":5},{"name":"dagger","damage":10}])")) << "vector of unions";
  EXPECT_EQ(v["data"], json::parse("[0,1,255]"));
  EXPECT_EQ(v["temp"], -0.5);
  // Declaration order (by field id).
  EXPECT_LT(r.json.find("\"id\""), r.json.find("\"name\""));
  EXPECT_LT(r.json.find("\"equipped_type\""), r.json.find("\"equipped\""));
}

TEST(DecodersFlatbuffer, AbsentFieldsAreDefaultsOrNull) {
  auto r = item("item_defaults");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  EXPECT_EQ(r.value(), json::parse(R"({"id":0,"name":"plain","color":"Blue","pos":null,"bounds":null,"count":7,
      "ratio":0.5,"big":0,"huge":0,"maybe":null,"active":true,"tiny":0,"equipped_type":"NONE","equipped":null,
      "parts":null,"points":null,"labels":null,"colors":null,"loot_type":null,"loot":null,"data":null,"temp":0})"));
  auto armor = item("item_armor");
  ASSERT_EQ(armor.status, Status::ok) << armor.error;
  EXPECT_EQ(armor.value()["equipped_type"], "Armor");
  EXPECT_EQ(armor.value()["equipped"], json::parse(R"({"defense":12})"));
}

TEST(DecodersFlatbuffer, BinarySchemaAndExplicitRootTypeGiveTheSameJson) {
  auto from_bfbs = run(*make_flatbuffer_decoder(schema((generated() / "inventory.bfbs").string())),
                       payload("flatbuffer", "item_full"));
  ASSERT_EQ(from_bfbs.status, Status::ok) << from_bfbs.error;
  EXPECT_EQ(from_bfbs.json, item("item_full").json);
  auto explicit_root = run(*make_flatbuffer_decoder(schema(data_file("inventory.fbs").string(), "Item")),
                           payload("flatbuffer", "item_full"));
  EXPECT_EQ(explicit_root.json, item("item_full").json);
  // Another root type reads the same bytes differently (as flatbuffers does).
  auto weapon = run(*make_flatbuffer_decoder(schema(data_file("inventory.fbs").string(), "picomq.test.fb.Weapon")),
                    payload("flatbuffer", "item_defaults"));
  EXPECT_NE(weapon.status, Status::retry);
}

TEST(DecodersFlatbuffer, UnalignedPayloadsDecodeTheSame) {
  const std::string bytes = payload("flatbuffer", "item_full");
  std::string shifted = "x" + bytes;
  auto d = make_flatbuffer_decoder(schema());
  std::string out, error;
  ASSERT_EQ(d->decode({reinterpret_cast<const uint8_t*>(shifted.data()) + 1, bytes.size()}, out, error), Status::ok)
      << error;
  EXPECT_EQ(out, item("item_full").json);
}

TEST(DecodersFlatbuffer, CorruptedBuffersFailVerification) {
  const std::string good = payload("flatbuffer", "item_full");
  auto d = make_flatbuffer_decoder(schema());
  const std::string expected = "flatbuffer: verification failed (not a valid picomq.test.fb.Item buffer of ";
  std::vector<std::string> bad;
  std::string root = good;
  root[0] = '\xf0', root[1] = '\xff', root[2] = '\xff';  // root offset far outside
  bad.push_back(root);
  bad.push_back(good.substr(0, good.size() / 2));  // truncated
  bad.push_back("");
  bad.push_back("abc");
  std::string vtable = good;
  for (size_t i = 4; i < 8 && i < vtable.size(); ++i) vtable[i] = '\x7f';  // garbage vtable offset
  bad.push_back(vtable);
  for (const auto& b : bad) {
    auto r = run(*d, b);
    EXPECT_EQ(r.status, Status::bad_record) << b.size();
    EXPECT_EQ(r.error.rfind(expected, 0), 0u) << r.error;
  }
  // Every single-byte flip either decodes to valid JSON or is rejected: never a crash.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    auto r = run(*d, flipped);
    EXPECT_NE(r.status, Status::retry);
  }
}

TEST(DecodersFlatbuffer, InvalidUtf8IsABadRecord) {
  std::string bytes = payload("flatbuffer", "item_full");
  const auto at = bytes.find("sword");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = '\xff';
  auto r = run(*make_flatbuffer_decoder(schema()), bytes);
  EXPECT_EQ(r.status, Status::bad_record);
  EXPECT_EQ(r.error, "flatbuffer: invalid UTF-8 in string field 'picomq.test.fb.Item.name'");
}

TEST(DecodersFlatbuffer, SchemaErrorsNameTheFile) {
  std::string error;
  FlatbufferOptions o;
  o.schema = data_file("broken.fbs").string();
  EXPECT_FALSE(compile_flatbuffer(o, error));
  EXPECT_NE(error.find("broken.fbs:4: "), std::string::npos) << error;
  EXPECT_NE(error.find("error"), std::string::npos) << error;
  o.schema = data_file("missing.fbs").string();
  EXPECT_FALSE(compile_flatbuffer(o, error));
  EXPECT_EQ(error, "cannot read '" + o.schema + "': No such file or directory");
  o.schema = data_file("inventory.fbs").string();
  o.root_type = "Nope";
  EXPECT_FALSE(compile_flatbuffer(o, error));
  EXPECT_EQ(error, "root type 'Nope' is not a table of '" + o.schema + "'");
  o.root_type = "Vec3";
  EXPECT_FALSE(compile_flatbuffer(o, error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace picomq::decoders::test

namespace picomq::decoders::test {
namespace {

// Found by fuzz_decoder_flatbuffer: flatbuffers 2.0.8's reflection Verify() reads past the type
// vector of a vector of unions when it is shorter than the vector (a SEGV); ours rejects it.
TEST(DecodersFlatbuffer, FuzzRegressionUnionVectorWithShortTypeVector) {
  const auto bytes = read_text(std::filesystem::path(PICOMQ_DECODERS_DATA) /
                               "../../fuzz/decoders/corpus_flatbuffer/regression-union-vector-short-types.bin");
  ASSERT_FALSE(bytes.empty());
  auto r = run(*make_flatbuffer_decoder(schema()), bytes);
  EXPECT_EQ(r.status, Status::bad_record);
  EXPECT_EQ(r.error.rfind("flatbuffer: verification failed", 0), 0u) << r.error;
}

}  // namespace
}  // namespace picomq::decoders::test
