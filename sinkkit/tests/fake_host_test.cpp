// The fake host itself: it must refuse what the runtime refuses and report what the runtime
// would see, or sink unit tests prove nothing.
#include "picomq/kit/testing/fake_host.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "picomq/kit/destination_cache.hpp"
#include "picomq/sdk.hpp"

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using kit::testing::FakeHost;
using kit::testing::TestBatch;
using namespace std::chrono_literals;

namespace {

class RowSink : public sdk::BaseSink<RowSink> {
 public:
  static constexpr std::string_view sink_name = "rows";
  static constexpr std::array options{pmq_option{.name = "refuse",
                                                 .type = PMQ_OPTION_STRING,
                                                 .flags = 0,
                                                 .default_json = "\"bad\"",
                                                 .allowed = nullptr,
                                                 .help = "Payload to refuse."}};
  void open(const sdk::Config& c) {
    refuse_ = c.string("refuse");
    declare_unread_fields(PMQ_FIELD_HEADERS);
    count("opens");
  }
  void write(const sdk::Record& r) {
    if (r.payload_text() == "\"" + refuse_ + "\"") reject(r.index(), "refused: " + refuse_);
    if (r.payload_text() == "\"boom\"") throw sdk::RetryableError("destination down");
    log(sdk::LogLevel::Warn, "wrote " + std::to_string(r.offset()));
  }

 private:
  std::string refuse_;
};

class AsyncSink : public sdk::BaseSink<AsyncSink> {
 public:
  static constexpr std::string_view sink_name = "async";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 8;
  sdk::Pending write_batch(const sdk::Batch& b) {
    sdk::Pending p = pending();
    const std::string topic(b.topic());  // the batch stays valid until completion: read it later too
    threads_.emplace_back([p, b]() mutable {
      std::this_thread::sleep_for(20ms);
      if (std::string_view(b.topic()) == "fail") p.fatal("no such index");
      else p.done();
    });
    return p;
  }
  void close() {
    for (auto& t : threads_) t.join();
  }
  std::vector<std::thread> threads_;
};

// Counts its validate() calls; `limit` must be at least `floor`.
int g_validations = 0;
class CheckedSink : public sdk::BaseSink<CheckedSink> {
 public:
  static constexpr std::string_view sink_name = "checked";
  static constexpr std::array options{pmq_option{.name = "floor",
                                                 .type = PMQ_OPTION_INT,
                                                 .flags = 0,
                                                 .default_json = "1",
                                                 .allowed = nullptr,
                                                 .help = "Lowest limit."},
                                      pmq_option{.name = "limit",
                                                 .type = PMQ_OPTION_INT,
                                                 .flags = 0,
                                                 .default_json = "10",
                                                 .allowed = nullptr,
                                                 .help = "At least floor."}};
  static void validate(const sdk::Config& c, sdk::ConfigProblems& p) {
    ++g_validations;
    if (c.integer("limit") < c.integer("floor")) p.add("limit", "must be at least floor");
  }
  void open(const sdk::Config& c) { count("limit", static_cast<uint64_t>(c.integer("limit"))); }
  void write(const sdk::Record&) {}
};

}  // namespace

// As at the runtime's start: one check (table, then validate()), and open() on what passed.
TEST(KitFakeHost, OpenValidatesOnceAndOpensOnTheValidatedOptions) {
  FakeHost host(sdk::descriptor<CheckedSink>());
  g_validations = 0;
  EXPECT_EQ(host.check(R"({"limit": 0})"), std::vector<std::string>{"limit: must be at least floor"});
  EXPECT_EQ(g_validations, 1);
  g_validations = 0;
  try {
    host.open(R"({"limit": 0})");
    ADD_FAILURE() << "opened a config its validate() refuses";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "limit: must be at least floor");
  }
  EXPECT_FALSE(host.is_open());
  EXPECT_EQ(g_validations, 1);
  g_validations = 0;
  host.open(R"({"limit": 7})");
  EXPECT_EQ(g_validations, 1) << "open() checks the config once";
  EXPECT_EQ(host.counter("limit"), 7u) << "and opens the sink on the options that passed";
}

TEST(KitFakeHost, ValidatesLikeTheRuntimeAndDeliversRowsWithRejectionsAndErrors) {
  FakeHost host(sdk::descriptor<RowSink>());
  auto problems = host.check(R"({"refuse": 1, "unknown": true})");
  ASSERT_EQ(problems.size(), 2u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("unknown"), std::string::npos);
  EXPECT_THROW(host.open(R"({"refsue": "x"})"), std::runtime_error);
  host.open();
  EXPECT_EQ(host.delivery_plane(), static_cast<uint32_t>(PMQ_PLANE_ROWS));
  EXPECT_EQ(host.unread_fields(), static_cast<uint32_t>(PMQ_FIELD_HEADERS));
  EXPECT_EQ(host.counter("opens"), 1u);
  auto outcome = host.write(TestBatch::json("t", 0, 10, {"1", "\"bad\"", "3"}));
  EXPECT_EQ(outcome.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_EQ(outcome.rejected[0].reason, "refused: bad");
  EXPECT_TRUE(host.logged("warn: wrote 12")) << "the records after the refused one are written";
  auto failed = host.write(TestBatch::json("t", 0, 20, {"1", "\"boom\"", "3"}));
  EXPECT_EQ(failed.status, PMQ_WRITE_RETRY);
  EXPECT_EQ(failed.error, "destination down");
  EXPECT_FALSE(host.logged("wrote 22")) << "a failure ends the batch there";
}

TEST(KitFakeHost, PendingWritesCompleteLaterExactlyOnceWithTheirBatchStillValid) {
  FakeHost host(sdk::descriptor<AsyncSink>());
  host.open();
  EXPECT_EQ(host.max_in_flight(), 8u);
  auto ok = host.start_write(TestBatch::json("t", 0, 0, {"1"}));
  auto bad = host.start_write(TestBatch::json("fail", 0, 0, {"1"}));
  EXPECT_EQ(ok->wait(5s).status, PMQ_WRITE_OK);
  auto o = bad->wait(5s);
  EXPECT_EQ(o.status, PMQ_WRITE_FATAL);
  EXPECT_EQ(o.error, "no such index");
  host.close();
  EXPECT_EQ(ok->completions(), 1);
}

TEST(KitDestinationCache, ResolvesSanitisesAndPreparesEachTopicOnceAndRetriesAFailure) {
  int prepared = 0;
  bool fail = true;
  kit::DestinationCache<std::string> cache(
      kit::NameTemplate::parse("Events_{topic_segment[-1]}").value(), kit::NamePolicy::IndexName,
      [&](const std::string& name, std::string_view) {
        ++prepared;
        if (fail) throw sdk::RetryableError("server down");
        return name;
      },
      "index");
  EXPECT_THROW(cache.get("shop.Orders"), sdk::RetryableError);
  fail = false;
  EXPECT_EQ(cache.get("shop.Orders"), "events_orders");
  EXPECT_EQ(cache.get("shop.Orders"), "events_orders");
  EXPECT_EQ(prepared, 2) << "failure not cached, success cached";
  kit::DestinationCache<std::string> third(
      kit::NameTemplate::parse("{topic_segment[2]}").value(), kit::NamePolicy::IndexName,
      [](const std::string& name, std::string_view) { return name; }, "index");
  try {
    third.get("shop.orders");
    ADD_FAILURE() << "a topic whose name the template cannot fill is a configuration error";
  } catch (const sdk::FatalError& e) {
    EXPECT_NE(std::string(e.what()).find("index for topic 'shop.orders'"), std::string::npos) << e.what();
  } catch (...) {}
}
