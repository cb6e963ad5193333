// The accumulator through a real sink in the fake host: batches share segments, writes complete
// only when their segment commits, a failure fails every batch of its segment.
#include "picomq/kit/accumulator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "picomq/kit/testing/fake_host.hpp"

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using kit::testing::FakeHost;
using kit::testing::TestBatch;
using namespace std::chrono_literals;

namespace {

// What the destination got: one entry per committed segment.
struct Destination {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::vector<int64_t>>> commits;  // key, first offsets of its batches
  std::atomic<int> fail_next_commits{0};
  std::atomic<int> abandoned{0};
  std::atomic<bool> fail_next_fill{false};
  std::vector<kit::CommitReport> reports;
  // A gate commits wait at while held (a COMMIT the server takes its time over).
  std::mutex gate_mutex;
  std::condition_variable gate;
  bool hold_commits = false;
  std::vector<std::thread::id> commit_threads;
  void open_gate() {
    {
      std::lock_guard lock(gate_mutex);
      hold_commits = false;
    }
    gate.notify_all();
  }
};
Destination* destination = nullptr;
kit::AccumulatorLimits limits;

struct TestSegment : kit::Segment {
  std::string key;
  std::vector<int64_t> batches;
  void commit() override {
    if (destination->fail_next_commits > 0) {
      --destination->fail_next_commits;
      throw sdk::RetryableError("commit refused");
    }
    {
      std::unique_lock gate(destination->gate_mutex);
      destination->gate.wait(gate, [] { return !destination->hold_commits; });
    }
    std::lock_guard lock(destination->mutex);
    destination->commits.emplace_back(key, batches);
    destination->commit_threads.push_back(std::this_thread::get_id());
  }
  void abandon() noexcept override { ++destination->abandoned; }
};

class AccumulatingSink : public sdk::BaseSink<AccumulatingSink> {
 public:
  static constexpr std::string_view sink_name = "accumulating";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 64;

  void open(const sdk::Config&) {
    accumulator_ = std::make_unique<kit::Accumulator>(limits, [](const kit::CommitReport& r) {
      std::lock_guard lock(destination->mutex);
      destination->reports.push_back(r);
    });
  }
  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending write = pending();
    const std::string key(batch.topic());
    const int64_t first = batch[0].offset();
    accumulator_->append(key, write, {batch.size() * 10, batch.size()},
                         [&] {
                           auto s = std::make_unique<TestSegment>();
                           s->key = key;
                           return s;
                         },
                         [&](kit::Segment& s) {
                           if (destination->fail_next_fill.exchange(false)) throw sdk::FatalError("cannot encode");
                           static_cast<TestSegment&>(s).batches.push_back(first);
                         });
    return write;
  }
  void flush(std::chrono::milliseconds) { accumulator_->flush(); }
  void close() { accumulator_->close(); }

 private:
  std::unique_ptr<kit::Accumulator> accumulator_;
};

class KitAccumulator : public ::testing::Test {
 protected:
  void SetUp() override {
    destination = &dest_;
    limits = kit::AccumulatorLimits{};
  }
  void TearDown() override { destination = nullptr; }
  TestBatch batch(std::string topic, int64_t first, size_t n = 3) {
    std::vector<std::string> payloads(n, "{}");
    return TestBatch::json(std::move(topic), 0, first, payloads);
  }
  // `threads` writers at once, each `per_thread` one-record batches spread over `keys` keys.
  std::vector<std::shared_ptr<kit::testing::Write>> write_from_threads(FakeHost& host, int threads, int per_thread,
                                                                        int keys) {
    std::vector<std::shared_ptr<kit::testing::Write>> writes;
    std::mutex writes_mutex;
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
      writers.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          auto w = host.start_write(batch("k" + std::to_string((t + i) % keys), t * 1000 + i, 1));
          std::lock_guard lock(writes_mutex);
          writes.push_back(w);
        }
      });
    for (auto& w : writers) w.join();
    return writes;
  }
  Destination dest_;
};

}  // namespace

