// kit::BatchCompletion through the fake host: a batch's write completed once, when the last of its
// requests finished, with the outcome its requests came to.
#include "picomq/kit/batch_completion.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "picomq/kit/testing/fake_host.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using kit::testing::FakeHost;
using kit::testing::TestBatch;
using namespace std::chrono_literals;

// The completion of the last write, for the test to drive as the requests' callbacks would.
std::shared_ptr<kit::BatchCompletion> g_last;
size_t g_requests = 3;

class SplittingSink : public sdk::BaseSink<SplittingSink> {
 public:
  static constexpr std::string_view sink_name = "splitting";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 8;
  sdk::Pending write_batch(const sdk::Batch&) {
    sdk::Pending write = pending();
    g_last = std::make_shared<kit::BatchCompletion>(write, g_requests);
    return write;
  }
};

kit::Classification failure(kit::Outcome o, std::string reason) { return {.outcome = o, .reason = std::move(reason)}; }

class KitBatchCompletion : public ::testing::Test {
 protected:
  void SetUp() override {
    g_requests = 3;
    host_.open();
  }
  std::shared_ptr<kit::testing::Write> start() {
    return host_.start_write(TestBatch::json("t", 0, 0, {"{}", "{}", "{}"}));
  }
  FakeHost host_{sdk::descriptor<SplittingSink>()};
};

TEST_F(KitBatchCompletion, CompletesWhenTheLastRequestIsDoneWithTheRefusedRecords) {
  auto w = start();
  g_last->written();
  g_last->reject(1, "refused: bad field");
  EXPECT_FALSE(g_last->finish_one());
  g_last->add(1);  // a request split in two
  EXPECT_FALSE(g_last->finish_one());
  EXPECT_FALSE(g_last->finish_one());
  EXPECT_FALSE(w->completed()) << "one request is still out";
  EXPECT_TRUE(g_last->finish_one());
  const auto out = w->wait(5s);
  EXPECT_EQ(out.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 1u);
  EXPECT_EQ(out.rejected[0].reason, "refused: bad field");
  EXPECT_FALSE(g_last->finish_one()) << "never twice";
  EXPECT_EQ(w->completions(), 1);
}

TEST_F(KitBatchCompletion, AFailureAfterAWriteIsPartialWithoutOneARetryAndFatalOutranksBoth) {
  g_requests = 2;
  auto retry = start();
  g_last->fail(failure(kit::Outcome::Retry, "503"));
  g_last->finish_one();
  g_last->finish_one();
  EXPECT_EQ(retry->wait(5s).status, PMQ_WRITE_RETRY);

  auto partial = start();
  g_last->written();
  g_last->fail(failure(kit::Outcome::Retry, "429 for 3 items"));
  g_last->reject(0, "ignored: the batch is retried whole");
  g_last->finish_one();
  g_last->finish_one();
  const auto p = partial->wait(5s);
  EXPECT_EQ(p.status, PMQ_WRITE_PARTIAL);
  EXPECT_EQ(p.error, "429 for 3 items");

  auto fatal = start();
  g_last->fail(failure(kit::Outcome::MaybeWritten, "reset"));
  g_last->fail(failure(kit::Outcome::Fatal, "401"));
  g_last->fail(failure(kit::Outcome::Retry, "later"));
  g_last->finish_one();
  g_last->finish_one();
  const auto f = fatal->wait(5s);
  EXPECT_EQ(f.status, PMQ_WRITE_FATAL);
  EXPECT_EQ(f.error, "401");
}

TEST_F(KitBatchCompletion, RequestsFinishingOnManyThreadsCompleteItOnce) {
  g_requests = 64;
  auto w = start();
  auto done = g_last;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([done, t] {
      for (int i = 0; i < 8; ++i) {
        if (i % 3 == 0) done->reject(static_cast<size_t>(t % 3), "r");
        done->written();
        done->finish_one();
      }
    });
  for (auto& t : threads) t.join();
  const auto out = w->wait(5s);
  EXPECT_EQ(out.status, PMQ_WRITE_REJECTED);
  EXPECT_EQ(done->rejected(), 24u);
  EXPECT_EQ(w->completions(), 1);
}

}  // namespace

namespace {

TEST_F(KitBatchCompletion, OnSuccessHearsTheRefusedCountOnlyWhenTheWriteSucceeds) {
  std::vector<size_t> heard;
  auto ok = start();
  g_last->on_success([&](size_t rejected) { heard.push_back(rejected); });
  g_last->reject(2, "refused");
  for (int i = 0; i < 3; ++i) g_last->finish_one();
  EXPECT_EQ(ok->wait(5s).status, PMQ_WRITE_REJECTED);

  auto failed = start();
  g_last->on_success([&](size_t rejected) { heard.push_back(100 + rejected); });
  g_last->reject(0, "refused, but the batch is retried whole");
  g_last->fail(failure(kit::Outcome::Retry, "503"));
  for (int i = 0; i < 3; ++i) g_last->finish_one();
  EXPECT_EQ(failed->wait(5s).status, PMQ_WRITE_RETRY);
  EXPECT_EQ(heard, std::vector<size_t>{1}) << "a failed write reports no refused records";
}

}  // namespace
