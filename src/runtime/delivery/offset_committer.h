#pragma once
// Commit after the write, the Kafka half: written batches store their offsets (delivery
// thread), and the consumer thread commits what is stored, with at most one asynchronous
// commit in flight. Commits coalesce: while records keep coming, one starts at most every
// `offset_commit_interval` (a [[topics]] setting, default 1 s) and carries the newest offsets stored by
// then, so what was written meanwhile is committed by one request instead of one per batch (each
// is a write to the group's log on the broker: docs/runtime.md, "Commit after the write"); once
// the consumer has caught up, what is stored goes at once. An offset is still committed only
// after the write it covers. Revocation, shutdown and the error path commit synchronously,
// whatever the interval.
//
// Pure over OffsetTransport (the consumer client at run time, a fake in tests).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
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
  using Clock = std::chrono::steady_clock;
  struct Counts {
    uint64_t stored = 0;     // offsets stored (one per batch written, or per prefix of one)
    uint64_t committed = 0;  // of those, how many a successful commit has covered
    uint64_t commits = 0;    // successful commit requests
    uint64_t failed_commits = 0;
  };

  // `interval`: the least time between the starts of two asynchronous commits (0: the next
  // one starts as soon as the one in flight is answered).
  OffsetCommitter(OffsetTransport& transport, std::string log_prefix,
                  std::chrono::milliseconds interval = std::chrono::milliseconds(0))
      : transport_(transport), log_prefix_(std::move(log_prefix)), interval_(interval) {}

  // Any thread (the delivery thread).
  void store(const TopicPartition& tp, int64_t next_offset) override;
  // The committing thread: serves finished commits, then starts one if offsets are stored, none
  // is in flight and the interval since the last one has passed, or `caught_up()` says the
  // consumer has written everything there is to read (asked only then: nothing to coalesce with,
  // so the end of a burst is committed at once).
  void commit_stored(Clock::time_point now = Clock::now(), const std::function<bool()>& caught_up = {});
  // The committing thread, through OffsetTransport::serve_commit_results(): `error` empty on
  // success. A failed commit is made again with the next one.
  void commit_done(const std::string& error);
  // The committing thread: revocation and shutdown.
  bool commit_sync(const char* why);
  // Stored offsets wait (behind a commit in flight, whose answer does not wake the poll, or for
  // the interval): how long the committing thread may wait before it looks again, at least
  // `follow_up` while a commit is in flight. Nullopt: nothing waits.
  std::optional<std::chrono::milliseconds> look_again_in(Clock::time_point now,
                                                         std::chrono::milliseconds follow_up) const;
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
  // When the interval lets the next asynchronous commit start (at once before the first).
  Clock::time_point next_allowed() const {
    return last_started_ == Clock::time_point{} ? Clock::time_point{} : last_started_ + interval_;
  }

  const std::chrono::milliseconds interval_;
  bool in_flight_ = false;  // committing thread only, as the two below
  uint64_t covering_ = 0;   // stored_ when the commit in flight was issued
  Clock::time_point last_started_{};
};

}  // namespace picomq::runtime
