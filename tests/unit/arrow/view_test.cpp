// The read-only view: over the exporter's arrays, and over hand-built arrays with offsets and
// validity bitmaps as other producers (pyarrow slices) hand them over.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_batch.h"
#include "view_cxx17.h"

namespace picomq::arrow::testing {
namespace {

using sdk::ArrowBatchView;
using sdk::ColumnType;
using sdk::ColumnView;

TEST(ArrowView, ReadsAnExportedBatch) {
  TestBatch batch(PMQ_PAYLOAD_JSON, "events", 2);
  batch.add({R"({"id":1,"ok":true,"x":1.5,"tags":["a"],"name":"n"})", std::string("k"), {{"h", "v"}}, 1000});
  batch.add({R"({"id":2,"x":2})"});
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok) << out->result.error;
  const ArrowBatchView view = out->view();
  EXPECT_EQ(view.num_rows(), 2u);
  EXPECT_EQ(view.num_columns(), 11u);
  EXPECT_EQ(view.column(0).name(), "pico_topic");
  EXPECT_EQ(view.column("pico_topic").type(), ColumnType::Utf8);
  EXPECT_EQ(view.column("pico_partition").type(), ColumnType::Int32);
  EXPECT_EQ(view.column("pico_offset").type(), ColumnType::Int64);
  EXPECT_EQ(view.column("pico_timestamp").type(), ColumnType::TimestampMs);
  EXPECT_EQ(view.column("pico_key").type(), ColumnType::Binary);
  EXPECT_EQ(view.column("pico_headers").type(), ColumnType::Map);
  EXPECT_EQ(view.column("ok").type(), ColumnType::Bool);
  EXPECT_EQ(view.column("x").type(), ColumnType::Float64);
  EXPECT_EQ(view.column("tags").format(), "u");
  EXPECT_TRUE(view.column("tags").is_json());
  EXPECT_FALSE(view.column("name").is_json());
  EXPECT_EQ(view.column("pico_partition").as_int32(1), 2);
  EXPECT_EQ(view.column("pico_timestamp").as_timestamp_ms(0), 1000);
  EXPECT_EQ(view.column("id").as_int64(1), 2);
  EXPECT_TRUE(view.column("ok").as_bool(0));
  EXPECT_TRUE(view.column("ok").is_null(1));
  EXPECT_DOUBLE_EQ(view.column("x").as_double(1), 2.0);
  EXPECT_EQ(view.column("tags").as_string(0), "[\"a\"]");
  EXPECT_EQ(view.column("pico_headers").entries(0).size(), 1u);
  EXPECT_TRUE(view.column("pico_headers").entries(1).empty());
  EXPECT_TRUE(view.column("pico_headers").nullable() == false);
  EXPECT_EQ(view.find("nope"), std::nullopt);
  EXPECT_EQ(view.find("x"), std::optional<size_t>(8));
}

TEST(ArrowView, ChecksNamesTypesBoundsAndNulls) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("a").tombstone();
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok);
  const ArrowBatchView view = out->view();
  try {
    (void)view.column("amount");
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "no column named 'amount'");
  }
  EXPECT_THROW((void)view.column(99), std::out_of_range);
  try {
    (void)view.column("pico_offset").as_string(0);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "column 'pico_offset' is int64 (format 'l'), not a utf8 column");
  }
  EXPECT_THROW((void)view.column("pico_offset").as_int32(0), std::logic_error);
  EXPECT_THROW((void)view.column("pico_offset").as_timestamp_ms(0), std::logic_error);
  EXPECT_THROW((void)view.column("pico_offset").entries(0), std::logic_error);
  try {
    (void)view.column("payload").as_string(2);
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "column 'payload': row 2 is out of range (2 rows)");
  }
  EXPECT_THROW((void)view.column("payload").is_null(2), std::out_of_range);
  try {
    (void)view.column("payload").as_string(1);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "column 'payload': row 1 is null");
  }
  EXPECT_EQ(view.column("payload").as_bytes(0).as_string_view(), "a") << "utf8 reads as bytes too";
}

TEST(ArrowView, RefusesWhatIsNotABatch) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("a");
  auto out = run_export(batch);
  EXPECT_THROW(ArrowBatchView(nullptr, &out->array), std::invalid_argument);
  EXPECT_THROW(ArrowBatchView(out->schema.children[0], out->array.children[0]), std::invalid_argument);
  ArrowSchema released{};
  EXPECT_THROW(ArrowBatchView(&released, &out->array), std::invalid_argument);
}

