// Exporter: metadata columns, TEXT and RAW batches, and JSON inference.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "picomq/kit/testing/inference_cases.hpp"
#include "test_batch.h"

namespace picomq::arrow::testing {
namespace {

std::string_view bytes_text(const sdk::ByteView& bytes) { return bytes.as_string_view(); }

// ---- metadata columns -------------------------------------------------------------------------

TEST(ArrowExportMetadata, ColumnsComeFirstWithTheirArrowTypes) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("hello");
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->schema.format, "+s");
  EXPECT_EQ(out->names(), (std::vector<std::string>{"pico_topic", "pico_partition", "pico_offset", "pico_timestamp",
                                                    "pico_key", "pico_headers", "payload"}));
  struct Expected {
    const char* name;
    const char* format;
    bool nullable;
  };
  for (const Expected& e : {Expected{"pico_topic", "u", false}, Expected{"pico_partition", "i", false},
                            Expected{"pico_offset", "l", false}, Expected{"pico_timestamp", "tsm:UTC", true},
                            Expected{"pico_key", "z", true}, Expected{"pico_headers", "+m", false}}) {
    const ArrowSchema& field = out->field(e.name);
    EXPECT_STREQ(field.format, e.format) << e.name;
    EXPECT_EQ((field.flags & ARROW_FLAG_NULLABLE) != 0, e.nullable) << e.name;
  }
}

TEST(ArrowExportMetadata, ValuesAndNulls) {
  TestBatch batch(PMQ_PAYLOAD_TEXT, "shop.orders", 7);
  batch.add({"a", std::string("k1"), {}, 1700000000123, 42});
  batch.add({"b", std::nullopt, {}, -1, 43});             // no key, no timestamp
  batch.add({"c", std::string("\0\xff", 2), {}, 0, 44});  // binary key; epoch 0 is a time
  batch.add({"d", std::string(), {}, -5, 45});            // empty key is not absent
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto view = out->view();
  ASSERT_EQ(view.num_rows(), 4u);
  for (size_t row = 0; row < 4; ++row) {
    EXPECT_EQ(view.column("pico_topic").as_string(row), "shop.orders");
    EXPECT_EQ(view.column("pico_partition").as_int32(row), 7);
    EXPECT_EQ(view.column("pico_offset").as_int64(row), 42 + static_cast<int64_t>(row));
  }
  const auto ts = view.column("pico_timestamp");
  EXPECT_EQ(ts.as_timestamp_ms(0), 1700000000123);
  EXPECT_TRUE(ts.is_null(1));
  EXPECT_FALSE(ts.is_null(2));
  EXPECT_EQ(ts.as_timestamp_ms(2), 0);
  EXPECT_EQ(ts.as_timestamp_ms(3), -5) << "only -1 means 'no timestamp'";
  EXPECT_EQ(ts.timezone(), "UTC");
  EXPECT_EQ(out->array.children[3]->null_count, 1);

  const auto key = view.column("pico_key");
  EXPECT_EQ(bytes_text(key.as_bytes(0)), "k1");
  EXPECT_TRUE(key.is_null(1));
  EXPECT_EQ(bytes_text(key.as_bytes(2)), std::string_view("\0\xff", 2));
  EXPECT_FALSE(key.is_null(3));
  EXPECT_EQ(key.as_bytes(3).size, 0u);
}

