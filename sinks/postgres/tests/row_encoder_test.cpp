#include "postgres/row_encoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "picomq/kit/testing/inference_cases.hpp"
#include "test_util.h"

namespace picomq::postgres {
namespace {

using test::Batch;
using test::field;
using test::hex;
using test::layout;

// The expected COPY stream: each lambda appends one row's fields.
template <class... Rows>
std::string stream(Rows&&... rows) {
  CopyBinaryWriter w;
  auto one = [&](auto&& row) {
    w.begin_row();
    row(w);
    w.commit_row();
  };
  (one(rows), ...);
  return w.finish();
}

std::string reasons(const EncodeResult& r) {
  std::string out;
  for (const auto& j : r.rejected) out += std::to_string(j.record_index) + ": " + j.reason + "\n";
  return out;
}

// ---- change events (docs/changes.md) -------------------------------------------------------

TEST(RowEncoder, ChangeEventsCarryPicoDeletedAndADeleteFillsTheKeyColumnsFromItsKey) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.change(PMQ_OP_UPSERT, R"({"id":1,"name":"a"})", R"({"id":1})");
  b.change(PMQ_OP_DELETE, nullptr, R"({"id":2})");
  b.change(PMQ_OP_DELETE, nullptr, R"({"other":3})");  // a key without the key column
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Upsert, false,
                        {field("id", ColumnType::Int8), field("name", ColumnType::Text)}, {"id"}, true));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.truncate);
  EXPECT_EQ(reasons(r), "2: field 'id': missing, and the column is a key (NOT NULL)\n");
  EXPECT_EQ(r.copy_data, stream(
                             [](CopyBinaryWriter& w) {
                               w.int8(1);
                               w.text("a");
                               w.int8(0);  // the staging-only pico_offset
                               w.boolean(false);
                               w.null();  // pico_absent: a full row
                             },
                             [](CopyBinaryWriter& w) {
                               w.int8(2);
                               w.null();  // a delete has no row
                               w.int8(1);
                               w.boolean(true);
                               w.null();
                             }));
}

TEST(RowEncoder, ATruncateStagesOnlyTheChangesAfterIt) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.change(PMQ_OP_UPSERT, R"({"id":1})", R"({"id":1})");
  b.change(PMQ_OP_TRUNCATE, nullptr, nullptr);
  b.change(PMQ_OP_UPSERT, R"({"id":2})", R"({"id":2})");
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Upsert, false, {field("id", ColumnType::Int8)}, {"id"}, true));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.truncate);
  EXPECT_EQ(r.rows, 1u);
  EXPECT_EQ(r.copy_data, stream([](CopyBinaryWriter& w) {
              w.int8(2);
              w.int8(2);
              w.boolean(false);
              w.null();
            }));
}

TEST(RowEncoder, APatchListsTheColumnsItKeeps) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.change(PMQ_OP_PATCH, R"({"id":1,"title":"b"})", R"({"id":1})");
  RowEncoder enc(
      layout(PayloadMode::Columns, WriteMode::Upsert, false,
             {field("id", ColumnType::Int8), field("title", ColumnType::Text), field("body", ColumnType::Text)}, {"id"},
             true));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(reasons(r), "");
  EXPECT_EQ(r.copy_data, stream([](CopyBinaryWriter& w) {
              w.int8(1);
              w.text("b");
              w.null();  // body: not named
              w.int8(0);
              w.boolean(false);
              w.jsonb(R"(["body"])");
            }));
}

// ---- jsonb / text / bytea ------------------------------------------------------------------

TEST(RowEncoder, JsonbInsertWithoutMetadataByteForByte) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.offset(7).json("{}").tombstone();
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Insert, false));
  const pmq_batch batch = b.get();
  auto r = enc.encode(batch);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.rows, 2u);
  EXPECT_TRUE(r.rejected.empty());
  EXPECT_EQ(hex(r.copy_data), std::string(test::kHeaderHex) +
                                  " 00 02 00 00 00 05 74 3a 30 3a 37 00 00 00 03 01 7b 7d"  // "t:0:7", jsonb {}
                                  " 00 02 00 00 00 05 74 3a 30 3a 38 ff ff ff ff"           // "t:0:8", NULL (tombstone)
                                  " ff ff");
}

