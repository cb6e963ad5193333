#include "picomq/kit/refusal_memory.hpp"

namespace picomq::kit {

void RefusalMemory::remember(std::string_view topic, int32_t partition, int64_t offset, std::string reason) {
  std::lock_guard lock(mutex_);
  Key key{std::string(topic), partition, offset};
  if (auto it = by_record_.find(key); it != by_record_.end()) {  // remembered again: it is the newest now
    by_age_.erase(it->second.sequence);
    by_record_.erase(it);
  }
  while (by_record_.size() >= capacity_) {
    const auto oldest = by_age_.begin();
    by_record_.erase(oldest->second);
    by_age_.erase(oldest);
  }
  const uint64_t sequence = next_sequence_++;
  by_age_.emplace(sequence, key);
  by_record_.emplace(std::move(key), Entry{std::move(reason), sequence});
  count_.store(by_record_.size(), std::memory_order_release);
}

std::optional<std::string> RefusalMemory::take(std::string_view topic, int32_t partition, int64_t offset) {
  if (empty()) return std::nullopt;
  std::lock_guard lock(mutex_);
  const auto it = by_record_.find(Key{std::string(topic), partition, offset});
  if (it == by_record_.end()) return std::nullopt;
  std::string reason = std::move(it->second.reason);
  by_age_.erase(it->second.sequence);
  by_record_.erase(it);
  count_.store(by_record_.size(), std::memory_order_release);
  return reason;
}

}  // namespace picomq::kit
