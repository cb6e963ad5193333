// kit::RequestEngine through the fake host and the fault-injecting receiver (a real HTTP server on
// loopback): each rule of the engine — bisection to the refused records, 413 split, Retry-After,
// close() during a resend wait, requests in flight, in-order sending — as a sink's user sees it:
// the write's outcome, the records that reached the server, the counters.
#include "picomq/kit/request_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using kit::testing::FakeHost;
using kit::testing::HttpReceiver;
using kit::testing::TestBatch;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the test sink is set up with (the fake host opens it through the SDK, as the runtime would).
struct EngineSetup {
  std::string url;
  kit::SplitLimits limits{};
  bool in_order = false;
  std::chrono::milliseconds retry_timeout = 30s;
};
EngineSetup g_setup;

// A minimal sink on the engine: each record's payload as one NDJSON line, POSTed to the url.
class EngineSink : public sdk::BaseSink<EngineSink> {
 public:
  static constexpr std::string_view sink_name = "engine_probe";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 16;

  void open(const sdk::Config&) {
    client_ = std::make_unique<kit::HttpClient>(kit::HttpClientOptions{.max_in_flight = 8});
    engine_ = kit::RequestEngine::for_host(host(), *client_, rules_,
                                           {.retry_timeout = g_setup.retry_timeout,
                                            .destination = "the receiver",
                                            .items = "lines",
                                            .written_counter = "lines",
                                            .in_order = g_setup.in_order});
  }

  struct Job : kit::RequestJob {
    Job(sdk::Pending p, const pmq_batch& b) : RequestJob(std::move(p)), batch(b) {}
    const pmq_batch& batch;
    void render(size_t item, std::string& out) const override {
      const pmq_record& r = *pmq_batch_record(&batch, item);
      out.append(reinterpret_cast<const char*>(r.payload.data), r.payload.size);
    }
    kit::HttpRequest request(const kit::Run&) const override {
      kit::HttpRequest r{.method = "POST", .url = g_setup.url};
      r.headers.set("Content-Type", "application/x-ndjson");
      return r;
    }
  };

  sdk::Pending write_batch(const sdk::Batch& batch) {
    auto job = std::make_shared<Job>(pending(), batch.raw());
    job->framing = kit::Framing::ndjson();
    job->limits = g_setup.limits;
    engine_->submit(job, batch.raw().record_count);
    return job->result();
  }

  void stop() { engine_->stop(); }
  void close() {
    engine_->close();
    client_->close(5s);
  }

 private:
  kit::OutcomeRules rules_;
  std::unique_ptr<kit::HttpClient> client_;
  std::unique_ptr<kit::RequestEngine> engine_;
};

std::vector<std::string> records(int n, int bad = -1) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back(i == bad ? R"({"n":)" + std::to_string(i) + R"(,"bad":true})" : R"({"n":)" + std::to_string(i) + "}");
  return out;
}

// The records (by "n") the receiver answered 2xx to.
std::multiset<int> delivered(const HttpReceiver& receiver) {
  std::multiset<int> out;
  for (const auto& r : receiver.requests("/in")) {
    if (!r.answer.is_number() || r.answer.get<int>() >= 300) continue;
    size_t from = 0;
    while (from < r.body.size()) {
      size_t nl = r.body.find('\n', from);
      auto line = nlohmann::json::parse(r.body.substr(from, nl - from));
      out.insert(line["n"].get<int>());
      from = nl + 1;
    }
  }
  return out;
}

