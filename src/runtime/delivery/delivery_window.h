#pragma once
// The commit rules of one [[topics]] block, between the prepared batches and the sink: writes
// go out in order, up to the sink's max_in_flight at once, and their outcomes are taken
// strictly in order, so offsets are stored in order and only for what is done:
//  - OK: the offset just past the batch (or past its last filtered / bad record) is stored;
//  - RETRY / PARTIAL: the same batch again, one write at a time, on the retry policy; the
//    offset holds; the last attempt's failure, or a FATAL one, fails the partition; a resend
//    still pending after poll_interval is sealed with the sink's flush() (nothing else comes);
//  - REJECTED: the named records go to the bad-record policy (skip / dead_letter) and the
//    rest counts as written; under `fail` the records before the first rejected one are
//    committed and the partition fails;
//  - a failed partition writes nothing more (its failed batch stays first on restart), and a
//    stop during a back-off leaves the batch uncommitted without failing the sink;
//  - a batch the sink released (ABI 2.3) is freed at once and cannot be sent again: when its
//    write fails in a way a retry could cure, the partition is rewound (its records read again
//    from the batch's first offset, after the same back-off, within the same attempts) and
//    every later write of it already under way counts for nothing.
//
// It takes prepared jobs only (runtime/delivery/preparation_stage.h). Pure over its three
// dependencies (the sink, the offset store, the block it delivers for), so the rules are
// unit-tested without a broker. One thread drives it (the block's delivery thread); WriteCall
// completions may come from any.
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/sink_definition.h"
#include "runtime/delivery/job.h"
#include "runtime/delivery/offset_committer.h"
#include "runtime/delivery/retry.h"
#include "runtime/plugin_host/write_call.h"

namespace picomq::runtime {

// The sink as the window writes to it (the open plugin instance at run time).
class BatchWriter {
 public:
  virtual ~BatchWriter() = default;
  // Starts writing `batch`, which stays alive until `call` is complete.
  virtual void start(const DecodedBatch& batch, WriteCall& call) = 0;
  virtual size_t max_in_flight() const = 0;
  // Asks the sink to seal and complete what it holds open (ABI 2.2 flush); returns when the sink
  // has been asked, not when the writes are done.
  virtual void flush() = 0;
};

// Where `dead_letter` puts bad records (the block's dead-letter producer at run time).
class DeadLetters {
 public:
  virtual ~DeadLetters() = default;
  // Produces the job's bad records and waits for the broker's acknowledgement: false, with the
  // reason, when any of them is not confirmed.
  virtual bool send(const PreparedJob& job, const std::vector<BadRecord>& bad, std::string& error) = 0;
  virtual std::string topic() const = 0;
};

// A latency histogram with fixed bucket bounds (seconds), recorded with relaxed atomics: one
// clock read and two increments per batch, read by /metrics.
struct LatencyHistogram {
  static constexpr std::array<double, 12> kBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets{};  // the last one: +Inf
  std::atomic<uint64_t> sum_us{0};
  void observe(std::chrono::microseconds d) {
    const double s = static_cast<double>(d.count()) / 1e6;
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    buckets[i].fetch_add(1, std::memory_order_relaxed);
    sum_us.fetch_add(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
  }
};

struct DeliveryCounters {
  // Write attempts by outcome (pmq_write_status: ok, retry, partial, fatal, rejected; pending is
  // counted by its completion).
  std::array<std::atomic<uint64_t>, 6> attempts{};
  LatencyHistogram write_latency;  // start of a batch's write to its outcome, retries included
  // The Kafka timestamp of a batch's first record to the moment its offset is stored for the
  // commit (which goes out within one consumer poll, at most ~50 ms later).
  LatencyHistogram end_to_end_latency;
  std::atomic<uint64_t> rejected{0};       // records the sink refused (PMQ_WRITE_REJECTED)
  std::atomic<uint64_t> delivered{0};      // records the sink wrote
  std::atomic<uint64_t> skipped{0};        // bad records the `skip` policy stepped over
  std::atomic<uint64_t> dead_lettered{0};  // bad records confirmed in the dead-letter topic
  std::atomic<uint64_t> filtered{0};       // records a transform dropped
};

// What the window needs from the block it delivers for (the block pipeline at run time).
class DeliveryHost {
 public:
  virtual ~DeliveryHost() = default;
  virtual Waiter& waiter() = 0;  // back-off waits, ended by a stop
  virtual DeliveryCounters& counters() = 0;
  virtual DeadLetters* dead_letters(std::string& error) = 0;  // created on first use; null with `error`
  virtual void partition_failed(const TopicPartition& tp, const std::string& message) = 0;  // the block fails
  virtual void write_done() = 0;  // any thread: an outcome is known
  // Delivery thread: `batch` was written (but the records of `rejected` offsets, refused by the
  // sink); not called for a batch the sink released, whose records are gone by then.
  virtual void written(const DecodedBatch& batch, const std::vector<std::pair<int64_t, std::string>>& rejected) {
    (void)batch;
    (void)rejected;
  }
  // Read the partition again from `offset`; jobs consumed from then on carry `generation`.
  // A host that cannot (can_rewind() false) makes the window keep released batches (a failure
  // resends them as usual).
  virtual bool can_rewind() const = 0;
  virtual void rewind(const TopicPartition& tp, int64_t offset, uint64_t generation) = 0;
};

class DeliveryWindow {
 public:
  struct Settings {
    std::string log_prefix;
    config::BadRecordPolicy on_bad_record = config::BadRecordPolicy::Fail;
    RetryPolicy retry;
    // A resent write still pending after this long is sealed with the sink's flush(): a sink that
    // holds writes open to accumulate gets nothing else while a batch is retried alone.
    std::chrono::milliseconds seal_retry_after{100};
    // on_write_failure = "dead_letter": a batch still failing after the retries (not FATAL) goes
    // to the bad-record policy as the sink's refusals, and the partition goes on.
    bool dead_letter_write_failures = false;
  };
  struct Dependencies {
    BatchWriter& writer;
    OffsetSink& offsets;
    DeliveryHost& host;
  };
  struct Freed {
    size_t records = 0, bytes = 0;
  };

