// avro: payloads written by fastavro (tests/decoders_data/make_payloads.py), decoded and checked
// field by field; malformed payloads built byte by byte; registry framing without a registry.
#include <gtest/gtest.h>

#include "decoders/avro_decoder.h"
#include "decoders/schema_registry.h"
#include "payloads.h"

namespace picomq::decoders::test {
namespace {

using nlohmann::json;

std::unique_ptr<SchemaDecoder> decoder_for(std::string_view schema_json) {
  std::string error;
  auto schema = compile_avro(schema_json, error);
  EXPECT_TRUE(schema) << error;
  return schema ? make_avro_decoder(schema) : nullptr;
}

Result order(const std::string& name) {
  auto d = decoder_for(read_text(generated() / "order.avsc"));
  return run(*d, payload("avro", name));
}

std::string zz(int64_t v) {  // zig-zag varint
  uint64_t u = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  std::string out;
  while (u >= 0x80) {
    out.push_back(static_cast<char>(u | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
  return out;
}

TEST(DecodersAvro, EveryTypeFromFastavroFieldByField) {
  auto r = order("order_full");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_EQ(v["id"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(v["small"].get<int64_t>(), INT32_MIN);
  EXPECT_EQ(v["name"], "na\u00efve \"q\"");
  EXPECT_EQ(v["price"], "-12345678901234567890.1234") << "decimal: the exact decimal as a string";
  EXPECT_EQ(v["fixed_price"], "0.05") << "decimal on fixed";
  EXPECT_NE(r.json.find("\"ratio\":0.1,"), std::string::npos) << "float: shortest text";
  EXPECT_EQ(v["score"], "Infinity");
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["note"], "hello") << "union: the plain value, no {\"string\": ...} wrapper";
  EXPECT_EQ(v["multi"].get<int64_t>(), INT64_MAX);
  EXPECT_EQ(v["blob"], "AP8=") << "bytes: base64";
  EXPECT_EQ(v["digest"], "YWJjZA==") << "fixed: base64";
  EXPECT_EQ(v["status"], "SHIPPED") << "enum: the symbol";
  EXPECT_EQ(v["lines"], json::parse(R"([{"sku":"a","qty":1},{"sku":"b","qty":-2}])"));
  EXPECT_EQ(v["attrs"], json::parse(R"({"x":1,"y":-1})"));
  EXPECT_EQ(v["address"], json::parse(R"({"city":"Bern","next":{"city":"Basel","next":null}})")) << "recursive record";
  EXPECT_EQ(v["day"], "2024-01-31") << "date";
  EXPECT_EQ(v["at_ms"], "2024-01-31T12:34:56.789Z") << "timestamp-millis";
  EXPECT_EQ(v["at_us"], "1969-12-31T23:59:59.999999Z") << "timestamp-micros before the epoch";
  EXPECT_EQ(v["local_ms"], "2000-02-29T00:00:00.001") << "local-timestamp-millis: no zone";
  EXPECT_EQ(v["t_ms"], "12:34:56.789");
  EXPECT_EQ(v["t_us"], "23:59:59.999999");
  EXPECT_EQ(v["uid"], "123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ(v["line_ref"], json::parse(R"({"sku":"ref","qty":0})")) << "a named type used again";
  EXPECT_EQ(v.size(), 24u);
}

TEST(DecodersAvro, NullsEmptiesNaNAndDecimalScale) {
  auto r = order("order_nulls");
  ASSERT_EQ(r.status, Status::ok) << r.error;
  const json v = r.value();
  EXPECT_TRUE(v["note"].is_null());
  EXPECT_TRUE(v["multi"].is_null());
  EXPECT_TRUE(v["address"].is_null());
  EXPECT_EQ(v["lines"], json::array());
  EXPECT_EQ(v["attrs"], json::object());
  EXPECT_EQ(v["score"], "NaN");
  EXPECT_EQ(v["price"], "0.0000") << "the scale's digits are kept";
  EXPECT_EQ(v["fixed_price"], "-0.01");
  EXPECT_EQ(v["name"], "");
  EXPECT_EQ(order("order_multi_string").value()["multi"], "s");
  EXPECT_EQ(order("order_multi_array").value()["multi"], json::parse("[1,-1]"));
}

TEST(DecodersAvro, PrimitiveRootsAndLogicalTypeEdges) {
  EXPECT_EQ(run(*decoder_for(R"("long")"), zz(INT64_MAX)).json, "9223372036854775807");
  EXPECT_EQ(run(*decoder_for(R"("string")"), zz(3) + "\xe2\x82\xac").json, "\"\xe2\x82\xac\"");
  EXPECT_EQ(run(*decoder_for(R"("null")"), "").json, "null");
  auto date = decoder_for(R"({"type":"int","logicalType":"date"})");
  EXPECT_EQ(run(*date, zz(-1)).json, "\"1969-12-31\"");
  EXPECT_EQ(run(*date, zz(-719162)).json, "\"0001-01-01\"");
  EXPECT_EQ(run(*date, zz(-719163)).json, "-719163") << "before year 1: the number";
  auto ts = decoder_for(R"({"type":"long","logicalType":"timestamp-millis"})");
  EXPECT_EQ(run(*ts, zz(-1)).json, "\"1969-12-31T23:59:59.999Z\"");
  EXPECT_EQ(run(*ts, zz(INT64_MAX)).json, "9223372036854775807") << "beyond year 9999: the number";
  // Decimals of any length, exact.
  auto dec = decoder_for(R"({"type":"bytes","logicalType":"decimal","precision":40,"scale":2})");
  EXPECT_EQ(run(*dec, zz(1) + "\x80").json, "\"-1.28\"");
  EXPECT_EQ(run(*dec, zz(0)).json, "\"0.00\"") << "no bytes: zero";
  EXPECT_EQ(run(*dec, zz(16) + std::string("\x7f") + std::string(15, '\xff')).json,
            "\"1701411834604692317316873037158841057.27\"")
      << "2^127 - 1, scale 2";
  // A logical type that does not fit its type is ignored (the spec): bytes stay base64.
  auto bad_decimal = decoder_for(R"({"type":"bytes","logicalType":"decimal","precision":2,"scale":3})");
  EXPECT_EQ(run(*bad_decimal, zz(1) + "\x01").json, "\"AQ==\"");
  auto uuid_fixed = decoder_for(R"({"type":"fixed","name":"U","size":16,"logicalType":"uuid"})");
  EXPECT_EQ(run(*uuid_fixed, std::string("\x12\x3e\x45\x67\xe8\x9b\x12\xd3\xa4\x56\x42\x66\x14\x17\x40\x00", 16)).json,
            "\"123e4567-e89b-12d3-a456-426614174000\"");
  auto duration = decoder_for(R"({"type":"fixed","name":"D","size":12,"logicalType":"duration"})");
  EXPECT_EQ(run(*duration, std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0", 12)).json,
            R"({"months":1,"days":2,"millis":3})");
  auto map_blocks = decoder_for(R"({"type":"map","values":"int"})");
  // Two blocks, the second with a byte count (negative count).
  EXPECT_EQ(run(*map_blocks, zz(1) + zz(1) + "a" + zz(5) + zz(-1) + zz(3) + zz(1) + "b" + zz(-5) + zz(0)).json,
            R"({"a":5,"b":-5})");
}

TEST(DecodersAvro, MalformedPayloadsAreBadRecordsWithAPosition) {
  struct Case {
    std::string schema, bytes, error;
  };
  const std::vector<Case> cases = {
      {R"(["null","string"])", zz(7), "avro: union branch 7 out of range (2 branches) at byte 0"},
      {R"(["null","string"])", zz(-1), "avro: union branch -1 out of range (2 branches) at byte 0"},
      {R"({"type":"enum","name":"E","symbols":["A","B"]})", zz(2),
       "avro: enum index 2 out of range (2 symbols in E) at byte 0"},
      {R"("string")", zz(5) + "ab", "avro: length 5 exceeds the 2 bytes left at byte 0"},
      {R"("string")", zz(-2), "avro: negative length -2 at byte 0"},
      {R"("string")", zz(2) + "\xc3\x28", "avro: invalid UTF-8 in a string at byte 1"},
      {R"("boolean")", "\x02", "avro: boolean byte 2 is neither 0 nor 1 at byte 0"},
      {R"("boolean")", "", "avro: needs 1 bytes, 0 left at byte 0"},
      {R"("long")", "\x80\x80", "avro: truncated varint at byte 0"},
      {R"("long")", std::string(10, '\xff') + "\x01", "avro: varint longer than 64 bits at byte 0"},
      {R"("int")", zz(int64_t{1} << 40), "avro: int 1099511627776 out of 32-bit range at byte 0"},
      {R"("double")", std::string(3, '\0'), "avro: needs 8 bytes, 3 left at byte 0"},
      {R"("int")", zz(1) + "x", "avro: 1 bytes left after the value at byte 1"},
      {R"({"type":"array","items":"long"})", zz(1000), "avro: block of 1000 items exceeds the 0 bytes left at byte 0"},
      {R"({"type":"array","items":"null"})", zz(int64_t{1} << 40),
       "avro: more than 1048576 items of a zero-byte type at byte 0"},
      {R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]})", zz(1),
       "avro: truncated varint at byte 1"},
  };
  for (const auto& c : cases) {
    auto d = decoder_for(c.schema);
    auto r = run(*d, c.bytes);
    EXPECT_EQ(r.status, Status::bad_record) << c.schema;
    EXPECT_EQ(r.error, c.error) << c.schema;
  }
}

TEST(DecodersAvro, TruncatedFastavroPayloadsAreAllRejected) {
  const std::string full = payload("avro", "order_full");
  auto d = decoder_for(read_text(generated() / "order.avsc"));
  for (size_t cut = 0; cut < full.size(); ++cut) {
    auto r = run(*d, std::string_view(full).substr(0, cut));
    EXPECT_EQ(r.status, Status::bad_record) << "cut at " << cut;
    EXPECT_EQ(r.error.rfind("avro: ", 0), 0u) << r.error;
  }
}

TEST(DecodersAvro, SchemaErrorsComeFromAvroC) {
  std::string error;
  EXPECT_FALSE(compile_avro(R"({"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]})", error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(compile_avro("{not json", error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(compile_avro(R"({"type":"enum","name":"E"})", error));
  EXPECT_FALSE(error.empty());
}

TEST(DecodersAvroRegistry, FramingErrorsAreBadRecordsAndAnUnreachableRegistryIsRetry) {
  std::string error;
  auto registry = SchemaRegistry::create("http://user:secret@127.0.0.1:1", error);
  ASSERT_TRUE(registry) << error;
  auto d = make_avro_registry_decoder(registry);
  auto short_payload = run(*d, std::string(3, '\0'));
  EXPECT_EQ(short_payload.status, Status::bad_record);
  EXPECT_NE(short_payload.error.find("at least 5 bytes"), std::string::npos) << short_payload.error;
  auto magic = run(*d, "{\"a\":1}");
  EXPECT_EQ(magic.status, Status::bad_record);
  EXPECT_EQ(magic.error, "avro: first byte is 123, not the schema-registry magic byte 0");
  auto down = run(*d, std::string("\0\0\0\0\x07\x02", 6));
  EXPECT_EQ(down.status, Status::retry);
  EXPECT_NE(down.error.find("schema registry http://***@127.0.0.1:1 (schema id 7) unreachable"), std::string::npos)
      << down.error;
  EXPECT_EQ(down.error.find("secret"), std::string::npos) << "credentials are never shown";
}

TEST(DecodersAvroRegistry, UrlsAreCheckedAndRedacted) {
  std::string error;
  EXPECT_TRUE(SchemaRegistry::create("https://registry.example:8081/base/", error)) << error;
  EXPECT_FALSE(SchemaRegistry::create("ftp://host", error));
  EXPECT_EQ(error, "'ftp://host' must be an http:// or https:// URL");
  EXPECT_FALSE(SchemaRegistry::create("http://u:pw@host:8081?x=1", error));
  EXPECT_EQ(error, "'http://***@host:8081?x=1' must not have a query or fragment");
  EXPECT_FALSE(SchemaRegistry::create("not a url", error));
  EXPECT_EQ(error.find("pw"), std::string::npos);
  EXPECT_EQ(redact_url("https://user:p%40ss@host/x"), "https://***@host/x");
  EXPECT_EQ(redact_url("http://host:1/a@b"), "http://host:1/a@b");
}

}  // namespace
}  // namespace picomq::decoders::test