TEST(RowEncoder, MetadataColumns) {
  Batch b("shop.orders", PMQ_PAYLOAD_JSON);
  b.offset(42);
  b.add(
      {R"({"a":1})", 1700000000123, "k1", {{"trace", "abc"}, {"bin", "\xff\xfe"}, {"none", nullptr}, {"q\"", "x\ny"}}});
  b.add({R"([1])", -1, nullptr, {}});
  b.add({R"(2)", 0, "", {}});  // empty key: "" not NULL; 1970 timestamp
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Insert, true));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(reasons(r), "");
  const std::string expected = stream(
      [](CopyBinaryWriter& w) {
        w.text("shop.orders:0:42");
        w.text("shop.orders");
        w.int4(0);
        w.int8(42);
        w.timestamptz_from_epoch_ms(1700000000123);
        w.bytea(std::string_view("k1"));
        w.jsonb(R"({"trace":"abc","bin":"//4=","none":null,"q\"":"x\ny"})");
        w.jsonb(R"({"a":1})");
      },
      [](CopyBinaryWriter& w) {
        w.text("shop.orders:0:43");
        w.text("shop.orders");
        w.int4(0);
        w.int8(43);
        w.null();  // no timestamp
        w.null();  // no key
        w.jsonb("{}");
        w.jsonb("[1]");
      },
      [](CopyBinaryWriter& w) {
        w.text("shop.orders:0:44");
        w.text("shop.orders");
        w.int4(0);
        w.int8(44);
        w.timestamptz_from_epoch_ms(0);
        w.bytea(std::string_view(""));
        w.jsonb("{}");
        w.jsonb("2");
      });
  EXPECT_EQ(hex(r.copy_data), hex(expected));
}

// A buffer handed back with recycle() carries the stream after next (the writer alternates two):
// a steady flow of batches allocates nothing, and the bytes are the same.
TEST(RowEncoder, RecycledBuffersAreReusedAndChangeNoByte) {
  Batch b("shop.orders", PMQ_PAYLOAD_JSON);
  b.add({R"({"a":1})", 1700000000123, "k1", {{"trace", "abc"}}});
  b.add({R"([1])", -1, nullptr, {}});
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Insert, true));
  auto first = enc.encode(b.get());
  const std::string expected = first.copy_data;
  // The buffer's address as a number: only compared, never read through.
  const auto memory = reinterpret_cast<std::uintptr_t>(first.copy_data.data());
  enc.recycle(std::move(first.copy_data));
  auto second = enc.encode(b.get());
  EXPECT_EQ(hex(second.copy_data), hex(expected));
  enc.recycle(std::move(second.copy_data));
  auto third = enc.encode(b.get());
  EXPECT_EQ(hex(third.copy_data), hex(expected));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(third.copy_data.data()), memory);
}

TEST(RowEncoder, JsonbRefusesNulEscapeAndTimestampsOutOfRange) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(R"({"a":"x\u0000"})").json(R"({"a":"x\\u0000"})");
  b.add({"1", std::numeric_limits<int64_t>::max(), nullptr, {}});
  b.add({"1", 0, nullptr, {{"h", "a\0b"}}});
  // header value with a NUL byte: valid UTF-8, but jsonb cannot hold U+0000
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Append, true));
  pmq_batch batch = b.get();
  // give the 4th record's header value its NUL (Batch builds C strings)
  static const uint8_t nul_value[] = {'a', 0, 'b'};
  pmq_record* records = const_cast<pmq_record*>(batch.records);
  const_cast<pmq_header*>(records[3].headers)[0].value = pmq_bytes{nul_value, 3};
  auto r = enc.encode(batch);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.rows, 1u);
  EXPECT_EQ(reasons(r),
            "0: payload contains \\u0000, which PostgreSQL jsonb cannot store\n"
            "2: record timestamp 9223372036854775807 ms is outside PostgreSQL's timestamptz range\n"
            "3: a header name or value contains U+0000, which PostgreSQL jsonb cannot store\n");
}