TEST(ArrowExportMetadata, HeadersKeepOrderDuplicatesNullsAndBinaryValues) {
  TestBatch batch(PMQ_PAYLOAD_RAW);
  batch.add(
      {"x",
       std::nullopt,
       {{"trace", "t1"}, {"dup", "1"}, {"dup", "2"}, {"gone", std::nullopt}, {"bin", std::string("\x00\x80", 2)}}});
  batch.add({"y"});  // no headers
  batch.add({"z", std::nullopt, {{"dup", ""}}});
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;

  const ArrowSchema& field = out->field("pico_headers");
  ASSERT_EQ(field.n_children, 1);
  const ArrowSchema& entries = *field.children[0];
  EXPECT_STREQ(entries.format, "+s");
  EXPECT_EQ(entries.flags & ARROW_FLAG_NULLABLE, 0);
  ASSERT_EQ(entries.n_children, 2);
  EXPECT_STREQ(entries.children[0]->format, "u");
  EXPECT_STREQ(entries.children[0]->name, "key");
  EXPECT_EQ(entries.children[0]->flags & ARROW_FLAG_NULLABLE, 0);
  EXPECT_STREQ(entries.children[1]->format, "z");
  EXPECT_STREQ(entries.children[1]->name, "value");
  EXPECT_EQ(entries.children[1]->flags & ARROW_FLAG_NULLABLE, ARROW_FLAG_NULLABLE);

  const auto headers = out->view().column("pico_headers");
  const auto first = headers.entries(0);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first[0].first, "trace");
  EXPECT_EQ(bytes_text(*first[0].second), "t1");
  EXPECT_EQ(first[1].first, "dup");
  EXPECT_EQ(bytes_text(*first[1].second), "1");
  EXPECT_EQ(first[2].first, "dup");
  EXPECT_EQ(bytes_text(*first[2].second), "2");
  EXPECT_EQ(first[3].first, "gone");
  EXPECT_FALSE(first[3].second.has_value());
  EXPECT_EQ(bytes_text(*first[4].second), std::string_view("\x00\x80", 2));

  EXPECT_FALSE(headers.is_null(1)) << "no headers is an empty map, not null";
  EXPECT_TRUE(headers.entries(1).empty());
  const auto third = headers.entries(2);
  ASSERT_EQ(third.size(), 1u);
  ASSERT_TRUE(third[0].second.has_value()) << "an empty value is not a null value";
  EXPECT_EQ(third[0].second->size, 0u);
  EXPECT_EQ(out->array.children[5]->null_count, 0);
}

TEST(ArrowExportMetadata, HeaderNameThatIsNotUtf8RejectsTheRecord) {
  TestBatch batch(PMQ_PAYLOAD_RAW);
  batch.add({"ok", std::nullopt, {{"fine", "v"}}});
  batch.add({"bad", std::nullopt, {{"fine", "v"}, {"\xc3\x28", "v"}}});
  auto out = run_export(batch);
  EXPECT_FALSE(out->result.ok);
  ASSERT_EQ(out->result.rejected.size(), 1u);
  EXPECT_EQ(out->result.rejected[0].record_index, 1u);
  EXPECT_EQ(out->result.rejected[0].reason, "header 1 has a name that is not valid UTF-8");
  EXPECT_EQ(out->schema.release, nullptr);
  EXPECT_EQ(out->array.release, nullptr);
  // Without metadata the headers are not exported, so they cannot be wrong.
  EXPECT_TRUE(run_export(batch, without_metadata())->result.ok);
}

TEST(ArrowExportMetadata, LeftOutOnRequest) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("hello");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names(), std::vector<std::string>{"payload"});
}

TEST(ArrowExportMetadata, RecordStrideIsHonoured) {
  TestBatch batch(PMQ_PAYLOAD_TEXT, "t", 0, sizeof(pmq_record) + 24);  // a newer host's larger records
  batch.add({"one", std::nullopt, {}, -1, 10})
      .add({"two", std::nullopt, {}, -1, 11})
      .add({"three", std::nullopt, {}, -1, 12});
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto view = out->view();
  EXPECT_EQ(view.column("payload").as_string(2), "three");
  EXPECT_EQ(view.column("pico_offset").as_int64(2), 12);
}

// ---- TEXT and RAW ------------------------------------------------------------------------------

TEST(ArrowExportBytes, TextBatchIsOneUtf8PayloadColumnWithTombstonesNull) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("héllo").tombstone().payload("");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const ArrowSchema& field = out->field("payload");
  EXPECT_STREQ(field.format, "u");
  EXPECT_EQ(field.flags & ARROW_FLAG_NULLABLE, ARROW_FLAG_NULLABLE);
  EXPECT_FALSE(has_json_extension(field));
  const auto payload = out->view().column("payload");
  EXPECT_EQ(payload.as_string(0), "héllo");
  EXPECT_TRUE(payload.is_null(1));
  EXPECT_FALSE(payload.is_null(2));
  EXPECT_EQ(payload.as_string(2), "");
  EXPECT_EQ(out->array.children[0]->null_count, 1);
}

