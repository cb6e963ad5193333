// Exporter: JSON batches with a declared schema — conversions and every rejection kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "test_batch.h"

namespace picomq::arrow::testing {
namespace {

TEST(ArrowExportDeclared, ExactlyTheDeclaredColumnsInDeclaredOrder) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"extra":1,"b":"x","a":true})");
  auto out = run_export(
      batch, declared({{"a", ColumnType::Bool, false}, {"missing", ColumnType::Utf8}, {"b", ColumnType::Utf8}}));
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names(), (std::vector<std::string>{"a", "missing", "b"})) << "undeclared fields are dropped";
  EXPECT_EQ(out->field("a").flags & ARROW_FLAG_NULLABLE, 0);
  EXPECT_EQ(out->field("missing").flags & ARROW_FLAG_NULLABLE, ARROW_FLAG_NULLABLE);
  EXPECT_TRUE(out->view().column("missing").is_null(0));
}

TEST(ArrowExportDeclared, FormatsPerDeclaredType) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload("{}");
  auto out = run_export(batch, declared({{"b", ColumnType::Bool},
                                         {"i", ColumnType::Int64},
                                         {"f", ColumnType::Float64},
                                         {"s", ColumnType::Utf8},
                                         {"z", ColumnType::Binary},
                                         {"t", ColumnType::TimestampMs},
                                         {"j", ColumnType::Json}},
                                        true));
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names().size(), 13u) << "metadata columns first";
  EXPECT_STREQ(out->field("b").format, "b");
  EXPECT_STREQ(out->field("i").format, "l");
  EXPECT_STREQ(out->field("f").format, "g");
  EXPECT_STREQ(out->field("s").format, "u");
  EXPECT_FALSE(has_json_extension(out->field("s")));
  EXPECT_STREQ(out->field("z").format, "z");
  EXPECT_STREQ(out->field("t").format, "tsm:UTC");
  EXPECT_STREQ(out->field("j").format, "u");
  EXPECT_TRUE(has_json_extension(out->field("j")));
}

