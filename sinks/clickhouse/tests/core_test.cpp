// The ClickHouse sink's pure pieces: types, the RowBinary encoder and its strict conversions,
// exception codes, DESCRIBE parsing, layouts, CREATE TABLE and inference. No server.
#include <gtest/gtest.h>

#include <cstring>

#include "clickhouse/changes.h"
#include "clickhouse/config.h"
#include "clickhouse/errors.h"
#include "clickhouse/row_binary.h"
#include "clickhouse/schema.h"
#include "clickhouse/types.h"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/inference_cases.hpp"

namespace ch = picomq::clickhouse;
namespace kt = picomq::kit::testing;
using picomq::kit::Outcome;

namespace {

ch::Type type(const std::string& name) {
  auto t = ch::parse_type(name);
  EXPECT_TRUE(t) << name << ": " << t.error();
  return t.value();
}

ch::Column field(const std::string& name, const std::string& t) { return {name, type(t), ch::Source::Field, name}; }

template <class T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
std::string str(const std::string& s) { return std::string(1, static_cast<char>(s.size())) + s; }

// One JSON value encoded into a type: the bytes, or "!" + the reason.
std::string one(const std::string& t, const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(json).value();
  std::string out, scratch;
  std::string why = ch::append_value(type(t), e, out, scratch);
  return why.empty() ? out : "!" + why;
}

}  // namespace

TEST(ClickHouseTypes, ParsesAndPrintsTheTypesTheSinkWrites) {
  for (const char* name : {"String",
                           "FixedString(16)",
                           "Int8",
                           "Int16",
                           "Int32",
                           "Int64",
                           "UInt8",
                           "UInt16",
                           "UInt32",
                           "UInt64",
                           "Float32",
                           "Float64",
                           "Bool",
                           "Date",
                           "DateTime",
                           "DateTime('Europe/Berlin')",
                           "DateTime64(3)",
                           "DateTime64(6, 'UTC')",
                           "UUID",
                           "Nullable(String)",
                           "Array(Int64)",
                           "Array(Nullable(String))",
                           "Array(Array(Float64))",
                           "LowCardinality(String)",
                           "LowCardinality(Nullable(String))"})
    EXPECT_EQ(type(name).name(), name);
  EXPECT_EQ(type(" Nullable( Int64 ) ").name(), "Nullable(Int64)");
}

TEST(ClickHouseTypes, RefusesWhatItDoesNotWriteNamingIt) {
  for (const char* name : {"Decimal(18, 4)", "Enum8('a' = 1)", "Map(String, String)", "Tuple(Int8, String)",
                           "Nullable(Array(Int8))", "FixedString(0)", "DateTime64(10)", "Int128", "", "Int64)"}) {
    auto t = ch::parse_type(name);
    EXPECT_FALSE(t) << name;
  }
  EXPECT_NE(ch::parse_type("Decimal(18, 4)").error().find("'Decimal(18, 4)' is not a type the sink writes"),
            std::string::npos);
}