TEST(RowEncoder, TextMode) {
  Batch b("t", PMQ_PAYLOAD_TEXT);
  b.json("héllo").json("").add({"a\0b", 0, nullptr, {}, 3}).tombstone();
  RowEncoder enc(layout(PayloadMode::Text, WriteMode::Append, false));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(reasons(r), "2: payload contains a NUL byte, which PostgreSQL text cannot store\n");
  EXPECT_EQ(hex(r.copy_data),
            hex(stream([](CopyBinaryWriter& w) { w.text("héllo"); }, [](CopyBinaryWriter& w) { w.text(""); },
                       [](CopyBinaryWriter& w) { w.null(); })));
  // JSON is text too; RAW is not.
  Batch j("t", PMQ_PAYLOAD_JSON);
  j.json("[1]");
  EXPECT_TRUE(enc.encode(j.get()).ok());
  Batch raw("t", PMQ_PAYLOAD_RAW);
  raw.json("x");
  auto e = enc.encode(raw.get());
  EXPECT_EQ(e.error, "payload mode 'text' cannot take RAW payloads (schema 'json')");
  EXPECT_TRUE(e.copy_data.empty());
}

TEST(RowEncoder, ByteaModeTakesAnyFormat) {
  Batch b("t", PMQ_PAYLOAD_RAW);
  b.add({"\x00\xff", 0, nullptr, {}, 2}).tombstone();
  RowEncoder enc(layout(PayloadMode::Bytea, WriteMode::Append, false));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(hex(r.copy_data), std::string(test::kHeaderHex) + " 00 01 00 00 00 02 00 ff 00 01 ff ff ff ff ff ff");
}

TEST(RowEncoder, BatchErrors) {
  RowEncoder jsonb(layout(PayloadMode::Jsonb, WriteMode::Append, true));
  Batch text("t", PMQ_PAYLOAD_TEXT);
  EXPECT_EQ(jsonb.encode(text.get()).error, "payload mode 'jsonb' cannot take TEXT payloads (schema 'json')");
  Batch odd("t", 9);
  EXPECT_EQ(jsonb.encode(odd.get()).error, "unknown payload format unknown (9)");
  Batch bad_topic("t\xff", PMQ_PAYLOAD_JSON);
  EXPECT_EQ(jsonb.encode(bad_topic.get()).error, "topic name is not valid UTF-8");
  Batch ok("t", PMQ_PAYLOAD_JSON);
  ok.json("1");
  pmq_batch small = ok.get();
  small.record_size = 8;
  EXPECT_FALSE(jsonb.encode(small).ok());
  pmq_batch no_topic = ok.get();
  no_topic.topic = nullptr;
  EXPECT_FALSE(jsonb.encode(no_topic).ok());
  // Empty batch: header and trailer only.
  Batch empty("t", PMQ_PAYLOAD_JSON);
  auto r = jsonb.encode(empty.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(hex(r.copy_data), std::string(test::kHeaderHex) + " ff ff");
}

TEST(RowEncoder, HonoursTheRecordStride) {
  struct Wide {
    pmq_record record;
    uint64_t future_field;
  };
  const char* payloads[] = {"1", "2"};
  Wide wide[2] = {};
  for (int i = 0; i < 2; ++i) {
    wide[i].record.offset = 10 + i;
    wide[i].record.timestamp_ms = -1;
    wide[i].record.payload = pmq_bytes{reinterpret_cast<const uint8_t*>(payloads[i]), 1};
    wide[i].future_field = ~0ull;
  }
  pmq_batch batch{};
  batch.struct_size = sizeof(pmq_batch);
  batch.topic = "t";
  batch.payload_format = PMQ_PAYLOAD_JSON;
  batch.schema = "json";
  batch.records = &wide[0].record;
  batch.record_count = 2;
  batch.record_size = sizeof(Wide);
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Append, false));
  auto r = enc.encode(batch);
  EXPECT_EQ(hex(r.copy_data),
            hex(stream([](CopyBinaryWriter& w) { w.jsonb("1"); }, [](CopyBinaryWriter& w) { w.jsonb("2"); })));
}

// ---- columns -------------------------------------------------------------------------------

std::vector<Column> all_types() {
  return {field("i", ColumnType::Int8), field("f", ColumnType::Float8), field("b", ColumnType::Bool),
          field("s", ColumnType::Text), field("j", ColumnType::Jsonb),  field("t", ColumnType::Timestamptz),
          field("n", ColumnType::Int4), field("raw", ColumnType::Bytea)};
}

