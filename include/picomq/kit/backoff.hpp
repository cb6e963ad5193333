#pragma once
// Back-off with jitter, and a wait that a sink's close() can cut short. For waits *inside* a
// write (a reconnect, a Retry-After, a task to finish): the runtime's own retry schedule (five
// attempts, 200 ms doubling to 5 s) is outside and unchanged.
//
//   kit::Backoff backoff({.initial = 250ms, .max = 2s});
//   while (!try_connect())
//     if (!stop.wait_for(backoff.next())) throw sdk::RetryableError("closing");
//
// Jitter is "equal jitter" (AWS architecture blog, "Exponential Backoff And Jitter"): half the
// capped exponential delay plus a uniform random part of the other half, so writers that failed
// together do not come back together, and no delay is shorter than half its step.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>

namespace picomq::kit {

struct BackoffPolicy {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{5000};
  double multiplier = 2.0;
  bool jitter = true;
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = std::random_device{}())
      : policy_(policy), rng_(seed) {}

  // The delay before the next attempt: initial, initial*m, ... capped at max (each with jitter).
  std::chrono::milliseconds next() {
    const double step = std::min<double>(static_cast<double>(policy_.max.count()),
                                         static_cast<double>(policy_.initial.count()) * factor_);
    factor_ = std::min(factor_ * policy_.multiplier, 1e12);
    if (!policy_.jitter || step < 2) return std::chrono::milliseconds(static_cast<int64_t>(step));
    std::uniform_real_distribution<double> half(0.0, step / 2);
    return std::chrono::milliseconds(static_cast<int64_t>(step / 2 + half(rng_)));
  }
  // Back to the first step (after a success).
  void reset() { factor_ = 1.0; }
  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
  double factor_ = 1.0;
};

// A wait that stop() ends at once, for every waiter, now and later: what lets close() (and the
// runtime's shutdown behind it) cut a reconnect or a Retry-After wait short.
class StopSignal {
 public:
  // False when stopped (before or during the wait): give up now.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> delay) {
    std::unique_lock lock(mutex_);
    return !cv_.wait_for(lock, delay, [&] { return stopped_; });
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

}  // namespace picomq::kit
