#pragma once
// Fakes for the commit rules: consumed records from vectors, a sink that completes writes on
// command (or at once, from a script), an offset store and a waiter that record what they get.
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/delivery/delivery_window.h"

namespace picomq::runtime::testing {

struct FakeRecord {
  int64_t offset;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  bool tombstone = false;  // no value at all (value is ignored)
  std::optional<std::string> key{};
};

class VectorRecords final : public ConsumedRecords {
 public:
  explicit VectorRecords(std::vector<FakeRecord> records) : records_(std::move(records)) {}
  size_t size() const override { return records_.size(); }
  ConsumedRecord at(size_t i) const override {
    const auto& r = records_[i];
    ConsumedRecord out;
    out.offset = r.offset;
    out.timestamp_ms = 1700000000000 + r.offset;
    if (!r.tombstone) out.value = {reinterpret_cast<const uint8_t*>(r.value.data()), r.value.size()};
    if (r.key) out.key = {reinterpret_cast<const uint8_t*>(r.key->data()), r.key->size()};
    return out;
  }
  void headers(size_t i, std::vector<pmq_header>& out) const override {
    for (const auto& [n, v] : records_[i].headers)
      out.push_back({{reinterpret_cast<const uint8_t*>(n.data()), n.size()},
                     {reinterpret_cast<const uint8_t*>(v.data()), v.size()}});
  }

 private:
  std::vector<FakeRecord> records_;
};

// Records [first, first + n) of partition tp, JSON values.
inline std::unique_ptr<VectorRecords> records(int64_t first, int n) {
  std::vector<FakeRecord> out;
  for (int i = 0; i < n; ++i) out.push_back({first + i, "{\"n\":" + std::to_string(first + i) + "}", {}});
  return std::make_unique<VectorRecords>(std::move(out));
}

// A job already prepared: every record goes to the sink, the commit goes past the last.
inline PreparedJob prepared_job(const TopicPartition& tp, int64_t first, int n) {
  PreparedJob job;
  job.tp = tp;
  job.records = records(first, n);
  job.out.batch.tp = tp;
  job.out.batch.format = PMQ_PAYLOAD_JSON;
  for (int i = 0; i < n; ++i) {
    pmq_record r{};
    r.offset = first + i;
    job.out.batch.records.push_back(r);
  }
  job.out.commit_to = first + n;
  return job;
}

// An outcome a scripted write completes with.
struct Outcome {
  Outcome() = default;
  Outcome(pmq_write_status s, std::string why = {}, std::vector<std::pair<size_t, std::string>> refused = {},
          size_t wrote = 0)
      : status(s), message(std::move(why)), rejections(std::move(refused)), written(wrote) {}
  pmq_write_status status = PMQ_WRITE_OK;
  std::string message;
  std::vector<std::pair<size_t, std::string>> rejections;
  size_t written = 0;
};

class FakeSink final : public BatchWriter {
 public:
  explicit FakeSink(size_t max_in_flight = 1) : max_in_flight_(max_in_flight) {}
  // Writes complete at once with the next scripted outcome (OK when the script is empty),
  // unless hold() was called: then they stay pending until complete(i, ...).
  void script(std::vector<Outcome> outcomes) {
    std::lock_guard lock(mutex_);
    script_.assign(outcomes.begin(), outcomes.end());
  }
  void hold() { hold_ = true; }
  // Every write releases its batch (ABI 2.3) as it starts, as a sink that copies it does.
  void release_on_start() { release_ = true; }
  // Like hold(), but flush() completes every held write with the next scripted outcomes (a sink
  // that accumulates writes until it is asked to seal them).
  void hold_until_flush() { hold_ = seal_on_flush_ = true; }

  void start(const DecodedBatch& batch, WriteCall& call) override {
    std::unique_lock lock(mutex_);
    starts_.push_back(batch.records.empty() ? -1 : batch.records.front().offset);
    sizes_.push_back(batch.records.size());
    if (release_) call.request_release();
    if (hold_) {
      held_.push_back(&call);
      return;
    }
    Outcome o = script_.empty() ? Outcome{} : script_.front();
    if (!script_.empty()) script_.pop_front();
    lock.unlock();
    finish(call, o);
  }
  size_t max_in_flight() const override { return max_in_flight_; }
  void flush() override {
    std::vector<std::pair<WriteCall*, Outcome>> sealed;
    {
      std::lock_guard lock(mutex_);
      ++flushes_;
      if (!seal_on_flush_) return;
      for (WriteCall* call : held_) {
        sealed.emplace_back(call, script_.empty() ? Outcome{} : script_.front());
        if (!script_.empty()) script_.pop_front();
      }
      held_.clear();
    }
    for (auto& [call, o] : sealed) finish(*call, o);
  }
  int flushes() const {
    std::lock_guard lock(mutex_);
    return flushes_;
  }