TEST(ArrowExportBytes, RawBatchIsOneBinaryPayloadColumn) {
  TestBatch batch(PMQ_PAYLOAD_RAW);
  batch.payload(std::string("\x00\x01\xfe\xff", 4)).tombstone();
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("payload").format, "z");
  const auto payload = out->view().column("payload");
  EXPECT_EQ(bytes_text(payload.as_bytes(0)), std::string_view("\x00\x01\xfe\xff", 4));
  EXPECT_TRUE(payload.is_null(1));
}

TEST(ArrowExportBytes, TextThatIsNotUtf8IsRejected) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("fine").payload("\xff").payload("\xe2\x82");
  auto out = run_export(batch, without_metadata());
  EXPECT_FALSE(out->result.ok);
  ASSERT_EQ(out->result.rejected.size(), 2u);
  EXPECT_EQ(out->result.rejected[0].record_index, 1u);
  EXPECT_EQ(out->result.rejected[0].reason, "payload is not valid UTF-8");
  EXPECT_EQ(out->result.rejected[1].record_index, 2u);
}

TEST(ArrowExportBytes, NoValidityBitmapWithoutNulls) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("a").payload("b");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok);
  EXPECT_EQ(out->array.children[0]->null_count, 0);
  EXPECT_EQ(out->array.children[0]->buffers[0], nullptr);
  EXPECT_NE(out->array.children[0]->buffers[1], nullptr);
  EXPECT_NE(out->array.children[0]->buffers[2], nullptr);
}

// ---- JSON inference ----------------------------------------------------------------------------

TEST(ArrowExportInfer, BooleansMakeABoolColumn) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"ok":true})").payload(R"({"ok":false})").payload(R"({"ok":null})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("ok").format, "b");
  const auto ok = out->view().column("ok");
  EXPECT_TRUE(ok.as_bool(0));
  EXPECT_FALSE(ok.as_bool(1));
  EXPECT_TRUE(ok.is_null(2));
}

TEST(ArrowExportInfer, IntegersMakeAnInt64Column) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"n":-9223372036854775808})").payload(R"({"n":9223372036854775807})").payload(R"({"n":0})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("n").format, "l");
  const auto n = out->view().column("n");
  EXPECT_EQ(n.as_int64(0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(n.as_int64(1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(n.as_int64(2), 0);
}

TEST(ArrowExportInfer, IntegersNextToFloatsWidenToFloat64) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"x":1})").payload(R"({"x":2.5})").payload(R"({"x":-3})").payload(R"({"x":1e2})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("x").format, "g");
  const auto x = out->view().column("x");
  EXPECT_DOUBLE_EQ(x.as_double(0), 1.0);
  EXPECT_DOUBLE_EQ(x.as_double(1), 2.5);
  EXPECT_DOUBLE_EQ(x.as_double(2), -3.0);
  EXPECT_DOUBLE_EQ(x.as_double(3), 100.0);
}

TEST(ArrowExportInfer, StringsMakeAUtf8ColumnWithEscapesDecoded) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"s":"a\"b\u00e9\n"})").payload(R"({"s":""})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("s").format, "u");
  EXPECT_FALSE(has_json_extension(out->field("s")));
  EXPECT_EQ(out->view().column("s").as_string(0), "a\"b\xc3\xa9\n");
  EXPECT_EQ(out->view().column("s").as_string(1), "");
}

TEST(ArrowExportInfer, NestedValuesMakeAJsonColumnOfTheirOriginalText) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"obj":{"a": [1, 2.50]},"arr":[true]})")
      .payload(R"({"obj":{},"arr":[]})")
      .payload(R"({"obj":null})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  for (const char* name : {"obj", "arr"}) {
    EXPECT_STREQ(out->field(name).format, "u") << name;
    EXPECT_TRUE(has_json_extension(out->field(name))) << name;
  }
  const auto view = out->view();
  EXPECT_TRUE(view.column("obj").is_json());
  EXPECT_EQ(view.column("obj").as_string(0), R"({"a": [1, 2.50]})") << "the payload's own text, spacing included";
  EXPECT_EQ(view.column("obj").as_string(1), "{}");
  EXPECT_TRUE(view.column("obj").is_null(2));
  EXPECT_EQ(view.column("arr").as_string(0), "[true]");
  EXPECT_TRUE(view.column("arr").is_null(2)) << "absent";
}