TEST(ClickHouseRowBinary, EncodesScalarsLittleEndianAndStringsWithTheirLength) {
  EXPECT_EQ(one("Int8", "-2"), le<int8_t>(-2));
  EXPECT_EQ(one("Int16", "-300"), le<int16_t>(-300));
  EXPECT_EQ(one("Int32", "70000"), le<int32_t>(70000));
  EXPECT_EQ(one("Int64", "-9223372036854775808"), le<int64_t>(INT64_MIN));
  EXPECT_EQ(one("UInt64", "18446744073709551615"), le<uint64_t>(UINT64_MAX));
  EXPECT_EQ(one("UInt8", "true"), "\x01") << "18.16's booleans are UInt8";
  EXPECT_EQ(one("Bool", "false"), std::string(1, '\0'));
  EXPECT_EQ(one("Float64", "1.5"), le<double>(1.5));
  EXPECT_EQ(one("Float64", "3"), le<double>(3.0));
  EXPECT_EQ(one("Float32", "0.25"), le<float>(0.25f));
  EXPECT_EQ(one("String", R"j("héllo")j"), str("héllo"));
  EXPECT_EQ(one("String", R"j({"a": [1, 2]})j"), str(R"j({"a":[1,2]})j")) << "nested JSON as its text";
  EXPECT_EQ(one("FixedString(4)", R"j("ab")j"), std::string("ab\0\0", 4));
  EXPECT_EQ(one("Nullable(Int32)", "null"), "\x01");
  EXPECT_EQ(one("Nullable(Int32)", "5"), std::string(1, '\0') + le<int32_t>(5));
  EXPECT_EQ(one("Array(Int16)", "[1, -1]"), "\x02" + le<int16_t>(1) + le<int16_t>(-1));
  EXPECT_EQ(one("Array(Nullable(String))", R"j(["a", null])j"), "\x02" + std::string(1, '\0') + str("a") + "\x01");
  EXPECT_EQ(one("LowCardinality(String)", R"j("x")j"), str("x")) << "LowCardinality(T) is T in RowBinary";
  EXPECT_EQ(one("UUID", R"j("aabbccdd-eeff-0011-2233-445566778899")j"),
            le<uint64_t>(0xaabbccddeeff0011ull) + le<uint64_t>(0x2233445566778899ull));
  // A string longer than 127 bytes: a two-byte LEB128 length.
  const std::string long_text(200, 'x');
  EXPECT_EQ(one("String", "\"" + long_text + "\""), std::string("\xc8\x01", 2) + long_text);
}

TEST(ClickHouseRowBinary, ConvertsDatesAndTimesFromIsoStringsAndEpochNumbers) {
  EXPECT_EQ(one("Date", R"j("1970-01-02")j"), le<uint16_t>(1));
  EXPECT_EQ(one("Date", R"j("2026-12-01")j"), le<uint16_t>(20788));
  EXPECT_EQ(one("DateTime", R"j("2023-11-14T22:13:20Z")j"), le<uint32_t>(1700000000));
  EXPECT_EQ(one("DateTime", R"j("2023-11-14 23:13:20+01:00")j"), le<uint32_t>(1700000000));
  EXPECT_EQ(one("DateTime", R"j("2023-11-14T22:13:20")j"), le<uint32_t>(1700000000)) << "no offset: UTC";
  EXPECT_EQ(one("DateTime", "1700000000"), le<uint32_t>(1700000000)) << "a number: epoch seconds";
  EXPECT_EQ(one("DateTime64(3)", R"j("2023-11-14T22:13:20.123Z")j"), le<int64_t>(1700000000123));
  EXPECT_EQ(one("DateTime64(3)", "1700000000123"), le<int64_t>(1700000000123)) << "a number: ticks (ms for 3)";
  EXPECT_EQ(one("DateTime64(6)", R"j("1969-12-31T23:59:59.5Z")j"), le<int64_t>(-500000));
}

TEST(ClickHouseRowBinary, RefusesWhatDoesNotConvertSaying) {
  EXPECT_EQ(one("Int64", R"j("12")j"), "!expected Int64, found string");
  EXPECT_EQ(one("Int8", "128"), "!expected Int8, found an integer out of its range");
  EXPECT_EQ(one("UInt32", "-1"), "!expected UInt32, found an integer out of its range");
  EXPECT_EQ(one("UInt64", "1.5"), "!expected UInt64, found floating-point number");
  EXPECT_EQ(one("Int64", "true"), "!expected Int64, found bool");
  EXPECT_EQ(one("Bool", "1"), "!expected Bool, found integer");
  EXPECT_EQ(one("Float32", "1e300"), "!expected Float32, found a number out of its range");
  EXPECT_EQ(one("FixedString(2)", R"j("abc")j"), "!expected FixedString(2), found a string of 3 bytes");
  EXPECT_EQ(one("Date", R"j("2026-02-30")j"), "!expected Date, found a string that is not YYYY-MM-DD");
  EXPECT_EQ(one("DateTime", R"j("2026-12-01T10:00:00.5Z")j"),
            "!expected DateTime, found a time with fractional seconds (DateTime holds whole seconds)");
  EXPECT_EQ(one("DateTime", R"j("yesterday")j"),
            "!expected DateTime, found a string that is not an ISO 8601 date-time");
  EXPECT_EQ(one("DateTime", R"j("1969-12-31T23:59:59Z")j"),
            "!expected DateTime, found a time outside 1970-01-01..2106-02-07");
  EXPECT_EQ(one("DateTime64(3)", R"j("2026-12-01T10:00:00.1234Z")j"),
            "!expected DateTime64(3), found a time more precise than its 3 fraction digits");
  EXPECT_EQ(one("UUID", R"j("not-a-uuid")j"), "!expected UUID, found a string that is not a UUID");
  EXPECT_EQ(one("Array(Int64)", R"j([1, "2"])j"), "!item 1: expected Int64, found string");
  EXPECT_EQ(one("Array(Int64)", R"j({"a": 1})j"), "!expected Array(Int64), found object");
}

