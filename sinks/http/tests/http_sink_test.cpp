// The HTTP sink in the kit's fake host (the runtime's option checks, planes, outcomes and pending
// writes) against the fault-injecting receiver: a real HTTP server on a loopback port. No broker:
// tests/integration/http_sink_test.cpp runs it through Kafka and the runtime.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class HttpSink : public ::testing::Test {
 protected:
  void SetUp() override { host_ = kt::FakeHost::load(HTTP_SINK_PLUGIN); }
  void TearDown() override {
    if (host_) host_->close();
  }
  void open(json config) {
    if (!config.contains("url")) config["url"] = receiver_.url("/in/{topic_segment[-1]}");
    host_->open(config.dump());
  }
  static TestBatch orders(int64_t first, size_t n, std::string topic = "shop.orders") {
    std::vector<TestRecord> records;
    for (size_t i = 0; i < n; ++i)
      records.push_back({.offset = first + static_cast<int64_t>(i),
                         .payload = json{{"id", first + static_cast<int64_t>(i)}}.dump(),
                         .key = "k" + std::to_string(i),
                         .headers = {{"trace", "t" + std::to_string(i)}}});
    return TestBatch(std::move(topic), 1, std::move(records));
  }
  // Every record the receiver got on `path`, as (offset -> how many times), from NDJSON bodies.
  std::map<int64_t, int> offsets_received(std::string_view path) {
    std::map<int64_t, int> out;
    for (const auto& r : receiver_.requests(path)) {
      if (r.answer != 200 && r.answer != 204) continue;
      size_t start = 0;
      while (start < r.body.size()) {
        const size_t end = r.body.find('\n', start);
        out[json::parse(r.body.substr(start, end - start))["pico_offset"].get<int64_t>()]++;
        start = end == std::string::npos ? r.body.size() : end + 1;
      }
    }
    return out;
  }

  kt::HttpReceiver receiver_;
  std::unique_ptr<kt::FakeHost> host_;
};

std::optional<std::string> header(const kt::RecordedRequest& r, std::string_view name) {
  auto v = r.headers.get(name);
  return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
}

}  // namespace

TEST_F(HttpSink, ABatchIsOneNdjsonRequestWithTheEnvelopeHeadersAndAnIdempotencyKey) {
  open({{"headers", {{"X-Team", "payments"}}}, {"secret_headers", {{"X-Secret", "hush"}}}});
  auto outcome = host_->write(orders(100, 3));
  ASSERT_EQ(outcome.status, PMQ_WRITE_OK) << outcome.error;
  auto requests = receiver_.requests("/in/orders");
  ASSERT_EQ(requests.size(), 1u) << "the URL template resolved the topic's last segment";
  const auto& r = requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(header(r, "Content-Type"), "application/x-ndjson");
  EXPECT_EQ(header(r, "X-Team"), "payments");
  EXPECT_EQ(header(r, "X-Secret"), "hush");
  EXPECT_EQ(header(r, "Idempotency-Key"), "shop_2Eorders-1-100-102");
  const auto first = json::parse(r.body.substr(0, r.body.find('\n')));
  EXPECT_EQ(first["pico_topic"], "shop.orders");
  EXPECT_EQ(first["pico_partition"], 1);
  EXPECT_EQ(first["pico_offset"], 100);
  EXPECT_EQ(first["pico_key"], "azA=");
  EXPECT_EQ(first["pico_headers"]["trace"], "t0");
  EXPECT_EQ(first["payload"]["id"], 100);
  EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 3);
  EXPECT_EQ(host_->counter("requests"), 1u);
}

TEST_F(HttpSink, BatchesAreCutIntoRequestsByRecordsAndBytesAndEveryRecordArrivesOnce) {
  open({{"max_request_records", 4}, {"max_request_bytes", 600}});
  ASSERT_EQ(host_->write(orders(0, 30)).status, PMQ_WRITE_OK);
  auto requests = receiver_.requests("/in/orders");
  EXPECT_GE(requests.size(), 8u);
  std::set<std::string> keys;
  for (const auto& r : requests) {
    EXPECT_LE(r.body.size(), 600u);
    EXPECT_LE(std::count(r.body.begin(), r.body.end(), '\n'), 4);
    keys.insert(*header(r, "Idempotency-Key"));
  }
  EXPECT_EQ(keys.size(), requests.size()) << "each request names its own records";
  auto got = offsets_received("/in/orders");
  ASSERT_EQ(got.size(), 30u);
  for (const auto& [offset, times] : got) EXPECT_EQ(times, 1) << offset;
}

