// The InfluxDB sink's pure pieces: line protocol escaping and values (the rules of the InfluxDB
// line protocol reference), the precision arithmetic, the record -> point mapping, and the refused
// lines read from write answers (as InfluxDB 1.13.2 and 2.8.0 send them; 3.x from its docs).
#include <gtest/gtest.h>

#include "influxdb/line_protocol.h"
#include "influxdb/points.h"
#include "influxdb/write_errors.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace picomq::influxdb {
namespace {

using kit::testing::TestBatch;
using kit::testing::TestRecord;

std::string line(Point p) {
  std::string out;
  auto bad = append_line(out, p);
  return bad ? "ERROR: " + *bad : out;
}

TEST(InfluxdbLineProtocol, EscapesEachPartByItsOwnRules) {
  Point p;
  p.measurement = "my measure,ment=x";  // measurement: comma and space only
  p.tags = {{"tag key,=", "tag value,= x"}};
  p.fields = {{"field key,= x", std::string("say \"hi\" \\ there, = ok")}};
  p.time = 1;
  EXPECT_EQ(line(p),
            "my\\ measure\\,ment=x,tag\\ key\\,\\==tag\\ value\\,\\=\\ x "
            "field\\ key\\,\\=\\ x=\"say \\\"hi\\\" \\\\ there, = ok\" 1\n");
}

TEST(InfluxdbLineProtocol, ValueTypesAndSuffixes) {
  Point p;
  p.measurement = "m";
  p.fields = {{"i", int64_t{-42}}, {"u", Unsigned{18446744073709551615u}},
              {"f", 1.5},          {"whole", 3.0},
              {"tiny", 1e-300},    {"t", true},
              {"n", false},        {"s", std::string("")}};
  EXPECT_EQ(line(p), "m i=-42i,u=18446744073709551615u,f=1.5,whole=3,tiny=1e-300,t=true,n=false,s=\"\"\n");
}

TEST(InfluxdbLineProtocol, TagsSortedFirstOfAKeyWinsEmptyValuesLeftOutNoTimeMeansServerClock) {
  Point p;
  p.measurement = "m";
  p.tags = {{"b", "2"}, {"a", "1"}, {"b", "3"}, {"c", ""}};
  p.fields = {{"v", int64_t{1}}, {"v", int64_t{2}}};
  EXPECT_EQ(line(p), "m,a=1,b=2 v=1i\n");
}

TEST(InfluxdbLineProtocol, RefusesWhatLineProtocolCannotCarry) {
  auto refused = [](Point p) {
    std::string out = "keep";
    auto bad = append_line(out, p);
    EXPECT_EQ(out, "keep");  // nothing half written
    return bad.value_or("");
  };
  EXPECT_EQ(refused({.measurement = "", .tags = {}, .fields = {{"v", 1.0}}, .time = {}}), "the measurement is empty");
  EXPECT_EQ(refused({.measurement = "#m", .tags = {}, .fields = {{"v", 1.0}}, .time = {}}),
            "the measurement starts with '#' (a comment line in line protocol)");
  EXPECT_EQ(refused({.measurement = "a\nb", .tags = {}, .fields = {{"v", 1.0}}, .time = {}}),
            "the measurement contains a line break, which line protocol cannot carry there");
  EXPECT_EQ(refused({.measurement = "m", .tags = {{"k", "v\\"}}, .fields = {{"v", 1.0}}, .time = {}}),
            "the value of tag \"k\" ends with a backslash, which line protocol cannot carry there");
  EXPECT_EQ(refused({.measurement = "m", .tags = {{"k", "a\rb"}}, .fields = {{"v", 1.0}}, .time = {}}),
            "the value of tag \"k\" contains a line break, which line protocol cannot carry there");
  EXPECT_EQ(refused({.measurement = "m", .tags = {}, .fields = {}, .time = {}}),
            "no field to write (a point needs at least one)");
  EXPECT_EQ(refused({.measurement = "m", .tags = {}, .fields = {{"", 1.0}}, .time = {}}), "a field key is empty");
  // A string field value may span lines (it is quoted).
  EXPECT_EQ(line({.measurement = "m", .tags = {}, .fields = {{"s", std::string("a\nb")}}, .time = 5}),
            "m s=\"a\nb\" 5\n");
}

TEST(InfluxdbLineProtocol, PrecisionArithmetic) {
  EXPECT_EQ(convert_time(1'700'000'000'123, Precision::Ms, Precision::Ns), 1'700'000'000'123'000'000);
  EXPECT_EQ(convert_time(1'700'000'000'123, Precision::Ms, Precision::S), 1'700'000'000);
  EXPECT_EQ(convert_time(-1, Precision::Ms, Precision::S), -1);  // rounded towards the past
  EXPECT_EQ(convert_time(9'000'000'000'000'000, Precision::S, Precision::Ns), std::nullopt);  // overflow
  EXPECT_EQ(time_from_parts(1'700'000'000, 123'456'789, Precision::Us), 1'700'000'000'123'456);
  EXPECT_EQ(precision_name(Precision::Us), "us");
  EXPECT_EQ(precision_v3_name(Precision::Ms), "millisecond");
}

TEST(InfluxdbLineProtocol, FieldTypesOfALineAsAConflictNamesThem) {
  const std::string_view l = "cpu\\ x,host=a usage=1i,name=\"a, b=c\",ok=true,f\\ k=2.5 17\n";
  EXPECT_EQ(line_measurement(l), "cpu\\ x");
  EXPECT_TRUE(line_field_has_type(l, "usage", "integer"));
  EXPECT_FALSE(line_field_has_type(l, "usage", "float"));
  EXPECT_TRUE(line_field_has_type(l, "name", "string"));
  EXPECT_TRUE(line_field_has_type(l, "ok", "boolean"));
  EXPECT_TRUE(line_field_has_type(l, "f\\ k", "float"));
  EXPECT_FALSE(line_field_has_type(l, "b", "string"));  // inside a quoted string: not a field
}

// ------------------------------------------------------------------ mapping

Plan plan_of(Settings s) {
  Plan p{s, "http://x", "http://x/write", kit::NameTemplate::parse("{topic}").value()};
  return p;
}

Settings mapping() {
  Settings s;
  s.field_separator = "_";
  s.precision = Precision::Ms;
  s.timestamp_unit = Precision::Ms;
  return s;
}

BatchLines map(const Settings& s, const TestBatch& b, std::string_view measurement = "m") {
  return PointMapper(plan_of(s)).map(b.raw(), measurement);
}

TEST(InfluxdbMapping, AllScalarsFlattenedNullsLeftOutRecordTimestamp) {
  const TestBatch b("t", 0,
                    {{.offset = 1,
                      .payload = R"({"a":1,"b":{"c":2.5,"d":{"e":"x"}},"arr":[1,true],"n":null})",
                      .timestamp_ms = 1'700'000'000'123}});
  const BatchLines l = map(mapping(), b);
  ASSERT_EQ(l.lines.size(), 1u);
  EXPECT_EQ(l.line(0), "m a=1i,b_c=2.5,b_d_e=\"x\",arr_0=1i,arr_1=true 1700000000123\n");
}

TEST(InfluxdbMapping, TagsFromFieldsKeyHeadersMetadataAreNotFieldsToo) {
  Settings s = mapping();
  s.tags = {"host", "loc.dc", "rack"};
  s.tag_key = "key";
  s.tag_headers = {"source"};
  s.tag_metadata = {"pico_topic", "pico_partition", "pico_offset"};
  s.fields = {};
  const TestBatch b("shop.cpu", 3,
                    {{.offset = 7,
                      .payload = R"({"host":"h 1","loc":{"dc":"eu","row":4},"rack":12,"v":0.5})",
                      .key = "k1",
                      .headers = {{"source", "agent"}, {"other", "x"}},
                      .timestamp_ms = 1000}});
  const BatchLines l = map(s, b, "cpu");
  ASSERT_EQ(l.lines.size(), 1u) << (l.refused.empty() ? "" : l.refused[0].second);
  EXPECT_EQ(l.line(0),
            "cpu,host=h\\ 1,key=k1,loc_dc=eu,pico_offset=7,pico_partition=3,pico_topic=shop.cpu,rack=12,source=agent "
            "loc_row=4i,v=0.5 1000\n");
}

TEST(InfluxdbMapping, MetadataAsFieldsKeyBase64HeadersAsJson) {
  Settings s = mapping();
  s.metadata_fields = {"pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key", "pico_headers"};
  const TestBatch b("t.x", 1,
                    {{.offset = 9,
                      .payload = R"({"v":1})",
                      .key = std::string("\x00\xff", 2),
                      .headers = {{"h", "a\"b"}, {"bin", std::string("\xff", 1)}},
                      .timestamp_ms = 42}});
  const BatchLines l = map(s, b);
  ASSERT_EQ(l.lines.size(), 1u) << (l.refused.empty() ? "" : l.refused[0].second);
  EXPECT_EQ(l.line(0),
            "m v=1i,pico_topic=\"t.x\",pico_partition=1i,pico_offset=9i,pico_timestamp=42i,pico_key=\"AP8=\","
            "pico_headers=\"{\\\"h\\\":\\\"a\\\\\\\"b\\\",\\\"bin\\\":\\\"/w==\\\"}\" 42\n");
  // Metadata alone is no point: a payload without fields is still refused.
  EXPECT_EQ(map(s, TestBatch::json("t", 0, 0, {"{}"})).refused.size(), 1u);
}

TEST(InfluxdbMapping, ListedFieldsMeasurementFieldTimestampFieldAndNumbersAsFloats) {
  Settings s = mapping();
  s.fields = {"temp", "meta"};
  s.measurement_field = "kind";
  s.timestamp_field = "at";
  s.timestamp_unit = Precision::S;
  s.precision = Precision::Ns;
  s.numbers = Numbers::Float;
  const TestBatch b =
      TestBatch::json("t", 0, 0, {R"({"kind":"weather","temp":21,"meta":{"q":1},"other":5,"at":1700000000})"});
  const BatchLines l = map(s, b);
  ASSERT_EQ(l.lines.size(), 1u) << (l.refused.empty() ? "" : l.refused[0].second);
  EXPECT_EQ(l.line(0), "weather temp=21,meta_q=1 1700000000000000000\n");
}

TEST(InfluxdbMapping, TimestampsFromRfc3339AndFractionalEpochs) {
  Settings s = mapping();
  s.timestamp_field = "ts";
  s.precision = Precision::Us;
  const TestBatch b =
      TestBatch::json("t", 0, 0,
                      {R"({"v":1,"ts":"2023-11-14T22:13:20.123456789Z"})",
                       R"({"v":1,"ts":"2023-11-14T23:13:20.5+01:00"})", R"({"v":1,"ts":1700000000123.5})"});
  const BatchLines l = map(s, b);
  ASSERT_EQ(l.lines.size(), 3u);
  EXPECT_EQ(l.line(0), "m v=1i 1700000000123456\n");
  EXPECT_EQ(l.line(1), "m v=1i 1700000000500000\n");
  EXPECT_EQ(l.line(2), "m v=1i 1700000000123500\n");
}

TEST(InfluxdbMapping, UnsignedOnV2FloatOnV1) {
  Settings s = mapping();
  const TestBatch b = TestBatch::json("t", 0, 0, {R"({"big":18446744073709551615})"});
  s.api = Api::V2;
  EXPECT_EQ(map(s, b).line(0), "m big=18446744073709551615u 1700000000000\n");
  s.api = Api::V1;
  EXPECT_EQ(map(s, b).line(0), "m big=18446744073709551616 1700000000000\n");  // no suffix: a float
}

TEST(InfluxdbMapping, RefusedRecordsSayWhyAndTheRestIsMapped) {
  Settings s = mapping();
  s.tags = {"host"};
  s.timestamp_field = "ts";
  const TestBatch b("t", 0,
                    {{.offset = 0, .payload = R"({"v":1,"ts":5})"},
                     {.offset = 1, .payload = R"([1,2])"},
                     {.offset = 2, .payload = R"({"ts":5,"only":null})"},
                     {.offset = 3, .payload = R"({"v":1})"},
                     {.offset = 4, .payload = R"({"v":1,"ts":"yesterday"})"},
                     {.offset = 5, .payload = R"({"v":1,"ts":5,"host":{"a":1}})"},
                     {.offset = 6, .payload = std::nullopt},
                     {.offset = 7, .payload = R"({"v":2,"ts":6})"}});
  const BatchLines l = map(s, b);
  ASSERT_EQ(l.lines.size(), 2u);
  EXPECT_EQ(l.lines[0].record, 0u);
  EXPECT_EQ(l.lines[1].record, 7u);
  EXPECT_EQ(l.line(1), "m v=2i 6\n");
  EXPECT_EQ(l.skipped, 1u);  // the tombstone
  ASSERT_EQ(l.refused.size(), 5u);
  EXPECT_EQ(l.refused[0], (std::pair<size_t, std::string>{1, "the payload is not a JSON object"}));
  EXPECT_EQ(l.refused[1].second, "no field to write (a point needs at least one non-null scalar field)");
  EXPECT_EQ(l.refused[2].second, "timestamp_field: the record has no field ts");
  EXPECT_EQ(l.refused[3].second, "timestamp_field ts: \"yesterday\" is not an RFC 3339 date-time");
  EXPECT_EQ(l.refused[4].second, "tag host is an object, not a value");
}

TEST(InfluxdbMapping, NoRecordTimestampIsRefused) {
  const TestBatch b("t", 0, {{.offset = 0, .payload = R"({"v":1})", .timestamp_ms = -1}});
  const BatchLines l = map(mapping(), b);
  ASSERT_EQ(l.refused.size(), 1u);
  EXPECT_EQ(l.refused[0].second, "the record has no timestamp (set timestamp_field)");
}

// ------------------------------------------------------------------ refused lines

std::vector<std::string_view> views(const std::vector<std::string>& lines) { return {lines.begin(), lines.end()}; }

TEST(InfluxdbWriteErrors, V1ParseErrorsNameTheirLines) {
  const std::vector<std::string> lines{"m v=1i 1\n", "m v= 2\n", "m v=3i 3\n", "m,t=x v=\"a 4\n"};
  // InfluxDB 1.13.2's answer to this body.
  const std::string body =
      R"({"error":"partial write: unable to parse 'm v= 2': missing field value\nunable to parse 'm,t=x v=\"a 4': unbalanced quotes dropped=0 for database: d"})";
  auto r = refused_lines(body, views(lines));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->lines.size(), 2u);
  EXPECT_EQ(r->lines[0].first, 1u);
  EXPECT_EQ(r->lines[0].second, "unable to parse 'm v= 2': missing field value");
  EXPECT_EQ(r->lines[1].first, 3u);
  EXPECT_EQ(r->lines[1].second, "unable to parse 'm,t=x v=\"a 4': unbalanced quotes");
  EXPECT_TRUE(r->rest_written);
}

TEST(InfluxdbWriteErrors, FieldTypeConflictsFindTheLinesOfThatTypeV1AndV2) {
  const std::vector<std::string> lines{"cpu v=1i 1\n", "cpu v=\"x\" 2\n", "mem v=\"y\" 3\n", "cpu v=\"z\",w=1 4\n"};
  const std::string v1 =
      R"({"error":"partial write: field type conflict: input field \"v\" on measurement \"cpu\" is type string, already exists as type integer dropped=2 for database: d for retention policy: autogen"})";
  auto r = refused_lines(v1, views(lines));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->lines.size(), 2u);
  EXPECT_EQ(r->lines[0].first, 1u);
  EXPECT_EQ(r->lines[1].first, 3u);
  EXPECT_EQ(
      r->lines[0].second,
      "field type conflict: input field \"v\" on measurement \"cpu\" is type string, already exists as type integer");
  EXPECT_TRUE(r->rest_written);
  const std::string v2 =
      R"({"code":"unprocessable entity","message":"failure writing points to database: partial write: field type conflict: input field \"v\" on measurement \"cpu\" is type string, already exists as type integer dropped=2"})";
  r = refused_lines(v2, views(lines));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->lines.size(), 2u);
  // A count that does not match what the answer names: not identified (the sink bisects).
  const std::string off =
      R"({"error":"partial write: field type conflict: input field \"v\" on measurement \"cpu\" is type string, already exists as type integer dropped=3"})";
  EXPECT_FALSE(refused_lines(off, views(lines)));
  EXPECT_FALSE(refused_lines(R"({"error":"partial write: points beyond retention policy dropped=1"})", views(lines)));
}