TEST(ArrowExportInfer, ConflictingKindsMakeAJsonColumnOfEachValuesText) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"mixed":"abc","flag":true})")
      .payload(R"({"mixed":5,"flag":1})")
      .payload(R"({"mixed":null,"flag":"x"})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto view = out->view();
  const auto mixed = view.column("mixed");
  EXPECT_TRUE(mixed.is_json());
  EXPECT_EQ(mixed.as_string(0), "\"abc\"");
  EXPECT_EQ(mixed.as_string(1), "5");
  EXPECT_TRUE(mixed.is_null(2)) << "JSON null stays null, not the text null";
  const auto flag = view.column("flag");
  EXPECT_TRUE(flag.is_json());
  EXPECT_EQ(flag.as_string(0), "true");
  EXPECT_EQ(flag.as_string(1), "1");
  EXPECT_EQ(flag.as_string(2), "\"x\"");
}

TEST(ArrowExportInfer, NestedNextToScalarsIsJson) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"v":"s"})").payload(R"({"v":["s"]})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok);
  EXPECT_EQ(out->view().column("v").as_string(0), "\"s\"");
  EXPECT_EQ(out->view().column("v").as_string(1), "[\"s\"]");
}

TEST(ArrowExportInfer, FieldNullEverywhereIsTheNullType) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":1,"nothing":null})").payload(R"({"a":2})").tombstone();
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const ArrowSchema& field = out->field("nothing");
  EXPECT_STREQ(field.format, "n");
  EXPECT_EQ(field.flags & ARROW_FLAG_NULLABLE, ARROW_FLAG_NULLABLE);
  const ArrowArray& array = *out->array.children[1];
  EXPECT_EQ(array.length, 3);
  EXPECT_EQ(array.null_count, 3);
  EXPECT_EQ(array.n_buffers, 0) << "the null type has no buffers";
  EXPECT_EQ(out->view().column("nothing").type(), sdk::ColumnType::Null);
  EXPECT_TRUE(out->view().column("nothing").is_null(0));
}

TEST(ArrowExportInfer, ColumnsInOrderOfFirstAppearanceAcrossTheBatch) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"b":1,"a":1})").payload(R"({"c":1,"a":2,"d":1})").payload(R"({"d":2,"e":1,"b":3})");
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto names = out->names();
  EXPECT_EQ(std::vector<std::string>(names.begin() + 6, names.end()),
            (std::vector<std::string>{"b", "a", "c", "d", "e"}));
}

TEST(ArrowExportInfer, LastDuplicateKeyWins) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"k":"first","other":1,"k":7})").payload(R"({"k":8})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names(), (std::vector<std::string>{"k", "other"})) << "first appearance still fixes the order";
  EXPECT_STREQ(out->field("k").format, "l") << "the overridden string does not count for inference";
  EXPECT_EQ(out->view().column("k").as_int64(0), 7);
}

TEST(ArrowExportInfer, AbsentFieldsAndTombstonesAreNull) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":1})").tombstone().payload(R"({"b":"x"})").payload("{}");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto view = out->view();
  ASSERT_EQ(view.num_rows(), 4u);
  const auto a = view.column("a");
  const auto b = view.column("b");
  EXPECT_EQ(a.as_int64(0), 1);
  EXPECT_TRUE(b.is_null(0));
  EXPECT_TRUE(a.is_null(1));
  EXPECT_TRUE(b.is_null(1));
  EXPECT_TRUE(a.is_null(2));
  EXPECT_EQ(b.as_string(2), "x");
  EXPECT_TRUE(a.is_null(3));
  EXPECT_TRUE(b.is_null(3));
}

