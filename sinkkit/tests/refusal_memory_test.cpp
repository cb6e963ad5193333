#include "picomq/kit/refusal_memory.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace picomq::kit {
namespace {

TEST(KitRefusalMemory, ARefusalIsTakenOnceWithItsReason) {
  RefusalMemory m;
  EXPECT_TRUE(m.empty());
  m.remember("orders", 1, 42, "refused: bad date");
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.take("orders", 0, 42), std::nullopt) << "another partition";
  EXPECT_EQ(m.take("orders.eu", 1, 42), std::nullopt) << "another topic";
  EXPECT_EQ(m.take("orders", 1, 43), std::nullopt) << "another offset";
  EXPECT_EQ(m.take("orders", 1, 42), "refused: bad date");
  EXPECT_EQ(m.take("orders", 1, 42), std::nullopt) << "forgotten once taken: a third coming is not rejected";
  EXPECT_TRUE(m.empty());
}

TEST(KitRefusalMemory, PastItsCapacityTheOldestIsForgottenNotTheSmallestRecord) {
  RefusalMemory m(3);
  m.remember("t", 0, 900, "a");
  m.remember("t", 0, 5, "b");
  m.remember("t", 0, 7, "c");
  m.remember("t", 0, 1, "d");  // the fourth: offset 900, the oldest, goes
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.take("t", 0, 900), std::nullopt);
  EXPECT_EQ(m.take("t", 0, 5), "b");
  m.remember("t", 0, 7, "c again");  // remembered again: now the newest
  m.remember("t", 0, 8, "e");
  m.remember("t", 0, 9, "f");  // full: offset 1 ("d") is the oldest now
  EXPECT_EQ(m.take("t", 0, 1), std::nullopt);
  EXPECT_EQ(m.take("t", 0, 7), "c again");
  EXPECT_EQ(m.take("t", 0, 8), "e");
  EXPECT_EQ(m.take("t", 0, 9), "f");
  EXPECT_TRUE(m.empty());
}

TEST(KitRefusalMemory, ThreadsRememberAndTakeWithoutLosingOne) {
  RefusalMemory m(1'000'000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int64_t o = 0; o < 5000; ++o) m.remember("t", t, o, "r" + std::to_string(o));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(m.size(), 20000u);
  threads.clear();
  std::atomic<int> taken{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, &taken, t] {
      for (int64_t o = 0; o < 5000; ++o)
        if (m.take("t", t, o) == "r" + std::to_string(o)) ++taken;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(taken.load(), 20000);
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace picomq::kit
