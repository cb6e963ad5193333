#include "runtime/delivery/offset_committer.h"

#include <spdlog/spdlog.h>

namespace picomq::runtime {

void OffsetCommitter::store(const TopicPartition& tp, int64_t next_offset) {
  if (auto error = transport_.store_offset(tp, next_offset); !error.empty()) {
    spdlog::warn("{}: cannot store offset {} for {}: {} (partition no longer assigned?)", log_prefix_, next_offset,
                 tp.to_string(), error);
    return;
  }
  stored_.fetch_add(1);
  pending_ = true;
  transport_.wake();
}

void OffsetCommitter::commit_stored() {
  transport_.serve_commit_results();
  if (in_flight_ || !pending_.exchange(false)) return;
  in_flight_ = true;
  covering_ = stored_.load();
  transport_.commit_async();
}

void OffsetCommitter::commit_done(const std::string& error) {
  in_flight_ = false;
  if (!error.empty()) {
    failed_commits_.fetch_add(1);
    spdlog::warn("{}: offset commit failed: {} (committed again with the next one)", log_prefix_, error);
    pending_ = true;
    return;
  }
  commits_.fetch_add(1);
  if (covering_ > committed_.load()) committed_ = covering_;
}

bool OffsetCommitter::commit_sync(const char* why) {
  pending_ = false;
  const uint64_t covering = stored_.load();
  if (auto error = transport_.commit_sync(); !error.empty()) {
    failed_commits_.fetch_add(1);
    pending_ = true;
    spdlog::warn("{}: synchronous commit ({}) failed: {}", log_prefix_, why, error);
    return false;
  }
  commits_.fetch_add(1);
  if (covering > committed_.load()) committed_ = covering;
  return true;
}

OffsetCommitter::Counts OffsetCommitter::counts() const {
  return {stored_.load(), committed_.load(), commits_.load(), failed_commits_.load()};
}

}  // namespace picomq::runtime
