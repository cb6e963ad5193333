// The commit rules of the delivery window, without a broker: a fake sink completes writes in
// any order, the waiter records the back-off instead of sleeping, and the offsets the window
// stores are what would be committed.
#include "runtime/delivery/delivery_window.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "fakes.h"

namespace picomq::runtime::testing {
namespace {

using Policy = config::BadRecordPolicy;
const TopicPartition A{"orders", 0};
const TopicPartition B{"orders", 1};

TEST(DeliveryWindow, OutOfOrderCompletionsAreTakenInOrderAndStoreOffsetsInOrder) {
  WindowRig rig(Policy::Fail, 3);
  rig.sink.hold();
  rig.window->start(prepared_job(A, 0, 10));
  rig.window->start(prepared_job(A, 10, 10));
  rig.window->start(prepared_job(A, 20, 10));
  EXPECT_TRUE(rig.window->full());
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 10, 20})) << "three writes in flight at once";
  rig.sink.complete(2);
  rig.sink.complete(1);
  EXPECT_FALSE(rig.window->oldest_done()) << "the newer writes are done, the oldest is not";
  EXPECT_TRUE(rig.offsets.stored().empty());
  rig.sink.complete(0);
  rig.drain();
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(rig.counted.delivered, 30u);
  EXPECT_TRUE(rig.failures.empty());
}

TEST(DeliveryWindow, AFailureBehindSuccessesCommitsOnlyTheSuccessesAndStopsThePartition) {
  WindowRig rig(Policy::Fail, 4);
  rig.sink.hold();
  for (int i = 0; i < 3; ++i) rig.window->start(prepared_job(A, i * 10, 10));
  rig.window->start(prepared_job(B, 0, 5));
  rig.sink.complete(0);
  rig.sink.complete(1);
  rig.sink.complete(2, {PMQ_WRITE_FATAL, "table is gone"});
  rig.sink.complete(3);
  rig.drain();
  EXPECT_EQ(rig.offsets.stored(), (std::vector<std::pair<TopicPartition, int64_t>>{{A, 10}, {A, 20}, {B, 5}}));
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_EQ(rig.failures[0].first, A);
  EXPECT_NE(rig.failures[0].second.find("orders[0] offsets 20..29 failed permanently"), std::string::npos)
      << rig.failures[0].second;
  EXPECT_NE(rig.failures[0].second.find("table is gone"), std::string::npos);
  EXPECT_TRUE(rig.recording_waiter.delays.empty()) << "a permanent failure is not retried";

  // Nothing later of the failed partition is written: its failed batch stays first on restart.
  rig.window->start(prepared_job(A, 30, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts().size(), 4u);
  EXPECT_EQ(rig.offsets.stored().size(), 3u);
}

TEST(DeliveryWindow, RetryableFailuresAreRetriedOnTheScheduleAndTheOffsetHoldsUntilSuccess) {
  WindowRig rig;
  rig.sink.script({{PMQ_WRITE_RETRY, "busy"}, {PMQ_WRITE_PARTIAL, "timeout"}, {}});
  rig.window->start(prepared_job(A, 0, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 0, 0})) << "the same batch, three times";
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200, 400}));
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10}));
  EXPECT_TRUE(rig.failures.empty());
}

// A sink that holds writes open until flush() (one file or COPY across batches): the resent
// batch is the only write, so nothing else would ever seal it.
TEST(DeliveryWindow, AResentWriteOfASinkThatAccumulatesIsSealedWithFlush) {
  WindowRig rig;
  rig.sink.hold_until_flush();
  rig.sink.script({{PMQ_WRITE_RETRY, "object upload failed"}, {}});
  rig.window->start(prepared_job(A, 0, 10));
  rig.sink.flush();  // the pipeline's flush after poll_interval: the first attempt fails
  auto finished = std::async(std::launch::async, [&] { rig.drain(); });
  const bool done = finished.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!done) rig.sink.flush();  // unblock the window so the test can end
  finished.wait();
  EXPECT_TRUE(done) << "the resent write waited for a flush that never came";
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 0}));
  EXPECT_GE(rig.sink.flushes(), 2) << "the window asked the sink to seal the resent write";
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10}));
  EXPECT_TRUE(rig.failures.empty());
}

