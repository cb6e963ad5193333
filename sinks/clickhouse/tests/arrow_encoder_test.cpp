// The ClickHouse sink's inserts from the Arrow plane (clickhouse/arrow_encoder.h) against its
// inserts from the batches plane: the same records, exported by the runtime's Arrow exporter,
// must give the same Native block (byte for byte) and the same rejections as the RowBinary
// encoder's rows made into a block. No server (the golden and sink tests send them to one).
#include "clickhouse/arrow_encoder.h"

#include <gtest/gtest.h>

#include <cstring>

#include "clickhouse/native.h"
#include "clickhouse/row_binary.h"
#include "clickhouse/schema.h"
#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/inference_cases.hpp"

namespace ch = picomq::clickhouse;
namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;

namespace {

ch::Type type(const std::string& name) {
  auto t = ch::parse_type(name);
  EXPECT_TRUE(t) << name << ": " << t.error();
  return t.value();
}

ch::Column column(const std::string& name, const std::string& t) {
  return {name, type(t), ch::metadata_source(name), ch::metadata_source(name) == ch::Source::Field ? name : ""};
}

// One batch exported as the runtime exports it for an Arrow-plane sink.
struct Exported {
  explicit Exported(const TestBatch& batch) {
    picomq::arrow::ExportOptions options;
    options.payloads_validated = true;
    result = picomq::arrow::export_batch(batch.raw(), options, &schema, &array);
    for (size_t i = 0; i < batch.size(); ++i) offsets.push_back(pmq_batch_record(&batch.raw(), i)->offset);
    input.schema = &schema;
    input.array = &array;
    input.topic = batch.raw().topic;
    input.partition = batch.raw().partition;
    input.payload_format = batch.raw().payload_format;
    input.schema_name = batch.raw().schema;
    input.offsets = offsets.data();
    input.rows = batch.size();
  }
  ~Exported() {
    if (schema.release) schema.release(&schema);
    if (array.release) array.release(&array);
  }
  picomq::arrow::ExportResult result;
  ArrowSchema schema{};
  ArrowArray array{};
  std::vector<int64_t> offsets;
  ch::ArrowInput input;
};

std::string rejections(const std::vector<ch::Rejection>& r) {
  std::string out;
  for (const auto& x : r) out += std::to_string(x.record_index) + ": " + x.reason + "\n";
  return out;
}

// The batches plane's Native block of `batch`: RowBinary rows, then made into one block.
std::string via_row_binary(const std::vector<ch::Column>& columns, const TestBatch& batch, std::string* rejected) {
  ch::RowBinaryEncoder encoder(columns);
  ch::Encoded e = encoder.encode(batch.raw());
  EXPECT_TRUE(e.ok()) << e.error;
  *rejected = rejections(e.rejected);
  auto block = ch::native_block(columns, e.data, e.rows.size());
  EXPECT_TRUE(block) << block.error();
  return block ? block.value() : "";
}

std::vector<ch::Column> metadata_columns() {
  return {column("pico_topic", "String"),    column("pico_partition", "Int32"),      column("pico_offset", "Int64"),
          column("pico_timestamp", "Int64"), column("pico_key", "Nullable(String)"), column("pico_headers", "String")};
}

void expect_same_as_row_binary(const std::vector<ch::Column>& columns, const TestBatch& batch) {
  std::string rb_rejected;
  const std::string expected = via_row_binary(columns, batch, &rb_rejected);
  Exported exported(batch);
  ASSERT_TRUE(exported.result.ok) << exported.result.error;
  ch::ArrowEncoder encoder(columns, true);
  ch::ArrowEncoded got = encoder.encode(exported.input);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(rejections(got.rejected), rb_rejected);
  std::string block = got.data;
  if (!got.native) {  // batches encoded as records: RowBinary rows, made into a block by the segment
    auto b = ch::native_block(columns, got.data, got.rows.size());
    ASSERT_TRUE(b) << b.error();
    block = b.value();
  }
  EXPECT_EQ(block, expected) << "the Arrow plane's block differs from the batches plane's";
}

}  // namespace

