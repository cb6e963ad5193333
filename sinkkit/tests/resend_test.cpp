// The resend budget a refused request carries, and its halves.
#include "picomq/kit/resend.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace picomq::kit {
namespace {

using namespace std::chrono_literals;

Classification refused(std::optional<std::chrono::seconds> retry_after = std::nullopt) {
  return {.outcome = Outcome::Retry, .reason = "503", .retry_after = retry_after, .status = 503};
}

TEST(ResendBudget, EachResendWaitsLongerUntilTheDeadline) {
  ResendBudget budget(30s, {.initial = 100ms, .max = 1s, .jitter = false});
  EXPECT_EQ(budget.next_delay(refused()), 100ms);
  EXPECT_EQ(budget.next_delay(refused()), 200ms);
  EXPECT_EQ(budget.next_delay(refused()), 400ms);
  EXPECT_EQ(budget.next_delay(refused()), 800ms);
  EXPECT_EQ(budget.next_delay(refused()), 1s) << "capped";
}

TEST(ResendBudget, RetryAfterIsTheLeastWait) {
  ResendBudget budget(30s, {.initial = 100ms, .max = 1s, .jitter = false});
  EXPECT_EQ(budget.next_delay(refused(3s)), 3s);
  EXPECT_EQ(budget.next_delay(refused()), 200ms) << "the back-off went on growing underneath";
}

TEST(ResendBudget, NoResendThatWouldEndPastTheDeadline) {
  ResendBudget none(0ms);
  EXPECT_FALSE(none.next_delay(refused()).has_value()) << "retry_timeout 0: the runtime's retry does it";
  ResendBudget budget(1s, {.initial = 400ms, .max = 5s, .jitter = false});
  EXPECT_TRUE(budget.next_delay(refused()).has_value());   // 400 ms from now: within 1 s
  EXPECT_TRUE(budget.next_delay(refused()).has_value());   // 800 ms from now (no time passed here)
  EXPECT_FALSE(budget.next_delay(refused()).has_value());  // 1600 ms from now would end past 1 s
  ResendBudget short_one(2s);
  EXPECT_FALSE(short_one.next_delay(refused(5s)).has_value()) << "a Retry-After past the deadline";
}

TEST(Halve, SplitsInOrderWithTheOddItemInTheSecondHalf) {
  const auto [a, b] = halve(std::vector<int>{1, 2, 3, 4, 5});
  EXPECT_EQ(a, (std::vector<int>{1, 2}));
  EXPECT_EQ(b, (std::vector<int>{3, 4, 5}));
  const auto [c, d] = halve(std::vector<int>{7});
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(d, (std::vector<int>{7}));
}

}  // namespace
}  // namespace picomq::kit
