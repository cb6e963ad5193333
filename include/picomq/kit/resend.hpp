#pragma once
// What the HTTP sinks do with one request the destination refused as a whole:
//  - refused as transient (429, 503, 5xx, a lost connection): sent again after a growing back-off,
//    at least the server's Retry-After, while the request's budget (retry_timeout from when it was
//    first sent) allows; past it the write fails as a retry and the runtime's own retry schedule
//    takes over. The budget travels with the request: each resend waits longer.
//  - refused as too large, or holding a record the destination refuses: its items in two halves,
//    each a request with a fresh budget.
//
//   void send(WritePtr w, std::vector<size_t> items, kit::ResendBudget budget) { ...
//     case kit::Outcome::Retry:
//       if (auto delay = budget.next_delay(c); delay && !closing_)
//         return scheduler_.after(*delay, [=, this](bool run) mutable { run ? send(w, items, budget) : give_up(w, c);
//         });
//       return give_up(w, c);
//     case kit::Outcome::TooLarge:
//       for (auto& half : kit::halve(items)) send(w, std::move(half), kit::ResendBudget(s_.retry_timeout));
#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::kit {

class ResendBudget {
 public:
  using Clock = std::chrono::steady_clock;

  // 200 ms doubling to 5 s, with jitter: the kit's HTTP sinks' resend schedule.
  static constexpr BackoffPolicy kDefaultPolicy{.initial = std::chrono::milliseconds(200),
                                                .max = std::chrono::milliseconds(5000)};

  // retry_timeout 0: never resent here (the runtime's retry does it).
  explicit ResendBudget(std::chrono::milliseconds retry_timeout, BackoffPolicy policy = kDefaultPolicy)
      : deadline_(Clock::now() + retry_timeout), backoff_(policy) {}
  // Until a point in time (a budget shared with other steps).
  explicit ResendBudget(Clock::time_point deadline, BackoffPolicy policy = kDefaultPolicy)
      : deadline_(deadline), backoff_(policy) {}

  // How long to wait before resending a request refused this way; nullopt when that resend would
  // come after the deadline.
  std::optional<std::chrono::milliseconds> next_delay(const Classification& refusal) {
    std::chrono::milliseconds delay = backoff_.next();
    if (refusal.retry_after) delay = std::max<std::chrono::milliseconds>(delay, *refusal.retry_after);
    if (Clock::now() + delay > deadline_) return std::nullopt;
    return delay;
  }

  Clock::time_point deadline() const { return deadline_; }

 private:
  Clock::time_point deadline_;
  Backoff backoff_;
};

// The waits of a synchronous retry loop (an index created, a load's state polled, a file staged,
// a request resent, a connection made again): a ResendBudget's back-off, on a stop signal (a
// sink's stopping()), so that the host's stop() and close() end them at once instead of after the
// budget. The one retry loop of the kit and its sinks.
//
//   kit::RetryWait retry(stopping(), s_.retry_timeout);
//   while (!try_commit(label))
//     if (!retry.wait()) throw sdk::RetryableError(what + (retry.stopped() ? ": stopping" : ": still failing"));
class RetryWait {
 public:
  using Clock = ResendBudget::Clock;

  RetryWait(const StopSignal& stop, std::chrono::milliseconds budget,
            BackoffPolicy policy = ResendBudget::kDefaultPolicy)
      : stop_(stop), budget_(budget, policy) {}
  RetryWait(const StopSignal& stop, Clock::time_point deadline, BackoffPolicy policy = ResendBudget::kDefaultPolicy)
      : stop_(stop), budget_(deadline, policy) {}

  // Waits the next back-off (at least `refusal`'s Retry-After); `before` hears the delay first
  // (a log line, a counter). False, at once, when the budget would be passed or the sink is
  // stopping; false as soon as a stop comes during the wait.
  bool wait(const Classification& refusal = {}, const std::function<void(std::chrono::milliseconds)>& before = {}) {
    if (stop_.stopped()) return false;
    const auto delay = budget_.next_delay(refusal);
    if (!delay) return false;
    if (before) before(*delay);
    return stop_.wait_for(*delay);
  }
  // Like wait(), but a back-off that would pass the deadline is cut to it: one last attempt at the
  // deadline (a server that comes back just then is still reached). False once it has passed.
  bool wait_until_deadline() {
    if (stop_.stopped()) return false;
    const auto left = budget_.deadline() - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    const auto delay = budget_.next_delay({});
    return stop_.wait_for(delay ? *delay : std::chrono::duration_cast<std::chrono::milliseconds>(left));
  }
  // The last wait() gave up because of a stop (not the budget).
  bool stopped() const { return stop_.stopped(); }
  Clock::time_point deadline() const { return budget_.deadline(); }

 private:
  const StopSignal& stop_;
  ResendBudget budget_;
};

// A refused request's items in two requests, in order: [0, n/2) and the rest.
template <class T>
std::array<std::vector<T>, 2> halve(const std::vector<T>& items) {
  const auto middle = items.begin() + static_cast<std::ptrdiff_t>(items.size() / 2);
  return {std::vector<T>(items.begin(), middle), std::vector<T>(middle, items.end())};
}

}  // namespace picomq::kit