TEST(ArrowExportInfer, NonObjectPayloadsMakeOneJsonPayloadColumn) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":1})").payload("[1, 2]").tombstone().payload("\"text\"").payload(" 42 ");
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names().back(), "payload");
  EXPECT_EQ(out->names().size(), 7u);
  const ArrowSchema& field = out->field("payload");
  EXPECT_STREQ(field.format, "u");
  EXPECT_TRUE(has_json_extension(field));
  const auto payload = out->view().column("payload");
  EXPECT_EQ(payload.as_string(0), R"({"a":1})");
  EXPECT_EQ(payload.as_string(1), "[1, 2]");
  EXPECT_TRUE(payload.is_null(2));
  EXPECT_EQ(payload.as_string(3), "\"text\"");
  EXPECT_EQ(payload.as_string(4), " 42 ") << "payloads exactly as received";
}

TEST(ArrowExportInfer, IntegersAboveInt64MaxMakeAJsonColumn) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"u":18446744073709551615,"i":1})").payload(R"({"u":1,"i":2})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_TRUE(has_json_extension(out->field("u")));
  EXPECT_STREQ(out->field("i").format, "l");
  EXPECT_EQ(out->view().column("u").as_string(0), "18446744073709551615");
  EXPECT_EQ(out->view().column("u").as_string(1), "1");
}

TEST(ArrowExportInfer, NumbersSimdjsonCannotParseMakeAJsonColumnOfTheirText) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"big":123456789012345678901234567890,"name":"a","n":1,"deep":{"x":-99999999999999999999}})")
      .payload(R"({"big":1e400,"name":"b","n":2.5,"deep":null})")
      .payload(R"({"big":3,"name":"c\u00e9","n":3})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const auto view = out->view();
  EXPECT_TRUE(view.column("big").is_json());
  EXPECT_EQ(view.column("big").as_string(0), "123456789012345678901234567890");
  EXPECT_EQ(view.column("big").as_string(1), "1e400");
  EXPECT_EQ(view.column("big").as_string(2), "3");
  EXPECT_STREQ(out->field("name").format, "u") << "the other fields of such a record keep their types";
  EXPECT_EQ(view.column("name").as_string(0), "a");
  EXPECT_EQ(view.column("name").as_string(2), "c\xc3\xa9");
  EXPECT_STREQ(out->field("n").format, "g");
  EXPECT_DOUBLE_EQ(view.column("n").as_double(1), 2.5);
  EXPECT_TRUE(view.column("deep").is_json());
  EXPECT_EQ(view.column("deep").as_string(0), R"({"x":-99999999999999999999})");
}

TEST(ArrowExportInfer, BigNumberOutsideAnObjectGoesToThePayloadColumn) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload("123456789012345678901234567890").payload(R"({"a":1})");
  auto out = run_export(batch, without_metadata());
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->view().column("payload").as_string(0), "123456789012345678901234567890");
}

TEST(ArrowExportInfer, InvalidJsonIsRejectedEvenWithBigNumbersInside) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"a":1})")
      .payload(R"({"a":})")
      .payload(R"({"a":123456789012345678901234567890,})")
      .payload(R"({"a":01})");
  auto out = run_export(batch, without_metadata());
  EXPECT_FALSE(out->result.ok);
  ASSERT_EQ(out->result.rejected.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out->result.rejected[i].record_index, i + 1);
    EXPECT_EQ(out->result.rejected[i].reason.rfind("payload is not valid JSON", 0), 0u)
        << out->result.rejected[i].reason;
  }
}

TEST(ArrowExportInfer, FieldNamedLikeAMetadataColumnRejectsTheRecord) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"pico_offset":1,"a":1})")
      .payload(R"({"a":2})")
      .payload(R"({"pico_topic":"x","pico_headers":{},"pico_topic":"y"})");
  auto out = run_export(batch);
  EXPECT_FALSE(out->result.ok);
  EXPECT_TRUE(out->result.error.empty());
  ASSERT_EQ(out->result.rejected.size(), 2u) << "every rejection of the batch, not the first";
  EXPECT_EQ(out->result.rejected[0].record_index, 0u);
  EXPECT_EQ(out->result.rejected[0].reason, "field 'pico_offset' collides with a metadata column");
  EXPECT_EQ(out->result.rejected[1].record_index, 2u);
  EXPECT_EQ(out->result.rejected[1].reason,
            "field 'pico_topic' collides with a metadata column; field 'pico_headers' collides with a metadata column");
  EXPECT_EQ(out->schema.release, nullptr);

  auto plain = run_export(batch, without_metadata());
  ASSERT_TRUE(plain->result.ok) << "no metadata columns, nothing to collide with";
  EXPECT_EQ(plain->names(), (std::vector<std::string>{"pico_offset", "a", "pico_topic", "pico_headers"}));
}