TEST(ClickHouseArrow, EveryTypeFromArrowColumnsIsTheBlockOfTheBatchesPlane) {
  std::vector<ch::Column> columns = metadata_columns();
  for (auto [name, t] : std::vector<std::pair<std::string, std::string>>{{"s", "String"},
                                                                         {"ns", "Nullable(String)"},
                                                                         {"i", "Int64"},
                                                                         {"ni", "Nullable(Int64)"},
                                                                         {"i8", "Int8"},
                                                                         {"u32", "UInt32"},
                                                                         {"u64", "UInt64"},
                                                                         {"f", "Float64"},
                                                                         {"nf", "Nullable(Float64)"},
                                                                         {"f32", "Float32"},
                                                                         {"b", "UInt8"},
                                                                         {"nb", "Nullable(UInt8)"},
                                                                         {"d", "Date"},
                                                                         {"ts", "DateTime"},
                                                                         {"ts3", "DateTime64(3)"},
                                                                         {"u", "UUID"},
                                                                         {"fs", "FixedString(3)"},
                                                                         {"a", "Array(Int32)"},
                                                                         {"as", "Array(Nullable(String))"},
                                                                         {"nested", "String"},
                                                                         {"absent", "Nullable(Int64)"},
                                                                         {"absent2", "String"}})
    columns.push_back(column(name, t));
  std::vector<TestRecord> records;
  // The first payload is one literal over three lines.
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
  const std::vector<std::string> payloads = {
      R"({"s":"é\t\"x\"","ns":"n","i":-5,"ni":7,"i8":-128,"u32":4000000000,"u64":9000000000000000000,"f":0.1,"nf":2.5,)"
      R"("f32":1.5,"b":true,"nb":false,"d":"2026-12-01","ts":"2026-12-01T15:04:05+01:00","ts3":"2026-12-01T15:04:05.123Z",)"
      R"("u":"aabbccdd-eeff-0011-2233-445566778899","fs":"ab","a":[1,-2,2147483647],"as":["x",null],"nested":{"k":[1,{"z":null}]}})",
      R"({"s":"only s","ns":null})",
      R"({"i":"not a number","s":"refused by i"})",
      R"({"i8":300})",
      R"({"u32":-1,"i8":1})",
      R"({"ts":"yesterday"})",
      R"({"a":[1,"x"]})",
      R"({"nested":[1,2],"f":3,"b":1})",
      R"({"fs":"abcd"})",
      R"({"s":5})",
      R"({"extra":"not a column","i":9})"};
  // NOLINTEND(bugprone-suspicious-missing-comma)
  for (size_t i = 0; i < payloads.size(); ++i)
    records.push_back({.offset = static_cast<int64_t>(100 + i),
                       .payload = payloads[i],
                       .key = i % 2 ? std::optional<std::string>("k" + std::to_string(i)) : std::nullopt,
                       .headers = {{"h", "v" + std::to_string(i)}}});
  records.push_back({.offset = 200, .payload = std::nullopt});  // a tombstone: defaults and NULLs
  expect_same_as_row_binary(columns, TestBatch("shop.orders", 3, records));
}

TEST(ClickHouseArrow, BatchesOfWholePayloadsAreEncodedAsRecordsExactlyAsTheBatchesPlane) {
  std::vector<ch::Column> columns = metadata_columns();
  columns.push_back(column("n", "Nullable(Int64)"));
  // One payload is not an object: the exporter gives one `payload` column of whole payloads.
  const TestBatch batch =
      TestBatch::json("t", 0, 0, {R"({"n":1})", R"([1,2])", R"({"n":"x"})", R"("text")", R"({"n":4})"});
  expect_same_as_row_binary(columns, batch);
  Exported exported(batch);
  ch::ArrowEncoder encoder(columns, true);
  const ch::ArrowEncoded e = encoder.encode(exported.input);
  ASSERT_EQ(e.rejected.size(), 3u);
  EXPECT_EQ(e.rejected[0].reason, "payload is not a JSON object (payload_mode 'columns' writes its fields)");
  EXPECT_EQ(e.rejected[1].reason, "field 'n': expected Int64, found string");
}

