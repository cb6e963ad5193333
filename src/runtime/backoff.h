#pragma once
// Retry schedule of a failed write: the spec's "five times, backoff from 200 ms to 5 s".
#include <algorithm>
#include <chrono>

namespace picomq::runtime {

struct RetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds first_delay{200};
  std::chrono::milliseconds max_delay{5000};

  // Delay before attempt `next_attempt` (2..max_attempts): 200, 400, 800, 1600 ms... capped.
  std::chrono::milliseconds delay_before(int next_attempt) const {
    auto delay = first_delay;
    for (int i = 2; i < next_attempt && delay < max_delay; ++i) delay *= 2;
    return std::min(delay, max_delay);
  }
};

}  // namespace picomq::runtime
