// Commit coalescing and honest counts, over a fake transport.
#include "runtime/delivery/offset_committer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace picomq::runtime {
namespace {

class FakeTransport final : public OffsetTransport {
 public:
  std::string store_offset(const TopicPartition& tp, int64_t next_offset) override {
    std::lock_guard lock(mutex);
    if (refuse_store) return "Local: Erroneous state";
    stored[tp] = next_offset;
    return {};
  }
  void commit_async() override {
    std::lock_guard lock(mutex);
    ++async_commits;
    in_flight.push_back(stored);
  }
  void serve_commit_results() override {
    std::vector<std::string> results;
    {
      std::lock_guard lock(mutex);
      results.swap(finished);
    }
    for (auto& r : results) committer->commit_done(r);
  }
  std::string commit_sync() override {
    std::lock_guard lock(mutex);
    ++sync_commits;
    committed = stored;
    return sync_error;
  }
  void wake() override { ++wakes; }
  // The broker answers the oldest commit in flight.
  void answer(std::string error = {}) {
    std::lock_guard lock(mutex);
    if (error.empty()) committed = in_flight.front();
    in_flight.erase(in_flight.begin());
    finished.push_back(std::move(error));
  }

  std::mutex mutex;
  OffsetCommitter* committer = nullptr;
  std::map<TopicPartition, int64_t> stored, committed;
  std::vector<std::map<TopicPartition, int64_t>> in_flight;
  std::vector<std::string> finished;
  int async_commits = 0, sync_commits = 0;
  std::atomic<int> wakes{0};
  bool refuse_store = false;
  std::string sync_error;
};

const TopicPartition A{"t", 0};

TEST(OffsetCommitter, OneCommitInFlightAndTheOffsetsStoredMeanwhileGoWithTheNext) {
  FakeTransport t;
  OffsetCommitter c(t, "test");
  t.committer = &c;
  c.store(A, 10);
  EXPECT_EQ(t.wakes, 1) << "a store wakes the committing thread";
  c.commit_stored();
  EXPECT_EQ(t.async_commits, 1);
  c.store(A, 20);
  c.store(A, 30);
  EXPECT_TRUE(c.look_again_in(OffsetCommitter::Clock::now(), std::chrono::milliseconds(2)));
  c.commit_stored();
  EXPECT_EQ(t.async_commits, 1) << "no second commit while one is in flight";
  t.answer();
  c.commit_stored();  // serves the answer, then sends what was stored meanwhile
  EXPECT_EQ(t.async_commits, 2);
  EXPECT_EQ(c.counts().committed, 1u) << "only the first store is known committed";
  t.answer();
  c.commit_stored();
  EXPECT_EQ(t.async_commits, 2) << "nothing new stored: no commit";
  EXPECT_EQ(t.committed.at(A), 30);
  const auto n = c.counts();
  EXPECT_EQ(n.stored, 3u);
  EXPECT_EQ(n.committed, 3u);
  EXPECT_EQ(n.commits, 2u);
}

TEST(OffsetCommitter, AFailedCommitIsMadeAgainWithTheNextOne) {
  FakeTransport t;
  OffsetCommitter c(t, "test");
  t.committer = &c;
  c.store(A, 10);
  c.commit_stored();
  t.answer("Broker: Coordinator not available");
  c.commit_stored();  // serves the failure: the offsets are pending again and go out at once
  EXPECT_EQ(t.async_commits, 2);
  EXPECT_EQ(c.counts().committed, 0u);
  EXPECT_EQ(c.counts().failed_commits, 1u);
  t.answer();
  c.commit_stored();
  EXPECT_EQ(c.counts().committed, 1u);
  EXPECT_EQ(t.committed.at(A), 10);
}

TEST(OffsetCommitter, AStoreTheClientRefusesIsNotCounted) {
  FakeTransport t;
  OffsetCommitter c(t, "test");
  t.committer = &c;
  t.refuse_store = true;
  c.store(A, 10);
  EXPECT_EQ(c.counts().stored, 0u);
  c.commit_stored();
  EXPECT_EQ(t.async_commits, 0);
}

TEST(OffsetCommitter, ASynchronousCommitCoversEverythingStored) {
  FakeTransport t;
  OffsetCommitter c(t, "test");
  t.committer = &c;
  c.store(A, 10);
  c.store(A, 20);
  EXPECT_TRUE(c.commit_sync("shutdown"));
  EXPECT_EQ(c.counts().committed, 2u);
  t.sync_error = "Broker: Not coordinator";
  c.store(A, 30);
  EXPECT_FALSE(c.commit_sync("shutdown"));
  EXPECT_EQ(c.counts().committed, 2u);
}

TEST(OffsetCommitter, StoresFromTheDeliveryThreadRaceCommitsFromTheConsumerThread) {
  FakeTransport t;
  OffsetCommitter c(t, "test");
  t.committer = &c;
  constexpr int kStores = 5000;
  std::thread delivery([&] {
    for (int i = 1; i <= kStores; ++i) c.store(A, i);
  });
  std::atomic<bool> stop{false};
  std::thread broker([&] {
    while (!stop) {
      {
        std::lock_guard lock(t.mutex);
        if (t.in_flight.empty()) continue;
      }
      t.answer();
    }
  });
  while (c.counts().stored < kStores || c.in_flight() ||
         c.look_again_in(OffsetCommitter::Clock::now(), std::chrono::milliseconds(2)))
    c.commit_stored();
  delivery.join();
  // Whatever was stored last gets committed.
  while (c.counts().committed < kStores) c.commit_stored();
  stop = true;
  broker.join();
  EXPECT_EQ(t.committed.at(A), kStores);
}

TEST(OffsetCommitter, CommitsCoalesceOverTheIntervalAndTheSynchronousOnesIgnoreIt) {
  using std::chrono::milliseconds;
  FakeTransport t;
  OffsetCommitter c(t, "test", milliseconds(1000));
  t.committer = &c;
  const auto t0 = OffsetCommitter::Clock::now();
  c.store(A, 10);
  c.commit_stored(t0);
  EXPECT_EQ(t.async_commits, 1) << "the first commit goes at once";
  t.answer();
  c.store(A, 20);
  c.store(A, 30);
  c.commit_stored(t0 + milliseconds(300));
  EXPECT_EQ(t.async_commits, 1) << "within the interval the stored offsets wait";
  EXPECT_EQ(c.look_again_in(t0 + milliseconds(300), milliseconds(2)), milliseconds(700));
  c.store(A, 40);
  c.commit_stored(t0 + milliseconds(1000));
  EXPECT_EQ(t.async_commits, 2) << "one commit for everything stored meanwhile";
  EXPECT_EQ(c.look_again_in(t0 + milliseconds(1000), milliseconds(2)), std::nullopt);
  t.answer();
  c.commit_stored(t0 + milliseconds(1001));
  EXPECT_EQ(t.committed.at(A), 40) << "the newest offset, not each one";
  EXPECT_EQ(c.counts().committed, 4u);
  // A commit in flight at the end of the interval: the next waits for its answer, then goes.
  c.store(A, 50);
  c.commit_stored(t0 + milliseconds(2000));
  c.store(A, 60);
  c.commit_stored(t0 + milliseconds(3000));
  EXPECT_EQ(t.async_commits, 3);
  EXPECT_EQ(c.look_again_in(t0 + milliseconds(3000), milliseconds(2)), milliseconds(2));
  t.answer();
  c.commit_stored(t0 + milliseconds(3002));
  EXPECT_EQ(t.async_commits, 4);
  // Revocation and shutdown do not wait for the interval.
  t.answer();
  c.store(A, 70);
  c.commit_stored(t0 + milliseconds(3003));
  EXPECT_EQ(t.async_commits, 4);
  EXPECT_TRUE(c.commit_sync("shutdown"));
  EXPECT_EQ(t.committed.at(A), 70);
  EXPECT_EQ(c.look_again_in(t0 + milliseconds(3004), milliseconds(2)), std::nullopt) << "nothing waits after it";
}

TEST(OffsetCommitter, OnceTheConsumerCaughtUpAHeldCommitGoesAtOnce) {
  using std::chrono::milliseconds;
  FakeTransport t;
  OffsetCommitter c(t, "test", milliseconds(1000));
  t.committer = &c;
  const auto t0 = OffsetCommitter::Clock::now();
  int asked = 0;
  c.store(A, 10);
  c.commit_stored(t0, [&] { return ++asked, true; });
  EXPECT_EQ(asked, 0) << "asked only while a commit is held";
  t.answer();
  c.store(A, 20);
  c.commit_stored(t0 + milliseconds(10), [&] { return ++asked, false; });
  EXPECT_EQ(t.async_commits, 1) << "more records are coming: the commit waits";
  c.commit_stored(t0 + milliseconds(20), [&] { return ++asked, true; });
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(t.async_commits, 2) << "the end of the burst is committed at once";
}

}  // namespace
}  // namespace picomq::runtime