TEST(ArrowExportDeclared, Conversions) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"b":true,"i":-5,"f":3,"s":"h\u00e9","z":"bytes","t":1700000000000,"j":{"a": [1]}})")
      .payload(R"({"b":false,"i":2.0,"f":2.5,"s":"","z":"","t":-1,"j":"str"})")
      .payload(R"({"i":-9.0e3,"f":18446744073709551615,"j":12.50})")
      .payload(R"({"f":123456789012345678901234567890,"j":123456789012345678901234567890})")
      .tombstone();
  auto out = run_export(batch, declared({{"b", ColumnType::Bool},
                                         {"i", ColumnType::Int64},
                                         {"f", ColumnType::Float64},
                                         {"s", ColumnType::Utf8},
                                         {"z", ColumnType::Binary},
                                         {"t", ColumnType::TimestampMs},
                                         {"j", ColumnType::Json}}));
  ASSERT_FALSE(out->result.ok) << "the big number cannot be a float64";
  ASSERT_EQ(out->result.rejected.size(), 1u);
  EXPECT_EQ(out->result.rejected[0].record_index, 3u);
  EXPECT_EQ(out->result.rejected[0].reason, "field 'f': expected float64, found number out of range");

  // Without that field, the same record's big number goes into the json column as text.
  TestBatch fixed(PMQ_PAYLOAD_JSON);
  fixed.payload(R"({"b":true,"i":-5,"f":3,"s":"h\u00e9","z":"bytes","t":1700000000000,"j":{"a": [1]}})")
      .payload(R"({"b":false,"i":2.0,"f":2.5,"s":"","z":"","t":-1,"j":"str"})")
      .payload(R"({"i":-9.0e3,"f":18446744073709551615,"j":12.50})")
      .payload(R"({"j":123456789012345678901234567890})")
      .tombstone();
  out = run_export(fixed, declared({{"b", ColumnType::Bool},
                                    {"i", ColumnType::Int64},
                                    {"f", ColumnType::Float64},
                                    {"s", ColumnType::Utf8},
                                    {"z", ColumnType::Binary},
                                    {"t", ColumnType::TimestampMs},
                                    {"j", ColumnType::Json}}));
  ASSERT_TRUE(out->result.ok) << (out->result.rejected.empty() ? out->result.error : out->result.rejected[0].reason);
  const auto view = out->view();
  EXPECT_TRUE(view.column("b").as_bool(0));
  EXPECT_FALSE(view.column("b").as_bool(1));
  EXPECT_EQ(view.column("i").as_int64(0), -5);
  EXPECT_EQ(view.column("i").as_int64(1), 2) << "a float with an integral value";
  EXPECT_EQ(view.column("i").as_int64(2), -9000);
  EXPECT_DOUBLE_EQ(view.column("f").as_double(0), 3.0);
  EXPECT_DOUBLE_EQ(view.column("f").as_double(1), 2.5);
  EXPECT_DOUBLE_EQ(view.column("f").as_double(2), 18446744073709551615.0);
  EXPECT_EQ(view.column("s").as_string(0), "h\xc3\xa9");
  EXPECT_EQ(view.column("s").as_string(1), "");
  EXPECT_EQ(view.column("z").as_bytes(0).as_string_view(), "bytes");
  EXPECT_EQ(view.column("t").as_timestamp_ms(0), 1700000000000);
  EXPECT_EQ(view.column("t").as_timestamp_ms(1), -1) << "a payload's -1 is a time, not 'none'";
  EXPECT_EQ(view.column("j").as_string(0), R"({"a": [1]})");
  EXPECT_EQ(view.column("j").as_string(1), "\"str\"");
  EXPECT_EQ(view.column("j").as_string(2), "12.50") << "a number's original text";
  EXPECT_EQ(view.column("j").as_string(3), "123456789012345678901234567890");
  EXPECT_TRUE(view.column("b").is_null(2));
  for (size_t c = 0; c < view.num_columns(); ++c) EXPECT_TRUE(view.column(c).is_null(4)) << "tombstone";
}

TEST(ArrowExportDeclared, MissingOrNullInANullableColumnIsNull) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":null})").payload("{}");
  auto out = run_export(batch, declared({{"a", ColumnType::Int64, true}}));
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_TRUE(out->view().column("a").is_null(0));
  EXPECT_TRUE(out->view().column("a").is_null(1));
}

TEST(ArrowExportDeclared, LastDuplicateKeyWins) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":"no","a":4})");
  auto out = run_export(batch, declared({{"a", ColumnType::Int64}}));
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->view().column("a").as_int64(0), 4);
}