TEST(ClickHouseRowBinary, NullAndMissingFieldsWriteNullOrTheTypesDefault) {
  EXPECT_EQ(one("Int32", "null"), le<int32_t>(0));
  EXPECT_EQ(one("String", "null"), std::string(1, '\0'));
  EXPECT_EQ(one("Array(String)", "null"), std::string(1, '\0'));
  EXPECT_EQ(one("UUID", "null"), std::string(16, '\0'));
  EXPECT_EQ(one("FixedString(3)", "null"), std::string(3, '\0'));
}

TEST(ClickHouseRowBinary, EncodesABatchWithMetadataAndRejectsRecordsAlone) {
  std::vector<ch::Column> cols{
      {"pico_topic", type("String"), ch::Source::Topic, ""},
      {"pico_partition", type("Int32"), ch::Source::Partition, ""},
      {"pico_offset", type("Int64"), ch::Source::Offset, ""},
      {"pico_timestamp", type("Int64"), ch::Source::Timestamp, ""},
      {"pico_key", type("Nullable(String)"), ch::Source::Key, ""},
      {"pico_headers", type("String"), ch::Source::Headers, ""},
      field("n", "Int64"),
      field("s", "Nullable(String)"),
  };
  ch::RowBinaryEncoder encoder(cols);
  std::vector<kt::TestRecord> records(4);
  records[0] = {.offset = 10, .payload = R"j({"n": 1, "s": "a", "other": [1]})j", .key = "k", .headers = {{"h", "v"}}};
  records[1] = {.offset = 11, .payload = R"j({"n": "bad"})j"};
  records[2] = {.offset = 12, .payload = "[1, 2]"};
  records[3] = {.offset = 13, .payload = R"j({"s": null})j", .timestamp_ms = 5};
  kt::TestBatch batch("t.x", 2, records);
  ch::Encoded e = encoder.encode(batch.raw());
  ASSERT_TRUE(e.ok()) << e.error;
  ASSERT_EQ(e.rejected.size(), 2u);
  EXPECT_EQ(e.rejected[0].record_index, 1u);
  EXPECT_EQ(e.rejected[0].reason, "field 'n': expected Int64, found string");
  EXPECT_EQ(e.rejected[1].record_index, 2u);
  EXPECT_EQ(e.rejected[1].reason, "payload is not a JSON object (payload_mode 'columns' writes its fields)");
  const std::string row0 = str("t.x") + le<int32_t>(2) + le<int64_t>(10) + le<int64_t>(1'700'000'000'000) +
                           std::string(1, '\0') + str("k") + str(R"j({"h":"v"})j") + le<int64_t>(1) +
                           std::string(1, '\0') + str("a");
  const std::string row3 =
      str("t.x") + le<int32_t>(2) + le<int64_t>(13) + le<int64_t>(5) + "\x01" + str("{}") + le<int64_t>(0) + "\x01";
  EXPECT_EQ(e.data, row0 + row3);
  ASSERT_EQ(e.rows.size(), 2u);
  EXPECT_EQ(e.rows[0].end, row0.size());
  EXPECT_EQ(e.rows[0].record_index, 0u);
  EXPECT_EQ(e.rows[1].end, row0.size() + row3.size());
  EXPECT_EQ(e.rows[1].record_index, 3u);
}