TEST(ClickHouseArrow, TextPayloadsInColumnsModeAreRefusedAsOnTheBatchesPlane) {
  const TestBatch batch("logs", 0, {{.offset = 0, .payload = "a line"}}, PMQ_PAYLOAD_TEXT, "text");
  Exported exported(batch);
  ch::ArrowEncoder encoder({column("n", "Int64")}, true);
  const ch::ArrowEncoded e = encoder.encode(exported.input);
  EXPECT_EQ(e.error, "payload_mode 'columns' needs JSON payloads (the topic's schema is 'text')");
}

TEST(ClickHouseArrow, APartOfABatchIsTheBlockOfThoseRows) {
  std::vector<ch::Column> columns = metadata_columns();
  columns.push_back(column("n", "Nullable(Int64)"));
  columns.push_back(column("s", "String"));
  columns.push_back(column("d", "DateTime"));
  std::vector<std::string> payloads;
  payloads.reserve(10);
  for (int i = 0; i < 10; ++i)
    payloads.push_back(R"({"n":)" + std::to_string(i) + R"(,"s":"r)" + std::to_string(i) + R"(","d":)" +
                       std::to_string(1700000000 + i) + "}");
  const TestBatch all = TestBatch::json("t", 1, 50, payloads);
  Exported exported(all);
  ch::ArrowEncoder encoder(columns, true);
  const std::vector<uint32_t> rows = {2, 3, 7};
  const std::string part = encoder.native_block(exported.input, rows);
  std::vector<TestRecord> picked;
  picked.reserve(rows.size());
  for (uint32_t r : rows) picked.push_back({.offset = 50 + r, .payload = payloads[r]});
  std::string rejected;
  EXPECT_EQ(part, via_row_binary(columns, TestBatch("t", 1, picked), &rejected));
}

TEST(ClickHouseArrow, LowCardinalityTablesGetTheRowBinaryRowsOfTheBatchesPlane) {
  std::vector<ch::Column> columns = {column("pico_offset", "Int64"), column("c", "LowCardinality(String)"),
                                     column("n", "Int64")};
  const TestBatch batch = TestBatch::json("t", 0, 0, {R"({"c":"eu","n":1})", R"({"c":"us","n":"x"})", R"({"n":3})"});
  ch::RowBinaryEncoder rb(columns);
  const ch::Encoded expected = rb.encode(batch.raw());
  Exported exported(batch);
  ch::ArrowEncoder encoder(columns, true);
  EXPECT_FALSE(encoder.native()) << "LowCardinality is a dictionary in Native";
  const ch::ArrowEncoded got = encoder.encode(exported.input);
  EXPECT_FALSE(got.native);
  EXPECT_EQ(got.data, expected.data);
  ASSERT_EQ(got.rows.size(), expected.rows.size());
  for (size_t i = 0; i < got.rows.size(); ++i) {
    EXPECT_EQ(got.rows[i].end, expected.rows[i].end);
    EXPECT_EQ(got.rows[i].record_index, expected.rows[i].record_index);
  }
  EXPECT_EQ(rejections(got.rejected), rejections(expected.rejected));
}