TEST(ArrowExportDeclared, EveryRejectionKindIsCollected) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch
      .payload(R"({"amount":"12.5","id":1})")                                  // 0 wrong kind
      .payload(R"({"amount":1.5,"id":1.5})")                                   // 1 fractional int64
      .payload(R"({"amount":1,"id":18446744073709551615})")                    // 2 uint64 beyond int64
      .payload(R"({"amount":1,"id":1e19})")                                    // 3 double beyond int64
      .payload(R"({"amount":1})")                                              // 4 missing non-nullable
      .payload(R"({"amount":1,"id":null})")                                    // 5 null non-nullable
      .payload(R"({"amount":1,"id":1,"at":1.5})")                              // 6 timestamp from a float
      .payload("[1,2]")                                                        // 7 not an object
      .tombstone()                                                             // 8 tombstone, id not nullable
      .payload(R"({"amount":1,"id":)")                                         // 9 not JSON
      .payload(R"({"amount":true,"id":"7","ok":1,"raw":2,"at":"now"})")        // 10 several at once
      .payload(R"({"amount":1,"id":123456789012345678901234567890})")          // 11 beyond 64 bits
      .payload(R"({"amount":1,"id":1,"ok":true,"raw":"r","at":5,"doc":{}})");  // 12 fine
  auto out = run_export(batch, declared({{"amount", ColumnType::Float64},
                                         {"id", ColumnType::Int64, false},
                                         {"ok", ColumnType::Bool},
                                         {"raw", ColumnType::Binary},
                                         {"at", ColumnType::TimestampMs},
                                         {"doc", ColumnType::Json}}));
  EXPECT_FALSE(out->result.ok);
  EXPECT_TRUE(out->result.error.empty());
  EXPECT_EQ(out->schema.release, nullptr) << "nothing exported";
  std::map<size_t, std::string> reasons;
  for (const auto& r : out->result.rejected) reasons[r.record_index] = r.reason;
  EXPECT_EQ(reasons.size(), 12u);
  EXPECT_EQ(reasons[0], "field 'amount': expected float64, found string");
  EXPECT_EQ(reasons[1], "field 'id': expected int64, found floating-point number with a fractional part");
  EXPECT_EQ(reasons[2], "field 'id': expected int64, found integer out of int64 range");
  EXPECT_EQ(reasons[3], "field 'id': expected int64, found floating-point number out of int64 range");
  EXPECT_EQ(reasons[4], "field 'id': missing, and the column is not nullable");
  EXPECT_EQ(reasons[5], "field 'id': expected int64, found null (the column is not nullable)");
  EXPECT_EQ(reasons[6], "field 'at': expected timestamp_ms, found floating-point number");
  EXPECT_EQ(reasons[7], "payload is not a JSON object (found array)");
  EXPECT_EQ(reasons[8], "tombstone: field 'id' is not nullable");
  EXPECT_EQ(reasons[9].rfind("payload is not valid JSON", 0), 0u) << reasons[9];
  EXPECT_EQ(reasons[10],
            "field 'amount': expected float64, found bool; field 'id': expected int64, found string; "
            "field 'ok': expected bool, found integer; field 'raw': expected binary, found integer; "
            "field 'at': expected timestamp_ms, found string");
  EXPECT_EQ(reasons[11], "field 'id': expected int64, found number out of range");
  EXPECT_EQ(reasons.count(12), 0u);
  EXPECT_TRUE(std::is_sorted(out->result.rejected.begin(), out->result.rejected.end(),
                             [](const auto& a, const auto& b) { return a.record_index < b.record_index; }));
}

TEST(ArrowExportDeclared, NonObjectPayloadsAreRejections) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload("\"text\"").payload("3").payload("null").payload("true");
  auto out = run_export(batch, declared({{"a", ColumnType::Utf8}}));
  ASSERT_EQ(out->result.rejected.size(), 4u);
  EXPECT_EQ(out->result.rejected[0].reason, "payload is not a JSON object (found string)");
  EXPECT_EQ(out->result.rejected[1].reason, "payload is not a JSON object (found integer)");
  EXPECT_EQ(out->result.rejected[2].reason, "payload is not a JSON object (found null)");
  EXPECT_EQ(out->result.rejected[3].reason, "payload is not a JSON object (found bool)");
}

TEST(ArrowExportDeclared, TombstoneIsNullWhenEveryColumnIsNullable) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.tombstone();
  auto out = run_export(batch, declared({{"a", ColumnType::Utf8}}));
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_TRUE(out->view().column("a").is_null(0));
}

TEST(ArrowExportDeclared, SchemaErrorsFailTheWholeBatch) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload("{}");
  auto twice = run_export(batch, declared({{"a", ColumnType::Utf8}, {"a", ColumnType::Int64}}));
  EXPECT_FALSE(twice->result.ok);
  EXPECT_EQ(twice->result.error, "column 'a' is declared twice");

  auto collides = run_export(batch, declared({{"pico_key", ColumnType::Utf8}}, true));
  EXPECT_EQ(collides->result.error, "declared column 'pico_key' collides with a metadata column");
  EXPECT_TRUE(run_export(batch, declared({{"pico_key", ColumnType::Utf8}}, false))->result.ok);

  auto unnamed = run_export(batch, declared({{"", ColumnType::Utf8}}));
  EXPECT_FALSE(unnamed->result.error.empty());

  TestBatch text(PMQ_PAYLOAD_TEXT);
  text.payload("x");
  auto not_json = run_export(text, declared({{"a", ColumnType::Utf8}}));
  EXPECT_EQ(not_json->result.error, "a declared schema applies to JSON batches only");
}

