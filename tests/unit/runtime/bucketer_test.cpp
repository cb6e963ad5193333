#include "runtime/bucketer.h"

#include <gtest/gtest.h>

#include "runtime/delivery/retry.h"

namespace picomq::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Bucketer, FullBucketIsReadyAtBatchLengthInExactBatches) {
  Bucketer<int> b(3, 100ms);
  const auto t0 = Clock::now();
  const TopicPartition a{"a", 0};
  for (int i = 0; i < 7; ++i) b.add(a, i, t0);
  auto ready = b.take_ready(t0);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].records, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ready[1].records, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(b.size(), 1u) << "the remainder waits for more or for poll_interval";
}

TEST(Bucketer, RunsAreAppendedInOrderAndCutAtBatchLength) {
  Bucketer<int> b(4, 100ms);
  const auto t0 = Clock::now();
  const TopicPartition a{"a", 0};
  b.add(a, std::vector<int>{0, 1, 2}, t0);
  b.add(a, 3, t0);
  b.add(a, std::vector<int>{4, 5, 6, 7, 8}, t0);
  b.add(a, std::vector<int>{}, t0 + 90ms);  // an empty run is no arrival
  auto ready = b.take_ready(t0);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].records, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ready[1].records, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.take_ready(t0 + 100ms).at(0).records, (std::vector<int>{8}));
}

TEST(Bucketer, QuietBucketIsReadyOnlyAfterPollIntervalWithoutArrivals) {
  Bucketer<int> b(1000, 100ms);
  const auto t0 = Clock::now();
  const TopicPartition a{"a", 0};
  b.add(a, 1, t0);
  b.add(a, 2, t0 + 80ms);  // a new arrival restarts the wait
  EXPECT_TRUE(b.take_ready(t0 + 150ms).empty());
  auto ready = b.take_ready(t0 + 180ms);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].records, (std::vector<int>{1, 2}));
  EXPECT_TRUE(b.empty());
}

TEST(Bucketer, BucketsArePerTopicPartition) {
  Bucketer<int> b(2, 100ms);
  const auto t0 = Clock::now();
  b.add({"a", 0}, 1, t0);
  b.add({"a", 1}, 2, t0);
  b.add({"b", 0}, 3, t0);
  EXPECT_TRUE(b.take_ready(t0).empty()) << "no single partition reached batch_length";
  b.add({"a", 1}, 4, t0);
  auto ready = b.take_ready(t0);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].tp, (TopicPartition{"a", 1}));
  EXPECT_EQ(ready[0].records, (std::vector<int>{2, 4}));
  auto part = b.take_partition({"a", 0});
  EXPECT_EQ(part, (std::vector<int>{1}));
  auto all = b.take_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].tp, (TopicPartition{"b", 0}));
  EXPECT_TRUE(b.empty());
}

TEST(Bucketer, NextDeadlineIsTheEarliestQuietBucket) {
  Bucketer<int> b(10, 100ms);
  const auto t0 = Clock::now();
  EXPECT_FALSE(b.next_deadline());
  b.add({"a", 0}, 1, t0 + 30ms);
  b.add({"b", 0}, 1, t0);
  EXPECT_EQ(*b.next_deadline(), t0 + 100ms);
}

TEST(RetryPolicy, BackoffDoublesFrom200msAndIsCappedAt5s) {
  RetryPolicy p;
  EXPECT_EQ(p.max_attempts, 5);
  EXPECT_EQ(p.delay_before(2), 200ms);
  EXPECT_EQ(p.delay_before(3), 400ms);
  EXPECT_EQ(p.delay_before(4), 800ms);
  EXPECT_EQ(p.delay_before(5), 1600ms);
  EXPECT_EQ(p.delay_before(6), 3200ms);
  EXPECT_EQ(p.delay_before(7), 5000ms);
  EXPECT_EQ(p.delay_before(30), 5000ms);
}

}  // namespace
}  // namespace picomq::runtime