class KitRequestEngine : public ::testing::Test {
 protected:
  void SetUp() override { g_setup = EngineSetup{.url = receiver_.url("/in")}; }
  void open() { host_.open(); }
  // True once the sink scheduled its first resend (a write refused as transient is waiting).
  bool resend_waiting() {
    const auto deadline = Clock::now() + kit::testing::scaled(10s);
    while (host_.counter("resends") == 0 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    return host_.counter("resends") == 1;
  }
  HttpReceiver receiver_;
  FakeHost host_{sdk::descriptor<EngineSink>()};
};

TEST_F(KitRequestEngine, ARefusedRequestIsBisectedDownToTheOneRecordTheServerRefuses) {
  open();
  receiver_.script({{"when_body_contains", "\"bad\""}, {"status", 400}, {"count", 0}, {"body", "bad field"}});
  const auto out = host_.write(TestBatch::json("t", 0, 100, records(8, 5)));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 5u);
  EXPECT_NE(out.rejected[0].reason.find("refused by the receiver: "), std::string::npos) << out.rejected[0].reason;
  EXPECT_NE(out.rejected[0].reason.find("bad field"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(delivered(receiver_), (std::multiset<int>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(host_.counter("splits"), 3u);  // 8 -> 4 -> 2 -> 1
  EXPECT_EQ(host_.counter("rejected_records"), 1u);
  EXPECT_EQ(host_.counter("lines"), 7u);
  EXPECT_EQ(host_.counter("requests"), 7u);  // 1 + 2 + 2 + 2
}

TEST_F(KitRequestEngine, A413SplitsTheRequestUntilEveryPartFitsAndEveryRecordArrivesOnce) {
  open();
  receiver_.script({{"when_body_over", 60}, {"status", 413}, {"count", 0}});
  const auto out = host_.write(TestBatch::json("t", 0, 0, records(20)));
  ASSERT_TRUE(out.ok()) << out.error;
  std::multiset<int> expected;
  for (int i = 0; i < 20; ++i) expected.insert(i);
  EXPECT_EQ(delivered(receiver_), expected);
  for (const auto& r : receiver_.requests("/in")) {
    if (r.answer == 200) {
      EXPECT_LE(r.body.size(), 60u);
    }
  }
  EXPECT_GT(host_.counter("splits"), 0u);
}

TEST_F(KitRequestEngine, ARecordTooLargeAloneIsRefusedAndTheRestIsWritten) {
  open();
  receiver_.script({{"when_body_over", 30}, {"status", 413}, {"count", 0}});
  std::vector<std::string> payloads = records(4);
  payloads[2] = R"({"n":2,"pad":")" + std::string(100, 'x') + R"("})";
  const auto out = host_.write(TestBatch::json("t", 0, 0, payloads));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 2u);
  EXPECT_NE(out.rejected[0].reason.find("too large for the receiver"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(delivered(receiver_), (std::multiset<int>{0, 1, 3}));
}

TEST_F(KitRequestEngine, RetryAfterIsWaitedBeforeTheResend) {
  open();
  receiver_.script({{"status", 503}, {"headers", {{"Retry-After", "1"}}}, {"count", 1}});
  const auto start = Clock::now();
  const auto out = host_.write(TestBatch::json("t", 0, 0, records(3)));
  const auto took = Clock::now() - start;
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_GE(took, 1s) << "the server asked for a second";
  EXPECT_EQ(host_.counter("resends"), 1u);
  EXPECT_EQ(delivered(receiver_), (std::multiset<int>{0, 1, 2}));
}

TEST_F(KitRequestEngine, ABudgetSpentFailsTheWriteAsARetryForTheRuntime) {
  g_setup.retry_timeout = 600ms;
  open();
  receiver_.script({{"status", 503}, {"count", 0}, {"body", "overloaded"}});
  const auto out = host_.write(TestBatch::json("t", 0, 0, records(2)));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("503"), std::string::npos) << out.error;
  EXPECT_GE(host_.counter("resends"), 1u);
}

TEST_F(KitRequestEngine, AFatalStatusStopsTheSinkWithoutResending) {
  open();
  receiver_.script({{"status", 401}, {"count", 0}, {"body", "who are you"}});
  const auto out = host_.write(TestBatch::json("t", 0, 0, records(2)));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL) << out.error;
  EXPECT_EQ(host_.counter("resends"), 0u);
  EXPECT_EQ(receiver_.stats().requests, 1u);
}

TEST_F(KitRequestEngine, CloseDuringAResendWaitCompletesTheWriteWithin100ms) {
  open();
  receiver_.script({{"status", 503}, {"headers", {{"Retry-After", "10"}}}, {"count", 0}});
  auto write = host_.start_write(TestBatch::json("t", 0, 0, records(2)));
  ASSERT_TRUE(resend_waiting()) << "the resend is waiting";
  ASSERT_FALSE(write->completed());
  const auto start = Clock::now();
  std::thread closer([&] { host_.close(); });
  const auto out = write->wait(5s);
  const auto took = Clock::now() - start;
  closer.join();
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("stopping"), std::string::npos) << out.error;
  EXPECT_LT(took, 100ms);
}

TEST_F(KitRequestEngine, TheHostsStopDuringAResendWaitCompletesTheWriteAsARetryWithin100ms) {
  open();
  receiver_.script({{"status", 503}, {"headers", {{"Retry-After", "10"}}}, {"count", 0}});
  auto write = host_.start_write(TestBatch::json("t", 0, 0, records(2)));
  ASSERT_TRUE(resend_waiting()) << "the resend is waiting";
  const auto start = Clock::now();
  host_.stop();  // ABI 2.6, beside the pending write; close() comes later
  const auto out = write->wait(5s);
  EXPECT_LT(Clock::now() - start, 100ms);
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  // A write after the stop is not resent either: it fails as a retry at its first refusal.
  const auto later = host_.write(TestBatch::json("t", 0, 2, records(1)), 5s);
  EXPECT_EQ(later.status, PMQ_WRITE_RETRY) << later.error;
  EXPECT_EQ(host_.counter("resends"), 1u);
}

TEST_F(KitRequestEngine, RequestsGoInFlightTogetherAndEachWriteCompletesWithItsOwnOutcome) {
  g_setup.limits = {.max_bytes = 0, .max_records = 1};
  open();
  receiver_.script({{"path", "/in"}, {"delay", 0.3}, {"count", 0}, {"status", 200}});
  auto a = host_.start_write(TestBatch::json("t", 0, 0, records(4)));
  auto b = host_.start_write(TestBatch::json("t", 1, 0, records(4)));
  EXPECT_TRUE(a->wait(10s).ok());
  EXPECT_TRUE(b->wait(10s).ok());
  EXPECT_GT(receiver_.stats().max_in_flight, 1u) << "requests of both writes were on the wire at once";
  EXPECT_EQ(receiver_.stats().requests, 8u);
}

TEST_F(KitRequestEngine, InOrderSendsOneRequestAtATimeInSubmissionOrderAndAResendKeepsItsPlace) {
  g_setup.limits = {.max_bytes = 0, .max_records = 2};
  g_setup.in_order = true;
  open();
  // The first request is refused as transient once, slowly: the others must wait behind it.
  receiver_.script({{"path", "/in"}, {"status", 503}, {"delay", 0.2}, {"count", 1}});
  auto a = host_.start_write(TestBatch::json("t", 0, 0, records(6)));
  std::vector<std::string> later;
  for (int i = 6; i < 10; ++i) later.push_back(R"({"n":)" + std::to_string(i) + "}");
  auto b = host_.start_write(TestBatch::json("t", 0, 6, later));
  ASSERT_TRUE(a->wait(10s).ok());
  ASSERT_TRUE(b->wait(10s).ok());
  EXPECT_EQ(receiver_.stats().max_in_flight, 1u);
  std::vector<int> order;
  for (const auto& r : receiver_.requests("/in")) {
    if (r.answer != 200) continue;
    order.push_back(nlohmann::json::parse(r.body.substr(0, r.body.find('\n')))["n"].get<int>());
  }
  EXPECT_EQ(order, (std::vector<int>{0, 2, 4, 6, 8}));
}

TEST_F(KitRequestEngine, ANotReachableServerIsRetriedThenFailsAsRetryNotFatal) {
  g_setup.retry_timeout = 500ms;
  receiver_.stop();
  open();
  const auto out = host_.write(TestBatch::json("t", 0, 0, records(2)));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_GE(host_.counter("resends"), 1u);
}

}  // namespace