TEST(ClickHouseRowBinary, AMetadataColumnOfTheWrongTypeFailsTheBatch) {
  ch::RowBinaryEncoder encoder({{"pico_offset", type("String"), ch::Source::Offset, ""}});
  kt::TestBatch batch = kt::TestBatch::json("t", 0, 0, {"{}"});
  ch::Encoded e = encoder.encode(batch.raw());
  EXPECT_EQ(e.error, "column pico_offset is String; it takes an integer type (Int64)");
}

TEST(ClickHouseRowBinary, StringModeWritesThePayloadBytesAndTombstonesAsNull) {
  ch::RowBinaryEncoder encoder({{"payload", type("Nullable(String)"), ch::Source::Payload, ""}});
  kt::TestBatch batch("t", 0, {{.offset = 0, .payload = "plain text"}, {.offset = 1, .payload = std::nullopt}},
                      PMQ_PAYLOAD_TEXT, "text");
  ch::Encoded e = encoder.encode(batch.raw());
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_EQ(e.data, std::string(1, '\0') + str("plain text") + "\x01");
}

namespace {
picomq::kit::HttpResponse response(long status, std::string body, const std::string& code_header = "") {
  picomq::kit::HttpResponse r;
  r.method = "POST";
  r.url = "http://127.0.0.1:8123/?query=INSERT";
  r.status = status;
  r.status_line = "HTTP/1.1 " + std::to_string(status);
  r.body = std::move(body);
  if (!code_header.empty()) r.headers.set("X-ClickHouse-Exception-Code", code_header);
  return r;
}
}  // namespace

TEST(ClickHouseErrors, ReadsTheCodeFromTheHeaderOrEitherGenerationsBody) {
  EXPECT_EQ(ch::exception_code(response(404, "Code: 60, e.displayText() = DB::Exception: Table x doesn't exist.")), 60);
  EXPECT_EQ(ch::exception_code(response(404, "Code: 60. DB::Exception: Table x does not exist. (UNKNOWN_TABLE)")), 60);
  EXPECT_EQ(ch::exception_code(response(500, "whatever", "252")), 252);
  EXPECT_EQ(ch::exception_code(response(502, "<html>Bad Gateway</html>")), std::nullopt);
}

TEST(ClickHouseErrors, ClassifiesByCodeNotByStatus) {
  EXPECT_EQ(ch::classify(response(500, "Code: 252, e.displayText() = DB::Exception: Too many parts")).outcome,
            Outcome::Retry);
  EXPECT_EQ(ch::classify(response(500, "Code: 319, ...")).outcome, Outcome::MaybeWritten);
  EXPECT_EQ(ch::classify(response(400, "Code: 6, e.displayText() = DB::Exception: Cannot parse")).outcome,
            Outcome::Rejected);
  EXPECT_EQ(ch::classify(response(500, "Code: 117, ...")).outcome, Outcome::Rejected);
  EXPECT_EQ(ch::classify(response(404, "Code: 60, ...")).outcome, Outcome::Fatal);
  const auto auth =
      ch::classify(response(401, "Code: 193, e.displayText() = DB::Exception: Wrong password for user w"));
  EXPECT_EQ(auth.outcome, Outcome::Fatal);
  EXPECT_NE(auth.reason.find("ClickHouse error 193 (authentication failed: check user and password)"),
            std::string::npos)
      << auth.reason;
  // No code (a proxy in front): the kit's HTTP table.
  EXPECT_EQ(ch::classify(response(503, "Service Unavailable")).outcome, Outcome::Retry);
  EXPECT_EQ(ch::classify(response(200, "")).outcome, Outcome::Written);
  for (int code : {3, 107, 159, 164, 202, 203, 209, 210, 241, 242, 252, 285, 425, 999})
    EXPECT_EQ(ch::code_outcome(code), Outcome::Retry) << code;
  for (int code : {26, 27, 53, 117}) EXPECT_EQ(ch::code_outcome(code), Outcome::Rejected) << code;
  for (int code : {16, 60, 81, 89, 115, 192, 193, 194, 497, 516})
    EXPECT_EQ(ch::code_outcome(code), Outcome::Fatal) << code;
}