TEST(ArrowExportInfer, NoCollisionWhenThePayloadIsExportedWhole) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"pico_offset":1})").payload("[]");
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->view().column("payload").as_string(0), R"({"pico_offset":1})");
}

TEST(ArrowExportInfer, AllTombstonesOrNoRecordsGiveNoPayloadColumns) {
  TestBatch tombstones(PMQ_PAYLOAD_JSON);
  tombstones.tombstone().tombstone();
  auto out = run_export(tombstones);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_EQ(out->names().size(), 6u);
  EXPECT_EQ(out->array.length, 2);

  TestBatch empty(PMQ_PAYLOAD_JSON);
  auto none = run_export(empty);
  ASSERT_TRUE(none->result.ok) << none->result.error;
  EXPECT_EQ(none->array.length, 0);
  EXPECT_EQ(none->view().column("pico_offset").size(), 0u);
}

TEST(ArrowExportBatch, MalformedBatchesAreErrors) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload("{}");
  pmq_batch copy = batch.get();
  ArrowSchema schema;
  ArrowArray array;

  copy.payload_format = 9;
  ExportResult result = export_batch(copy, {}, &schema, &array);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "unknown payload format 9");
  EXPECT_EQ(schema.release, nullptr);
  EXPECT_EQ(array.release, nullptr);

  copy = batch.get();
  copy.record_size = 8;
  EXPECT_NE(export_batch(copy, {}, &schema, &array).error.find("record_size"), std::string::npos);
  copy = batch.get();
  copy.topic = nullptr;
  EXPECT_EQ(export_batch(copy, {}, &schema, &array).error, "batch has no topic");
  copy = batch.get();
  copy.struct_size = 8;
  EXPECT_FALSE(export_batch(copy, {}, &schema, &array).error.empty());
  EXPECT_FALSE(export_batch(batch.get(), {}, nullptr, &array).error.empty());
}

TEST(ArrowExportTypes, NamesRoundTrip) {
  for (auto type : {ColumnType::Bool, ColumnType::Int64, ColumnType::Float64, ColumnType::Utf8, ColumnType::Binary,
                    ColumnType::TimestampMs, ColumnType::Json}) {
    EXPECT_EQ(parse_column_type(to_string(type)), type);
  }
  EXPECT_EQ(to_string(ColumnType::TimestampMs), "timestamp_ms");
  EXPECT_EQ(to_string(ColumnType::Float64), "float64");
  EXPECT_EQ(parse_column_type("json"), ColumnType::Json);
  EXPECT_FALSE(parse_column_type("int32"));
  EXPECT_FALSE(parse_column_type("Bool"));
  EXPECT_FALSE(parse_column_type(""));
}

// ---- one-pass reading of validated payloads ----------------------------------------------------

