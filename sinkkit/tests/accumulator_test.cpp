// The accumulator through a real sink in the fake host: batches share segments, writes complete
// only when their segment commits, a failure fails every batch of its segment.
#include "picomq/kit/accumulator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
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
  std::string hold_only;                               // when set, only that key's commits wait at the gate
  std::atomic<int> committing{0}, most_committing{0};  // commits inside commit() at once
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
    const int now = ++destination->committing;
    for (int most = destination->most_committing;
         now > most && !destination->most_committing.compare_exchange_weak(most, now);) {}
    {
      std::unique_lock gate(destination->gate_mutex);
      destination->gate.wait(gate, [&] {
        return !destination->hold_commits || (!destination->hold_only.empty() && destination->hold_only != key);
      });
    }
    --destination->committing;
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
    last_accumulator = accumulator_.get();
  }
  static inline kit::Accumulator* last_accumulator = nullptr;  // the latest open sink's
  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending write = pending();
    const std::string key(batch.topic());
    const int64_t first = batch[0].offset();
    accumulator_->append(
        key, write, {batch.size() * 10, batch.size()},
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

// committers = 2: a table whose commit is slow does not hold up another table's (two inserts in
// flight when tables differ), while one table's segments still commit one after another, in
// order; flush() waits for the slow one even when later segments completed before it.
TEST_F(KitAccumulator, WithTwoCommittersAnotherKeyCommitsBesideASlowOneAndAKeyKeepsItsOrder) {
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.max_batches = 1;  // every batch a segment, sealed at once
  limits.background_commits = true;
  limits.committers = 2;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  dest_.hold_commits = true;
  dest_.hold_only = "a";
  auto a1 = host.start_write(batch("a", 0)), a2 = host.start_write(batch("a", 3));
  auto b1 = host.start_write(batch("b", 0));
  EXPECT_EQ(b1->wait(5s).status, PMQ_WRITE_OK) << "b commits beside a's held commit";
  EXPECT_FALSE(a1->completed());
  EXPECT_FALSE(a2->completed()) << "a's second segment waits for its first";
  EXPECT_EQ(dest_.most_committing.load(), 2) << "two commits at once";
  auto flushed = std::async(std::launch::async, [&] { host.flush(); });
  EXPECT_EQ(flushed.wait_for(200ms), std::future_status::timeout) << "flush() waits for a's commits";
  dest_.open_gate();
  flushed.get();
  EXPECT_TRUE(a1->completed() && a2->completed());
  std::vector<int64_t> a_order;
  for (const auto& [key, firsts] : dest_.commits)
    if (key == "a") a_order.push_back(firsts.at(0));
  EXPECT_EQ(a_order, (std::vector<int64_t>{0, 3})) << "one key's segments in the order they were sealed";

  // ordered_per_key = false: one key's consecutive segments commit side by side too.
  limits.ordered_per_key = false;
  dest_.commits.clear();
  dest_.most_committing = 0;
  dest_.hold_commits = true;
  FakeHost unordered(sdk::descriptor<AccumulatingSink>());
  unordered.open();
  auto c1 = unordered.start_write(batch("a", 10)), c2 = unordered.start_write(batch("a", 13));
  for (int i = 0; i < 500 && dest_.committing.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(dest_.committing.load(), 2) << "both of a's segments inside commit() at once";
  dest_.open_gate();
  EXPECT_EQ(c1->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_EQ(c2->wait(5s).status, PMQ_WRITE_OK);
  unordered.flush();
  EXPECT_EQ(dest_.commits.size(), 2u);
}

// seal_all(): every open segment to the committers at once, without waiting for a held commit
// (flush() would); the held one completes when it is let go, the other one beside it.
TEST_F(KitAccumulator, SealAllHandsOpenSegmentsToTheCommittersWithoutWaitingForAHeldCommit) {
  limits.max_open = 4;
  limits.commit_interval = 10s;
  limits.idle = 10s;
  limits.background_commits = true;
  limits.committers = 2;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto& accumulator = *AccumulatingSink::last_accumulator;
  dest_.hold_commits = true;
  dest_.hold_only = "a";
  auto a = host.start_write(batch("a", 0));
  auto b = host.start_write(batch("b", 0));
  EXPECT_EQ(accumulator.open_segments(), 2u);
  auto sealed = std::async(std::launch::async, [&] { accumulator.seal_all(); });
  EXPECT_EQ(sealed.wait_for(2s), std::future_status::ready) << "seal_all() does not wait for a's held commit";
  EXPECT_EQ(accumulator.open_segments(), 0u);
  EXPECT_EQ(b->wait(5s).status, PMQ_WRITE_OK) << "b commits beside a's held commit";
  EXPECT_FALSE(a->completed());
  dest_.open_gate();
  EXPECT_EQ(a->wait(5s).status, PMQ_WRITE_OK);
  ASSERT_EQ(dest_.reports.size(), 2u);
  EXPECT_EQ(dest_.reports[0].trigger, "flush");
}

// A write still being prepared (a lookup before its append) holds back idle commits: the segment
// it will join stays open for it, however long the preparation; commit_interval still applies.
TEST_F(KitAccumulator, NoSegmentCommitsForIdleWhileABatchIsStillBeingPrepared) {
  limits.commit_interval = 10s;
  limits.idle = 10ms;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  auto& accumulator = *AccumulatingSink::last_accumulator;
  auto a = host.start_write(batch("t", 0));
  std::shared_ptr<kit::testing::Write> b;
  {
    const auto preparing = accumulator.preparing();  // b's lookup, taking 200 ms
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(a->completed()) << "not committed as idle while a batch is on its way";
    b = host.start_write(batch("t", 3));
  }
  EXPECT_EQ(a->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_EQ(b->wait(5s).status, PMQ_WRITE_OK);
  ASSERT_EQ(dest_.commits.size(), 1u) << "b joined a's segment";
  EXPECT_EQ(dest_.commits[0].second, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(dest_.reports[0].trigger, "idle") << "idle once the preparation is over";

  // commit_interval is not held back.
  limits.commit_interval = 100ms;
  dest_.commits.clear();
  FakeHost timed(sdk::descriptor<AccumulatingSink>());
  timed.open();
  auto c = timed.start_write(batch("t", 6));
  const auto preparing = AccumulatingSink::last_accumulator->preparing();
  EXPECT_EQ(c->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_EQ(dest_.reports.back().trigger, "commit_interval");
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

// A segment commits at its own deadline whatever the timer was sleeping towards when it opened:
// nothing open (the timer's long sleep), the deadline of a segment that the timer, flush(), a
// limit or max_open took away since, or an earlier one still open. Each commits after its
// commit_interval (or idle time), never before, and within 2 s of it (a loaded machine); a
// wake-up the timer missed would leave it until the next unrelated one (up to an hour).
TEST_F(KitAccumulator, EverySegmentCommitsAtItsDeadlineWhateverTheTimerWasWaitingFor) {
  using Clock = std::chrono::steady_clock;
  constexpr auto deadline = 80ms;
  for (const bool by_idle : {false, true}) {
    SCOPED_TRACE(by_idle ? "idle" : "commit_interval");
    dest_.reports.clear();
    limits = kit::AccumulatorLimits{};
    limits.commit_interval = by_idle ? 10s : deadline;
    limits.idle = by_idle ? deadline : 10s;
    limits.max_batches = 2;
    limits.max_open = 1;
    const std::string trigger = by_idle ? "idle" : "commit_interval";
    FakeHost host(sdk::descriptor<AccumulatingSink>());
    host.open();
    int64_t offset = 0;
    // One batch in a segment of its own, committed by the timer on time.
    auto expect_on_time = [&](const std::string& key, const std::string& after) {
      const auto start = Clock::now();
      auto w = host.start_write(batch(key, offset++, 1));
      EXPECT_EQ(w->wait(5s).status, PMQ_WRITE_OK) << after;
      const auto took = Clock::now() - start;
      EXPECT_GE(took, deadline) << after;
      EXPECT_LT(took, deadline + 2s) << after;
      std::lock_guard lock(dest_.mutex);
      EXPECT_EQ(dest_.reports.back().trigger, trigger) << after;
    };
    expect_on_time("a", "the first segment: nothing was open");
    expect_on_time("a", "after the timer committed the previous segment");
    host.start_write(batch("b", offset++, 1));
    host.flush();
    expect_on_time("b", "after flush() took the segment the timer was waiting for");
    host.start_write(batch("c", offset++, 1));
    host.start_write(batch("c", offset++, 1));  // max_batches: committed in this write
    expect_on_time("c", "after a full segment committed on its writer");
    host.start_write(batch("d", offset++, 1));
    expect_on_time("e", "after it pushed the segment the timer was waiting for out (max_open)");
  }
  // Two segments open at once, the second 30 ms after the first: each at its own deadline.
  limits = kit::AccumulatorLimits{};
  limits.commit_interval = deadline;
  limits.idle = 10s;
  limits.max_open = 2;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  const auto first_start = Clock::now();
  auto first = host.start_write(batch("x", 0, 1));
  std::this_thread::sleep_for(30ms);
  const auto second_start = Clock::now();
  auto second = host.start_write(batch("y", 0, 1));
  EXPECT_EQ(first->wait(5s).status, PMQ_WRITE_OK);
  const auto first_took = Clock::now() - first_start;
  EXPECT_EQ(second->wait(5s).status, PMQ_WRITE_OK);
  const auto second_took = Clock::now() - second_start;
  EXPECT_GE(first_took, deadline);
  EXPECT_LT(first_took, deadline + 2s);
  EXPECT_GE(second_took, deadline) << "not with the first: its deadline is 30 ms later";
  EXPECT_LT(second_took, deadline + 2s);
}

// Writers on many keys at once and no flush(): every segment still commits by its deadline,
// the last ones of each round too (no later append comes to wake the timer for them), and
// each round's first segment wakes a timer that had nothing to wait for.
TEST_F(KitAccumulator, WithManyWritersAndNoFlushEverySegmentCommitsByItsDeadline) {
  limits.commit_interval = 15ms;
  limits.idle = 10s;
  limits.max_batches = 1000;
  limits.max_open = 8;
  FakeHost host(sdk::descriptor<AccumulatingSink>());
  host.open();
  for (int round = 0; round < 20; ++round) {
    const auto writes = write_from_threads(host, 3, 20, 6);
    for (auto& w : writes) ASSERT_EQ(w->wait(5s).status, PMQ_WRITE_OK) << "round " << round;
  }
  std::lock_guard lock(dest_.mutex);
  size_t batches = 0;
  for (const auto& r : dest_.reports) {
    EXPECT_EQ(r.trigger, "commit_interval");
    EXPECT_LT(r.open_for, 1s) << "committed long after its deadline";
    batches += r.batches;
  }
  EXPECT_EQ(batches, 20u * 60u);
}