TEST(DeliveryWindow, TheFifthFailureFailsThePartitionAfter200To1600msOfBackoff) {
  WindowRig rig;
  rig.sink.script(std::vector<Outcome>(5, {PMQ_WRITE_RETRY, "connection refused"}));
  rig.window->start(prepared_job(A, 0, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts().size(), 5u);
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200, 400, 800, 1600}));
  EXPECT_TRUE(rig.offsets.stored().empty());
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_NE(rig.failures[0].second.find("failed 5 times; last error: retryable failure: connection refused"),
            std::string::npos)
      << rig.failures[0].second;
}

// on_write_failure = "dead_letter": the fifth failure sends the batch to the dead-letter topic
// and the partition goes on; a FATAL one still fails it.
TEST(DeliveryWindow, WithWriteFailuresDeadLetteredTheFifthFailureDeadLettersTheBatchAndThePartitionGoesOn) {
  WindowRig rig(Policy::DeadLetter, 1, /*dead_letter_write_failures=*/true);
  rig.sink.script(std::vector<Outcome>(5, {PMQ_WRITE_RETRY, "connection refused"}));
  rig.window->start(prepared_job(A, 0, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts().size(), 5u) << "the retries first";
  EXPECT_TRUE(rig.failures.empty());
  EXPECT_EQ(rig.letters.sent, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10})) << "committed past it once dead-lettered";
  EXPECT_EQ(rig.counted.delivered, 0u);
  EXPECT_EQ(rig.counted.dead_lettered, 10u);
  rig.window->start(prepared_job(A, 10, 10));
  rig.drain();
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10, 20})) << "the next batch is written as usual";
  rig.sink.script({{PMQ_WRITE_FATAL, "permission denied"}});
  rig.window->start(prepared_job(A, 20, 10));
  rig.drain();
  ASSERT_EQ(rig.failures.size(), 1u) << "a FATAL write still fails the partition";
  EXPECT_EQ(rig.letters.sent.size(), 10u);
}

TEST(DeliveryWindow, FilteredAndSkippedRecordsAtTheEndOfABatchAreCommittedPast) {
  WindowRig rig(Policy::Skip);
  // Offsets 0..4: the sink gets 0..2; 3 was filtered, 4 was undecodable (skip policy).
  PreparedJob job = prepared_job(A, 0, 5);
  job.out.batch.records.resize(3);
  job.out.filtered = 1;
  job.out.bad.push_back({4, BadRecordStage::Decode, "schema json: trailing garbage"});
  rig.window->start(std::move(job));
  rig.drain();
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{5}));
  EXPECT_EQ(rig.counted.filtered, 1u);
  EXPECT_EQ(rig.counted.skipped, 1u);
  EXPECT_EQ(rig.counted.delivered, 3u);
}

TEST(DeliveryWindow, ABatchWhoseRecordsWereAllFilteredIsCommittedWithoutAWrite) {
  WindowRig rig;
  PreparedJob job = prepared_job(A, 0, 4);
  job.out.batch.records.clear();
  job.out.filtered = 4;
  rig.window->start(std::move(job));
  EXPECT_TRUE(rig.window->oldest_done());
  rig.drain();
  EXPECT_TRUE(rig.sink.starts().empty());
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{4}));
}

TEST(DeliveryWindow, ARejectedLastRecordIsSkippedAndTheRestCommitted) {
  WindowRig rig(Policy::Skip);
  rig.sink.script({{PMQ_WRITE_REJECTED, "", {{4, "value too long"}}}});
  rig.window->start(prepared_job(A, 0, 5));
  rig.drain();
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{5}));
  EXPECT_EQ(rig.counted.skipped, 1u);
  EXPECT_EQ(rig.counted.delivered, 4u);
  EXPECT_TRUE(rig.failures.empty());
}

TEST(DeliveryWindow, UnderFailARejectedRecordCommitsWhatPrecedesItAndNamesIt) {
  WindowRig rig(Policy::Fail);
  rig.sink.script({{PMQ_WRITE_REJECTED, "", {{3, "null in a NOT NULL column"}, {4, "too long"}}}});
  rig.window->start(prepared_job(A, 10, 5));
  rig.drain();
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{13}));
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_NE(
      rig.failures[0].second.find("rejected record orders[0] at offset 13: null in a NOT NULL column (and 1 more)"),
      std::string::npos)
      << rig.failures[0].second;
}

