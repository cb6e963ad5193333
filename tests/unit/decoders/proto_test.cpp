// proto: payloads encoded by python-protobuf from tests/decoders_data/*.proto, decoded and
// checked field by field; malformed payloads built byte by byte.
#include <gtest/gtest.h>

#include "decoders/proto_decoder.h"
#include "payloads.h"

namespace picomq::decoders::test {
namespace {

using nlohmann::json;

std::shared_ptr<const ProtoSchema> compile(const std::string& message, bool int64_as_string = false,
                                           bool json_names = false) {
  ProtoOptions o;
  o.files = {data_file("all_types.proto").string(), data_file("legacy.proto").string()};
  o.include_paths = {PICOMQ_DECODERS_DATA};
  o.message = message;
  o.int64_as_string = int64_as_string;
  o.json_names = json_names;
  std::string error;
  auto schema = compile_proto(o, error);
  EXPECT_TRUE(schema) << error;
  return schema;
}

Result decode(const std::string& message, std::string_view bytes, bool int64_as_string = false,
              bool json_names = false) {
  auto d = make_proto_decoder(compile(message, int64_as_string, json_names));
  return run(*d, bytes);
}

Result order(const std::string& name, bool int64_as_string = false, bool json_names = false) {
  return decode("picomq.test.Order", payload("proto", name), int64_as_string, json_names);
}

// Wire-format builder for malformed payloads.
struct Wire {
  std::string b;
  Wire& varint(uint64_t v) {
    while (v >= 0x80) {
      b.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    b.push_back(static_cast<char>(v));
    return *this;
  }
  Wire& tag(uint32_t field, int wire) { return varint((uint64_t{field} << 3) | static_cast<uint64_t>(wire)); }
  Wire& bytes(std::string_view s) {
    varint(s.size());
    b.append(s);
    return *this;
  }
  Wire& raw(std::string_view s) {
    b.append(s);
    return *this;
  }
};

TEST(DecodersProto, EveryScalarTypeKeepsItsExactValue) {
  auto r = order("order_full");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json s = r.value()["scalars"];
  EXPECT_EQ(s["f_double"], 1.5);
  EXPECT_NE(r.json.find("\"f_float\":0.1,"), std::string::npos) << "shortest float text, not 0.10000000149011612";
  EXPECT_EQ(s["f_int32"].get<int64_t>(), INT32_MIN);
  EXPECT_EQ(s["f_int64"].get<int64_t>(), INT64_MIN);
  EXPECT_NE(r.json.find("\"f_int64\":-9223372036854775808"), std::string::npos) << "64-bit ints are JSON numbers";
  EXPECT_EQ(s["f_uint32"].get<uint64_t>(), UINT32_MAX);
  EXPECT_EQ(s["f_uint64"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(s["f_sint32"], -5);
  EXPECT_EQ(s["f_sint64"].get<int64_t>(), INT64_MAX);
  EXPECT_EQ(s["f_fixed32"].get<uint64_t>(), UINT32_MAX);
  EXPECT_EQ(s["f_fixed64"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(s["f_sfixed32"], -1);
  EXPECT_EQ(s["f_sfixed64"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(s["f_bool"], true);
  EXPECT_EQ(s["f_string"], "h\u00e9llo \"w\u00f6rld\"\n\U0001F600") << "unicode and escapes";
  EXPECT_EQ(s["f_bytes"], "AP/+") << "bytes are base64";
  EXPECT_EQ(s["f_color"], "MINUS_ONE") << "negative enum value by name";
  EXPECT_EQ(s["f_optional"], 0) << "a proto3 optional set to 0 is 0, not null";
}

TEST(DecodersProto, RepeatedMapsNestedAndOneof) {
  auto r = order("order_full");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["order_id"], "o-1");
  EXPECT_EQ(v["quantities"], json::parse("[1,-1,9223372036854775807]")) << "packed int64";
  EXPECT_EQ(v["tags"], json::parse(R"(["a",""])"));
  EXPECT_EQ(v["colors"], json::parse(R"(["RED","MINUS_ONE"])"));
  EXPECT_EQ(v["lines"],
            json::parse(R"([{"sku":"s1","quantity":2,"prices":[1.25,-0.0]},{"sku":"","quantity":0,"prices":[]}])"));
  EXPECT_NE(r.json.find("[1.25,-0]"), std::string::npos) << "negative zero kept";
  EXPECT_EQ(v["counters"], json::parse(R"({"x":-7,"y":9007199254740993})"));
  EXPECT_NE(r.json.find("9007199254740993"), std::string::npos) << "beyond 2^53, exact";
  EXPECT_EQ(v["lines_by_number"], json::parse(R"({"-3":{"sku":"neg","quantity":0,"prices":[]}})"))
      << "int keys as text";
  EXPECT_EQ(v["flags"], json::parse(R"({"true":"yes"})")) << "bool keys as text";
  EXPECT_EQ(v["voucher"], json::parse(R"({"sku":"v","quantity":0,"prices":[]})"));
  EXPECT_FALSE(v.contains("card")) << "only the oneof member that is set";
  EXPECT_FALSE(v.contains("points"));
  EXPECT_EQ(v["ship_to"], json::parse(R"({"street":"Main","city":"Z\u00fcrich","country_code":""})"))
      << "imported file";
  EXPECT_EQ(v["parent"]["order_id"], "p") << "recursive message";
  EXPECT_TRUE(v["parent"]["parent"].is_null());
  EXPECT_EQ(v["camel_case_field"], 5) << "proto names by default";
}

TEST(DecodersProto, WellKnownTypes) {
  auto r = order("order_full");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["created_at"], "2024-01-31T12:34:56.789Z") << "Timestamp: RFC 3339";
  EXPECT_EQ(v["ttl"], "-1.500s") << "Duration: seconds with 0/3/6/9 fraction digits";
  EXPECT_EQ(v["maybe_count"], -42) << "wrappers: the value";
  EXPECT_EQ(v["maybe_note"], "") << "a wrapper set to its default is not null";
  EXPECT_EQ(v["maybe_flag"], false);
  EXPECT_EQ(v["maybe_ratio"], "NaN") << "NaN as a string";
  EXPECT_EQ(v["maybe_blob"], "AQI=");
  EXPECT_EQ(v["attributes"], json::parse(R"({"a":1,"b":[true,null,"x"],"c":{"d":-1.5}})")) << "Struct";
  EXPECT_EQ(v["any_value"], "str") << "Value";
  EXPECT_EQ(v["list"], json::parse(R"([1,"two",null])")) << "ListValue";
  EXPECT_EQ(v["detail"],
            json::parse(R"({"@type":"type.googleapis.com/picomq.test.Line","sku":"in-any","quantity":3,"prices":[]})"))
      << "Any with a known type: its fields next to @type";
  EXPECT_EQ(v["nothing"], json::object()) << "Empty";
  EXPECT_EQ(v["mask"], "a.b,camel_case") << "FieldMask, proto names";
}

TEST(DecodersProto, UnsetFieldsDefaultsAndNulls) {
  auto r = order("order_empty");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  EXPECT_EQ(r.json.size(), r.json.find_last_of('}') + 1);
  const json v = r.value();
  EXPECT_EQ(v["order_id"], "") << "implicit presence: the default";
  EXPECT_EQ(v["camel_case_field"], 0);
  EXPECT_EQ(v["quantities"], json::array());
  EXPECT_EQ(v["counters"], json::object());
  for (const char* k : {"scalars", "created_at", "ttl", "maybe_count", "maybe_note", "attributes", "any_value", "list",
                        "detail", "nothing", "mask", "ship_to", "parent"})
    EXPECT_TRUE(v.contains(k) && v[k].is_null()) << k << ": unset message fields are null";
  for (const char* k : {"card", "voucher", "points"}) EXPECT_FALSE(v.contains(k)) << k << ": no oneof member set";
}

TEST(DecodersProto, SpecialValuesUnknownEnumAndOtherOneofMember) {
  auto r = order("order_special");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["scalars"]["f_double"], "Infinity");
  EXPECT_EQ(v["scalars"]["f_float"], "-Infinity");
  EXPECT_EQ(v["scalars"]["f_color"], 42) << "an unknown enum value is its number";
  EXPECT_TRUE(v["scalars"]["f_optional"].is_null()) << "unset proto3 optional";
  EXPECT_EQ(v["points"], 5);
  EXPECT_FALSE(v.contains("card"));
  EXPECT_FALSE(v.contains("voucher"));
  EXPECT_EQ(v["created_at"], "1969-12-31T23:59:59.000001Z") << "before the epoch, microseconds";
  EXPECT_EQ(v["ttl"], "315576000000s") << "the largest Duration";
  EXPECT_EQ(v["any_value"], json::parse(R"({"k":[1.5,false]})"));
}

TEST(DecodersProto, AnyOfUnknownTypeIsBase64AndAnyOfWellKnownTypeHasValue) {
  auto r = order("order_any_unknown");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  EXPECT_EQ(r.value()["detail"], json::parse(R"({"@type":"type.googleapis.com/unknown.Type","value":"CAE="})"));
  EXPECT_EQ(r.value()["card"], "4111");
  auto w = order("order_any_wkt");
  ASSERT_EQ(w.status, Status::ok) << w.error;
  EXPECT_EQ(w.value()["detail"],
            json::parse(
                R"({"@type":"type.googleapis.com/google.protobuf.Timestamp","value":"1970-01-01T00:00:00.000005Z"})"));
}

TEST(DecodersProto, ConcatenatedMessagesMergeAsLibprotobufDoes) {
  auto r = order("order_merged");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["order_id"], "second") << "last scalar wins";
  EXPECT_EQ(v["quantities"], json::parse("[1,2]")) << "repeated appended";
  EXPECT_EQ(v["scalars"]["f_int32"], 1) << "messages merged";
  EXPECT_EQ(v["scalars"]["f_string"], "a");
  EXPECT_EQ(v["scalars"]["f_int64"], 2);
  EXPECT_EQ(v["counters"], json::parse(R"({"only_first":2,"k":3})")) << "a map key given twice: the last entry";
  EXPECT_EQ(v["points"], 9) << "the oneof member set last";
  EXPECT_FALSE(v.contains("card"));
}

TEST(DecodersProto, Int64AsStringAndJsonNamesOptions) {
  auto r = order("order_full", /*int64_as_string=*/true, /*json_names=*/true);
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["orderId"], "o-1");
  EXPECT_EQ(v["camelCaseField"], "5") << "explicit json_name, 64-bit as string";
  EXPECT_EQ(v["scalars"]["fInt64"], "-9223372036854775808");
  EXPECT_EQ(v["scalars"]["fUint64"], "18446744073709551615");
  EXPECT_EQ(v["scalars"]["fFixed64"], "18446744073709551615");
  EXPECT_EQ(v["scalars"]["fInt32"], INT32_MIN) << "32-bit stay numbers";
  EXPECT_EQ(v["quantities"], json::parse(R"(["1","-1","9223372036854775807"])"));
  EXPECT_EQ(v["counters"], json::parse(R"({"x":"-7","y":"9007199254740993"})"));
  EXPECT_EQ(v["maybeCount"], "-42") << "Int64Value as string too";
  EXPECT_EQ(v["mask"], "a.b,camelCase");
}

TEST(DecodersProto, Proto2RequiredClosedEnumsGroupsAndPresence) {
  auto full = decode("picomq.legacy.Legacy", payload("proto", "legacy_full"));
  ASSERT_EQ(full.status, Status::ok) << full.error;
  EXPECT_EQ(full.value(),
            json::parse(R"({"id":1,"name":"n","level":"HIGH","levels":["LOW","HIGH"],"extra":{"a":5,"b":"g"}})"));
  auto missing = decode("picomq.legacy.Legacy", payload("proto", "legacy_missing_required"));
  EXPECT_EQ(missing.status, Status::bad_record);
  EXPECT_EQ(missing.error, "proto: missing required field 'picomq.legacy.Legacy.id'");
  // level = 7 is not a Level: a closed enum keeps it out (an unknown field), as libprotobuf does.
  auto unknown = decode("picomq.legacy.Legacy",
                        Wire().tag(1, 0).varint(3).tag(3, 0).varint(7).tag(4, 0).varint(9).tag(4, 0).varint(2).b);
  ASSERT_EQ(unknown.status, Status::ok) << unknown.error;
  EXPECT_EQ(unknown.value(), json::parse(R"({"id":3,"name":null,"level":null,"levels":["HIGH"],"extra":null})"))
      << "unset proto2 optionals are null (not their declared default)";
}

TEST(DecodersProto, UnknownFieldsAndWireTypeMismatchesAreSkipped) {
  const auto bytes = Wire()
                         .tag(99, 0)
                         .varint(5)  // unknown varint
                         .tag(100, 2)
                         .bytes("xyz")  // unknown bytes
                         .tag(101, 3)
                         .tag(1, 0)
                         .varint(1)
                         .tag(101, 4)  // unknown group
                         .tag(1, 0)
                         .varint(7)  // order_id as a varint: unknown to libprotobuf too
                         .tag(28, 0)
                         .varint(3)
                         .b;
  auto r = decode("picomq.test.Order", bytes);
  ASSERT_EQ(r.status, Status::ok) << r.error;
  EXPECT_EQ(r.value()["order_id"], "");
  EXPECT_EQ(r.value()["camel_case_field"], 3);
}

TEST(DecodersProto, PackedAndUnpackedRepeatedFieldsMix) {
  Wire packed;
  packed.tag(3, 0).varint(1);                            // unpacked element
  packed.tag(3, 2).bytes(Wire().varint(2).varint(3).b);  // packed run
  auto r = decode("picomq.test.Order", packed.b);
  ASSERT_EQ(r.status, Status::ok) << r.error;
  EXPECT_EQ(r.value()["quantities"], json::parse("[1,2,3]"));
}

TEST(DecodersProto, MalformedPayloadsAreBadRecordsWithAPosition) {
  struct Case {
    std::string bytes;
    std::string error;
  };
  const std::vector<Case> cases = {
      {Wire().tag(28, 0).raw("\x80").b, "proto: truncated varint of field 28 at byte 2"},
      {Wire().tag(1, 2).varint(5).raw("ab").b, "proto: length 5 of field 1 exceeds the 2 bytes left at byte 1"},
      {Wire().tag(1, 2).bytes("\xc3\x28").b,
       "proto: invalid UTF-8 in string field 'picomq.test.Order.order_id' at byte 2"},
      {Wire().raw("\x0f").b, "proto: invalid wire type 7 (field 1) at byte 0"},
      {Wire().raw("\x02\x00").b, "proto: field number 0 at byte 0"},
      {Wire().tag(1, 4).b, "proto: end-group tag of field 1 outside a group at byte 0"},
      {Wire().tag(5, 3).tag(1, 0).varint(1).b, "proto: group of field 5 has no end-group tag at byte 3"},
      {Wire().tag(6, 2).bytes(Wire().tag(3, 2).bytes("abc").b).b,
       "proto: packed field 'picomq.test.Line.prices' is not a whole number of 8-byte values at byte 4"},
      {Wire().tag(13, 2).bytes(Wire().tag(2, 0).varint(static_cast<uint64_t>(-1)).b).b,
       "proto: Timestamp nanos -1 out of range 0..999999999"},
      {Wire().tag(28, 0).raw("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").b,
       "proto: overlong varint of field 28 at byte 2"},
      {Wire().raw("\x80\x80\x80\x80\x80\x01").b, "proto: truncated or overlong tag at byte 0"},
  };
  for (const auto& c : cases) {
    auto r = decode("picomq.test.Order", c.bytes);
    EXPECT_EQ(r.status, Status::bad_record);
    EXPECT_EQ(r.error, c.error);
  }
}

TEST(DecodersProto, NestingIsLimitedAt100Levels) {
  auto nest = [](int levels) {
    std::string inner;
    for (int i = 0; i < levels; ++i) inner = Wire().tag(27, 2).bytes(inner).b;
    return inner;
  };
  EXPECT_EQ(decode("picomq.test.Order", nest(100)).status, Status::ok);
  auto deep = decode("picomq.test.Order", nest(101));
  EXPECT_EQ(deep.status, Status::bad_record);
  EXPECT_EQ(deep.error, "proto: nesting deeper than 100 levels");
}

TEST(DecodersProto, DescriptorSetWorksLikeProtoFiles) {
  ProtoOptions o;
  o.descriptor_set = (generated() / "all_types.pb").string();
  o.message = "picomq.test.Order";
  std::string error;
  auto schema = compile_proto(o, error);
  ASSERT_TRUE(schema) << error;
  auto d = make_proto_decoder(schema);
  auto from_set = run(*d, payload("proto", "order_full"));
  ASSERT_EQ(from_set.status, Status::ok) << from_set.error;
  EXPECT_EQ(from_set.json, order("order_full").json);
}

TEST(DecodersProto, CompileErrorsNameTheFileAndPosition) {
  std::string error;
  ProtoOptions o;
  o.files = {data_file("broken.proto").string()};
  o.message = "picomq.broken.Broken";
  EXPECT_FALSE(compile_proto(o, error));
  EXPECT_EQ(error, "broken.proto:5:3: Expected \";\".");
  o.files = {data_file("missing.proto").string()};
  EXPECT_FALSE(compile_proto(o, error));
  EXPECT_EQ(error, "cannot read '" + data_file("missing.proto").string() + "': No such file or directory");
  o.files = {data_file("all_types.proto").string()};
  o.include_paths = {PICOMQ_DECODERS_DATA};
  o.message = "picomq.test.Nope";
  EXPECT_FALSE(compile_proto(o, error));
  EXPECT_EQ(error,
            "message type 'picomq.test.Nope' is not defined (messages: picomq.test.Line, picomq.test.Order, "
            "picomq.test.Scalars)");
  o.include_paths.clear();  // the import of nested/address.proto is then still found next to the file
  o.message = "picomq.test.Order";
  EXPECT_TRUE(compile_proto(o, error)) << error;
  ProtoOptions bad_set;
  bad_set.descriptor_set = data_file("all_types.proto").string();
  bad_set.message = "x.Y";
  EXPECT_FALSE(compile_proto(bad_set, error));
  EXPECT_NE(error.find("is not a binary FileDescriptorSet"), std::string::npos) << error;
}

}  // namespace
}  // namespace picomq::decoders::test

namespace picomq::decoders::test {
namespace {

// Found by fuzz_decoder_proto: a google.protobuf.Value whose kind is set twice (list_value with
// an invalid body, then string_value). libprotobuf parses the first member before the second
// replaces it, and rejects the payload; so must we.
TEST(DecodersProto, FuzzRegressionSupersededValueMemberIsStillChecked) {
  const std::string value = Wire().tag(6, 2).bytes(Wire().tag(0, 2).bytes("").b).tag(3, 2).bytes("x").b;
  auto bad = decode("google.protobuf.Value", value);
  EXPECT_EQ(bad.status, Status::bad_record);
  EXPECT_EQ(bad.error, "proto: field number 0 at byte 2");
  const std::string good = Wire().tag(6, 2).bytes("").tag(3, 2).bytes("x").b;
  EXPECT_EQ(decode("google.protobuf.Value", good).json, "\"x\"");
  const auto crash = read_text(std::filesystem::path(PICOMQ_DECODERS_DATA) /
                               "../../fuzz/decoders/corpus_proto/regression-value-superseded-member.bin");
  EXPECT_EQ(decode("picomq.test.Order", crash).status, Status::bad_record);
}

}  // namespace
}  // namespace picomq::decoders::test
