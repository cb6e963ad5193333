// Exporter: ownership and release. Counts live heap allocations (this binary replaces the
// global operator new/delete) to prove that releasing an export frees everything it allocated;
// the ASan build of this test checks the same for leaks and use-after-free.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "test_batch.h"

namespace {
std::atomic<long> g_live_allocations{0};
}  // namespace

// Every non-aligned form, so that no allocation made through one form (by this binary or a
// shared library such as simdjson) is freed through another (ASan reports such mismatches).
namespace {
void* counted_alloc(std::size_t size) noexcept {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p != nullptr) g_live_allocations.fetch_add(1, std::memory_order_relaxed);
  return p;
}
void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_live_allocations.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) {
  if (void* p = counted_alloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = counted_alloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace picomq::arrow::testing {
namespace {

// Moves child `index` out of both trees, as the C Data Interface allows: the caller owns it and
// releases it on its own; the parents' release skips it.
struct MovedChild {
  ArrowSchema schema;
  ArrowArray array;
};
MovedChild move_child_out(ArrowSchema& schema, ArrowArray& array, int64_t index) {
  MovedChild child{*schema.children[index], *array.children[index]};
  schema.children[index]->release = nullptr;
  array.children[index]->release = nullptr;
  return child;
}

// A batch that uses every kind of buffer: metadata, headers, JSON, nested JSON, nulls.
TestBatch& rich(TestBatch& batch) {
  batch
      .add({R"({"a":1,"b":"x","c":{"d":[1,2]},"e":true,"f":1.5,"g":null,"big":123456789012345678901234567890})",
            std::string("key"),
            {{"h", "v"}, {"n", std::nullopt}},
            1700000000000})
      .add({R"({"a":2,"b":"y"})"})
      .tombstone();
  return batch;
}

TEST(ArrowExportMemory, ReleasingSchemaAndArrayFreesEverything) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  rich(batch).get();
  { auto warm_up = run_export(batch); }  // first-use statics (simdjson, metadata encoding)

  const long before = g_live_allocations.load();
  ArrowSchema schema;
  ArrowArray array;
  {
    ExportResult result = export_batch(batch.get(), {}, &schema, &array);
    ASSERT_TRUE(result.ok) << result.error;
  }
  EXPECT_GT(g_live_allocations.load(), before + 20) << "the export owns its buffers";
  ASSERT_NE(schema.release, nullptr);
  ASSERT_NE(array.release, nullptr);
  schema.release(&schema);
  EXPECT_EQ(schema.release, nullptr) << "a released struct is marked released";
  array.release(&array);
  EXPECT_EQ(array.release, nullptr);
  EXPECT_EQ(g_live_allocations.load(), before);
}

TEST(ArrowExportMemory, ExportCopiesEverythingOutOfTheBatch) {
  auto batch = std::make_unique<TestBatch>(PMQ_PAYLOAD_JSON);
  rich(*batch);
  auto out = run_export(*batch);
  ASSERT_TRUE(out->result.ok);
  batch.reset();  // the records' memory is gone, as after a sink's write call
  const auto view = out->view();
  EXPECT_EQ(view.column("b").as_string(0), "x");
  EXPECT_EQ(view.column("c").as_string(0), R"({"d":[1,2]})");
  EXPECT_EQ(view.column("pico_key").as_bytes(0).as_string_view(), "key");
  EXPECT_EQ(view.column("pico_headers").entries(0)[0].first, "h");
}

TEST(ArrowExportMemory, ChildMovedOutOutlivesItsParent) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  rich(batch);
  { auto warm_up = run_export(batch); }
  const long before = g_live_allocations.load();
  ArrowSchema schema;
  ArrowArray array;
  ASSERT_TRUE(export_batch(batch.get(), {}, &schema, &array).ok);

  auto [child_schema, child_array] = move_child_out(schema, array, 7);  // column "b"
  schema.release(&schema);
  array.release(&array);

  EXPECT_STREQ(child_schema.name, "b");
  ASSERT_EQ(child_array.length, 3);
  const auto* offsets = static_cast<const int32_t*>(child_array.buffers[1]);
  const auto* data = static_cast<const char*>(child_array.buffers[2]);
  EXPECT_EQ(std::string(data + offsets[0], data + offsets[1]), "x") << "still alive after the parent's release";
  child_schema.release(&child_schema);
  child_array.release(&child_array);
  EXPECT_EQ(child_schema.release, nullptr);
  EXPECT_EQ(g_live_allocations.load(), before);
}

// A write retry hands the sink the prepared export again: each lent copy reads the same data,
// may be released (or have children moved out) in any order, and the last release of all frees it.
TEST(ArrowExportMemory, LentCopiesShareOneExportThatTheLastReleaseFrees) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  rich(batch);
  { auto warm_up = run_export(batch); }
  const long before = g_live_allocations.load();
  auto held = std::make_shared<HeldExport>();
  held->result = export_batch(batch.get(), {}, &held->schema, &held->array);
  ASSERT_TRUE(held->result.ok);
  const long exported = g_live_allocations.load();

  ArrowSchema first_schema, second_schema;
  ArrowArray first_array, second_array;
  lend_export(held, &first_schema, &first_array);
  lend_export(held, &second_schema, &second_array);
  held.reset();  // the prepared batch is gone; the copies keep the export
  EXPECT_EQ(sdk::ArrowBatchView(&first_schema, &first_array).column("b").as_string(0), "x");
  EXPECT_EQ(sdk::ArrowBatchView(&second_schema, &second_array).column("b").as_string(1), "y");

  // The first consumer moves column "b" out and releases the rest; the second releases all.
  auto [moved_schema, moved_array] = move_child_out(first_schema, first_array, 7);
  first_schema.release(&first_schema);
  first_array.release(&first_array);
  EXPECT_EQ(first_array.release, nullptr);
  second_schema.release(&second_schema);
  second_array.release(&second_array);
  EXPECT_GE(g_live_allocations.load(), exported) << "the moved-out column still holds the export";
  const auto* offsets = static_cast<const int32_t*>(moved_array.buffers[1]);
  const auto* data = static_cast<const char*>(moved_array.buffers[2]);
  EXPECT_EQ(std::string(data + offsets[0], data + offsets[1]), "x");
  EXPECT_STREQ(moved_schema.name, "b");
  moved_schema.release(&moved_schema);
  moved_array.release(&moved_array);
  EXPECT_EQ(g_live_allocations.load(), before) << "the last release freed the export";
}

TEST(ArrowExportMemory, RejectedOrFailedExportsOwnNothing) {
  TestBatch batch(PMQ_PAYLOAD_JSON);
  batch.payload(R"({"pico_key":1})");
  {
    ArrowSchema s;
    ArrowArray a;
    (void)export_batch(batch.get(), {}, &s, &a);
  }
  const long before = g_live_allocations.load();
  ArrowSchema schema;
  ArrowArray array;
  {
    ExportResult result = export_batch(batch.get(), {}, &schema, &array);
    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.rejected.size(), 1u);
  }
  EXPECT_EQ(schema.release, nullptr);
  EXPECT_EQ(array.release, nullptr);
  EXPECT_EQ(g_live_allocations.load(), before);
}