TEST(ClickHouseSchema, ParsesDescribeOfBothGenerations) {
  // 18.16 and current servers (which add codec_expression, ttl_expression).
  auto cols = ch::parse_describe(
      R"j({"name":"id","type":"String","default_type":"","default_expression":"","comment_expression":""})j"
      "\n"
      R"j({"name":"m","type":"UInt8","default_type":"MATERIALIZED","default_expression":"1","comment":"","codec_expression":"","ttl_expression":""})j"
      "\n");
  ASSERT_TRUE(cols) << cols.error();
  ASSERT_EQ(cols.value().size(), 2u);
  EXPECT_EQ(cols.value()[1].name, "m");
  EXPECT_EQ(cols.value()[1].default_kind, "MATERIALIZED");
  EXPECT_FALSE(ch::parse_describe("Code: 60, ..."));
}

TEST(ClickHouseSchema, LayoutOfAnExistingTable) {
  std::vector<ch::DescribedColumn> table{{"pico_offset", "Int64", ""},
                                         {"n", "Int64", ""},
                                         {"d", "Decimal(9, 2)", ""},
                                         {"m", "UInt8", "MATERIALIZED"},
                                         {"payload", "String", ""}};
  ch::Layout l = ch::layout_from_table(table, false, {});
  ASSERT_TRUE(l.error.empty()) << l.error;
  ASSERT_EQ(l.columns.size(), 3u);
  EXPECT_EQ(l.columns[0].source, ch::Source::Offset);
  EXPECT_EQ(l.columns[1].name, "n");
  EXPECT_EQ(l.columns[2].name, "payload");
  ASSERT_EQ(l.notes.size(), 1u);
  EXPECT_NE(l.notes[0].find("column d is not written"), std::string::npos);

  ch::Layout s = ch::layout_from_table(table, true, {});
  ASSERT_TRUE(s.error.empty()) << s.error;
  ASSERT_EQ(s.columns.size(), 2u);
  EXPECT_EQ(s.columns[1].source, ch::Source::Payload);

  ch::Layout declared = ch::layout_from_table(table, false, {field("x", "Int64")});
  EXPECT_EQ(declared.error, "declared column 'x' is not in the table");
  EXPECT_EQ(ch::layout_from_table({{"n", "Int64", ""}}, true, {}).error,
            "payload_mode 'string' needs a String column named payload");
}

TEST(ClickHouseSchema, CreatesReplacingMergeTreeOrderedByTheRecordId) {
  EXPECT_EQ(ch::create_table_sql("`db`.`t`", {field("n", "Nullable(Int64)")}, true),
            "CREATE TABLE IF NOT EXISTS `db`.`t` (`pico_topic` String, `pico_partition` Int32, `pico_offset` Int64, "
            "`pico_timestamp` Int64, `pico_key` Nullable(String), `pico_headers` String, `n` Nullable(Int64)) "
            "ENGINE = ReplacingMergeTree ORDER BY (`pico_topic`, `pico_partition`, `pico_offset`)");
  EXPECT_EQ(ch::insert_sql("`db`.`t`", {field("a`b", "String"), field("c", "Int8")}),
            "INSERT INTO `db`.`t` (`a``b`, `c`) FORMAT RowBinary");
  EXPECT_EQ(ch::insert_sql("`db`.`t`", {field("c", "Int8")}, "Native"), "INSERT INTO `db`.`t` (`c`) FORMAT Native");
}

