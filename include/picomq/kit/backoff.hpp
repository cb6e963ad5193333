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
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>

#include "picomq/sdk.hpp"

namespace picomq::kit {

struct BackoffPolicy {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{5000};
  double multiplier = 2.0;
  bool jitter = true;
};

class Backoff {
 public:
  // seed 0: a different sequence per back-off, without a system call (a back-off is made per
  // request on hot paths; std::random_device costs one each time).
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = 0)
      : policy_(policy), state_(seed ? seed : fresh_seed()) {}

  // The delay before the next attempt: initial, initial*m, ... capped at max (each with jitter).
  std::chrono::milliseconds next() {
    const double step = std::min<double>(static_cast<double>(policy_.max.count()),
                                         static_cast<double>(policy_.initial.count()) * factor_);
    factor_ = std::min(factor_ * policy_.multiplier, 1e12);
    if (!policy_.jitter || step < 2) return std::chrono::milliseconds(static_cast<int64_t>(step));
    const double unit = static_cast<double>(next_random() >> 11) * 0x1.0p-53;  // [0, 1)
    return std::chrono::milliseconds(static_cast<int64_t>(step / 2 + unit * step / 2));
  }
  // Back to the first step (after a success).
  void reset() { factor_ = 1.0; }
  const BackoffPolicy& policy() const { return policy_; }

 private:
  // splitmix64 (Steele, Lea, Flood 2014): 8 bytes of state, good enough for jitter.
  uint64_t next_random() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static uint64_t fresh_seed() {
    static std::atomic<uint64_t> counter{std::random_device{}()};  // one system call per process
    return counter.fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed) | 1;
  }
  BackoffPolicy policy_;
  uint64_t state_;
  double factor_ = 1.0;
};

// A wait that stop() ends at once, for every waiter, now and later: what lets close() (and the
// runtime's shutdown behind it) cut a reconnect or a Retry-After wait short. The runtime's own
// retry waits (src/runtime/delivery/retry.h) are this too. The SDK's class (picomq/sdk.hpp).
using StopSignal = sdk::StopSignal;

}  // namespace picomq::kit