TEST_F(HttpSink, A429WithRetryAfterIsWaitedOutAndResentWithTheSameKey) {
  receiver_.script({{"path", "/in/orders"}, {"status", 429}, {"headers", {{"Retry-After", "1"}}}});
  open({});
  const auto start = std::chrono::steady_clock::now();
  auto outcome = host_->write(orders(0, 2));
  EXPECT_EQ(outcome.status, PMQ_WRITE_OK) << outcome.error;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 950ms) << "Retry-After: 1 honoured";
  auto requests = receiver_.requests("/in/orders");
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(header(requests[0], "Idempotency-Key"), header(requests[1], "Idempotency-Key"));
  EXPECT_EQ(host_->counter("resends"), 1u);
}

TEST_F(HttpSink, AnEndpointThatKeepsFailingFailsTheWriteAsRetryableAfterRetryTimeout) {
  receiver_.script({{"path", "/in/orders"}, {"status", 503}, {"count", 0}});
  open({{"retry_timeout", "1s"}});
  auto outcome = host_->write(orders(0, 2));
  EXPECT_EQ(outcome.status, PMQ_WRITE_RETRY) << "nothing was written: the runtime retries the batch";
  EXPECT_NE(outcome.error.find("503"), std::string::npos) << outcome.error;
  EXPECT_GE(receiver_.requests("/in/orders").size(), 2u) << "resent within retry_timeout";
}

TEST_F(HttpSink, WhenSomeRequestsOfABatchLandedAFailureIsMaybeWritten) {
  // The first request succeeds, every later one fails: the batch's retry resends the first too.
  receiver_.script(json::array(
      {{{"path", "/in/orders"}, {"status", 200}}, {{"path", "/in/orders"}, {"status", 503}, {"count", 0}}}));
  open({{"max_request_records", 2}, {"retry_timeout", "0s"}, {"max_in_flight", 1}});
  auto outcome = host_->write(orders(0, 6));
  EXPECT_EQ(outcome.status, PMQ_WRITE_PARTIAL) << outcome.error;
}

TEST_F(HttpSink, A413SplitsTheRequestAndARecordTooLargeAloneIsRefused) {
  receiver_.script({{"path", "/in/orders"}, {"when_body_over", 250}, {"status", 413}, {"count", 0}});
  open({});
  auto outcome = host_->write(orders(0, 8));
  EXPECT_EQ(outcome.status, PMQ_WRITE_OK) << outcome.error;
  auto got = offsets_received("/in/orders");
  EXPECT_EQ(got.size(), 8u);
  for (const auto& [offset, times] : got) EXPECT_EQ(times, 1);
  EXPECT_GT(host_->counter("splits"), 0u);

  std::vector<TestRecord> big{{.offset = 50, .payload = json{{"blob", std::string(400, 'x')}}.dump()},
                              {.offset = 51, .payload = R"({"id":51})"}};
  auto refused = host_->write(TestBatch("shop.orders", 1, big));
  EXPECT_EQ(refused.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(refused.rejected.size(), 1u);
  EXPECT_EQ(refused.rejected[0].record_index, 0u);
  EXPECT_NE(refused.rejected[0].reason.find("413"), std::string::npos) << refused.rejected[0].reason;
  EXPECT_EQ(offsets_received("/in/orders").count(51), 1u) << "the record beside it is written";
}

TEST_F(HttpSink, ARefusedRequestIsBisectedDownToTheRefusedRecordsAndTheRestIsWritten) {
  receiver_.script({{"path", "/in/orders"},
                    {"when_body_contains", "\"id\":13}"},
                    {"status", 400},
                    {"body", R"({"error":"field id: 13 is cursed"})"},
                    {"count", 0}});
  open({});
  auto outcome = host_->write(orders(10, 16));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 3u) << "offset 13 is record 3 of the batch";
  EXPECT_NE(outcome.rejected[0].reason.find("cursed"), std::string::npos) << "the endpoint's answer is the reason";
  auto got = offsets_received("/in/orders");
  EXPECT_EQ(got.size(), 15u);
  EXPECT_EQ(got.count(13), 0u);
  EXPECT_LE(receiver_.requests("/in/orders").size(), 1u + 2u * 4u) << "log2(16) levels of halves";
}