TEST_F(KitAccumulator, ConsecutiveBatchesShareOneSegmentAndCompleteOnlyWhenItCommits) {
  limits.commit_interval = 10s;
  limits.idle = 10s;  // nothing but flush() commits
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto a = host.start_write(batch("t", 0)), b = host.start_write(batch("t", 3)), c = host.start_write(batch("t", 6));
  EXPECT_FALSE(a->completed());
  EXPECT_FALSE(c->completed()) << "no batch is acknowledged before its segment is durable";
  host.flush();
  for (auto& w : {a, b, c}) EXPECT_EQ(w->wait(5s).status, PMQ_WRITE_OK);
  ASSERT_EQ(dest_.commits.size(), 1u);
  EXPECT_EQ(dest_.commits[0].second, (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(dest_.reports.at(0).batches, 3u);
  EXPECT_EQ(dest_.reports.at(0).records, 9u);
  EXPECT_EQ(dest_.reports.at(0).trigger, "flush");
  for (auto& w : {a, b, c}) EXPECT_EQ(w->completions(), 1);
}

TEST_F(KitAccumulator, AFailedCommitFailsEveryBatchOfTheSegmentAndNoneOfTheNext) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto a = host.start_write(batch("t", 0)), b = host.start_write(batch("t", 3));
  dest_.fail_next_commits = 1;
  host.flush();
  auto oa = a->wait(5s), ob = b->wait(5s);
  EXPECT_EQ(oa.status, PMQ_WRITE_RETRY);
  EXPECT_EQ(ob.status, PMQ_WRITE_RETRY);
  EXPECT_NE(oa.error.find("commit refused"), std::string::npos);
  EXPECT_EQ(dest_.abandoned, 1);
  auto c = host.start_write(batch("t", 0));
  host.flush();
  EXPECT_EQ(c->wait(5s).status, PMQ_WRITE_OK) << "a new segment after the failed one";
}

TEST_F(KitAccumulator, MaxBatchesCommitsOnTheWritersThreadAndIdleAndIntervalOnTheTimer) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.max_batches = 2;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    auto a = host.start_write(batch("t", 0));
    auto b = host.start_write(batch("t", 3));
    EXPECT_TRUE(a->completed() && b->completed()) << "the second batch filled the segment: committed in its write";
    EXPECT_EQ(dest_.reports.at(0).trigger, "limit");
  }
  limits.max_batches = 64;
  limits.idle = 50ms;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    auto a = host.start_write(batch("idle", 0));
    EXPECT_EQ(a->wait(5s).status, PMQ_WRITE_OK) << "committed by the idle timer";
  }
  limits.idle = 10s;
  limits.commit_interval = 100ms;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    const auto start = std::chrono::steady_clock::now();
    auto a = host.start_write(batch("interval", 0));
    EXPECT_EQ(a->wait(5s).status, PMQ_WRITE_OK);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms) << "not before commit_interval";
    EXPECT_EQ(dest_.reports.back().trigger, "commit_interval");
  }
}

TEST_F(KitAccumulator, SegmentsPerKeyAreBoundedAndTheOldestCommitsToMakeRoom) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.max_open = 2;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto a = host.start_write(batch("a", 0)), b = host.start_write(batch("b", 0)), a2 = host.start_write(batch("a", 3));
  EXPECT_FALSE(a->completed());
  EXPECT_FALSE(b->completed());
  auto c = host.start_write(batch("c", 0));
  EXPECT_TRUE(a->completed()) << "a is the oldest open segment";
  EXPECT_TRUE(a2->completed()) << "its second batch went with it";
  EXPECT_FALSE(b->completed());
  host.flush();
  EXPECT_TRUE(b->completed() && c->completed());
  ASSERT_EQ(dest_.commits.size(), 3u);
  EXPECT_EQ(dest_.commits[0], (std::pair<std::string, std::vector<int64_t>>{"a", {0, 3}}));
  EXPECT_EQ(dest_.reports[0].trigger, "max_open");
}

TEST_F(KitAccumulator, AFailedFillFailsItsBatchWithItsOutcomeAndRetriesTheSegmentsEarlierOnes) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto a = host.start_write(batch("t", 0));
  dest_.fail_next_fill = true;
  auto b = host.start_write(batch("t", 3));
  EXPECT_EQ(b->wait(5s).status, PMQ_WRITE_FATAL);
  auto oa = a->wait(5s);
  EXPECT_EQ(oa.status, PMQ_WRITE_RETRY);
  EXPECT_NE(oa.error.find("the segment it was in broke"), std::string::npos);
  EXPECT_EQ(dest_.abandoned, 1);
  EXPECT_TRUE(dest_.commits.empty());
}