TEST(DeliveryWindow, RejectedRecordsAreDeadLetteredWithRetriesBeforeTheOffsetMoves) {
  WindowRig rig(Policy::DeadLetter);
  rig.letters.failures_left = 2;
  rig.sink.script({{PMQ_WRITE_REJECTED, "", {{1, "bad date"}}}});
  rig.window->start(prepared_job(A, 0, 3));
  rig.drain();
  EXPECT_EQ(rig.letters.attempts, 3);
  EXPECT_EQ(rig.letters.sent, (std::vector<int64_t>{1}));
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200, 400}));
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{3}));
  EXPECT_EQ(rig.counted.dead_lettered, 1u);
}

TEST(DeliveryWindow, ADeadLetterTopicThatStaysDownFailsAtTheFirstBadRecord) {
  WindowRig rig(Policy::DeadLetter);
  rig.letters.failures_left = 100;
  PreparedJob job = prepared_job(A, 0, 6);
  job.out.batch.records.erase(job.out.batch.records.begin() + 2);  // offset 2 did not decode
  job.out.bad.push_back({2, BadRecordStage::Decode, "not JSON"});
  rig.window->start(std::move(job));
  rig.drain();
  EXPECT_EQ(rig.letters.attempts, 5);
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{2})) << "written before the bad record, nothing from it on";
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_NE(rig.failures[0].second.find("dead-letter topic 'dlq'"), std::string::npos);
}

TEST(DeliveryWindow, AStopDuringARetryEndsTheWaitLeavesTheBatchUncommittedAndIsNoError) {
  WindowRig rig;
  rig.recording_waiter.stop_at_wait = 2;
  rig.sink.script(std::vector<Outcome>(5, {PMQ_WRITE_RETRY, "down"}));
  rig.window->start(prepared_job(A, 0, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts().size(), 2u) << "no attempt after the stop";
  EXPECT_TRUE(rig.offsets.stored().empty());
  EXPECT_TRUE(rig.failures.empty()) << "a stop is not an error";
  EXPECT_TRUE(rig.window->partition_failed(A)) << "nothing later of the partition may go before it";
  rig.window->start(prepared_job(A, 10, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts().size(), 2u);
}

TEST(DeliveryWindow, ARowsPlanePrefixIsCommittedAndTheRetryStartsAtTheFailedRecord) {
  WindowRig rig;
  rig.sink.script({{PMQ_WRITE_RETRY, "lost connection", {}, 4}, {}});
  rig.window->start(prepared_job(A, 0, 10));
  rig.drain();
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(rig.sink.sizes(), (std::vector<size_t>{10, 6}));
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{4, 10}));
  EXPECT_EQ(rig.counted.delivered, 10u);
}

TEST(DeliveryWindow, CompletionsFromAnotherThreadAreTakenInOrder) {
  WindowRig rig(Policy::Fail, 8);
  rig.sink.hold();
  constexpr int kJobs = 64;
  std::thread completer;
  for (int i = 0; i < kJobs; ++i) {
    if (rig.window->full()) {
      if (completer.joinable()) completer.join();
      const size_t first = static_cast<size_t>(i - 8);
      completer = std::thread([&rig, first] {
        for (size_t k = first + 8; k-- > first;) rig.sink.complete(k);  // newest first
      });
      while (!rig.window->empty()) rig.window->finish_oldest();
    }
    rig.window->start(prepared_job(A, i * 10, 10));
  }
  if (completer.joinable()) completer.join();
  for (size_t k = kJobs - 8; k < kJobs; ++k) rig.sink.complete(k);
  rig.drain();
  std::vector<int64_t> expected;
  for (int i = 1; i <= kJobs; ++i) expected.push_back(i * 10);
  EXPECT_EQ(rig.offsets.offsets(), expected);
}

// ---------------------------------------------------------------- released batches (ABI 2.3)

PreparedJob job_of(const TopicPartition& tp, int64_t first, int n, uint64_t generation = 0) {
  PreparedJob job = prepared_job(tp, first, n);
  job.bytes = static_cast<size_t>(n) * 100;
  job.generation = generation;
  return job;
}

