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

void OffsetCommitter::commit_stored(Clock::time_point now, const std::function<bool()>& caught_up) {
  transport_.serve_commit_results();
  if (in_flight_ || !pending_.load()) return;
  if (now < next_allowed() && !(caught_up && caught_up())) return;  // coalesce with what comes next
  pending_ = false;
  in_flight_ = true;
  covering_ = stored_.load();
  last_started_ = now;
  transport_.commit_async();
}

std::optional<std::chrono::milliseconds> OffsetCommitter::look_again_in(Clock::time_point now,
                                                                        std::chrono::milliseconds follow_up) const {
  if (!pending_.load()) return std::nullopt;
  auto until_due = std::chrono::milliseconds(0);
  if (now < next_allowed()) until_due = std::chrono::ceil<std::chrono::milliseconds>(next_allowed() - now);
  return in_flight_ ? std::max(until_due, follow_up) : until_due;
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
  last_started_ = Clock::now();
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