TEST_F(KitAccumulator, CloseCommitsWhatIsOpenAndCommitIntervalZeroCommitsEachBatch) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  std::shared_ptr<kit::testing::Write> a;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    a = host.start_write(batch("t", 0));
    host.close();
  }
  EXPECT_EQ(a->wait(1s).status, PMQ_WRITE_OK);
  limits.commit_interval = 0ms;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto b = host.start_write(batch("t", 0));
  EXPECT_TRUE(b->completed());
  EXPECT_EQ(dest_.commits.size(), 2u);
}

TEST_F(KitAccumulator, ManyWritersOnManyKeysLoseNoBatchAndCompleteEachOnce) {
  limits.commit_interval = 20ms;
  limits.idle = 5ms;
  limits.max_batches = 7;
  limits.max_open = 3;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  const auto writes = write_from_threads(host, 4, 200, 5);
  host.flush();
  size_t batches = 0;
  for (auto& w : writes) {
    EXPECT_EQ(w->wait(5s).status, PMQ_WRITE_OK);
    EXPECT_EQ(w->completions(), 1);
  }
  for (const auto& c : dest_.commits) batches += c.second.size();
  EXPECT_EQ(batches, 800u);
}

// background_commits: a writer that fills a segment returns at once; the segment commits on the
// accumulator's committer thread while the next batch for the same key opens a new segment (the
// pipelining a sink with a connection per segment gets: the next COPY streams beside the COMMIT).
// flush() waits for those commits; nothing is lost or completed twice.
TEST_F(KitAccumulator, WithBackgroundCommitsAFullSegmentCommitsOffTheWriterWhileTheNextOneFills) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.max_batches = 2;
  limits.background_commits = true;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  dest_.hold_commits = true;
  auto a = host.start_write(batch("t", 0)), b = host.start_write(batch("t", 3));  // fills the first segment
  auto c = host.start_write(batch("t", 6));  // returns while the first segment's commit waits at the gate
  EXPECT_FALSE(a->completed() || b->completed()) << "not before the commit is through";
  EXPECT_FALSE(c->completed());
  dest_.open_gate();
  EXPECT_EQ(a->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_EQ(b->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_FALSE(c->completed()) << "c is in a segment of its own, still open";
  host.flush();
  EXPECT_TRUE(c->completed()) << "flush() returns once what was appended before it is committed";
  ASSERT_EQ(dest_.commits.size(), 2u);
  EXPECT_EQ(dest_.commits[0].second, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(dest_.commits[1].second, (std::vector<int64_t>{6}));
  EXPECT_NE(dest_.commit_threads[0], std::this_thread::get_id()) << "the full segment committed off the writer";
  EXPECT_EQ(dest_.reports[0].trigger, "limit");
  EXPECT_EQ(dest_.reports[1].trigger, "flush");

  // Pushed out by max_open, and timed out: the committer too; many writers, each write once.
  limits.max_batches = 5;
  limits.max_open = 2;
  limits.idle = 2ms;
  dest_.commits.clear();
  FakeHost many(sdk::descriptor<AccumulatingSink>());
  many.open();
  const auto writes = write_from_threads(many, 3, 150, 4);
  many.flush();
  for (auto& w : writes) {
    EXPECT_TRUE(w->completed()) << "flush() waited for the committer";
    EXPECT_EQ(w->wait(5s).status, PMQ_WRITE_OK);
    EXPECT_EQ(w->completions(), 1);
  }
  size_t batches = 0;
  for (const auto& c : dest_.commits) batches += c.second.size();
  EXPECT_EQ(batches, 450u);
}

// close() with background commits: what is sealed and what is open both commit, and an append
// after it fails.
TEST_F(KitAccumulator, WithBackgroundCommitsCloseCommitsTheSealedAndTheOpenSegments) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.max_batches = 1;
  limits.background_commits = true;
  std::shared_ptr<kit::testing::Write> sealed, open;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    sealed = host.start_write(batch("t", 0));  // full at once: handed to the committer
    host.close();
  }
  EXPECT_EQ(sealed->wait(1s).status, PMQ_WRITE_OK);
  limits.max_batches = 64;
  {
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    open = host.start_write(batch("t", 3));
    host.close();
  }
  EXPECT_EQ(open->wait(1s).status, PMQ_WRITE_OK);
  EXPECT_EQ(dest_.commits.size(), 2u);
}