TEST_F(HttpSink, CredentialsRefusedStopTheSinkWithoutShowingTheSecret) {
  receiver_.script({{"path", "/in/orders"}, {"status", 401}, {"body", "bad token s3cr3t-token"}, {"count", 0}});
  open({{"auth", "bearer"}, {"auth_token", "s3cr3t-token"}});
  auto outcome = host_->write(orders(0, 2));
  EXPECT_EQ(outcome.status, PMQ_WRITE_FATAL);
  EXPECT_NE(outcome.error.find("401"), std::string::npos) << outcome.error;
  EXPECT_EQ(outcome.error.find("s3cr3t-token"), std::string::npos) << outcome.error;
  EXPECT_EQ(header(receiver_.requests("/in/orders").at(0), "Authorization"), "Bearer s3cr3t-token");
}

// A secret header is sent, and its value is kept out of every message like a token's.
TEST_F(HttpSink, ASecretHeaderIsSentButNeverShownInAnError) {
  receiver_.script({{"path", "/in/orders"}, {"status", 403}, {"body", "refused key h3ader-s3cret"}, {"count", 0}});
  open({{"secret_headers", {{"X-Api-Key", "h3ader-s3cret"}}}});
  auto outcome = host_->write(orders(0, 2));
  EXPECT_EQ(outcome.status, PMQ_WRITE_FATAL);
  EXPECT_NE(outcome.error.find("403"), std::string::npos) << outcome.error;
  EXPECT_EQ(outcome.error.find("h3ader-s3cret"), std::string::npos) << outcome.error;
  EXPECT_EQ(header(receiver_.requests("/in/orders").at(0), "X-Api-Key"), "h3ader-s3cret");
}

TEST_F(HttpSink, AResetAfterTheRequestIsResentAndTheReceiverDropsTheRepeatByItsKey) {
  receiver_.idempotency("Idempotency-Key");
  receiver_.script({{"path", "/in/orders"}, {"action", "reset"}});
  open({});
  auto outcome = host_->write(orders(0, 3));
  EXPECT_EQ(outcome.status, PMQ_WRITE_OK) << outcome.error;
  auto requests = receiver_.requests("/in/orders");
  ASSERT_GE(requests.size(), 2u);
  EXPECT_EQ(header(requests[0], "Idempotency-Key"), header(requests.back(), "Idempotency-Key"));
}

TEST_F(HttpSink, TombstonesBecomeDeletesOfTheKeyAndAKeylessOneIsRefused) {
  receiver_.set_default_answer(204);
  open({{"tombstones", "delete"}});
  TestBatch batch("shop.orders", 0,
                  {{.offset = 1, .payload = R"({"id":1})", .key = "a"},
                   {.offset = 2, .payload = std::nullopt, .key = "user/7"},
                   {.offset = 3, .payload = std::nullopt}});
  auto outcome = host_->write(batch);
  EXPECT_EQ(outcome.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 2u);
  auto deletes = receiver_.requests("/in/orders/user%2F7");
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_EQ(deletes[0].method, "DELETE");
  auto posts = offsets_received("/in/orders");
  EXPECT_EQ(posts.size(), 1u) << "only the record with a payload is in a body";
}