  DeliveryWindow(Settings settings, Dependencies deps);

  size_t capacity() const { return capacity_; }
  size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }
  bool full() const { return pending_.size() >= capacity_; }

  // Whether a job of this partition and generation is still written: its partition did not
  // fail and was not rewound past it (else there is no use preparing it).
  bool accepts(const Job& job) const { return !failed_.count(job.tp) && !stale(job); }
  // Starts the job's write, unless it is not accepted or nothing in it is left to write; either
  // way it takes its place in the order.
  void start(PreparedJob job);
  // Whether the oldest write's outcome is known (true when it wrote nothing).
  bool oldest_done() const;
  // Takes the oldest write's outcome (waiting for it) and applies the rules above; returns the
  // finished job (its records can be released).
  PreparedJob finish_oldest();

  bool partition_failed(const TopicPartition& tp) const { return failed_.count(tp) != 0; }

  // Frees the batches the sink released since the last call and returns what they held, for
  // the buffer limit. Owner thread.
  Freed collect_released();
  // Whether a release is waiting to be collected (the owner's wake-up condition).
  bool release_waiting() const { return release_signals_.load() != releases_seen_; }

 private:
  struct Entry {
    PreparedJob job;
    std::unique_ptr<WriteCall> call;  // null when nothing was written (failed partition, no records)
    std::chrono::steady_clock::time_point started;
    bool release_checked = false;  // a release the plugin asked for was looked at (job.released: and honoured)
    std::string where;             // a released batch's topic-partition and offsets, for the log
    size_t batch_records = 0;      // ... and how many records the sink was handed
  };
  // The rest of the retry policy after a failed first attempt. True when the batch is written
  // (maybe with rejections); false when the partition failed or the block is stopping.
  bool retry_write(PreparedJob& job, WriteOutcome first, std::vector<std::pair<int64_t, std::string>>& rejected);
  // The outcome of a released batch: true when written; else the partition failed, or is
  // being read again from the batch (a rewind), or the block is stopping.
  bool finish_released(Entry& entry);
  void count_attempt(pmq_write_status status);
  bool stale(const Job& job) const;
  bool route_bad_records(PreparedJob& job);
  void fail(const TopicPartition& tp, const std::string& message);
  std::string describe(const PreparedJob& job, const BadRecord& b) const;

  Settings settings_;
  Dependencies deps_;
  size_t capacity_;
  std::deque<std::unique_ptr<Entry>> pending_;
  std::set<TopicPartition> failed_;
  // Rewound partitions: the generation their jobs must have to count, and the attempts their
  // released writes have had since one last went through.
  std::map<TopicPartition, uint64_t> valid_generation_;
  std::map<TopicPartition, int> rewind_attempts_;
  std::atomic<uint64_t> release_signals_{0};  // releases the plugin asked for (any thread)
  uint64_t releases_seen_ = 0;
};

}  // namespace picomq::runtime