namespace one_pass {

// A cell as text, by the column's Arrow format: what both readers must agree on.
std::string cell(const Exported& out, const std::string& name, size_t row) {
  const auto column = out.view().column(name);
  if (column.is_null(row)) return "<null>";
  const std::string_view format = out.field(name).format;
  if (format == "u") return std::string(column.as_string(row));
  if (format == "l") return std::to_string(column.as_int64(row));
  if (format == "g") {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", column.as_double(row));
    return text;
  }
  if (format == "b") return column.as_bool(row) ? "true" : "false";
  return "<format " + std::string(format) + ">";
}

void expect_same_columns(const Exported& a, const Exported& b, size_t rows, const std::string& what) {
  ASSERT_EQ(a.names(), b.names()) << what;
  for (const auto& name : a.names()) {
    EXPECT_STREQ(a.field(name).format, b.field(name).format) << what << ": " << name;
    EXPECT_EQ(a.field(name).flags, b.field(name).flags) << what << ": " << name;
    const std::string meta_a = a.field(name).metadata ? "m" : "", meta_b = b.field(name).metadata ? "m" : "";
    EXPECT_EQ(meta_a, meta_b) << what << ": " << name << ": both JSON-typed or neither";
    for (size_t row = 0; row < rows; ++row)
      EXPECT_EQ(cell(a, name, row), cell(b, name, row)) << what << ": " << name << " row " << row;
  }
}

// The same cells from the validating reader, the general reading of validated payloads and the
// one-pass columns (which may give way to the general reading: the result must not change).
void expect_same_export(const std::vector<std::optional<std::string>>& payloads) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  for (const auto& p : payloads) p ? batch.payload(*p) : batch.tombstone();
  for (const bool metadata : {true, false}) {
    ExportOptions checked;  // every payload validated by the export (DOM reader)
    checked.include_metadata = metadata;
    ExportOptions general = checked;
    general.payloads_validated = true;  // one On-Demand pass, cells kept for a second
    general.one_pass_columns = false;
    ExportOptions one_pass = general;  // columns built as they are read
    one_pass.one_pass_columns = true;
    auto a = run_export(batch, checked);
    auto b = run_export(batch, general);
    auto c = run_export(batch, one_pass);
    ASSERT_EQ(a->result.ok, b->result.ok);
    ASSERT_EQ(a->result.ok, c->result.ok);
    if (!a->result.ok) {
      ASSERT_EQ(a->result.rejected.size(), c->result.rejected.size());
      for (size_t k = 0; k < a->result.rejected.size(); ++k) {
        EXPECT_EQ(a->result.rejected[k].reason, c->result.rejected[k].reason);
        EXPECT_EQ(b->result.rejected[k].reason, c->result.rejected[k].reason);
      }
      continue;
    }
    expect_same_columns(*a, *b, payloads.size(), "general");
    expect_same_columns(*a, *c, payloads.size(), "one pass");
  }
}

}  // namespace one_pass

// The kit's lattice (kit/inferred_type.hpp) is the exporter's inference: the shared cases that
// Postgres and ClickHouse infer too, through each of the three readings.
TEST(ArrowExportInfer, AgreesWithTheKitsLatticeOnTheSharedCases) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  for (const std::string& p : picomq::kit::testing::inference_payloads()) batch.payload(p);
  const auto format_of = [](picomq::kit::InferredType type) -> std::string {
    switch (type) {
      case picomq::kit::InferredType::None: return "n";
      case picomq::kit::InferredType::Bool: return "b";
      case picomq::kit::InferredType::Int64: return "l";
      case picomq::kit::InferredType::Float64: return "g";
      case picomq::kit::InferredType::String:
      case picomq::kit::InferredType::Json: return "u";
    }
    return "?";
  };
  ExportOptions checked = without_metadata();
  ExportOptions general = checked;
  general.payloads_validated = true;
  general.one_pass_columns = false;
  ExportOptions one_pass = general;
  one_pass.one_pass_columns = true;
  for (const auto& [what, options] :
       {std::pair{"validating reader", checked}, {"general", general}, {"one pass", one_pass}}) {
    auto out = run_export(batch, options);
    ASSERT_TRUE(out->result.ok) << what << ": " << out->result.error;
    std::vector<std::string> names;
    for (const auto& [field, type] : picomq::kit::testing::inference_fields()) {
      names.push_back(field);
      EXPECT_EQ(out->field(field).format, format_of(type)) << what << ": " << field;
      EXPECT_EQ(out->view().column(field).is_json(), type == picomq::kit::InferredType::Json) << what << ": " << field;
    }
    EXPECT_EQ(out->names(), names) << what;
  }
}