// ---- hand-built arrays -------------------------------------------------------------------------

void no_release_schema(ArrowSchema* s) { s->release = nullptr; }
void no_release_array(ArrowArray* a) { a->release = nullptr; }

ArrowSchema field(const char* format, const char* name, std::vector<ArrowSchema*>* children = nullptr,
                  const char* metadata = nullptr) {
  ArrowSchema s{};
  s.format = format;
  s.name = name;
  s.metadata = metadata;
  s.flags = ARROW_FLAG_NULLABLE;
  if (children) {
    s.n_children = static_cast<int64_t>(children->size());
    s.children = children->data();
  }
  s.release = no_release_schema;
  return s;
}

ArrowArray array(int64_t length, int64_t offset, int64_t null_count, std::vector<const void*>* buffers,
                 std::vector<ArrowArray*>* children = nullptr) {
  ArrowArray a{};
  a.length = length;
  a.offset = offset;
  a.null_count = null_count;
  a.n_buffers = static_cast<int64_t>(buffers->size());
  a.buffers = buffers->data();
  if (children) {
    a.n_children = static_cast<int64_t>(children->size());
    a.children = children->data();
  }
  a.release = no_release_array;
  return a;
}

// Bits LSB first; '1' valid/true, '0' null/false, in physical index order.
std::vector<uint8_t> bits(std::string_view pattern) {
  std::vector<uint8_t> out((pattern.size() + 7) / 8, 0);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '1') out[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  }
  return out;
}

TEST(ArrowView, HonoursOffsetsAndValidityBitmapsAtEveryLevel) {
  // int64: physical [10..17], index 4 null; the array starts at 1 and the batch at 1 more.
  const int64_t ints[] = {10, 11, 12, 13, 14, 15, 16, 17};
  const auto int_valid = bits("11110111");
  std::vector<const void*> int_buffers{int_valid.data(), ints};
  // utf8: "", "a", "bb", "ccc", "dddd", "e"; index 3 null.
  const int32_t str_offsets[] = {0, 0, 1, 3, 6, 10, 11};
  const char str_data[] = "abbcccdddde";
  const auto str_valid = bits("111011");
  std::vector<const void*> str_buffers{str_valid.data(), str_offsets, str_data};
  // bool: physical 0..15; values from index 9 on: 1,0,1,1,0,1; index 11 null.
  const auto bool_values = bits("0000000001011010");
  const auto bool_valid = bits("1111111111101111");
  std::vector<const void*> bool_buffers{bool_valid.data(), bool_values.data()};
  // int32 without a bitmap, null_count unknown (-1): nothing is null.
  const int32_t small[] = {1, 2, 3, 4, 5, 6};
  std::vector<const void*> small_buffers{nullptr, small};
  // timestamps: index 2 null.
  const int64_t times[] = {100, 200, 300, 400, 500};
  const auto time_valid = bits("11011");
  std::vector<const void*> time_buffers{time_valid.data(), times};
  // null type: no buffers.
  std::vector<const void*> no_buffers;

  ArrowSchema f_int = field("l", "i");
  ArrowSchema f_str = field("u", "s");
  ArrowSchema f_bool = field("b", "b");
  ArrowSchema f_small = field("i", "small");
  ArrowSchema f_time = field("tsm:", "t");
  ArrowSchema f_null = field("n", "none");
  ArrowArray a_int = array(7, 1, 1, &int_buffers);       // rows of the batch: physical 2..4
  ArrowArray a_str = array(5, 0, 1, &str_buffers);       // physical 1..3
  ArrowArray a_bool = array(7, 8, 1, &bool_buffers);     // physical 9..11
  ArrowArray a_small = array(6, 0, -1, &small_buffers);  // physical 1..3
  ArrowArray a_time = array(4, 0, 1, &time_buffers);     // physical 1..3
  ArrowArray a_null = array(4, 0, 4, &no_buffers);
  std::vector<ArrowSchema*> fields{&f_int, &f_str, &f_bool, &f_small, &f_time, &f_null};
  std::vector<ArrowArray*> arrays{&a_int, &a_str, &a_bool, &a_small, &a_time, &a_null};
  std::vector<const void*> struct_buffers{nullptr};
  ArrowSchema root_schema = field("+s", "", &fields);
  ArrowArray root = array(3, 1, 0, &struct_buffers, &arrays);

  const ArrowBatchView view(&root_schema, &root);
  ASSERT_EQ(view.num_rows(), 3u);
  const ColumnView i = view.column("i");
  EXPECT_EQ(i.as_int64(0), 12);
  EXPECT_EQ(i.as_int64(1), 13);
  EXPECT_TRUE(i.is_null(2));
  EXPECT_THROW((void)i.as_int64(2), std::logic_error);
  EXPECT_THROW((void)i.as_int64(3), std::out_of_range) << "the batch has 3 rows, the array more";

  const ColumnView s = view.column("s");
  EXPECT_EQ(s.as_string(0), "a");
  EXPECT_EQ(s.as_string(1), "bb");
  EXPECT_TRUE(s.is_null(2));

  const ColumnView b = view.column("b");
  EXPECT_TRUE(b.as_bool(0));
  EXPECT_FALSE(b.as_bool(1));
  EXPECT_TRUE(b.is_null(2));

  const ColumnView sm = view.column("small");
  EXPECT_FALSE(sm.is_null(0));
  EXPECT_EQ(sm.as_int32(0), 2);
  EXPECT_EQ(sm.as_int32(2), 4);

  const ColumnView t = view.column("t");
  EXPECT_EQ(t.timezone(), "");
  EXPECT_EQ(t.as_timestamp_ms(0), 200);
  EXPECT_TRUE(t.is_null(1));
  EXPECT_EQ(t.as_timestamp_ms(2), 400);

  EXPECT_EQ(view.column("none").type(), ColumnType::Null);
  EXPECT_TRUE(view.column("none").is_null(1));
}