TEST(RowEncoder, ColumnsStrictConversions) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(
      R"({"i": -5, "f": 2, "b": true, "s": "é", "j": {"x": [1, 2.50, "y"]}, "t": 946684800001, "n": -2147483648, "raw": "ab", "extra": 1})");
  b.json(R"({"f": 1.5, "j": "str", "s": null})");  // missing and null: NULL
  b.json(R"({"i": 1, "i": 2, "j": 7})");           // duplicate member: the last wins
  b.tombstone();
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Append, false, all_types()));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(reasons(r), "");
  const std::string expected = stream(
      [](CopyBinaryWriter& w) {
        w.int8(-5);
        w.float8(2.0);
        w.boolean(true);
        w.text("é");
        w.jsonb(R"({"x":[1,2.5,"y"]})");
        w.timestamptz_from_epoch_ms(946684800001);
        w.int4(std::numeric_limits<int32_t>::min());
        w.bytea(std::string_view("ab"));
      },
      [](CopyBinaryWriter& w) {
        w.null();
        w.float8(1.5);
        w.null();
        w.null();
        w.jsonb(R"("str")");
        w.null();
        w.null();
        w.null();
      },
      [](CopyBinaryWriter& w) {
        w.int8(2);
        for (int k = 0; k < 3; ++k) w.null();
        w.jsonb("7");
        for (int k = 0; k < 3; ++k) w.null();
      },
      [](CopyBinaryWriter& w) {
        for (int k = 0; k < 8; ++k) w.null();
      });
  EXPECT_EQ(hex(r.copy_data), hex(expected));
}

TEST(RowEncoder, ColumnsRejectionsAreCollectedForEveryBadRecord) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(R"({"i": 1.5})");                    // 0
  b.json(R"({"i": "1", "f": "x", "b": 1})");  // 1: three problems in one record
  b.json(R"({"i": 18446744073709551615})");   // 2
  b.json(R"({"n": 2147483648, "t": 1.0})");   // 3
  b.json(R"({"t": 9223372036854775807})");    // 4
  b.json(R"({"s": "a\u0000b"})");             // 5
  b.json(R"({"j": {"k": "\u0000"}})");        // 6
  b.json(R"([1, 2])");                        // 7
  b.json(R"({"i": 1e400})");                  // 8: simdjson cannot represent it
  b.json(R"({"s": {}, "raw": 5})");           // 9
  b.json(R"({"i": 3})");                      // 10: fine
  b.json(R"({"b": false)");                   // 11: not JSON (the runtime would have refused it)
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Append, false, all_types()));
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.rows, 1u);
  ASSERT_EQ(r.rejected.size(), 11u) << reasons(r);
  EXPECT_EQ(reasons(r).substr(0, reasons(r).find("11: ")),
            "0: field 'i': expected int8, found floating-point number\n"
            "1: field 'i': expected int8, found string; field 'f': expected float8, found string; field 'b': expected "
            "boolean, found integer\n"
            "2: field 'i': expected int8, found integer out of int64 range\n"
            "3: field 't': expected timestamptz, found floating-point number; field 'n': expected int4, found integer "
            "out of int4 range\n"
            "4: field 't': expected timestamptz, found integer out of timestamptz range\n"
            "5: field 's': string contains U+0000, which PostgreSQL text cannot store\n"
            "6: field 'j': value contains \\u0000, which PostgreSQL jsonb cannot store\n"
            "7: payload is not a JSON object (found array)\n"
            "8: payload has a number beyond 64-bit integer or double range, which columns mode cannot read\n"
            "9: field 's': expected text, found object; field 'raw': expected bytea, found integer\n");
  EXPECT_EQ(r.rejected.back().record_index, 11u);
  EXPECT_EQ(r.rejected.back().reason.rfind("payload is not valid JSON: ", 0), 0u);
  // Only record 10 is in the stream.
  EXPECT_EQ(hex(r.copy_data), hex(stream([](CopyBinaryWriter& w) {
              w.int8(3);
              for (int k = 0; k < 7; ++k) w.null();
            })));
}