TEST(DeliveryWindow, ReleasedBatchesAreFreedAtOnceAndCommittedInOrderWhenWritten) {
  WindowRig rig(Policy::Fail, 4);
  rig.sink.hold();
  rig.sink.release_on_start();
  for (int i = 0; i < 3; ++i) rig.window->start(job_of(A, i * 10, 10));
  EXPECT_TRUE(rig.window->release_waiting());
  const auto freed = rig.window->collect_released();
  EXPECT_EQ(freed.records, 30u);
  EXPECT_EQ(freed.bytes, 3000u);
  EXPECT_FALSE(rig.window->release_waiting());
  EXPECT_EQ(rig.window->collect_released().records, 0u) << "each batch is freed once";
  for (size_t i = 0; i < 3; ++i) rig.sink.complete(i);
  std::vector<PreparedJob> done;
  while (!rig.window->empty()) done.push_back(rig.window->finish_oldest());
  ASSERT_EQ(done.size(), 3u);
  EXPECT_TRUE(done[1].released);
  EXPECT_EQ(done[1].bytes, 0u) << "no longer counted in the buffer";
  EXPECT_EQ(done[1].records->size(), 10u);
  EXPECT_EQ(done[1].records->first_offset(), 10);
  EXPECT_EQ(done[1].records->last_offset(), 19);
  EXPECT_TRUE(done[1].out.batch.records.empty()) << "the decoded batch is gone";
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(rig.counted.delivered, 30u);
}

TEST(DeliveryWindow, AReleasedBatchThatFailsIsReadAgainFromItsFirstOffsetAndLaterWritesOfItsPartitionCountForNothing) {
  WindowRig rig(Policy::Fail, 4);
  rig.sink.hold();
  rig.sink.release_on_start();
  rig.window->start(job_of(A, 0, 10));
  rig.window->start(job_of(A, 10, 10));
  rig.window->start(job_of(B, 0, 5));
  rig.window->collect_released();
  rig.sink.complete(0, {PMQ_WRITE_RETRY, "upload failed"});
  rig.sink.complete(1);  // written, but it follows a failed batch of its partition
  rig.sink.complete(2);
  rig.drain();
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 10, 0})) << "nothing is resent: the batch was released";
  ASSERT_EQ(rig.rewinds.size(), 1u);
  EXPECT_EQ(rig.rewinds[0], (WindowRig::Rewind{A, 0, 1}));
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200}))
      << "the retry policy's back-off before the rewind";
  EXPECT_EQ(rig.offsets.stored(), (std::vector<std::pair<TopicPartition, int64_t>>{{B, 5}}));
  EXPECT_TRUE(rig.failures.empty());

  // A job consumed before the rewind took effect is stale: not written. The records read
  // again (the new generation) are, and commit.
  rig.window->start(job_of(A, 20, 10, 0));
  rig.window->start(job_of(A, 0, 15, 1));
  rig.window->collect_released();
  rig.sink.complete(3);
  rig.drain();
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 10, 0, 0}));
  EXPECT_EQ(rig.sink.sizes().back(), 15u) << "read again, cut anew";
  EXPECT_EQ(rig.offsets.stored().back(), (std::pair<TopicPartition, int64_t>{A, 15}));
  EXPECT_EQ(rig.counted.delivered, 20u) << "B's 5 and A's 15; the stale write is not counted";
}

TEST(DeliveryWindow, RewindsOfAReleasedBatchUseTheRetryPolicysAttemptsThenThePartitionFails) {
  WindowRig rig(Policy::Fail, 2);
  rig.sink.hold();
  rig.sink.release_on_start();
  for (uint64_t generation = 0; generation < 5; ++generation) {
    rig.window->start(job_of(A, 0, 10, generation));
    rig.window->collect_released();
    rig.sink.complete(generation, {PMQ_WRITE_PARTIAL, "timeout"});
    rig.drain();
  }
  EXPECT_EQ(rig.rewinds.size(), 4u);
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200, 400, 800, 1600}));
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_NE(rig.failures[0].second.find(
                "orders[0] offsets 0..9 failed 5 times; last error: failure, possibly partly written: timeout"),
            std::string::npos)
      << rig.failures[0].second;
  EXPECT_TRUE(rig.offsets.stored().empty());
}

