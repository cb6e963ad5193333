#include "picomq/kit/splitter.hpp"

#include <gtest/gtest.h>

namespace kit = picomq::kit;

namespace {
kit::RenderRecord items(const std::vector<std::string>& v) {
  return [&v](size_t i, std::string& out) { out += v.at(i); };
}
}  // namespace

TEST(KitSplitter, BodiesStayWithinTheByteAndRecordLimitsAndCarryTheirRanges) {
  std::vector<std::string> v{"aaaa", "bb", "cccc", "d", "eeeeee"};
  auto chunks = kit::split_records(0, v.size(), {.max_bytes = 9}, kit::Framing::json_array(), items(v));
  // [aaaa,bb] = 9 bytes; [cccc,d] = 8; [eeeeee] = 8
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].body, "[aaaa,bb]");
  EXPECT_EQ(chunks[0].first, 0u);
  EXPECT_EQ(chunks[0].count, 2u);
  EXPECT_EQ(chunks[1].body, "[cccc,d]");
  EXPECT_EQ(chunks[1].first, 2u);
  EXPECT_EQ(chunks[2].body, "[eeeeee]");
  EXPECT_EQ(chunks[2].first, 4u);
  for (const auto& c : chunks) EXPECT_LE(c.body.size(), 9u);

  auto by_count = kit::split_records(1, 4, {.max_records = 3}, kit::Framing::ndjson(), items(v));
  ASSERT_EQ(by_count.size(), 2u);
  EXPECT_EQ(by_count[0].body, "bb\ncccc\nd\n");
  EXPECT_EQ(by_count[0].first, 1u);
  EXPECT_EQ(by_count[1].body, "eeeeee\n");
  EXPECT_EQ(by_count[1].first, 4u);
}

TEST(KitSplitter, ARecordOverTheLimitGetsABodyOfItsOwnAndNothingIsLost) {
  std::vector<std::string> v{"a", std::string(50, 'x'), "b", "c"};
  auto chunks = kit::split_records(0, v.size(), {.max_bytes = 10}, kit::Framing::ndjson(), items(v));
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].body, "a\n");
  EXPECT_EQ(chunks[1].count, 1u);
  EXPECT_EQ(chunks[1].first, 1u);
  EXPECT_EQ(chunks[2].body, "b\nc\n");
  size_t total = 0;
  for (const auto& c : chunks) total += c.count;
  EXPECT_EQ(total, v.size());
  EXPECT_TRUE(kit::split_records(0, 0, {}, kit::Framing::ndjson(), items(v)).empty());
  auto h = kit::halves(4, 5);
  EXPECT_EQ(h.first_a, 4u);
  EXPECT_EQ(h.count_a, 2u);
  EXPECT_EQ(h.first_b, 6u);
  EXPECT_EQ(h.count_b, 3u);
}

#include <atomic>
#include <thread>

#include "picomq/kit/scheduler.hpp"

TEST(KitScheduler, TasksRunInDeadlineOrderAndCloseCancelsTheRestExactlyOnce) {
  using namespace std::chrono_literals;
  kit::Scheduler scheduler;
  std::mutex m;
  std::vector<std::pair<int, bool>> ran;
  auto task = [&](int id) {
    return [&, id](bool run) {
      std::lock_guard lock(m);
      ran.emplace_back(id, run);
    };
  };
  scheduler.after(60ms, task(2));
  scheduler.after(10ms, task(1));
  scheduler.after(std::chrono::hours(1), task(3));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(m);
      if (ran.size() == 2) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(scheduler.waiting(), 1u);
  scheduler.close();
  scheduler.after(0ms, task(4));  // after close: at once, cancelled
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[0], (std::pair<int, bool>{1, true}));
  EXPECT_EQ(ran[1], (std::pair<int, bool>{2, true}));
  EXPECT_EQ(ran[2], (std::pair<int, bool>{3, false}));
  EXPECT_EQ(ran[3], (std::pair<int, bool>{4, false}));
}

#include "picomq/kit/backoff.hpp"

TEST(KitBackoff, DelaysDoubleToTheCapWithEqualJitterAndResetStartsOver) {
  using namespace std::chrono_literals;
  kit::Backoff plain({.initial = 100ms, .max = 1000ms, .jitter = false});
  EXPECT_EQ(plain.next(), 100ms);
  EXPECT_EQ(plain.next(), 200ms);
  EXPECT_EQ(plain.next(), 400ms);
  EXPECT_EQ(plain.next(), 800ms);
  EXPECT_EQ(plain.next(), 1000ms);
  EXPECT_EQ(plain.next(), 1000ms);
  plain.reset();
  EXPECT_EQ(plain.next(), 100ms);
  // With jitter each delay is in [step/2, step], and two back-offs do not move in lockstep.
  kit::Backoff a({.initial = 400ms, .max = 400ms}), b({.initial = 400ms, .max = 400ms});
  int same = 0;
  for (int i = 0; i < 50; ++i) {
    const auto da = a.next(), db = b.next();
    EXPECT_GE(da, 200ms);
    EXPECT_LE(da, 400ms);
    same += da == db;
  }
  EXPECT_LT(same, 10) << "independent sequences (seeded apart)";
  kit::Backoff s1({.initial = 400ms, .max = 400ms}, 42), s2({.initial = 400ms, .max = 400ms}, 42);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s1.next(), s2.next()) << "a given seed replays";
}

#include <chrono>
#include <thread>
#include <vector>

// The stop signal that sinks' close() and the runtime's retry waits share: stop() ends every
// wait in progress at once, and every later one returns false without sleeping.
TEST(KitStopSignal, StopEndsEveryWaitInProgressAndEveryLaterOne) {
  using namespace std::chrono_literals;
  kit::StopSignal stop;
  EXPECT_TRUE(stop.wait_for(1ms)) << "not stopped: the wait runs out";
  EXPECT_FALSE(stop.stopped());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> waiters;
  std::vector<int> results(3, -1);
  for (size_t i = 0; i < results.size(); ++i) waiters.emplace_back([&, i] { results[i] = stop.wait_for(60s); });
  std::this_thread::sleep_for(50ms);
  stop.stop();
  for (auto& w : waiters) w.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(results, (std::vector<int>{0, 0, 0}));
  EXPECT_TRUE(stop.stopped());
  EXPECT_FALSE(stop.wait_for(60s)) << "stays stopped";
}