TEST(ArrowExportMemory, StringDataBeyondTwoGibibytesIsAnError) {
  // Three 1 GiB payloads that are never touched: the total is checked before anything is copied.
  constexpr size_t kGiB = size_t{1} << 30;
  void* region = mmap(nullptr, kGiB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  std::vector<pmq_record> records(3);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].offset = static_cast<int64_t>(i);
    records[i].timestamp_ms = -1;
    records[i].payload = {static_cast<const uint8_t*>(region), kGiB};
  }
  pmq_batch batch{sizeof(pmq_batch),  "t", 0,      PMQ_PAYLOAD_RAW, "raw", records.data(), records.size(),
                  sizeof(pmq_record), 0,   nullptr};
  ArrowSchema schema;
  ArrowArray array;
  ExportResult result = export_batch(batch, {}, &schema, &array);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error,
            "column 'payload' would hold more than 2 GiB of string data, beyond what int32 offsets address");
  EXPECT_EQ(schema.release, nullptr);

  // The same limit for data the export repeats: a 1 MiB topic on 2049 records.
  const std::string topic(size_t{1} << 20, 't');
  std::vector<pmq_record> many(2049);
  for (auto& r : many) r.timestamp_ms = -1;
  pmq_batch repeated{sizeof(pmq_batch), topic.c_str(),      0, PMQ_PAYLOAD_RAW, "raw", many.data(),
                     many.size(),       sizeof(pmq_record), 0, nullptr};
  result = export_batch(repeated, {}, &schema, &array);
  EXPECT_EQ(result.error,
            "column 'pico_topic' would hold more than 2 GiB of string data, beyond what int32 offsets address");
  munmap(region, kGiB);
}

}  // namespace
}  // namespace picomq::arrow::testing
