#pragma once
// Insert mode's replays: which partitions stream through the staging table. A replay can only
// follow a partition assignment (start-up, rebalance), which the sink hears; the first batch of
// each assigned partition is probed (is its first record in the table already?). A partition that
// replays, or whose direct COPY met a row written before, goes through staging until a merge
// inserted every row it staged (it is past the replayed window). Thread-safe: writers read it,
// segments committing on the accumulator's threads update it.
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace picomq::postgres {

using Partition = std::pair<std::string, int32_t>;  // topic, partition

class Replays {
 public:
  void assigned(Partition p) {
    std::lock_guard lock(mutex_);
    catching_up_.erase(p);
    unprobed_.insert(std::move(p));
  }
  void revoked(const Partition& p) {
    std::lock_guard lock(mutex_);
    catching_up_.erase(p);
    unprobed_.erase(p);
  }
  // Assigned, and its first batch not looked at yet.
  bool unprobed(const Partition& p) const {
    std::lock_guard lock(mutex_);
    return unprobed_.count(p) > 0;
  }
  void probed(const Partition& p, bool replaying) {
    std::lock_guard lock(mutex_);
    unprobed_.erase(p);
    if (replaying) catching_up_.insert(p);
  }
  // Its batches go through staging.
  bool staged(const Partition& p) const {
    std::lock_guard lock(mutex_);
    return catching_up_.count(p) > 0;
  }
  // A direct COPY of these partitions met rows written before.
  void conflict(const std::set<Partition>& partitions) {
    std::lock_guard lock(mutex_);
    catching_up_.insert(partitions.begin(), partitions.end());
  }
  // A staged merge inserted `inserted` of the `rows` it staged for these partitions: all of them
  // means they are past the replay. Returns the partitions that were catching up and are now.
  std::vector<Partition> merged(const std::set<Partition>& partitions, size_t rows, size_t inserted) {
    std::vector<Partition> past;
    if (inserted < rows) return past;
    std::lock_guard lock(mutex_);
    for (const auto& p : partitions)
      if (catching_up_.erase(p)) past.push_back(p);
    return past;
  }

 private:
  mutable std::mutex mutex_;
  std::set<Partition> unprobed_, catching_up_;
};

}  // namespace picomq::postgres