TEST(RowEncoder, ColumnsFloat8WidensIntegers) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(R"({"f": 9223372036854775807})").json(R"({"f": 18446744073709551615})").json(R"({"f": -0.0})");
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Append, false, {field("f", ColumnType::Float8)}));
  auto r = enc.encode(b.get());
  EXPECT_EQ(hex(r.copy_data), hex(stream([](CopyBinaryWriter& w) { w.float8(9223372036854775807.0); },
                                         [](CopyBinaryWriter& w) { w.float8(18446744073709551615.0); },
                                         [](CopyBinaryWriter& w) { w.float8(-0.0); })));
}

TEST(RowEncoder, HostileFieldNamesMapByTheirJsonName) {
  Column c = field(R"(x"); DROP TABLE t; --)", ColumnType::Text);
  Column u = field("ключ", ColumnType::Int8);
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Append, false, {c, u}));
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(R"({"x\"); DROP TABLE t; --": "v", "ключ": 1})");
  auto r = enc.encode(b.get());
  EXPECT_EQ(reasons(r), "");
  EXPECT_EQ(hex(r.copy_data), hex(stream([](CopyBinaryWriter& w) {
              w.text("v");
              w.int8(1);
            })));
}

TEST(RowEncoder, UpsertKeyMustBePresent) {
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Upsert, false,
                        {field("id", ColumnType::Int8), field("v", ColumnType::Text)}, {"id"}));
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.offset(5)
      .json(R"({"id": 1, "v": "a"})")
      .json(R"({"v": "b"})")
      .json(R"({"id": null})")
      .tombstone()
      .json(R"({"id": 1, "v": "c"})");
  auto r = enc.encode(b.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(reasons(r),
            "1: field 'id': missing, and the column is a key (NOT NULL)\n"
            "2: field 'id': null, and the column is a key (NOT NULL)\n"
            "3: tombstone: field 'id' is a key column (NOT NULL)\n");
  // Both rows of key 1 are staged, each with its offset (the staging-only last column); the
  // merge keeps offset 9.
  EXPECT_EQ(hex(r.copy_data), hex(stream(
                                  [](CopyBinaryWriter& w) {
                                    w.int8(1);
                                    w.text("a");
                                    w.int8(5);
                                  },
                                  [](CopyBinaryWriter& w) {
                                    w.int8(1);
                                    w.text("c");
                                    w.int8(9);
                                  })));
}

TEST(RowEncoder, UpsertOnRecordKeyRejectsKeylessRecords) {
  RowEncoder enc(layout(PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {"pico_key"}));
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.add({"1", -1, "k", {}}).add({"2", -1, nullptr, {}});
  auto r = enc.encode(b.get());
  EXPECT_EQ(r.rows, 1u);
  EXPECT_EQ(reasons(r), "1: the record has no key, and pico_key is a key column\n");
}

TEST(RowEncoder, EncoderIsReusableAcrossBatches) {
  RowEncoder enc(layout(PayloadMode::Columns, WriteMode::Append, false, {field("a", ColumnType::Int8)}));
  Batch b1("t", PMQ_PAYLOAD_JSON);
  b1.json(R"({"a": 1})").json(R"({"a": "x"})");
  Batch b2("t", PMQ_PAYLOAD_JSON);
  b2.json(R"({})");
  auto r1 = enc.encode(b1.get());
  auto r2 = enc.encode(b2.get());
  EXPECT_EQ(r1.rows, 1u);
  EXPECT_EQ(r2.rows, 1u);
  EXPECT_TRUE(r2.rejected.empty());
  EXPECT_EQ(hex(r2.copy_data), hex(stream([](CopyBinaryWriter& w) { w.null(); })));
}

// ---- inference -----------------------------------------------------------------------------

TEST(Infer, TypesInFirstAppearanceOrder) {
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json(R"({"id": 1, "price": 2, "ok": true, "name": "a", "tags": [1], "mixed": 1, "none": null})");
  b.json(R"({"price": 2.5, "extra": {"a": 1}, "mixed": "x", "big": 18446744073709551615, "id": 2})");
  b.json(R"([1, 2])").tombstone().json("not json");
  auto r = infer_columns(b.get());
  std::vector<std::pair<std::string, ColumnType>> got;
  for (const auto& c : r.columns) {
    EXPECT_EQ(c.source, Source::Field);
    EXPECT_EQ(c.name, c.field);
    EXPECT_FALSE(c.not_null);
    got.emplace_back(c.name, c.type);
  }
  const std::vector<std::pair<std::string, ColumnType>> want = {
      {"id", ColumnType::Int8},    {"price", ColumnType::Float8}, {"ok", ColumnType::Bool},
      {"name", ColumnType::Text},  {"tags", ColumnType::Jsonb},   {"mixed", ColumnType::Jsonb},
      {"none", ColumnType::Jsonb}, {"extra", ColumnType::Jsonb},  {"big", ColumnType::Jsonb}};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(r.notes.empty());
}