TEST(InfluxdbWriteErrors, AFieldNamedTimeIsFoundBy2xsAnswer) {
  const std::vector<std::string> lines{"p v=1i 5\n", "p time=1i 6\n", "q time=1i 7\n"};
  // InfluxDB 2.8.0's answer to this body (1.13.2: the same after "partial write: ").
  const std::string body =
      R"({"code":"unprocessable entity","message":"failure writing points to database: partial write: invalid field name: input field \"time\" on measurement \"p\" is invalid dropped=1"})";
  auto r = refused_lines(body, views(lines));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].first, 1u);
  EXPECT_EQ(r->lines[0].second, "invalid field name: input field \"time\" on measurement \"p\" is invalid");
  EXPECT_TRUE(r->rest_written);
}

TEST(InfluxdbWriteErrors, A2xParseErrorWritesNothingSoTheRestIsResent) {
  const std::vector<std::string> lines{"p v=1i 1\n", "p v= 2\n", "p v=3i 3\n"};
  auto r =
      refused_lines(R"({"code":"invalid","message":"unable to parse 'p v= 2': missing field value"})", views(lines));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].first, 1u);
  EXPECT_FALSE(r->rest_written);  // 2.8.0 wrote neither line 1 nor 3
}

TEST(InfluxdbWriteErrors, V3LineNumbers) {
  const std::vector<std::string> lines{"m v=1i 1\n", "m v= 2\n", "m v=3i 3\n"};
  const std::string body =
      R"({"error":"partial write of line protocol occurred","data":[{"original_line":"m v= 2","line_number":2,"error_message":"No fields were provided"}]})";
  auto r = refused_lines(body, views(lines));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].first, 1u);
  EXPECT_EQ(r->lines[0].second, "No fields were provided");
  EXPECT_TRUE(r->rest_written);
  EXPECT_FALSE(refused_lines(R"({"error":"x","data":[{"line_number":9}]})", views(lines)));
}

TEST(InfluxdbWriteErrors, ErrorTextOfEachVersion) {
  EXPECT_EQ(error_text(R"({"error":"database not found: \"x\""})"), "database not found: \"x\"");
  EXPECT_EQ(error_text(R"({"code":"not found","message":"bucket \"b\" not found"})"), "bucket \"b\" not found");
  EXPECT_EQ(error_text("plain"), "plain");
}

}  // namespace
}  // namespace picomq::influxdb
