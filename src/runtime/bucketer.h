#pragma once
// Per topic-partition buckets and the spec's two flush rules: a bucket is flushed when it
// reaches batch_length records, or when poll_interval passes with nothing new arriving.
// Pure (no Kafka, injected clock) so the rules are unit-tested on their own.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace picomq::runtime {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  // clang-tidy 14 reports the 0 of the comparison it synthesizes here as modernize-use-nullptr.
  auto operator<=>(const TopicPartition&) const = default;  // NOLINT(modernize-use-nullptr)
  std::string to_string() const { return topic + "[" + std::to_string(partition) + "]"; }
};

template <class Record>
class Bucketer {
 public:
  using Clock = std::chrono::steady_clock;

  struct Ready {
    TopicPartition tp;
    std::vector<Record> records;
  };

  Bucketer(size_t batch_length, std::chrono::milliseconds poll_interval)
      : batch_length_(batch_length), poll_interval_(poll_interval) {}

  void add(const TopicPartition& tp, Record record, Clock::time_point now) {
    Bucket& b = buckets_[tp];
    b.records.push_back(std::move(record));
    b.last_arrival = now;
    ++size_;
  }

  // A run of records of one partition, in order (one lookup for the lot).
  void add(const TopicPartition& tp, std::vector<Record>&& records, Clock::time_point now) {
    if (records.empty()) return;
    Bucket& b = buckets_[tp];
    for (auto& r : records) b.records.push_back(std::move(r));
    b.last_arrival = now;
    size_ += records.size();
  }

  // Batches due now: full batches of exactly batch_length first, then whatever sat
  // poll_interval without a new arrival. Order within a partition is preserved.
  std::vector<Ready> take_ready(Clock::time_point now) {
    std::vector<Ready> out;
    for (auto& [tp, b] : buckets_) {
      while (b.records.size() >= batch_length_) out.push_back({tp, take_front(b, batch_length_)});
      if (!b.records.empty() && now - b.last_arrival >= poll_interval_)
        out.push_back({tp, take_front(b, b.records.size())});
    }
    std::erase_if(buckets_, [](const auto& kv) { return kv.second.records.empty(); });
    return out;
  }

  // Everything buffered, regardless of the rules (shutdown).
  std::vector<Ready> take_all() {
    std::vector<Ready> out;
    for (auto& [tp, b] : buckets_)
      if (!b.records.empty()) out.push_back({tp, take_front(b, b.records.size())});
    buckets_.clear();
    return out;
  }

  // Removes and returns what is buffered for one partition (rebalance, error path).
  std::vector<Record> take_partition(const TopicPartition& tp) {
    auto it = buckets_.find(tp);
    if (it == buckets_.end()) return {};
    auto records = take_front(it->second, it->second.records.size());
    buckets_.erase(it);
    return records;
  }

  // When the next poll_interval deadline falls, so the poll loop can sleep until then.
  std::optional<Clock::time_point> next_deadline() const {
    std::optional<Clock::time_point> next;
    for (const auto& [tp, b] : buckets_)
      if (!b.records.empty() && (!next || b.last_arrival + poll_interval_ < *next))
        next = b.last_arrival + poll_interval_;
    return next;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Bucket {
    std::deque<Record> records;
    Clock::time_point last_arrival{};
  };

  std::vector<Record> take_front(Bucket& b, size_t n) {
    std::vector<Record> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      out.push_back(std::move(b.records.front()));
      b.records.pop_front();
    }
    size_ -= n;
    return out;
  }

  size_t batch_length_;
  std::chrono::milliseconds poll_interval_;
  std::map<TopicPartition, Bucket> buckets_;
  size_t size_ = 0;
};

}  // namespace picomq::runtime
