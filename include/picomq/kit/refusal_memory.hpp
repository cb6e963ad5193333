#pragma once
// Refusals a sink learns of after it released their batch (ABI 2.3 `release`): the runtime can no
// longer resend that batch, so the sink fails it and the runtime reads the partition again from the
// broker. When the refused records come again, the sink looks them up here before releasing their
// new batch and rejects them with the destination's reason: they reach the bad-record policy once,
// and a refusal cannot loop. (The ClickHouse sink: rows a released insert's bisection found.)
//
//   kit::RefusalMemory refused;                       // shared by the sink's threads
//   refused.remember("orders", 0, 42, "ClickHouse refused the row: ...");
//   if (auto reason = refused.take("orders", 0, 42)) write.reject(i, *reason);
//
// Bounded: past `capacity` records the oldest is forgotten (its record would be refused by the
// destination a second time, and remembered again).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace picomq::kit {

class RefusalMemory {
 public:
  explicit RefusalMemory(size_t capacity = 100'000) : capacity_(capacity == 0 ? 1 : capacity) {}

  void remember(std::string_view topic, int32_t partition, int64_t offset, std::string reason);
  // The reason remembered for this record, forgotten as it is taken; nullopt if none.
  std::optional<std::string> take(std::string_view topic, int32_t partition, int64_t offset);
  // Without the lock: the common case, nothing remembered, costs one load per batch.
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  size_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  using Key = std::tuple<std::string, int32_t, int64_t>;  // topic, partition, offset
  struct Entry {
    std::string reason;
    uint64_t sequence;  // when it was remembered: the oldest goes first
  };

  const size_t capacity_;
  std::mutex mutex_;
  std::map<Key, Entry> by_record_;
  std::map<uint64_t, Key> by_age_;
  uint64_t next_sequence_ = 0;
  std::atomic<size_t> count_{0};
};

}  // namespace picomq::kit
