#pragma once
// The accumulator: consecutive batches for one destination (a table, an index, an object) gathered
// into one *segment* — one COPY and one transaction, one large INSERT, one object — that commits
// as a whole. Every batch's write (its sdk::Pending) completes when its segment commits, with the
// segment's outcome: a failed commit fails all of the segment's batches, and none is acknowledged
// (its offset committed) before the data it carries is durable.
//
// A segment opens on the first batch for its key and commits when the first of these comes:
//   - commit_interval after it opened (0: every batch is a segment of its own);
//   - idle without a new batch (the runtime sends the next batch as soon as a write is accepted,
//     so a quiet spell means there is nothing more for now, and waiting would only hold records);
//     a batch the sink is still preparing (preparing(): a lookup, a replay check before its
//     append) counts as one on its way, so no segment commits for idle meanwhile;
//   - max_batches, max_records or max_bytes reached;
//   - max_open segments are open and a batch for another key comes (the oldest commits);
//   - flush() (ABI 2.2 flush, partitions revoked, shutdown) or close().
// A sink with max_batches above its descriptor's max_in_flight waits for batches that cannot
// come (the runtime keeps at most max_in_flight writes pending): keep max_batches <= max_in_flight.
//
//   struct TableSegment : kit::Segment {
//     void commit() override { send(body); }            // throw sdk::RetryableError etc. on failure
//     std::string body;
//   };
//   sdk::Pending write_batch(const sdk::Batch& batch) {
//     std::string rows = encode(batch);                  // fail this batch alone *before* append
//     sdk::Pending write = pending();
//     accumulator_.append(table_of(batch), write, {rows.size(), batch.size()},
//         [&] { return std::make_unique<TableSegment>(); },
//         [&](kit::Segment& s) { static_cast<TableSegment&>(s).body += rows; });
//     return write;
//   }
//
// Threads: append() from any number of writer threads; a segment's fill and commit never overlap
// (each segment has its own lock); commits run on the thread that triggers them — a writer that
// filled a segment up, flush()'s caller, or the accumulator's own timer thread for commit_interval
// and idle. With background_commits, every commit but flush()'s and seal()'s runs on the
// accumulator's committer thread instead, in the order the segments were sealed: a writer never
// waits for a commit, and the next batch for a key opens a new segment while the previous one
// commits (for segments that do not share a connection, the next COPY streams beside the COMMIT).
// With committers > 1, that many commits run at once: segments of different keys (tables) side by
// side, and with ordered_per_key = false also consecutive segments of one key (for destinations
// where the order of two inserts does not matter, e.g. one insert on the wire while the previous
// one is still being merged by the server).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "picomq/sdk.hpp"

namespace picomq::kit {

struct AccumulatorLimits {
  std::chrono::milliseconds commit_interval{1000};
  std::chrono::milliseconds idle{10};
  size_t max_batches = 64;
  uint64_t max_records = 0;  // 0: no limit
  uint64_t max_bytes = 0;    // 0: no limit
  size_t max_open = 1;       // segments (keys) open at once
  // Segments that fill up, are pushed out by max_open, or whose commit_interval or idle time is
  // up commit on a thread of the accumulator's own, not on the writer's (see Threads above).
  // Sealed segments then wait for their commit beside the open ones: up to max_open + the
  // committer's queue hold destination resources (connections) at once.
  bool background_commits = false;
  // background_commits: threads committing sealed segments at once (at least 1).
  size_t committers = 1;
  // With committers > 1: a key's segments commit one after another, in the order they were
  // sealed (true), or side by side too (false).
  bool ordered_per_key = true;
};

// The sink's part of one segment.
class Segment {
 public:
  virtual ~Segment() = default;
  // Makes everything appended durable. Throw an SDK outcome on failure (RetryableError: nothing
  // of it is written; PartialWriteError: maybe some; FatalError): every batch of the segment
  // fails with it. Any other exception counts as PartialWriteError.
  virtual void commit() = 0;
  // The segment will not commit (an append into it failed, or the sink closes without a
  // commit): release what it holds (e.g. ROLLBACK). Must not throw.
  virtual void abandon() noexcept {}
};

// How much one batch adds to its segment.
struct AppendSize {
  uint64_t bytes = 0;
  uint64_t records = 0;
};

// What a commit covered, for a sink's logs and counters.
struct CommitReport {
  std::string key;
  size_t batches = 0;
  uint64_t records = 0, bytes = 0;
  std::chrono::milliseconds open_for{0};  // from the first append to the commit's start
  std::chrono::milliseconds took{0};      // the commit itself
  std::string trigger;                    // "commit_interval", "idle", "max_batches", "flush", ...
  bool ok = false;
  std::string error;
};

class Accumulator {
 public:
  using Opener = std::function<std::unique_ptr<Segment>()>;
  using Filler = std::function<void(Segment&)>;