// The kit's lattice (kit/inferred_type.hpp) through column_type(): the shared cases the Arrow
// exporter and ClickHouse infer too.
TEST(Infer, AgreesWithTheKitsLatticeOnTheSharedCases) {
  const std::vector<std::string> payloads = picomq::kit::testing::inference_payloads();
  Batch b("t", PMQ_PAYLOAD_JSON);
  for (const std::string& p : payloads) b.json(p.c_str());
  auto r = infer_columns(b.get());
  std::vector<std::pair<std::string, ColumnType>> got, want;
  for (const auto& c : r.columns) got.emplace_back(c.name, c.type);
  for (const auto& [field, type] : picomq::kit::testing::inference_fields())
    want.emplace_back(field, column_type(type));
  EXPECT_EQ(got, want);
  EXPECT_EQ(column_type(picomq::kit::InferredType::Json), ColumnType::Jsonb);
  EXPECT_EQ(column_type(picomq::kit::InferredType::None), ColumnType::Jsonb);
  EXPECT_EQ(column_type(picomq::kit::InferredType::Float64), ColumnType::Float8);
}

TEST(Infer, NamesAreSanitisedAndCollisionsLeftOut) {
  const std::string long_name(200, 'f');
  Batch b("t", PMQ_PAYLOAD_JSON);
  b.json((R"({"pico_offset": 1, "a\u0001": 1, "a_": 2, "q\"; --": "x", ")" + long_name + R"(": true, "": 0})").c_str());
  auto r = infer_columns(b.get(), reserved_column_names(WriteMode::Insert, true));
  ASSERT_EQ(r.columns.size(), 3u);
  EXPECT_EQ(r.columns[0].name, "a_");
  EXPECT_EQ(r.columns[0].field, "a\x01");
  EXPECT_EQ(r.columns[1].name, "q\"; --");
  EXPECT_EQ(r.columns[2].name.size(), 63u);
  EXPECT_EQ(r.columns[2].name.substr(0, 54), std::string(54, 'f'));
  EXPECT_EQ(r.columns[2].field, long_name);
  ASSERT_EQ(r.notes.size(), 3u);
  EXPECT_EQ(r.notes[0], "field 'pico_offset' left out: column name 'pico_offset' is already taken");
  EXPECT_EQ(r.notes[1], "field 'a_' left out: column name 'a_' is already taken");
  EXPECT_EQ(r.notes[2].rfind("field '' left out: ", 0), 0u);
  // The inferred columns make a valid layout, and the encoder maps them back by field.
  auto l = make_layout(LayoutOptions{PayloadMode::Columns, WriteMode::Insert, true, r.columns, {}});
  ASSERT_TRUE(l.ok()) << l.error();
  RowEncoder enc(l.value());
  auto e = enc.encode(b.get());
  EXPECT_EQ(e.rows, 1u) << reasons(e);
}

TEST(Infer, ReservedNames) {
  EXPECT_EQ(reserved_column_names(WriteMode::Append, false), std::vector<std::string>{});
  EXPECT_EQ(reserved_column_names(WriteMode::Upsert, false), std::vector<std::string>{"pico_offset"});
  EXPECT_EQ(reserved_column_names(WriteMode::Insert, false), std::vector<std::string>{"pico_id"});
  EXPECT_EQ(reserved_column_names(WriteMode::Insert, true).size(), 7u);
}

TEST(Infer, NonJsonBatch) {
  Batch b("t", PMQ_PAYLOAD_TEXT);
  b.json("x");
  auto r = infer_columns(b.get());
  EXPECT_TRUE(r.columns.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "payload format is TEXT, not JSON: no columns");
}

}  // namespace
}  // namespace picomq::postgres