TEST(ArrowExportInferOnePass, BuildsColumnsAsItReadsAndGivesWayWhereTheGeneralReadingIsNeeded) {
  using one_pass::expect_same_export;
  // Shape-stable records, fields missing and appearing late, reordered, tombstones, all-null.
  expect_same_export({R"({"a": 1, "b": "x", "c": true, "d": [1], "e": null})", std::nullopt,
                      R"({"b": "y", "a": 2, "e": null, "late": {"k": 1}})", R"({"a": -3, "c": false})", "{}",
                      std::nullopt, R"({"a": 4, "b": "", "d": {"x": [1, {"y": 2}]}, "e": null})"});
  // Integers then floats, floats then integers, in the same batch: float64.
  expect_same_export(
      {R"({"n": 1, "m": 1.5})", R"({"n": 2.25, "m": 3})", R"({"n": null, "m": -0.0})", R"({"n": 9007199254740993})"});
  // Where the one-pass columns give way: a mixed family, a duplicate key, a collision, a
  // number beyond int64, a payload that is not an object, an integer column turning into text.
  expect_same_export({R"({"v": 1})", R"({"v": "one"})"});
  expect_same_export({R"({"v": [1]})", R"({"v": 2})"});
  expect_same_export({R"({"v": 2})", R"({"v": {"a": 1}})"});
  expect_same_export({R"({"k": 1, "k": 2})", R"({"k": 3})"});
  expect_same_export({R"({"k": 1})", R"({"k": 2, "pico_offset": 7})"});
  expect_same_export(
      {R"({"big": 1})", R"({"big": 18446744073709551615})", R"({"big": 123456789012345678901234567890})"});
  expect_same_export({R"({"a": 1})", R"([1, 2])", R"("text")"});
  expect_same_export({std::nullopt, std::nullopt});
  // Many rows: the buffers grow past what the first record's sizes reserved.
  std::vector<std::optional<std::string>> many;
  for (int i = 0; i < 3000; ++i) {
    many.push_back("{\"id\": " + std::to_string(i) + ", \"s\": \"" + std::string(static_cast<size_t>(i % 97), 'x') +
                   "\", \"f\": " + std::to_string(i) + ".5" +
                   (i % 7 == 0 ? ", \"opt\": [" + std::to_string(i) + "]" : "") + "}");
  }
  expect_same_export(many);
}

TEST(ArrowExportInferOnePass, ReadsValidatedPayloadsExactlyAsTheValidatingReaderDoes) {
  one_pass::expect_same_export({
      R"({"id": 1, "name": "a\"b\\c\u00e9\ud83d\ude00", "price": 12.50, "ok": true, "none": null,
          "items": [ {"sku": "x", "qty": 2} , [1, 2.0e3, "s"] ],   "ship_to": {"city" : "Z\u00fcrich", "zip": "8000"}})",
      R"(  { "id" : -9223372036854775808 , "name" : "" , "price" : -0.0 , "ok" : false , "items" : [ ] , "ship_to" : { } }  )",
      R"({"id": 3, "price": 1e-300, "extra": {"deep": [[[]]]}, "zero": -0, "negzero": -0.0, "e": 1E2})",
      "{}",
  });
}

TEST(ArrowExportInferOnePass, MixedKindsGiveJsonColumnsOfTheOriginalTextOfEveryValue) {
  // Scalars in a JSON column are their original text too (quotes, exponent and spacing kept).
  one_pass::expect_same_export({R"({"v": 1.50e2 , "w": "x"})", R"({"v": "one", "w": [1 ,2]})",
                                R"({"v": true, "w": null})", R"({"v": {"a" : 1}, "w": 7})"});
}

TEST(ArrowExportInferOnePass, WhatOneOnDemandPassDoesNotReadFallsBackToTheValidatingReader) {
  // Numbers beyond int64 / double, escaped and duplicate keys, and payloads that are not objects.
  one_pass::expect_same_export({R"({"big": 123456789012345678901234567890, "u": 18446744073709551615, "k\n": 1})",
                                R"({"big": 1e400, "u": 1, "k\n": 2, "k\n": 3})", R"({"big": 3, "u": 2})"});
  one_pass::expect_same_export({R"([1, 2])", R"({"a": 1})", R"("text")", "42"});
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"k":"first","other":1,"k":7})").payload(R"({"k":8})");
  ExportOptions validated = without_metadata();
  validated.payloads_validated = true;
  auto out = run_export(batch, validated);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  EXPECT_STREQ(out->field("k").format, "l") << "the last of a duplicate key wins, as in the validating reader";
  EXPECT_EQ(out->view().column("k").as_int64(0), 7);
}

}  // namespace
}  // namespace picomq::arrow::testing