// Malformed arrays from another producer: the accessors' out-of-line error paths name the column
// and what is wrong (a missing value buffer, a missing data buffer, offsets going backwards).
TEST(ArrowView, MalformedBuffersAreNamedByTheAccessors) {
  std::vector<const void*> only_validity{nullptr};  // int64 without its values
  const int32_t offsets[] = {0, 2, 1};              // the second value ends before it starts
  const char data[] = "ab";
  std::vector<const void*> backwards{nullptr, offsets, data};
  const int32_t offsets_ok[] = {0, 2};
  std::vector<const void*> no_data{nullptr, offsets_ok, nullptr};  // a 2-byte value, no data buffer
  ArrowSchema f_int = field("l", "i");
  ArrowSchema f_back = field("u", "back");
  ArrowSchema f_nodata = field("u", "nodata");
  ArrowArray a_int = array(2, 0, 0, &only_validity);
  ArrowArray a_back = array(2, 0, 0, &backwards);
  ArrowArray a_nodata = array(1, 0, 0, &no_data);
  std::vector<ArrowSchema*> fields{&f_int, &f_back, &f_nodata};
  std::vector<ArrowArray*> arrays{&a_int, &a_back, &a_nodata};
  std::vector<const void*> struct_buffers{nullptr};
  ArrowSchema root_schema = field("+s", "", &fields);
  ArrowArray root = array(1, 0, 0, &struct_buffers, &arrays);
  const ArrowBatchView view(&root_schema, &root);
  auto message = [](auto&& read) -> std::string {
    try {
      read();
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(message([&] { (void)view.column("i").as_int64(0); }), "column 'i' lacks buffer 1");
  EXPECT_EQ(message([&] { (void)view.column("nodata").as_string(0); }), "column 'nodata' lacks buffer 2");
  const ColumnView back = view.column("back");
  EXPECT_EQ(back.as_string(0), "ab");
  ArrowArray a_back_row1 = array(2, 1, 0, &backwards);  // the row whose offsets go backwards
  arrays[1] = &a_back_row1;
  EXPECT_EQ(message([&] { (void)view.column("back").as_string(0); }), "column 'back' has malformed offsets");
}

TEST(ArrowView, MapEntriesHonourTheMapTheEntriesAndTheChildOffsets) {
  // Map rows (physical): [k0], [k1,k2], [], null, [k3, k4]; the map array starts at 1.
  const int32_t map_offsets[] = {0, 1, 3, 3, 3, 5};
  const auto map_valid = bits("11101");
  std::vector<const void*> map_buffers{map_valid.data(), map_offsets};
  // Entries start at physical 1 of their struct; keys have an offset of their own (2).
  const int32_t key_offsets[] = {0, 0, 0, 2, 4, 6, 8, 10, 12};
  const char key_data[] = "XXk0k1k2k3k4";
  std::vector<const void*> key_buffers{nullptr, key_offsets, key_data};
  // Values by physical index: 3 "b", 4 "\x01x", 5 null, 6 "" (entries 1..4 after both offsets).
  const int32_t value_offsets[] = {0, 1, 2, 2, 3, 5, 5, 5};
  const char value_data[] = "??b\x01x";
  const auto value_valid = bits("11111011");
  std::vector<const void*> value_buffers{value_valid.data(), value_offsets, value_data};
  std::vector<const void*> entries_buffers{nullptr};

  ArrowSchema f_key = field("u", "key");
  ArrowSchema f_value = field("z", "value");
  std::vector<ArrowSchema*> kv_fields{&f_key, &f_value};
  ArrowSchema f_entries = field("+s", "entries", &kv_fields);
  std::vector<ArrowSchema*> entries_fields{&f_entries};
  ArrowSchema f_map = field("+m", "m", &entries_fields);

  ArrowArray a_key = array(6, 2, 0, &key_buffers);
  ArrowArray a_value = array(6, 1, 1, &value_buffers);
  std::vector<ArrowArray*> kv_arrays{&a_key, &a_value};
  ArrowArray a_entries = array(5, 1, 0, &entries_buffers, &kv_arrays);
  std::vector<ArrowArray*> entries_arrays{&a_entries};
  ArrowArray a_map = array(4, 1, 1, &map_buffers, &entries_arrays);

  std::vector<ArrowSchema*> fields{&f_map};
  std::vector<ArrowArray*> arrays{&a_map};
  std::vector<const void*> struct_buffers{nullptr};
  ArrowSchema root_schema = field("+s", "", &fields);
  ArrowArray root = array(4, 0, 0, &struct_buffers, &arrays);

  const ColumnView m = ArrowBatchView(&root_schema, &root).column("m");
  const auto row0 = m.entries(0);  // physical map row 1: entries 1..2
  ASSERT_EQ(row0.size(), 2u);
  EXPECT_EQ(row0[0].first, "k1");
  EXPECT_EQ(row0[0].second->as_string_view(), "b");
  EXPECT_EQ(row0[1].first, "k2");
  EXPECT_EQ(row0[1].second->as_string_view(), std::string_view("\x01x", 2));
  EXPECT_TRUE(m.entries(1).empty());
  EXPECT_TRUE(m.is_null(2));
  EXPECT_TRUE(m.entries(2).empty());
  const auto row3 = m.entries(3);  // entries 3..4
  ASSERT_EQ(row3.size(), 2u);
  EXPECT_EQ(row3[0].first, "k3");
  EXPECT_FALSE(row3[0].second.has_value());
  EXPECT_EQ(row3[1].first, "k4");
  EXPECT_EQ(row3[1].second->size, 0u);
}

TEST(ArrowView, MetadataDecodingAndTheJsonExtension) {
  const std::string encoded = [] {
    std::string out;
    auto put = [&out](int32_t n) { out.append(reinterpret_cast<const char*>(&n), sizeof n); };
    put(2);
    put(3);
    out += "one";
    put(1);
    out += "1";
    put(20);
    out += "ARROW:extension:name";
    put(10);
    out += "arrow.json";
    return out;
  }();
  const auto pairs = sdk::decode_metadata(encoded.data());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].first, "one");
  EXPECT_EQ(pairs[1].second, "arrow.json");
  EXPECT_TRUE(sdk::decode_metadata(nullptr).empty());

  const int32_t offsets[] = {0, 2};
  std::vector<const void*> buffers{nullptr, offsets, "{}"};
  ArrowSchema f = field("u", "doc", nullptr, encoded.data());
  ArrowArray a = array(1, 0, 0, &buffers);
  const ColumnView column(&f, &a, 0, 1);
  EXPECT_TRUE(column.is_json());
  EXPECT_EQ(column.metadata("one"), std::optional<std::string_view>("1"));
  EXPECT_EQ(column.as_string(0), "{}");
}

TEST(ArrowView, CompilesAsCxx17) {
  TestBatch batch(PMQ_PAYLOAD_TEXT);
  batch.payload("first").tombstone();
  auto out = run_export(batch);
  ASSERT_TRUE(out->result.ok);
  EXPECT_EQ(view_cxx17_describe(&out->schema, &out->array, "payload"), "first,null");
}

}  // namespace
}  // namespace picomq::arrow::testing