  // Completes held write `i` (in start order).
  void complete(size_t i, Outcome o = {}) {
    WriteCall* call;
    {
      std::lock_guard lock(mutex_);
      call = held_.at(i);
    }
    finish(*call, o);
  }
  std::vector<int64_t> starts() const {
    std::lock_guard lock(mutex_);
    return starts_;
  }
  std::vector<size_t> sizes() const {
    std::lock_guard lock(mutex_);
    return sizes_;
  }

 private:
  static void finish(WriteCall& call, const Outcome& o) {
    call.outcome.message = o.message;
    call.outcome.rejections = o.rejections;
    call.outcome.written = o.written;
    call.complete(o.status);
  }
  size_t max_in_flight_;
  bool hold_ = false;
  bool release_ = false;
  bool seal_on_flush_ = false;
  int flushes_ = 0;
  mutable std::mutex mutex_;
  std::deque<Outcome> script_;
  std::vector<WriteCall*> held_;
  std::vector<int64_t> starts_;
  std::vector<size_t> sizes_;
};

class RecordingOffsets final : public OffsetSink {
 public:
  void store(const TopicPartition& tp, int64_t next_offset) override {
    std::lock_guard lock(mutex_);
    stored_.emplace_back(tp, next_offset);
  }
  std::vector<std::pair<TopicPartition, int64_t>> stored() const {
    std::lock_guard lock(mutex_);
    return stored_;
  }
  std::vector<int64_t> offsets() const {
    std::vector<int64_t> out;
    for (const auto& s : stored()) out.push_back(s.second);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<TopicPartition, int64_t>> stored_;
};

// Returns at once (an injected clock: the delays are recorded, not slept); stops when told to,
// optionally from inside the n-th wait.
class RecordingWaiter final : public Waiter {
 public:
  bool wait(std::chrono::milliseconds delay) override {
    delays.push_back(delay.count());
    if (stop_at_wait && delays.size() >= stop_at_wait) stopped = true;
    return !stopped;
  }
  std::vector<int64_t> delays;
  size_t stop_at_wait = 0;  // 0: never
  bool stopped = false;
};

class FakeDeadLetters final : public DeadLetters {
 public:
  bool send(const PreparedJob& job, const std::vector<BadRecord>& bad, std::string& error) override {
    ++attempts;
    if (failures_left > 0) {
      --failures_left;
      error = "cannot produce to dead-letter topic 'dlq': broker down";
      return false;
    }
    for (const auto& b : bad) sent.push_back(job.records->at(b.index).offset);
    return true;
  }
  std::string topic() const override { return "dlq"; }
  int failures_left = 0;
  int attempts = 0;
  std::vector<int64_t> sent;
};

// A window over the fakes, its host recording what it was told.
struct WindowRig final : DeliveryHost {
  explicit WindowRig(config::BadRecordPolicy policy = config::BadRecordPolicy::Fail, size_t max_in_flight = 1,
                     bool dead_letter_write_failures = false)
      : sink(max_in_flight) {
    DeliveryWindow::Settings s;
    s.log_prefix = "test";
    s.on_bad_record = policy;
    s.dead_letter_write_failures = dead_letter_write_failures;
    window = std::make_unique<DeliveryWindow>(
        s, DeliveryWindow::Dependencies{.writer = sink, .offsets = offsets, .host = *this});
  }
  Waiter& waiter() override { return recording_waiter; }
  DeliveryCounters& counters() override { return counted; }
  DeadLetters* dead_letters(std::string&) override { return &letters; }
  void partition_failed(const TopicPartition& tp, const std::string& m) override { failures.emplace_back(tp, m); }
  void write_done() override {}
  bool can_rewind() const override { return true; }
  void rewind(const TopicPartition& tp, int64_t offset, uint64_t generation) override {
    rewinds.push_back({tp, offset, generation});
  }
  struct Rewind {
    TopicPartition tp;
    int64_t offset;
    uint64_t generation;
    bool operator==(const Rewind&) const = default;
  };
  std::vector<Rewind> rewinds;
  // Finishes every pending write, oldest first.
  void drain() {
    while (!window->empty()) window->finish_oldest();
  }
  FakeSink sink;
  RecordingOffsets offsets;
  RecordingWaiter recording_waiter;
  DeliveryCounters counted;
  FakeDeadLetters letters;
  std::vector<std::pair<TopicPartition, std::string>> failures;
  std::unique_ptr<DeliveryWindow> window;
};

}  // namespace picomq::runtime::testing