TEST(ClickHouseSchema, InfersColumnsFromTheFirstBatch) {
  kt::TestBatch batch = kt::TestBatch::json(
      "t", 0, 0,
      {R"j({"i": 1, "f": 1, "s": "a", "b": true, "o": {"x": 1}, "pico_offset": 3, "z": null})j",
       R"j({"i": 2, "f": 2.5, "s": "b", "b": false, "o": [1], "mixed": 1})j", R"j({"mixed": "x"})j"});
  ch::Inferred old = ch::infer_columns(batch.raw(), {18, 16});
  std::vector<std::string> names;
  for (const auto& c : old.columns) names.push_back(c.name + " " + c.type.name());
  EXPECT_EQ(names, (std::vector<std::string>{"i Nullable(Int64)", "f Nullable(Float64)", "s Nullable(String)",
                                             "b Nullable(UInt8)", "o Nullable(String)", "z Nullable(String)",
                                             "mixed Nullable(String)"}));
  EXPECT_EQ(old.notes.size(), 1u);
  ch::Inferred modern = ch::infer_columns(batch.raw(), {24, 3});
  EXPECT_EQ(modern.columns[3].type.name(), "Nullable(Bool)");
}

// The kit's lattice (kit/inferred_type.hpp) through column_type(): the shared cases the Arrow
// exporter and Postgres infer too.
TEST(ClickHouseSchema, InfersAsTheKitsLatticeOnTheSharedCases) {
  kt::TestBatch batch = kt::TestBatch::json("t", 0, 0, picomq::kit::testing::inference_payloads());
  const ch::Inferred inferred = ch::infer_columns(batch.raw(), {24, 8});
  std::vector<std::string> got, want;
  for (const auto& c : inferred.columns) got.push_back(c.name + " " + c.type.name());
  for (const auto& [field, type] : picomq::kit::testing::inference_fields())
    want.push_back(field + " " + ch::column_type(type, {24, 8}).name());
  EXPECT_EQ(got, want);
  EXPECT_EQ(ch::column_type(picomq::kit::InferredType::Json, {24, 8}).name(), "Nullable(String)");
  EXPECT_EQ(ch::column_type(picomq::kit::InferredType::Bool, {18, 16}).name(), "Nullable(UInt8)");
}

// A String column takes a string's text and any other scalar's JSON text (as ClickHouse's own
// JSON input does): every value of a column inferred from conflicting kinds is written.
TEST(ClickHouseRowBinary, ScalarsIntoAStringColumnAreTheirJsonText) {
  EXPECT_EQ(one("String", "12"), str("12"));
  EXPECT_EQ(one("String", "-9223372036854775808"), str("-9223372036854775808"));
  EXPECT_EQ(one("String", "18446744073709551615"), str("18446744073709551615"));
  EXPECT_EQ(one("String", "2.5"), str("2.5"));
  EXPECT_EQ(one("String", "true"), str("true"));
  EXPECT_EQ(one("Nullable(String)", "false"), std::string(1, '\0') + str("false"));
  EXPECT_EQ(one("String", R"j({"a": [1, 2]})j"), str(R"j({"a":[1,2]})j"));
}

TEST(ClickHouseSchema, ReadsServerVersions) {
  EXPECT_EQ(ch::parse_version("18.16.1").major, 18);
  EXPECT_EQ(ch::parse_version("18.16.1").minor, 16);
  EXPECT_TRUE(ch::parse_version("21.11.2.2").at_least(21, 11));
  EXPECT_FALSE(ch::parse_version("21.10.1").at_least(21, 11));
  EXPECT_EQ(ch::parse_version("garbage").major, 0);
}

TEST(ClickHouseConfig, ParsesDeclaredColumnsAndRefusesMistakes) {
  auto cols =
      ch::parse_declared_columns(R"j([{"name": "id", "type": "String"}, {"name": "n", "type": "Nullable(Int64)"}])j");
  ASSERT_TRUE(cols) << cols.error();
  EXPECT_EQ(cols.value()[1].type.name(), "Nullable(Int64)");
  EXPECT_FALSE(ch::parse_declared_columns(R"j([{"name": "d", "type": "Decimal(9, 2)"}])j"));
  EXPECT_EQ(ch::parse_declared_columns(R"j([{"name": "pico_offset", "type": "Int64"}])j").error(),
            "column 'pico_offset' is a metadata column (include_metadata adds it)");
  EXPECT_EQ(ch::parse_declared_columns(R"j([{"name": "a", "type": "Int8"}, {"name": "a", "type": "Int8"}])j").error(),
            "column 'a' is declared twice");
}

