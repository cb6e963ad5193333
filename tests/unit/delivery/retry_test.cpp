#include "runtime/delivery/retry.h"

#include <gtest/gtest.h>

#include <thread>

#include "runtime/delivery/in_flight.h"

namespace picomq::runtime {
namespace {

using namespace std::chrono_literals;

TEST(Retry, TheSpecsScheduleDoublesFrom200msAndCapsAt5s) {
  RetryPolicy p;
  EXPECT_EQ(p.delay_before(2), 200ms);
  EXPECT_EQ(p.delay_before(3), 400ms);
  EXPECT_EQ(p.delay_before(5), 1600ms);
  EXPECT_EQ(p.delay_before(7), 5000ms);
  EXPECT_EQ(p.delay_before(30), 5000ms);
}

class CountingWaiter : public Waiter {
 public:
  bool wait(std::chrono::milliseconds d) override {
    waited.push_back(d);
    return waited.size() < stop_after;
  }
  std::vector<std::chrono::milliseconds> waited;
  size_t stop_after = 1000;
};

TEST(Retry, RunsUntilDoneGiveUpOrOutOfAttempts) {
  CountingWaiter w;
  int calls = 0;
  auto end = run_with_retries(
      RetryPolicy{}, w, [&](int) { return ++calls == 3 ? Attempt::Done : Attempt::Retry; }, [](int, auto) {});
  EXPECT_TRUE(end.done());
  EXPECT_EQ(end.attempts, 3);
  end = run_with_retries(
      RetryPolicy{}, w, [&](int) { return Attempt::Retry; }, [](int, auto) {});
  EXPECT_TRUE(end.exhausted(RetryPolicy{}));
  EXPECT_EQ(end.attempts, 5);
  end = run_with_retries(
      RetryPolicy{}, w, [&](int) { return Attempt::GiveUp; }, [](int, auto) {});
  EXPECT_EQ(end.attempts, 1);
  EXPECT_FALSE(end.exhausted(RetryPolicy{}));
}

TEST(Retry, UnlimitedAttemptsEndOnlyWhenTheWaiterStops) {
  CountingWaiter w;
  w.stop_after = 12;
  auto end = run_with_retries(
      RetryPolicy{0}, w, [&](int) { return Attempt::Retry; }, [](int, auto) {});
  EXPECT_TRUE(end.stopped);
  EXPECT_EQ(end.attempts, 12);
}

TEST(Retry, StopWaiterWakesAWaitAtOnce) {
  StopWaiter w;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    w.request_stop();
  });
  EXPECT_FALSE(w.wait(30s));
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_FALSE(w.wait(1ms)) << "stays stopped";
}

TEST(InFlightPartitions, ARevokeWaitsForThePartitionsWritesWithADeadline) {
  InFlightPartitions f;
  const TopicPartition a{"t", 0}, b{"t", 1};
  f.begin(a);
  f.begin(a);
  f.begin(b);
  EXPECT_FALSE(f.wait_idle({a}, 20ms)) << "two writes of a still in flight: the deadline ends the wait";
  std::thread delivery([&] {
    std::this_thread::sleep_for(30ms);
    f.end(a);
    f.end(a);
  });
  EXPECT_TRUE(f.wait_idle({a}, 10s));
  delivery.join();
  EXPECT_TRUE(f.any({b})) << "b's write is not a's business";
  f.end(b);
  EXPECT_FALSE(f.any({a, b}));
}

}  // namespace
}  // namespace picomq::runtime
