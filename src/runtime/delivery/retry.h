#pragma once
// Retrying: the spec's schedule ("five times, backoff from 200 ms to 5 s") and the one loop that
// every retry in a block goes through (a failed write, a record that cannot be decoded for now,
// a dead-letter produce). The wait between attempts is interruptible: a stop request ends it at
// once, so shutdown never sits out a back-off.
#include <algorithm>
#include <chrono>

#include "picomq/kit/backoff.hpp"

namespace picomq::runtime {

struct RetryPolicy {
  int max_attempts = 5;  // 0: no limit (waits for a condition that is not the record's fault)
  std::chrono::milliseconds first_delay{200};
  std::chrono::milliseconds max_delay{5000};

  // Delay before attempt `next_attempt` (2, 3, ...): 200, 400, 800, 1600 ms... capped.
  std::chrono::milliseconds delay_before(int next_attempt) const {
    auto delay = first_delay;
    for (int i = 2; i < next_attempt && delay < max_delay; ++i) delay *= 2;
    return std::min(delay, max_delay);
  }
};

// Waits between attempts. wait() returns false when the block is stopping: give up now.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual bool wait(std::chrono::milliseconds delay) = 0;
};

// The run-time Waiter: the sink kit's stop signal (the one a sink's close() cuts its own waits
// with), so request_stop() ends a wait at once and every later one too.
class StopWaiter : public Waiter {
 public:
  bool wait(std::chrono::milliseconds delay) override { return stop_.wait_for(delay); }
  void request_stop() { stop_.stop(); }

 private:
  kit::StopSignal stop_;
};

// What one attempt came to.
enum class Attempt { Done, Retry, GiveUp };
// How the loop ended: Done, GiveUp (permanent, or out of attempts: `attempts` says which), or
// Stopped (the waiter was interrupted before the next attempt).
struct RetryEnd {
  Attempt last = Attempt::Done;
  int attempts = 0;
  bool stopped = false;
  bool done() const { return last == Attempt::Done; }
  bool exhausted(const RetryPolicy& policy) const {
    return last == Attempt::Retry && !stopped && policy.max_attempts > 0 && attempts >= policy.max_attempts;
  }
};

// Runs attempt(n) for n = 1, 2, ... until it is Done or GiveUp, the policy's attempts are used
// up, or the waiter says stop. before_wait(n, delay) runs before each wait (to log it).
template <class AttemptFn, class BeforeWait>
RetryEnd run_with_retries(const RetryPolicy& policy, Waiter& waiter, AttemptFn&& attempt, BeforeWait&& before_wait) {
  RetryEnd end;
  for (int n = 1;; ++n) {
    end.attempts = n;
    end.last = attempt(n);
    if (end.last != Attempt::Retry) return end;
    if (policy.max_attempts > 0 && n >= policy.max_attempts) return end;
    const auto delay = policy.delay_before(n + 1);
    before_wait(n, delay);
    if (!waiter.wait(delay)) {
      end.stopped = true;
      return end;
    }
  }
}

}  // namespace picomq::runtime
