#pragma once
// Commit after the write, the Kafka half: written batches store their offsets (delivery
// thread), and the consumer thread commits what is stored, with at most one asynchronous
// commit in flight. A broker completes offset commits one at a time per connection (Kafka 4
// lingers 5 ms on each), so a commit per batch would cap throughput at a few hundred batches a
// second; coalescing commits the same offsets, later by at most one round trip. Revocation and
// shutdown commit synchronously.
//
// Pure over OffsetTransport (the consumer client at run time, a fake in tests).
#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/bucketer.h"

namespace picomq::runtime {

class OffsetTransport {
 public:
  virtual ~OffsetTransport() = default;
  // Stores `next_offset` for `tp` to go out with the next commit: empty, or why it could not.
  virtual std::string store_offset(const TopicPartition& tp, int64_t next_offset) = 0;
  // Commits everything stored; the result reaches OffsetCommitter::commit_done() from
  // serve_commit_results(), on the committing thread.
  virtual void commit_async() = 0;
  virtual void serve_commit_results() = 0;
  // Commits everything stored and waits: empty, or why it failed.
  virtual std::string commit_sync() = 0;
  // Wakes the committing thread's poll so a stored offset goes out now.
  virtual void wake() = 0;
};

// Where the delivery window puts the offset a written batch may commit to.
class OffsetSink {
 public:
  virtual ~OffsetSink() = default;
  virtual void store(const TopicPartition& tp, int64_t next_offset) = 0;
};

class OffsetCommitter : public OffsetSink {
 public:
  struct Counts {
    uint64_t stored = 0;     // offsets stored (one per batch written, or per prefix of one)
    uint64_t committed = 0;  // of those, how many a successful commit has covered
    uint64_t commits = 0;    // successful commit requests
    uint64_t failed_commits = 0;
  };

  OffsetCommitter(OffsetTransport& transport, std::string log_prefix)
      : transport_(transport), log_prefix_(std::move(log_prefix)) {}

  // Any thread (the delivery thread).
  void store(const TopicPartition& tp, int64_t next_offset) override;
  // The committing thread: serves finished commits, then starts one if offsets are stored and
  // none is in flight.
  void commit_stored();
  // The committing thread, through OffsetTransport::serve_commit_results(): `error` empty on
  // success. A failed commit is made again with the next one.
  void commit_done(const std::string& error);
  // The committing thread: revocation and shutdown.
  bool commit_sync(const char* why);
  // Offsets wait behind a commit in flight, whose completion does not wake the poll: the
  // committing thread should look again soon.
  bool follow_up_due() const { return in_flight_ && pending_.load(); }
  bool in_flight() const { return in_flight_; }
  Counts counts() const;

 private:
  OffsetTransport& transport_;
  std::string log_prefix_;
  std::atomic<bool> pending_{false};  // stored since the last commit was issued
  std::atomic<uint64_t> stored_{0};
  std::atomic<uint64_t> committed_{0};
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> failed_commits_{0};
  bool in_flight_ = false;  // committing thread only
  uint64_t covering_ = 0;   // stored_ when the commit in flight was issued
};

}  // namespace picomq::runtime
