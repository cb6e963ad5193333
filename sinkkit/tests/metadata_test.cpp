#include "picomq/kit/metadata.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace picomq::kit {
namespace {

TEST(Metadata, FieldNamesMatchTheSpec) {
  EXPECT_EQ(kTopicField, "pico_topic");
  EXPECT_EQ(kPartitionField, "pico_partition");
  EXPECT_EQ(kOffsetField, "pico_offset");
  EXPECT_EQ(kTimestampField, "pico_timestamp");
  EXPECT_EQ(kKeyField, "pico_key");
  EXPECT_EQ(kHeadersField, "pico_headers");
}

TEST(Metadata, RecordIdJoinsTopicPartitionOffset) {
  EXPECT_EQ(record_id("orders.eu", 0, 42), "orders.eu:0:42");
  EXPECT_EQ(record_id("t", std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::max()),
            "t:2147483647:9223372036854775807");
}

TEST(Metadata, RecordIdKeepsColonsInTopic) {
  // Partition and offset never contain ':', so the id still splits from the right.
  EXPECT_EQ(record_id("a:b", 0, 1), "a:b:0:1");
  EXPECT_NE(record_id("a", 1, 2), record_id("a:1", 0, 2));
}

}  // namespace
}  // namespace picomq::kit
