#pragma once
// Which partitions have writes the delivery thread took and has not finished: what a revoke
// waits for (with a deadline) before it commits and hands the partitions over.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/bucketer.h"

namespace picomq::runtime {

class InFlightPartitions {
 public:
  void begin(const TopicPartition& tp) {
    std::lock_guard lock(mutex_);
    ++count_[tp];
  }
  void end(const TopicPartition& tp) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = count_.find(tp); it != count_.end() && --it->second == 0) count_.erase(it);
    }
    cv_.notify_all();
  }
  bool any(const std::vector<TopicPartition>& partitions) const {
    std::lock_guard lock(mutex_);
    return busy(partitions);
  }
  // Waits until none of `partitions` has a write in flight: false when `timeout` ran out first.
  bool wait_idle(const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return !busy(partitions); });
  }

 private:
  bool busy(const std::vector<TopicPartition>& partitions) const {
    return std::any_of(partitions.begin(), partitions.end(),
                       [&](const TopicPartition& tp) { return count_.count(tp) != 0; });
  }
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::map<TopicPartition, int> count_;
};

}  // namespace picomq::runtime