TEST(DeliveryWindow, ASuccessfulWriteAfterARewindStartsTheAttemptsAgain) {
  WindowRig rig(Policy::Fail, 2);
  rig.sink.hold();
  rig.sink.release_on_start();
  size_t call = 0;
  auto write = [&](int64_t first, uint64_t generation, Outcome outcome) {
    rig.window->start(job_of(A, first, 10, generation));
    rig.window->collect_released();
    rig.sink.complete(call++, std::move(outcome));
    rig.drain();
  };
  write(0, 0, {PMQ_WRITE_RETRY, "down"});
  write(0, 1, {});
  write(10, 1, {PMQ_WRITE_RETRY, "down"});
  EXPECT_EQ(rig.recording_waiter.delays, (std::vector<int64_t>{200, 200})) << "attempt 1 again, not 2";
  EXPECT_EQ(rig.rewinds.back(), (WindowRig::Rewind{A, 10, 2}));
}

TEST(DeliveryWindow, APermanentFailureOfAReleasedBatchFailsThePartitionWithoutRewinding) {
  WindowRig rig;
  rig.sink.hold();
  rig.sink.release_on_start();
  rig.window->start(job_of(A, 0, 10));
  rig.window->collect_released();
  rig.sink.complete(0, {PMQ_WRITE_FATAL, "bucket is gone"});
  rig.drain();
  EXPECT_TRUE(rig.rewinds.empty());
  ASSERT_EQ(rig.failures.size(), 1u);
  EXPECT_NE(rig.failures[0].second.find("orders[0] offsets 0..9 failed permanently: permanent failure: bucket is gone"),
            std::string::npos)
      << rig.failures[0].second;
}

TEST(DeliveryWindow, AStopDuringTheBackOffBeforeARewindLeavesTheBatchUncommittedWithoutFailing) {
  WindowRig rig(Policy::Fail, 2);
  rig.sink.hold();
  rig.sink.release_on_start();
  rig.recording_waiter.stop_at_wait = 1;
  rig.window->start(job_of(A, 0, 10));
  rig.window->start(job_of(A, 10, 10));
  rig.window->collect_released();
  rig.sink.complete(0, {PMQ_WRITE_RETRY, "down"});
  rig.sink.complete(1);
  rig.drain();
  EXPECT_TRUE(rig.rewinds.empty());
  EXPECT_TRUE(rig.failures.empty());
  EXPECT_TRUE(rig.offsets.stored().empty()) << "read again from the committed offset on restart";
}

TEST(DeliveryWindow, ARejectionAfterTheReleaseIsReadAgainBecauseTheRecordsAreGone) {
  WindowRig rig(Policy::Skip);
  rig.sink.hold();
  rig.sink.release_on_start();
  rig.window->start(job_of(A, 0, 10));
  rig.window->collect_released();
  rig.sink.complete(0, {PMQ_WRITE_REJECTED, "", {{3, "bad"}}});
  rig.drain();
  ASSERT_EQ(rig.rewinds.size(), 1u);
  EXPECT_EQ(rig.rewinds[0].offset, 0);
  EXPECT_TRUE(rig.offsets.stored().empty());
}

TEST(DeliveryWindow, ABatchWithRecordsForTheBadRecordPolicyIsKeptThroughARelease) {
  WindowRig rig(Policy::Skip);
  rig.sink.hold_until_flush();
  rig.sink.release_on_start();
  rig.sink.script({{PMQ_WRITE_RETRY, "down"}, {}});
  PreparedJob job = job_of(A, 0, 10);
  job.out.batch.records.erase(job.out.batch.records.begin() + 4);
  job.out.bad.push_back({4, BadRecordStage::Decode, "not JSON"});
  rig.window->start(std::move(job));
  EXPECT_EQ(rig.window->collect_released().records, 0u) << "the bad record's bytes are still needed";
  rig.sink.flush();
  rig.drain();
  EXPECT_TRUE(rig.rewinds.empty());
  EXPECT_EQ(rig.sink.starts(), (std::vector<int64_t>{0, 0})) << "resent as usual";
  EXPECT_EQ(rig.offsets.offsets(), (std::vector<int64_t>{10}));
  EXPECT_EQ(rig.counted.skipped, 1u);
}

}  // namespace
}  // namespace picomq::runtime::testing