TEST(ClickHouseChangeEvents, ATableOfChangesIsAReplacingMergeTreeByItsKeyVersionedByOffset) {
  const std::vector<ch::Column> key{{"order_id", ch::make(ch::Kind::Int64), ch::Source::Field, "order_id"},
                                    {"line", ch::make(ch::Kind::Int64), ch::Source::Field, "line"}};
  const std::vector<ch::Column> payload{{"line", ch::nullable(ch::make(ch::Kind::Int64)), ch::Source::Field, "line"},
                                        {"sku", ch::nullable(ch::make(ch::Kind::String)), ch::Source::Field, "sku"}};
  const std::string old = ch::create_change_table_sql("`d`.`t`", key, payload, false, {18, 16});
  EXPECT_EQ(old,
            "CREATE TABLE IF NOT EXISTS `d`.`t` (`order_id` Int64, `line` Int64, `sku` Nullable(String), "
            "`pico_version` UInt64, `pico_deleted` UInt8, `pico_topic` String, `pico_partition` Int32, `pico_offset` "
            "Int64) ENGINE = ReplacingMergeTree(`pico_version`) ORDER BY (`order_id`, `line`)")
      << "a key column is not Nullable, and not repeated from the payload";
  EXPECT_NE(ch::create_change_table_sql("`d`.`t`", key, payload, true, {23, 2})
                .find("ReplacingMergeTree(`pico_version`, `pico_deleted`)"),
            std::string::npos)
      << "from 23.2 the engine drops deleted keys itself";
}

TEST(ClickHouseChangeEvents, TheKeyColumnsAreTheFirstKeysFieldsTypedOverTheBatch) {
  picomq::kit::testing::TestBatch batch(
      "t", 0,
      {{.offset = 0, .payload = "{}", .op = PMQ_OP_UPSERT, .key_json = R"({"id":1,"region":"eu"})"},
       {.offset = 1, .payload = "{}", .op = PMQ_OP_UPSERT, .key_json = R"({"id":2.5,"region":"us"})"}});
  const auto key = ch::infer_key_columns(batch.raw());
  ASSERT_EQ(key.size(), 2u);
  EXPECT_EQ(key[0].name, "id");
  EXPECT_EQ(key[0].type.name(), "Float64");
  EXPECT_EQ(key[1].type.name(), "String");
}

TEST(ClickHouseChangeEvents, ThePatchedKeysRowsAreReadBackAndTheLatestVersionWins) {
  EXPECT_EQ(ch::current_rows_sql("`d`.`t`", {"id", "k"}, {"id", "k", "title"},
                                 {R"({"id":1,"k":"a'b"})", R"({"id":2,"k":"c"})"}),
            "SELECT `id`, `k`, `title`, `pico_version`, `pico_deleted` FROM `d`.`t` WHERE (`id`, `k`) IN ((1, "
            "'a\\'b'), (2, 'c')) FORMAT JSONEachRow");
  const auto rows = ch::latest_rows(R"({"id":1,"title":"old","pico_version":3,"pico_deleted":0}
{"id":1,"title":"new","pico_version":"9","pico_deleted":0}
{"id":2,"title":"x","pico_version":4,"pico_deleted":0}
{"id":2,"title":null,"pico_version":5,"pico_deleted":1}
)",
                                    {"id"});
  ASSERT_TRUE(rows) << rows.error();
  EXPECT_EQ(rows.value(), (std::map<std::string, std::string>{{"1", R"({"id":1,"title":"new"})"}}))
      << "the highest version, whether quoted or not; a key whose latest row is a delete has none";
  EXPECT_EQ(ch::merge_rows(R"({"id":1,"title":"t","body":"long"})", R"({"id":1,"title":"u"})"),
            R"({"body":"long","id":1,"title":"u"})")
      << "the base's other fields, then the patch's";
  EXPECT_EQ(ch::key_text(R"({"flag":true,"id":"x"})", {"id", "flag"}), std::string("\"x\"\x1f") + "1");
}