TEST(ClickHouseArrow, WhatTheArrowColumnsCannotTellApartIsDocumented) {
  // A field with integers and floats is one float64 column: its integral values go into an
  // integer column (5.0 too, which the batches plane refuses), its fractions are refused.
  std::vector<ch::Column> columns = {column("pico_offset", "Int64"), column("n", "Int64"), column("j", "String")};
  const TestBatch batch =
      TestBatch::json("t", 0, 0, {R"({"n":5,"j":{"a": [1, 2.50]}})", R"({"n":5.0})", R"({"n":2.5})"});
  Exported exported(batch);
  ch::ArrowEncoder encoder(columns, true);
  const ch::ArrowEncoded e = encoder.encode(exported.input);
  ASSERT_EQ(e.rejected.size(), 1u);
  EXPECT_EQ(e.rejected[0].record_index, 2u);
  EXPECT_EQ(e.rejected[0].reason, "field 'n': expected Int64, found floating-point number with a fractional part");
  // Nested values: their text without whitespace, numbers as sent (the batches plane re-serialises: 2.5).
  std::string rows_binary;
  ch::append_integer(type("Int64"), 0, rows_binary);
  ch::append_integer(type("Int64"), 5, rows_binary);
  ch::append_string(type("String"), R"({"a":[1,2.50]})", rows_binary);
  ch::append_integer(type("Int64"), 1, rows_binary);
  ch::append_integer(type("Int64"), 5, rows_binary);
  ch::append_string(type("String"), "", rows_binary);
  auto expected = ch::native_block(columns, rows_binary, 2);
  ASSERT_TRUE(expected);
  EXPECT_EQ(e.data, expected.value());
}

// Both planes give the kit's lattice the same columns (kit/inferred_type.hpp), and write every
// record of the shared cases: a String column inferred from conflicting kinds takes them all.
TEST(ClickHouseArrow, BothPlanesInferAsTheKitsLatticeAndWriteEveryRecordOfTheSharedCases) {
  const TestBatch batch = TestBatch::json("t", 0, 0, picomq::kit::testing::inference_payloads());
  Exported exported(batch);
  const ch::Inferred arrow_plane = ch::infer_arrow_columns(exported.input, {24, 8});
  const ch::Inferred batches_plane = ch::infer_columns(TestBatch(batch).raw(), {24, 8});
  std::vector<std::string> want, arrow, rows;
  for (const auto& [field, type] : picomq::kit::testing::inference_fields())
    want.push_back(field + " " + ch::column_type(type, {24, 8}).name());
  for (const auto& c : arrow_plane.columns) arrow.push_back(c.name + " " + c.type.name());
  for (const auto& c : batches_plane.columns) rows.push_back(c.name + " " + c.type.name());
  EXPECT_EQ(arrow, want);
  EXPECT_EQ(rows, want);
  ch::ArrowEncoder encoder(arrow_plane.columns, true);
  const ch::ArrowEncoded on_arrow = encoder.encode(exported.input);
  ASSERT_TRUE(on_arrow.ok()) << on_arrow.error;
  EXPECT_EQ(rejections(on_arrow.rejected), "");
  EXPECT_EQ(on_arrow.rows.size(), batch.raw().record_count);
  ch::RowBinaryEncoder records(batches_plane.columns);
  const ch::Encoded on_batches = records.encode(batch.raw());
  ASSERT_TRUE(on_batches.ok()) << on_batches.error;
  EXPECT_EQ(rejections(on_batches.rejected), "");
  EXPECT_EQ(on_batches.rows.size(), batch.raw().record_count);
}

TEST(ClickHouseArrow, TablesCreatedFromAnArrowBatchTakeTheExportersInference) {
  const TestBatch batch = TestBatch::json(
      "t", 0, 0, {R"({"i":1,"f":1,"s":"x","b":true,"o":{"a":1},"mixed":1,"none":null})", R"({"f":2.5,"mixed":"x"})"});
  Exported exported(batch);
  const ch::Inferred old_server = ch::infer_arrow_columns(exported.input, {18, 16});
  std::string got;
  for (const auto& c : old_server.columns) got += c.name + " " + c.type.name() + "; ";
  EXPECT_EQ(got,
            "i Nullable(Int64); f Nullable(Float64); s Nullable(String); b Nullable(UInt8); o Nullable(String); "
            "mixed Nullable(String); none Nullable(String); ");
  EXPECT_EQ(ch::infer_arrow_columns(exported.input, {24, 8}).columns[3].type.name(), "Nullable(Bool)");
}