  explicit Accumulator(AccumulatorLimits limits, std::function<void(const CommitReport&)> on_commit = nullptr);
  ~Accumulator();
  Accumulator(const Accumulator&) = delete;
  Accumulator& operator=(const Accumulator&) = delete;

  // Adds one batch to the open segment of `key`, opening one with `open` when there is none;
  // `fill` adds the batch's data. `write` completes when that segment commits. A throw from
  // `open` fails this write alone; a throw from `fill` abandons the segment: this write fails
  // with the thrown outcome, the segment's earlier writes are retried (nothing of them is durable).
  void append(const std::string& key, sdk::Pending write, AppendSize size, const Opener& open, const Filler& fill);

  // Held by a write from its start to its append(): while any is held, no segment commits for
  // being idle (commit_interval and the limits still apply). A batch being prepared is not a
  // quiet spell, and the segment it is bound for would otherwise commit just before it comes.
  class [[nodiscard]] PreparingBatch {
   public:
    explicit PreparingBatch(Accumulator& a) : a_(&a) { a_->begin_preparing(); }
    ~PreparingBatch() {
      if (a_) a_->end_preparing();
    }
    PreparingBatch(const PreparingBatch&) = delete;
    PreparingBatch& operator=(const PreparingBatch&) = delete;

   private:
    Accumulator* a_;
  };
  PreparingBatch preparing() { return PreparingBatch(*this); }

  // Commits the segment of `key` now, on the caller's thread (no-op when none is open).
  void seal(const std::string& key, std::string_view trigger = "seal");
  // Commits every open segment now (ABI 2.2 flush, a revoke, shutdown), on the caller's thread;
  // with background_commits, then waits for the committer to finish what it was given, so every
  // write appended before flush() has completed when it returns.
  void flush(std::string_view trigger = "flush");
  // Seals every open segment now without waiting: with background_commits they go to the
  // committers (flush() minus its wait; for an ABI flush while other commits are in flight, e.g.
  // the runtime's idle flush: the host waits for the writes' completions itself, and a stalled
  // commit of one key must not keep the caller from delivering another key's batches);
  // without, they commit on the caller's thread, as flush().
  void seal_all(std::string_view trigger = "flush");
  // Abandons every open segment, retrying their writes with `reason` (the destination is gone).
  void abandon_all(const std::string& reason);
  // flush(), then stops the timer thread. append() after close() fails the write (fatal).
  void close();

  size_t open_segments() const;
  const AccumulatorLimits& limits() const { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string key;
    std::mutex mutex;  // fill and commit of this segment
    std::unique_ptr<Segment> segment;
    std::vector<sdk::Pending> writes;
    AppendSize size;
    Clock::time_point opened, last_append;
    bool done = false;     // committed or abandoned: no more appends
    uint64_t handoff = 0;  // background_commits: its number among the segments handed off
  };

  std::shared_ptr<Entry> take(const std::string& key);  // mutex_ held; removes it from open_
  void commit(const std::shared_ptr<Entry>& entry, std::string_view trigger);
  // A sealed segment's commit: on the committer thread with background_commits, else here.
  void commit_sealed(std::shared_ptr<Entry> entry, std::string_view trigger);
  void committer_main();
  // mutex_ held: the oldest sealed segment a committer may take now (sealed_.end(): none).
  std::deque<std::pair<std::shared_ptr<Accumulator::Entry>, std::string>>::iterator next_ready();
  void abandon(const std::shared_ptr<Entry>& entry, const std::string& reason);
  void timer_main();
  bool full(const Entry& entry) const;
  void begin_preparing();
  void end_preparing();

  AccumulatorLimits limits_;
  std::function<void(const CommitReport&)> on_commit_;
  mutable std::mutex mutex_;  // open_, order_, closing_
  std::condition_variable wake_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> open_;
  std::vector<std::string> order_;  // keys of open_ by age, oldest first
  bool closing_ = false;
  size_t preparing_ = 0;  // writes between their start and their append (PreparingBatch)
  // The timer's wake-ups: a segment that gets its first batch bumps changes_ (and wakes the
  // timer) only when its deadline comes before timer_deadline_, the one the timer sleeps towards
  // (time_point::max() while it looks through the segments, so that none it missed is lost).
  uint64_t changes_ = 0;
  Clock::time_point timer_deadline_ = Clock::time_point::max();
  // background_commits: sealed segments waiting for a committer, oldest first.
  std::deque<std::pair<std::shared_ptr<Entry>, std::string>> sealed_;
  std::condition_variable sealed_wake_, sealed_done_;
  uint64_t handed_off_ = 0;                          // segments given to the committers so far (their numbers)
  std::set<uint64_t> unfinished_;                    // numbers of those not committed yet (queued or committing)
  std::unordered_set<std::string> committing_keys_;  // ordered_per_key: keys a committer holds
  bool committer_stopped_ = false;                   // close(): later seals commit on their own thread
  std::thread timer_;
  std::vector<std::thread> committers_;
};

}  // namespace picomq::kit