// Validated payloads are read in one On-Demand pass: the same columns, values and rejections as
// the validating reader, for every declared type and every conversion rule.
TEST(ArrowExportDeclared, ValidatedPayloadsInOnePassGiveExactlyWhatTheValidatingReaderGives) {
  const std::vector<std::string> payloads = {
      R"({"b": true, "i": 42, "f": 1.5, "s": "x\u00e9\"", "z": "bytes", "t": 1700000000123, "j": {"a" : [1, 2.50]}})",
      R"({ "i" : 3.0 , "f" : 7 , "j" : "text" , "extra" : [1] })",
      R"({"i": 2.5, "f": "no", "b": 1, "s": 5, "t": 1.5})",                              // rejections of each kind
      R"({"i": 1e30, "f": 18446744073709551615, "j": 123456789012345678901234567890})",  // beyond int64 / double
      R"({"i": null, "b": false, "s": ""})",
      R"([1])",
  };
  const std::vector<DeclaredColumn> columns = {
      {"b", ColumnType::Bool},   {"i", ColumnType::Int64},       {"f", ColumnType::Float64}, {"s", ColumnType::Utf8},
      {"z", ColumnType::Binary}, {"t", ColumnType::TimestampMs}, {"j", ColumnType::Json}};
  TestBatch batch(PMQ_PAYLOAD_JSON);
  for (const auto& p : payloads) batch.payload(p);
  ExportOptions validated = declared(columns);
  validated.payloads_validated = true;
  auto a = run_export(batch, declared(columns));
  auto b = run_export(batch, validated);
  ASSERT_FALSE(a->result.ok);
  ASSERT_EQ(a->result.rejected.size(), b->result.rejected.size());
  for (size_t k = 0; k < a->result.rejected.size(); ++k) {
    EXPECT_EQ(a->result.rejected[k].record_index, b->result.rejected[k].record_index);
    EXPECT_EQ(a->result.rejected[k].reason, b->result.rejected[k].reason);
  }
  // Without the records refused, both exports succeed with the same cells.
  TestBatch good(PMQ_PAYLOAD_JSON);
  good.payload(payloads[0]).payload(payloads[1]).payload(payloads[4]);
  auto c = run_export(good, declared(columns));
  auto d = run_export(good, validated);
  ASSERT_TRUE(c->result.ok) << c->result.error;
  ASSERT_TRUE(d->result.ok) << d->result.error;
  const auto vc = c->view(), vd = d->view();
  for (size_t row = 0; row < 3; ++row) {
    for (const char* name : {"b", "i", "f", "s", "z", "t", "j"}) {
      EXPECT_EQ(vc.column(name).is_null(row), vd.column(name).is_null(row)) << name << " row " << row;
    }
    if (!vc.column("j").is_null(row)) EXPECT_EQ(vc.column("j").as_string(row), vd.column("j").as_string(row)) << row;
    if (!vc.column("i").is_null(row)) EXPECT_EQ(vc.column("i").as_int64(row), vd.column("i").as_int64(row)) << row;
    if (!vc.column("f").is_null(row)) EXPECT_EQ(vc.column("f").as_double(row), vd.column("f").as_double(row)) << row;
    if (!vc.column("s").is_null(row)) EXPECT_EQ(vc.column("s").as_string(row), vd.column("s").as_string(row)) << row;
  }
  EXPECT_EQ(vd.column("j").as_string(0), R"({"a" : [1, 2.50]})") << "the original text";
  EXPECT_EQ(vd.column("j").as_string(1), R"("text")");
  EXPECT_EQ(vd.column("i").as_int64(1), 3) << "an integral double";
}

}  // namespace
}  // namespace picomq::arrow::testing
