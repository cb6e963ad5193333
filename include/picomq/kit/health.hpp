#pragma once
// Reachability of a destination, as a sink reports it: one warning when an outage starts and one
// line with its length when it ends (never one per failed attempt), so a long outage is two log
// lines, not hundreds. The sink does the logging and counting itself (it owns log() and count()):
//
//   kit::Outage outage;
//   if (outage.failed()) {                       // the first failure of an outage
//     log(Warn, "destination unreachable: ...");
//     count("destination_unreachable");          // in the status file: an outage was seen
//   }
//   if (auto lasted = outage.recovered())        // the first success after one
//     log(Info, "reachable again after " + kit::format_duration(*lasted));
//
// For a start-up health check (connect and authenticate in open()): a destination that refuses
// the credentials fails the sink at once; one that cannot be reached is outage.failed() and the
// sink starts anyway, connecting later. Thread-safe.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

namespace picomq::kit {

class Outage {
 public:
  using Clock = std::chrono::steady_clock;

  // A failed attempt to reach the destination. True for the first of an outage (warn then).
  bool failed(Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mutex_);
    ++attempts_;
    if (since_) return false;
    since_ = now;
    attempts_ = 1;
    return true;
  }
  // A successful attempt. How long the outage lasted when this ends one, else nullopt.
  std::optional<Clock::duration> recovered(Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mutex_);
    if (!since_) return std::nullopt;
    const auto lasted = now - *since_;
    since_.reset();
    return lasted;
  }
  bool active() const {
    std::lock_guard lock(mutex_);
    return since_.has_value();
  }
  // When the current outage began (its first failure); nullopt when there is none.
  std::optional<Clock::time_point> since() const {
    std::lock_guard lock(mutex_);
    return since_;
  }
  // Failed attempts in the current (or the last) outage.
  uint64_t attempts() const {
    std::lock_guard lock(mutex_);
    return attempts_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<Clock::time_point> since_;
  uint64_t attempts_ = 0;
};

// "350 ms", "8.2 s", "3 min 5 s": for log lines about waits and outages.
inline std::string format_duration(std::chrono::nanoseconds d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  char out[48];
  if (ms < 1000) std::snprintf(out, sizeof out, "%lld ms", static_cast<long long>(ms));
  else if (ms < 60000) std::snprintf(out, sizeof out, "%.1f s", static_cast<double>(ms) / 1000.0);
  else
    std::snprintf(out, sizeof out, "%lld min %lld s", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms / 1000 % 60));
  return out;
}

}  // namespace picomq::kit
