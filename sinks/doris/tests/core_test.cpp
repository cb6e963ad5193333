// The Doris sink's pure pieces, without a server: how a batch is cut into Stream Loads and how
// they are named (docs/sinks/doris.md, "Labels").
#include <gtest/gtest.h>

#include "doris/loads.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace picomq::doris {
namespace {

using kit::testing::TestBatch;
using kit::testing::TestRecord;

kit::RecordJsonWriter payload_lines() {
  kit::RecordJsonOptions o;
  o.layout = kit::JsonLayout::PayloadOnly;
  return kit::RecordJsonWriter(o);
}

// Offsets 8..13 with a tombstone at 10: blocks of 5 offsets are 5..9 and 10..14.
TestBatch offsets_8_to_13() {
  std::vector<TestRecord> records;
  for (int64_t o = 8; o <= 13; ++o)
    records.push_back({.offset = o, .payload = o == 10 ? std::nullopt : std::optional<std::string>("{\"n\":1}")});
  return TestBatch("orders", 2, records);
}

TEST(DorisLoads, AreCutAtLabelSpanBlocksAndTombstonesAreLeftOut) {
  const TestBatch b = offsets_8_to_13();
  const Cut cut = cut_loads(b.raw(), payload_lines(), 5, 1 << 20);
  EXPECT_EQ(cut.tombstones, 1u);
  ASSERT_EQ(cut.loads.size(), 2u);
  EXPECT_EQ(cut.loads[0].first, 8);
  EXPECT_EQ(cut.loads[0].last, 9);
  EXPECT_EQ(cut.loads[0].positions, (std::vector<size_t>{0, 1}));
  EXPECT_FALSE(cut.loads[0].ends_at_batch_end);
  EXPECT_EQ(cut.loads[1].first, 11) << "the block's first record (10 was a tombstone)";
  EXPECT_EQ(cut.loads[1].last, 13);
  EXPECT_EQ(cut.loads[1].positions, (std::vector<size_t>{3, 4, 5}));
  EXPECT_EQ(cut.loads[1].lines, (std::vector<std::string>{"{\"n\":1}", "{\"n\":1}", "{\"n\":1}"}));
  EXPECT_TRUE(cut.loads[1].ends_at_batch_end) << "13 is not the block's last offset: a longer batch went on";
  const Cut at_block_end = cut_loads(b.raw(), payload_lines(), 7, 1 << 20);  // blocks 7..13
  ASSERT_EQ(at_block_end.loads.size(), 1u);
  EXPECT_FALSE(at_block_end.loads[0].ends_at_batch_end) << "13 ends its block";
}

TEST(DorisLoads, AreCutAtMaxLoadBytesToo) {
  const TestBatch b = offsets_8_to_13();
  const Cut cut = cut_loads(b.raw(), payload_lines(), 1000, 16);  // two 8-byte lines per load
  ASSERT_EQ(cut.loads.size(), 3u);
  EXPECT_EQ(cut.loads[0].first, 8);
  EXPECT_EQ(cut.loads[1].first, 11);
  EXPECT_EQ(cut.loads[2].first, 13);
}

TEST(DorisLoads, TrimBelowKeepsTheRestAndWhereTheLoadEnds) {
  const TestBatch b = offsets_8_to_13();
  Load load = cut_loads(b.raw(), payload_lines(), 5, 1 << 20).loads[1];
  trim_below(b.raw(), load, 13);
  EXPECT_EQ(load.first, 13);
  EXPECT_EQ(load.last, 13);
  EXPECT_EQ(load.positions, std::vector<size_t>{5});
  EXPECT_TRUE(load.ends_at_batch_end);
  trim_below(b.raw(), load, 20);
  EXPECT_TRUE(load.positions.empty());
  EXPECT_EQ(load.last, 13) << "still says where it ended";
}

TEST(DorisLoads, ChangeEventsCarryTheirOffsetAndTheDeleteFlag) {
  // An upsert is its row with pico_version (the offset) and pico_deleted 0 first; a delete (no
  // payload) the key's fields with pico_deleted 1; a delete without a key is left out.
  const TestBatch b(
      "shop.customers", 0,
      {{.offset = 5, .payload = R"({"id":7,"name":"ada"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":7})"},
       {.offset = 6, .op = PMQ_OP_DELETE, .key_json = R"({"order_id":1,"line":2})"},
       {.offset = 7, .op = PMQ_OP_DELETE},
       {.offset = 8, .payload = "{}", .op = PMQ_OP_UPSERT, .key_json = R"({"id":8})"}});
  const Cut cut = cut_loads(b.raw(), payload_lines(), 100, 1 << 20);
  EXPECT_EQ(cut.keyless_deletes, 1u);
  EXPECT_EQ(cut.tombstones, 0u);
  ASSERT_EQ(cut.loads.size(), 1u);
  EXPECT_EQ(cut.loads[0].positions, (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(cut.loads[0].lines,
            (std::vector<std::string>{R"({"pico_version":5,"pico_deleted":0,"id":7,"name":"ada"})",
                                      R"({"pico_version":6,"pico_deleted":1,"order_id":1,"line":2})",
                                      R"({"pico_version":8,"pico_deleted":0})"}));
}

TEST(DorisLabels, NameThePartitionAndTheRangeWithinDorisLimits) {
  const TestBatch b = offsets_8_to_13();
  EXPECT_EQ(load_label("picomq-sink", b.raw(), 11, 13), "picomq-sink-orders-2-11-13");
  const TestBatch odd("orders.eu/x", 0, {{.offset = 1, .payload = "{}"}});
  const std::string label = load_label("p", odd.raw(), 1, 1);
  for (char c : label)
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':') << label;
  const TestBatch long_topic(std::string(240, 't'), 0, {{.offset = 1, .payload = "{}"}});
  EXPECT_LE(load_label("picomq-sink", long_topic.raw(), 1, 1).size(), 128u);
  EXPECT_NE(load_label("p", long_topic.raw(), 1, 1), load_label("p", long_topic.raw(), 1, 2)) << "still distinct";
}

}  // namespace
}  // namespace picomq::doris