TEST_F(HttpSink, OAuth2TokensAreFetchedOnceReusedAndRenewedWhenTheEndpointRefusesOne) {
  receiver_.script(json::array({{{"path", "/token"},
                                 {"status", 200},
                                 {"body", R"({"access_token":"t1","token_type":"Bearer","expires_in":3600})"}},
                                {{"path", "/token"},
                                 {"status", 200},
                                 {"body", R"({"access_token":"t2","token_type":"bearer","expires_in":3600})"}},
                                {{"path", "/in/orders"}, {"status", 200}},
                                {{"path", "/in/orders"}, {"status", 401}}}));
  open({{"auth", "oauth2"},
        {"oauth2_token_url", receiver_.url("/token")},
        {"oauth2_client_id", "picomq"},
        {"oauth2_client_secret", "cl13nt-s3cret"},
        {"oauth2_scope", "ingest write"}});
  ASSERT_EQ(host_->write(orders(0, 1)).status, PMQ_WRITE_OK);
  auto second = host_->write(orders(1, 1));
  ASSERT_EQ(second.status, PMQ_WRITE_OK) << second.error;
  auto tokens = receiver_.requests("/token");
  ASSERT_EQ(tokens.size(), 2u) << "one fetch, then one after the 401";
  EXPECT_EQ(tokens[0].body, "grant_type=client_credentials&scope=ingest+write");
  EXPECT_EQ(header(tokens[0], "Authorization"), "Basic cGljb21xOmNsMTNudC1zM2NyZXQ=");
  auto in = receiver_.requests("/in/orders");
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(header(in[0], "Authorization"), "Bearer t1");
  EXPECT_EQ(header(in[1], "Authorization"), "Bearer t1");
  EXPECT_EQ(header(in[2], "Authorization"), "Bearer t2");
  EXPECT_EQ(host_->counter("token_refreshes"), 1u);
}

TEST_F(HttpSink, BodiesAsJsonArraysSingleDocumentsOrRawPayloadsAndGzip) {
  open({{"body", "json_array"}, {"compression", "gzip"}, {"include_metadata", false}, {"method", "PUT"}});
  ASSERT_EQ(host_->write(orders(0, 3)).status, PMQ_WRITE_OK);
  auto r = receiver_.requests("/in/orders").at(0);
  EXPECT_EQ(r.method, "PUT");
  EXPECT_EQ(r.content_encoding, "gzip");
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"id":0},{"id":1},{"id":2}])"));
  host_->close();
  receiver_.reset();
  open({{"body", "raw"}});
  TestBatch raw("bin.blobs", 0, {{.offset = 5, .payload = std::string("\x00\x01", 2)}, {.offset = 6, .payload = "z"}},
                PMQ_PAYLOAD_RAW, "raw");
  ASSERT_EQ(host_->write(raw).status, PMQ_WRITE_OK);
  auto raws = receiver_.requests("/in/blobs");
  ASSERT_EQ(raws.size(), 2u) << "one request per record";
  // The two requests go in parallel: they may arrive in either order.
  std::set<std::string> keys;
  for (const auto& request : raws) {
    EXPECT_EQ(header(request, "Content-Type"), "application/octet-stream");
    keys.insert(header(request, "Idempotency-Key").value_or(""));
  }
  EXPECT_EQ(keys, (std::set<std::string>{"bin_2Eblobs-0-5-5", "bin_2Eblobs-0-6-6"}));
}

TEST_F(HttpSink, RequestsGoInParallelUpToMaxInFlight) {
  receiver_.script({{"path", "/in/orders"}, {"delay", 0.3}, {"count", 0}});
  open({{"max_request_records", 1}, {"max_in_flight", 3}});
  EXPECT_EQ(host_->max_in_flight(), 3u) << "the runtime's window follows max_in_flight";
  ASSERT_EQ(host_->write(orders(0, 9)).status, PMQ_WRITE_OK);
  const auto stats = receiver_.stats();
  EXPECT_EQ(stats.max_in_flight, 3u);
}

TEST_F(HttpSink, ConfigurationMistakesAreReportedUnderTheirKeys) {
  auto problems = host_->check(json{
      {"url", "http://x/{topic_segment[}"},
      {"success_statuses", {"2xy"}},
      {"auth", "basic"},
      {"auth_user", "u"},
      {"auth_token", "t"},
      {"headers",
       {{"Bad Name", "v"}}}}.dump());
  const std::string all = ::testing::PrintToString(problems);
  EXPECT_NE(all.find("url:"), std::string::npos) << all;
  EXPECT_NE(all.find("success_statuses:"), std::string::npos) << all;
  EXPECT_NE(all.find("auth_password: is required"), std::string::npos) << all;
  EXPECT_NE(all.find("auth_token: is for auth = \\\"bearer\\\""), std::string::npos) << all;
  EXPECT_NE(all.find("headers:"), std::string::npos) << all;
}
