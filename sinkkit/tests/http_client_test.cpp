// The kit's HTTP client against real servers on loopback ports: the fault-injecting receiver
// (sinkkit/testing/http_receiver.py) and nginx (sinkkit/testing/nginx.sh, HTTP and TLS with a
// generated CA). No mock of libcurl: every outcome here came over a socket.
#include "picomq/kit/http_client.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::kit {
namespace {

using namespace std::chrono_literals;
using testing::HttpReceiver;
using testing::Nginx;
using testing::scaled;

HttpRequest post(std::string url, std::string body = R"({"n":1})") {
  HttpRequest r;
  r.url = std::move(url);
  r.body = std::move(body);
  r.headers.set("Content-Type", "application/json");
  return r;
}

Outcome outcome_of(const HttpResponse& r) { return OutcomeRules().classify(r).outcome; }

std::string describe(const HttpResponse& r) { return OutcomeRules().classify(r).reason; }

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  std::string out;
  char hex[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

std::string lines_of_json(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += R"({"index":{"_id":")" + std::to_string(i) + "\"}}\n" + R"({"amount":)" + std::to_string(i % 13) + "}\n";
  return s;
}

// Polls `condition` until it holds or `timeout` (scaled) passed.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

// Collects responses from callbacks on the I/O thread.
struct Responses {
  std::mutex mutex;
  std::vector<HttpResponse> all;
  HttpClient::Callback collector() {
    return [this](HttpResponse r) {
      std::lock_guard lock(mutex);
      all.push_back(std::move(r));
    };
  }
  size_t size() {
    std::lock_guard lock(mutex);
    return all.size();
  }
};

class HttpClientTest : public ::testing::Test {
 protected:
  HttpReceiver receiver;
};

// ---------------------------------------------------------------- pure pieces

TEST(RedactUrl, UserinfoAndSecretLookingParametersAreHidden) {
  EXPECT_EQ(redact_url("https://user:pw@es.example:9200/_bulk?token=abc&refresh=true"),
            "https://***@es.example:9200/_bulk?token=***&refresh=true");
  EXPECT_EQ(redact_url("http://user@host/"), "http://***@host/");
  EXPECT_EQ(
      redact_url("https://bucket.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20240101"
                 "&X-Amz-Date=20240101T000000Z&X-Amz-Signature=0a1b&X-Amz-Security-Token=FQo"),
      "https://bucket.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
      "&X-Amz-Date=20240101T000000Z&X-Amz-Signature=***&X-Amz-Security-Token=***");
  EXPECT_EQ(
      redact_url("http://h/p?api_key=1&apiKey=2&password=3&access_token=4&client_secret=5&sig=6&AUTH=7&sessionid=8"),
      "http://h/"
      "p?api_key=***&apiKey=***&password=***&access_token=***&client_secret=***&sig=***&AUTH=***&sessionid=***");
  EXPECT_EQ(redact_url("http://h/p?signal=1&design=2&page=3"), "http://h/p?signal=1&design=2&page=3")
      << "only names that look secret";
  EXPECT_EQ(redact_url("http://h/cb#access_token=abc&state=x"), "http://h/cb#access_token=***&state=x");
  EXPECT_EQ(redact_url("http://h/p/with@sign?q=1"), "http://h/p/with@sign?q=1") << "an @ in the path is not userinfo";
  EXPECT_EQ(redact_url("http://h/p?token="), "http://h/p?token=") << "nothing to hide";
  EXPECT_EQ(redact_url("not a url ?key=v"), "not a url ?key=***");
  EXPECT_EQ(redact_url(""), "");
}

// A sink's base URL option: http(s), no query or fragment, no userinfo; an '@' in the path is not one.
TEST(BaseUrl, OnlyAnHttpAddressWithoutQueryOrCredentialsPasses) {
  const picomq::kit::BaseUrlHints hints{
      .what = "e.g. http://h:1", .credentials = "use token", .query = "the sink sets it"};
  EXPECT_EQ(picomq::kit::check_base_url("http://h:1", hints), std::nullopt);
  EXPECT_EQ(picomq::kit::check_base_url("https://h:1/prefix/a@b", hints), std::nullopt);
  EXPECT_EQ(picomq::kit::check_base_url("h:1", hints), "must start with http:// or https:// (e.g. http://h:1)");
  EXPECT_EQ(picomq::kit::check_base_url("http://h:1/?x=1", hints),
            "must not hold a query or fragment (the sink sets it)");
  EXPECT_EQ(picomq::kit::check_base_url("http://h:1/#f", {.what = "w", .credentials = "c"}),
            "must not hold a query or fragment");
  EXPECT_EQ(picomq::kit::check_base_url("http://u:p@h:1", hints), "must not hold credentials (use token)");
  EXPECT_EQ(picomq::kit::check_base_url("http://u:p@h:1/x", hints), "must not hold credentials (use token)");
}

// A reason for the user: redacted, then cut at kMaxReasonBytes on a UTF-8 boundary with "...".
TEST(Redactor, BoundedReasonsAreRedactedThenCutAtACharacterBoundary) {
  EXPECT_EQ(picomq::kit::bounded("short"), "short");
  EXPECT_EQ(picomq::kit::bounded(std::string(1000, 'a')), std::string(1000, 'a')) << "exactly the limit: not cut";
  EXPECT_EQ(picomq::kit::bounded(std::string(1001, 'a')), std::string(1000, 'a') + "...");
  // "é" is two bytes: a cut at byte 5 of "abcdé..." would split it; it backs up to byte 4.
  EXPECT_EQ(picomq::kit::bounded("abcd\xC3\xA9"
                                 "fgh",
                                 5),
            "abcd...");
  EXPECT_EQ(picomq::kit::bounded("abcd\xC3\xA9"
                                 "fgh",
                                 6),
            "abcd\xC3\xA9...");
  Redactor r;
  r.add("s3cr3t-value");
  const std::string text = std::string(995, 'x') + "s3cr3t-value and more";
  EXPECT_EQ(r.bounded(text), std::string(995, 'x') + "*** a...")
      << "redacted before the cut: no prefix of the secret survives";
  EXPECT_EQ(r.bounded(text).find("s3cr"), std::string::npos);
}

TEST(Redactor, EveryFormOfEverySecretIsHidden) {
  auto client = std::make_shared<Redactor>();
  client->add("abc");
  client->add("abcdef");
  client->add("p@ss word");
  client->add("");
  Redactor request(client);
  request.add("qs-value");
  EXPECT_EQ(request.redact("xabcdefx"), "x***x") << "the longer secret first: no tail left";
  EXPECT_EQ(request.redact("a p@ss word and p%40ss%20word"), "a *** and ***") << "raw and percent-encoded";
  EXPECT_EQ(request.redact("?k=qs-value and abc"), "?k=*** and ***") << "own and the parent's";
  EXPECT_EQ(Redactor().redact("nothing secret"), "nothing secret");
  EXPECT_TRUE(Redactor().empty());
  EXPECT_FALSE(Redactor(client).empty());
}

TEST(HttpHeadersTest, NamesCompareCaseInsensitively) {
  HttpHeaders h{{"Content-Type", "application/json"}};
  h.add("X-Multi", "1");
  h.add("x-multi", "2");
  EXPECT_EQ(h.get("content-type"), "application/json");
  EXPECT_EQ(h.get_all("X-MULTI"), (std::vector<std::string_view>{"1", "2"}));
  h.set("X-Multi", "3");
  EXPECT_EQ(h.get_all("x-multi"), (std::vector<std::string_view>{"3"}));
  h.remove("CONTENT-TYPE");
  EXPECT_FALSE(h.contains("Content-Type"));
  EXPECT_EQ(h.size(), 1u);
}

TEST(HttpClientOptionsTest, OptionsThatCannotWorkAreRefusedUpFront) {
  EXPECT_THROW(HttpClient({.max_in_flight = 0}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.io_threads = 0}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = BasicAuth{"", "pw"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = BasicAuth{"a:b", "pw"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = BearerAuth{""}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = BearerAuth{"two\nlines"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = ApiKeyAuth{"X Key", "v"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = ApiKeyAuth{"X-Key", ""}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.auth = AwsSigV4Auth{.region = "eu-west-1", .service = "s3", .access_key_id = "AK"}}),
               std::invalid_argument);
  EXPECT_THROW(HttpClient({.tls = {.ca_file = "/nonexistent/ca.pem"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.tls = {.ca_dir = "/etc/hostname"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.tls = {.client_key_file = "/etc/hostname"}}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.compression = Compression::Gzip, .compression_level = 42}), std::invalid_argument);
  EXPECT_THROW(HttpClient({.user_agent = "a\r\nX-Injected: 1"}), std::invalid_argument);
  try {
    HttpClient({.tls = {.ca_file = "/nonexistent/ca.pem"}});
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "tls ca_file '/nonexistent/ca.pem' does not exist");
  }
}

// ---------------------------------------------------------------- exchanges

TEST_F(HttpClientTest, PostsAndReadsTheWholeResponse) {
  receiver.script({{"path", "/bulk"}, {"status", 201}, {"headers", {{"X-Trace", "t-1"}}}, {"body", "created"}});
  HttpClient client({});
  HttpRequest request = post(receiver.url("/bulk?refresh=false"), R"({"id":1})");
  request.headers.set("X-Custom", "yes");
  const HttpResponse r = client.send(std::move(request));
  ASSERT_TRUE(r.completed()) << describe(r);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.status_line, "HTTP/1.1 201 Created");
  EXPECT_EQ(r.headers.get("x-trace"), "t-1");
  EXPECT_EQ(r.body, "created");
  EXPECT_EQ(r.body_bytes, 7u);
  EXPECT_FALSE(r.body_truncated);
  EXPECT_EQ(r.protocol, HttpProtocol::Http1_1);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, receiver.url("/bulk?refresh=false"));
  EXPECT_GT(r.timings.total.count(), 0);
  EXPECT_EQ(outcome_of(r), Outcome::Written);

  const auto seen = receiver.requests("/bulk");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].query, "refresh=false");
  EXPECT_EQ(seen[0].body, R"({"id":1})");
  EXPECT_EQ(seen[0].headers.get("Content-Type"), "application/json");
  EXPECT_EQ(seen[0].headers.get("X-Custom"), "yes");
  EXPECT_EQ(seen[0].headers.get("User-Agent"), "picomq-connect");
}

TEST_F(HttpClientTest, SendAllPutsEveryRequestOnTheWireAtOnceAndAnswersInTheirOrder) {
  // The first request is answered last: the responses still come back in the requests' order.
  receiver.script(nlohmann::json::array({{{"path", "/state/0"}, {"status", 200}, {"body", "zero"}, {"delay", 0.6}},
                                         {{"path", "/state/1"}, {"status", 200}, {"body", "one"}, {"delay", 0.4}},
                                         {{"path", "/state/2"}, {"status", 404}, {"body", "two"}, {"delay", 0.3}}}));
  HttpClient client({.max_in_flight = 3});
  std::vector<HttpRequest> requests;
  requests.reserve(3);
  for (int i = 0; i < 3; ++i) requests.push_back({.method = "GET", .url = receiver.url("/state/" + std::to_string(i))});
  const std::vector<HttpResponse> answers = client.send_all(std::move(requests));
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].body, "zero");
  EXPECT_EQ(answers[1].body, "one");
  EXPECT_EQ(answers[2].body, "two");
  EXPECT_EQ(answers[2].status, 404);
  EXPECT_EQ(receiver.stats().max_in_flight, 3u) << "all three on the wire together";
  EXPECT_TRUE(client.send_all({}).empty());
}

TEST_F(HttpClientTest, EveryMethodWithAndWithoutABody) {
  HttpClient client({});
  auto request = [&](std::string method, std::string body) {
    HttpRequest r;
    r.method = std::move(method);
    r.url = receiver.url("/m");
    r.body = std::move(body);
    return client.send(std::move(r));
  };
  EXPECT_EQ(request("PUT", "").status, 200);
  EXPECT_EQ(request("GET", "").status, 200);
  EXPECT_EQ(request("GET", R"({"query":{}})").status, 200) << "a search body on GET";
  EXPECT_EQ(request("DELETE", "").status, 200);
  EXPECT_EQ(request("PATCH", "p").status, 200);
  const HttpResponse head = request("HEAD", "");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(request("POST", "untyped").status, 200);

  const auto seen = receiver.requests("/m");
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].headers.get("Content-Length"), "0") << "an empty PUT still says how long it is";
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_FALSE(seen[1].headers.contains("Content-Length"));
  EXPECT_EQ(seen[2].body, R"({"query":{}})");
  EXPECT_EQ(seen[3].method, "DELETE");
  EXPECT_EQ(seen[4].method, "PATCH");
  EXPECT_EQ(seen[4].body, "p");
  EXPECT_EQ(seen[5].method, "HEAD");
  EXPECT_EQ(seen[6].headers.get("Content-Type"), "application/octet-stream") << "not curl's form-urlencoded default";
}

TEST_F(HttpClientTest, ABorrowedBodyIsSentFromTheCallersBuffer) {
  const std::string payload = lines_of_json(3000);
  HttpClient client({});
  HttpRequest r;
  r.url = receiver.url("/borrowed");
  r.body = HttpBody::borrowed(payload);
  EXPECT_TRUE(r.body.is_borrowed());
  EXPECT_EQ(r.body.bytes().data(), payload.data()) << "not a copy";
  EXPECT_EQ(client.send(std::move(r)).status, 200);
  const auto seen = receiver.requests("/borrowed");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].body, payload);
}

// A POST of `stream` to `path` on the receiver; the future holds its response.
std::future<HttpResponse> send_streamed(HttpClient& client, const HttpReceiver& receiver, const std::string& path,
                                        std::shared_ptr<BodyStream> stream) {
  HttpRequest r;
  r.url = receiver.url(path);
  r.body = HttpBody::streamed(std::move(stream));
  auto done = std::make_shared<std::promise<HttpResponse>>();
  auto answered = done->get_future();
  client.send_async(std::move(r), [done](HttpResponse response) { done->set_value(std::move(response)); });
  return answered;
}

TEST_F(HttpClientTest, AStreamedBodyGoesUpAsItIsMadeChunkedAndWhole) {
  HttpClient client({.compression = Compression::Gzip});  // a stream is sent as it is
  auto stream = std::make_shared<BodyStream>();
  auto answered = send_streamed(client, receiver, "/stream", stream);
  std::string sent;
  for (int i = 0; i < 20; ++i) {  // the transfer pauses between appends and resumes on each
    std::string piece = lines_of_json(50 + i);
    sent += piece;
    stream->append(std::move(piece));
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(answered.wait_for(0s), std::future_status::timeout) << "no answer before the body ends";
  EXPECT_EQ(stream->appended(), sent.size());
  stream->finish();
  stream->append("ignored after finish()");
  const HttpResponse response = answered.get();
  ASSERT_TRUE(response.completed()) << describe(response);
  EXPECT_EQ(response.status, 200);
  const auto seen = receiver.requests("/stream");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].chunked);
  EXPECT_EQ(seen[0].body, sent);
  EXPECT_FALSE(seen[0].headers.contains("Content-Encoding"));
  EXPECT_FALSE(seen[0].headers.contains("Expect")) << "no 100-continue wait";
  EXPECT_EQ(seen[0].headers.get("Content-Type"), "application/octet-stream");
}

TEST_F(HttpClientTest, AFailedStreamCutsTheRequestAndAnEndedRequestDropsLaterBytes) {
  HttpClient client({});
  auto stream = std::make_shared<BodyStream>();
  auto answered = send_streamed(client, receiver, "/cut", stream);
  stream->append(lines_of_json(100));
  std::this_thread::sleep_for(50ms);
  stream->fail("the insert was abandoned");
  const HttpResponse response = answered.get();
  ASSERT_TRUE(response.failure) << "never a complete body: " << describe(response);
  EXPECT_EQ(response.failure->sent, SendProgress::Partial);
  for (const auto& seen : receiver.requests("/cut"))  // the receiver records a body it could not read whole as empty
    EXPECT_TRUE(seen.body.empty()) << "the server never saw a whole body";

  // A refused request (SigV4 cannot sign a stream) ends at once; the stream then takes nothing.
  HttpClient signing(
      {.auth = AwsSigV4Auth{.region = "eu-west-1", .service = "s3", .access_key_id = "AK", .secret_access_key = "SK"}});
  auto unsigned_stream = std::make_shared<BodyStream>();
  HttpRequest s;
  s.url = receiver.url("/signed");
  s.body = HttpBody::streamed(unsigned_stream);
  const HttpResponse refused = signing.send(std::move(s));
  ASSERT_TRUE(refused.failure);
  EXPECT_EQ(refused.failure->error, TransportError::InvalidRequest);
  EXPECT_NE(refused.failure->message.find("SigV4"), std::string::npos) << refused.failure->message;
  unsigned_stream->append("nobody reads this");
  EXPECT_EQ(unsigned_stream->appended(), 0u);
  EXPECT_NE(unsigned_stream->why().find("ended before its body did"), std::string::npos) << unsigned_stream->why();
}

TEST_F(HttpClientTest, TheResponseBodyIsCappedAndTheRestDrained) {
  receiver.script({{"path", "/big"}, {"status", 200}, {"body", std::string(10000, 'x')}});
  HttpClient client({.max_response_body = 100});
  const HttpResponse r = client.send(post(receiver.url("/big")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(100, 'x'));
  EXPECT_TRUE(r.body_truncated);
  EXPECT_EQ(r.body_bytes, 10000u);
  EXPECT_EQ(outcome_of(r), Outcome::Written) << "a long answer is not a failed write";
  const HttpResponse next = client.send(post(receiver.url("/after")));
  EXPECT_EQ(next.status, 200);
  EXPECT_TRUE(next.connection_reused) << "the connection survived: the rest was read";
}

// ---------------------------------------------------------------- statuses -> outcomes

TEST_F(HttpClientTest, StatusesFromARealServerMapToOutcomes) {
  const std::vector<std::pair<long, Outcome>> cases = {
      {200, Outcome::Written}, {201, Outcome::Written},  {204, Outcome::Written},  {400, Outcome::Rejected},
      {401, Outcome::Fatal},   {403, Outcome::Fatal},    {404, Outcome::Fatal},    {405, Outcome::Fatal},
      {408, Outcome::Retry},   {413, Outcome::TooLarge}, {422, Outcome::Rejected}, {429, Outcome::Retry},
      {500, Outcome::Retry},   {501, Outcome::Fatal},    {502, Outcome::Retry},    {503, Outcome::Retry},
      {504, Outcome::Retry},   {301, Outcome::Fatal},
  };
  HttpClient client({});
  for (const auto& [status, expected] : cases) {
    nlohmann::json rule = {{"path", "/s"}, {"status", status}};
    if (status != 204) rule["body"] = "answer " + std::to_string(status);
    receiver.script(rule);
    const HttpResponse r = client.send(post(receiver.url("/s")));
    const Classification c = OutcomeRules().classify(r);
    EXPECT_EQ(c.outcome, expected) << status << ": " << c.reason;
    EXPECT_EQ(c.status, status);
    EXPECT_NE(c.reason.find("HTTP/1.1 " + std::to_string(status)), std::string::npos) << c.reason;
  }
}

TEST_F(HttpClientTest, TooLargeOnlyOverTheServersLimit) {
  receiver.script({{"path", "/limited"}, {"when_body_over", 1000}, {"status", 413}, {"count", 0}});
  HttpClient client({});
  EXPECT_EQ(outcome_of(client.send(post(receiver.url("/limited"), std::string(5000, 'b')))), Outcome::TooLarge);
  EXPECT_EQ(outcome_of(client.send(post(receiver.url("/limited"), std::string(500, 'b')))), Outcome::Written);
}

TEST_F(HttpClientTest, OverridesAndSuccessSetsApplyToRealAnswers) {
  receiver.script({{{"path", "/doc"}, {"status", 409}, {"body", R"({"error":"version_conflict_engine_exception"})"}},
                   {{"path", "/accepted"}, {"status", 202}}});
  HttpClient client({});
  const OutcomeRules es =
      OutcomeRules().on(409, Outcome::Written, "Elasticsearch: version conflict on create = document already there");
  EXPECT_EQ(es.classify(client.send(post(receiver.url("/doc")))).outcome, Outcome::Written);
  EXPECT_EQ(OutcomeRules().success_statuses({200}).classify(client.send(post(receiver.url("/accepted")))).outcome,
            Outcome::Fatal);
}

TEST_F(HttpClientTest, RetryAfterInSecondsAndAsAnHttpDate) {
  HttpClient client({});
  receiver.script({{"path", "/busy"}, {"status", 429}, {"headers", {{"Retry-After", "2"}}}});
  const Classification seconds = OutcomeRules().classify(client.send(post(receiver.url("/busy"))));
  EXPECT_EQ(seconds.outcome, Outcome::Retry);
  EXPECT_EQ(seconds.retry_after, 2s);

  const std::time_t later = std::time(nullptr) + 120;
  std::tm gmt{};
  gmtime_r(&later, &gmt);
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &gmt);  // IMF-fixdate (C locale)
  receiver.script({{"path", "/busy"}, {"status", 503}, {"headers", {{"Retry-After", date}}}});
  const Classification dated = OutcomeRules().max_retry_after(10min).classify(client.send(post(receiver.url("/busy"))));
  EXPECT_EQ(dated.outcome, Outcome::Retry);
  ASSERT_TRUE(dated.retry_after) << date;
  EXPECT_LE(*dated.retry_after, 121s);
  EXPECT_GE(*dated.retry_after, 60s) << "about two minutes, minus however long this test took";
}

// ---------------------------------------------------------------- transport failures

TEST_F(HttpClientTest, AResetAfterTheBodyArrivedMayBeWritten) {
  receiver.script({{"path", "/r"}, {"action", "reset"}});
  HttpClient client({});
  const std::string body = lines_of_json(2000);
  const HttpResponse r = client.send(post(receiver.url("/r"), body));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Receive) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Complete);
  EXPECT_EQ(outcome_of(r), Outcome::MaybeWritten);
  const auto seen = receiver.requests("/r");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].body, body) << "the server had all of it: it may well have written it";
}

TEST_F(HttpClientTest, AReusedConnectionThatDiesUnansweredIsResentOnceOnAFreshOne) {
  HttpClient client({});
  ASSERT_EQ(client.send(post(receiver.url("/warm"))).status, 200);  // a kept-alive connection now
  receiver.script({{"path", "/r"}, {"action", "reset"}});
  const HttpResponse r = client.send(post(receiver.url("/r"), "payload"));
  EXPECT_EQ(r.status, 200) << describe(r);
  EXPECT_EQ(outcome_of(r), Outcome::Written);
  const auto seen = receiver.requests("/r");
  ASSERT_EQ(seen.size(), 2u) << "curl resent it on a new connection: the destination saw it twice";
  EXPECT_NE(seen[0].connection, seen[1].connection);
}

TEST_F(HttpClientTest, AResponseCutInItsBodyMayBeWritten) {
  receiver.script(
      {{"path", "/cut"}, {"status", 200}, {"body", std::string(4000, 'r')}, {"action", "reset_mid_response"}});
  HttpClient client({});
  const HttpResponse r = client.send(post(receiver.url("/cut")));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Receive) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Complete);
  EXPECT_EQ(r.status, 200) << "the status line had come";
  EXPECT_EQ(outcome_of(r), Outcome::MaybeWritten);
}

TEST_F(HttpClientTest, AConnectionClosedWithoutAnswerMayBeWritten) {
  receiver.script({{"path", "/silent"}, {"action", "close"}});
  HttpClient client({});
  const HttpResponse r = client.send(post(receiver.url("/silent")));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Receive) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Complete);
  EXPECT_EQ(outcome_of(r), Outcome::MaybeWritten);
}

TEST(HttpClientTransport, ConnectionRefusedIsRetry) {
  HttpReceiver gone;
  const std::string url = gone.url("/x");
  gone.stop();
  HttpClient client({});
  const HttpResponse r = client.send(post(url));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Connect) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Nothing);
  const Classification c = OutcomeRules().classify(r);
  EXPECT_EQ(c.outcome, Outcome::Retry);
  EXPECT_NE(c.reason.find("POST " + url + ": connect failed before the request was sent"), std::string::npos)
      << c.reason;
}

// A listener whose accept queue is full: Linux drops further SYNs, so a connect hangs until it
// times out. A real "server that does not answer", without depending on an unroutable address.
class FullBacklogListener {
 public:
  FullBacklogListener() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 0) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0)
      throw std::runtime_error("cannot listen");
    port_ = ntohs(addr.sin_port);
    for (int i = 0; i < 3; ++i) {  // fill the queue; never accepted
      const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      (void)::connect(s, reinterpret_cast<sockaddr*>(&addr),
                      sizeof addr);  // refused or not: the test reads what follows
      fillers_.push_back(s);
    }
    std::this_thread::sleep_for(100ms);
  }
  ~FullBacklogListener() {
    for (int s : fillers_) ::close(s);
    ::close(listener_);
  }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  std::vector<int> fillers_;
};

TEST(HttpClientTransport, AConnectTimeoutIsRetry) {
  FullBacklogListener silent;
  HttpClient client({.connect_timeout = 500ms, .request_timeout = 60s});
  const HttpResponse r = client.send(post(silent.url("/x")));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Timeout) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Nothing);
  EXPECT_EQ(outcome_of(r), Outcome::Retry);
}

TEST_F(HttpClientTest, ATimeoutWaitingForTheAnswerMayBeWritten) {
  receiver.script({{"path", "/slow"}, {"delay", 120}});
  HttpClient client({.request_timeout = 1500ms});
  const HttpResponse r = client.send(post(receiver.url("/slow")));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Timeout) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Complete);
  EXPECT_EQ(outcome_of(r), Outcome::MaybeWritten);
}

TEST_F(HttpClientTest, ARequestsOwnTimeoutOverridesTheClients) {
  receiver.script({{"path", "/slow"}, {"delay", 120}});
  HttpClient client({.request_timeout = 600s});
  HttpRequest request = post(receiver.url("/slow"));
  request.timeout = 1500ms;
  const HttpResponse r = client.send(std::move(request));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Timeout) << describe(r);
}

TEST_F(HttpClientTest, TheLowSpeedLimitCutsAStalledResponse) {
  receiver.script({{"path", "/stall"}, {"status", 200}, {"body", "late"}, {"action", "stall_body"}, {"delay", 120}});
  HttpClient client({.request_timeout = 600s, .low_speed_bytes_per_second = 1000, .low_speed_time = 1s});
  const HttpResponse r = client.send(post(receiver.url("/stall")));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::Timeout) << describe(r);
  EXPECT_NE(r.failure->message.find("too slow"), std::string::npos) << r.failure->message;
  EXPECT_EQ(outcome_of(r), Outcome::MaybeWritten) << "the answer had begun";
}

TEST_F(HttpClientTest, MalformedRequestsAreFatalAndNeverSent) {
  HttpClient client({});
  HttpRequest injected = post(receiver.url("/x"));
  injected.headers.set("X-Tenant", "a\r\nX-Injected: 1");
  const HttpResponse r1 = client.send(std::move(injected));
  ASSERT_TRUE(r1.failure);
  EXPECT_EQ(r1.failure->error, TransportError::InvalidRequest);
  EXPECT_EQ(outcome_of(r1), Outcome::Fatal);

  HttpRequest bad_method = post(receiver.url("/x"));
  bad_method.method = "PO ST";
  EXPECT_EQ(client.send(std::move(bad_method)).failure->error, TransportError::InvalidRequest);

  const HttpResponse r3 = client.send(post("ftp://127.0.0.1/x"));
  ASSERT_TRUE(r3.failure);
  EXPECT_EQ(r3.failure->error, TransportError::InvalidRequest) << describe(r3);
  EXPECT_EQ(outcome_of(r3), Outcome::Fatal);
  EXPECT_EQ(client.send(post("http://[::1")).failure->error, TransportError::InvalidRequest);
  EXPECT_TRUE(receiver.requests().empty());
}

// ---------------------------------------------------------------- auth

TEST_F(HttpClientTest, BasicBearerAndApiKeyAuthReachTheServer) {
  HttpClient basic({.auth = BasicAuth{"alice", "s3cret"}});
  HttpClient bearer({.auth = BearerAuth{"tok-123"}});
  HttpClient api_key({.auth = ApiKeyAuth{"X-API-Key", "key-456"}});
  HttpClient es_api_key({.auth = ApiKeyAuth{"Authorization", "ApiKey ZWxhc3RpYw=="}});
  HttpClient anonymous({});
  ASSERT_EQ(basic.send(post(receiver.url("/basic"))).status, 200);
  ASSERT_EQ(bearer.send(post(receiver.url("/bearer"))).status, 200);
  ASSERT_EQ(api_key.send(post(receiver.url("/key"))).status, 200);
  ASSERT_EQ(es_api_key.send(post(receiver.url("/es"))).status, 200);
  const std::string with_userinfo = "http://bob:pw%3A1@127.0.0.1:" + std::to_string(receiver.port()) + "/userinfo";
  const HttpResponse r = anonymous.send(post(with_userinfo));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.url, "http://***@127.0.0.1:" + std::to_string(receiver.port()) + "/userinfo");

  EXPECT_EQ(receiver.requests("/basic").at(0).headers.get("Authorization"),
            "Basic " + base64_encode(std::string_view("alice:s3cret")));
  EXPECT_EQ(receiver.requests("/bearer").at(0).headers.get("Authorization"), "Bearer tok-123");
  EXPECT_EQ(receiver.requests("/key").at(0).headers.get("X-API-Key"), "key-456");
  EXPECT_FALSE(receiver.requests("/key").at(0).headers.contains("Authorization"));
  EXPECT_EQ(receiver.requests("/es").at(0).headers.get("Authorization"), "ApiKey ZWxhc3RpYw==");
  EXPECT_EQ(receiver.requests("/userinfo").at(0).headers.get("Authorization"),
            "Basic " + base64_encode(std::string_view("bob:pw:1")));
}

AwsSigV4Auth aws(std::string session_token = "") {
  return {.region = "eu-west-1",
          .service = "s3",
          .access_key_id = "AKIDEXAMPLE",
          .secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
          .session_token = std::move(session_token)};
}

TEST_F(HttpClientTest, AwsSigV4SignsWithTheDateAndThePayloadHash) {
  HttpClient client({.auth = aws("FQoGZXIvYXdzEXAMPLETOKEN")});
  HttpRequest put = post(receiver.url("/bucket/key.json"), "hello");
  put.method = "PUT";
  ASSERT_EQ(client.send(std::move(put)).status, 200);
  const auto seen = receiver.requests("/bucket/key.json");
  ASSERT_EQ(seen.size(), 1u);
  const std::string authorization(seen[0].headers.get("Authorization").value_or(""));
  std::smatch m;
  ASSERT_TRUE(
      std::regex_match(authorization, m,
                       std::regex(R"(AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/(\d{8})/eu-west-1/s3/aws4_request, )"
                                  R"(SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64})")))
      << authorization;
  const std::string signed_headers = m[2];
  for (const char* name : {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"})
    EXPECT_NE((";" + signed_headers + ";").find(";" + std::string(name) + ";"), std::string::npos)
        << name << " in " << signed_headers;
  const std::string date(seen[0].headers.get("x-amz-date").value_or(""));
  EXPECT_TRUE(std::regex_match(date, std::regex(R"(\d{8}T\d{6}Z)"))) << date;
  EXPECT_EQ(date.substr(0, 8), std::string(m[1])) << "the credential scope is the request's day";
  EXPECT_EQ(seen[0].headers.get("x-amz-content-sha256"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
      << "SHA-256 of 'hello'";
  EXPECT_EQ(seen[0].headers.get("x-amz-security-token"), "FQoGZXIvYXdzEXAMPLETOKEN");
  EXPECT_EQ(authorization.find("wJalrXUtnFEMI"), std::string::npos) << "the secret key never travels";
}

TEST_F(HttpClientTest, AwsSigV4HashesTheCompressedBodyItSends) {
  HttpClient client({.auth = aws(), .compression = Compression::Gzip});
  const std::string body = lines_of_json(500);
  ASSERT_EQ(client.send(post(receiver.url("/bucket/batch.ndjson.gz"), body)).status, 200);
  const auto seen = receiver.requests("/bucket/batch.ndjson.gz");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].body, body);
  EXPECT_EQ(seen[0].headers.get("x-amz-content-sha256"), sha256_hex(compress(Compression::Gzip, body)));
  EXPECT_FALSE(seen[0].headers.contains("x-amz-security-token")) << "no session token, no header";
}

// ---------------------------------------------------------------- compression

TEST_F(HttpClientTest, GzipAndZstdBodiesDecompressToTheOriginalAtTheReceiver) {
  const std::string body = lines_of_json(4000);
  for (Compression c : {Compression::Gzip, Compression::Zstd}) {
    HttpClient client({.compression = c});
    const std::string path = "/" + std::string(to_string(c));
    ASSERT_EQ(client.send(post(receiver.url(path), body)).status, 200);
    const auto seen = receiver.requests(path);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].content_encoding, to_string(c));
    EXPECT_EQ(seen[0].body, body) << to_string(c);
    EXPECT_LT(seen[0].wire_size, body.size() / 3) << to_string(c);
  }
}

TEST_F(HttpClientTest, SmallAndAlreadyEncodedBodiesAreSentAsTheyAre) {
  HttpClient client({.compression = Compression::Zstd, .compress_min_bytes = 1000});
  ASSERT_EQ(client.send(post(receiver.url("/small"), "tiny")).status, 200);
  HttpRequest encoded = post(receiver.url("/encoded"), compress(Compression::Gzip, "zipped by the sink"));
  encoded.headers.set("Content-Encoding", "gzip");
  ASSERT_EQ(client.send(std::move(encoded)).status, 200);

  const auto small = receiver.requests("/small").at(0);
  EXPECT_EQ(small.content_encoding, "");
  EXPECT_EQ(small.body, "tiny");
  const auto already = receiver.requests("/encoded").at(0);
  EXPECT_EQ(already.content_encoding, "gzip") << "not compressed twice";
  EXPECT_EQ(already.body, "zipped by the sink");
}

// ---------------------------------------------------------------- concurrency and connections

TEST_F(HttpClientTest, SequentialRequestsReuseOneConnection) {
  HttpClient client({});
  for (int i = 0; i < 20; ++i) {
    const HttpResponse r = client.send(post(receiver.url("/seq")));
    ASSERT_EQ(r.status, 200) << describe(r);
    if (i > 0) {
      EXPECT_TRUE(r.connection_reused) << i;
    }
  }
  const auto stats = receiver.stats();
  EXPECT_EQ(stats.requests, 20u);
  EXPECT_EQ(stats.connections, 1u);
}

TEST_F(HttpClientTest, AsyncSendsCompleteExactlyOnceWithBoundedInFlight) {
  receiver.script({{"path", "/slow"}, {"delay", 0.2}, {"count", 0}});
  constexpr size_t kRequests = 40;
  constexpr size_t kInFlight = 4;
  HttpClient client({.max_in_flight = kInFlight});
  std::vector<std::atomic<int>> calls(kRequests);
  std::vector<long> statuses(kRequests, 0);
  std::mutex threads_mutex;
  std::set<std::thread::id> callback_threads;
  for (size_t i = 0; i < kRequests; ++i)
    client.send_async(post(receiver.url("/slow?i=" + std::to_string(i))), [&, i](const HttpResponse& r) {
      ++calls[i];
      statuses[i] = r.status;
      std::lock_guard lock(threads_mutex);
      callback_threads.insert(std::this_thread::get_id());
    });
  EXPECT_GT(client.pending(), 0u);
  ASSERT_TRUE(client.wait_idle(scaled(120s)));
  EXPECT_EQ(client.pending(), 0u);
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(calls[i].load(), 1) << "request " << i;
    EXPECT_EQ(statuses[i], 200) << "request " << i;
  }
  EXPECT_EQ(callback_threads.size(), 1u) << "all on the one I/O thread";
  EXPECT_EQ(callback_threads.count(std::this_thread::get_id()), 0u);
  const auto stats = receiver.stats();
  EXPECT_EQ(stats.requests, kRequests);
  EXPECT_LE(stats.max_in_flight, kInFlight) << "never more on the wire than allowed";
  EXPECT_GE(stats.max_in_flight, 2u) << "and they did overlap";
  EXPECT_LE(stats.connections, kInFlight) << "connections are reused across requests";
}

// io_threads: requests spread over the threads in turn, each with its own connections; the
// in-flight limit is shared, and waiting, counting and closing cover every thread.
TEST_F(HttpClientTest, SeveralIoThreadsShareTheInFlightLimitAndCompleteEveryRequestOnce) {
  receiver.script({{"path", "/slow"}, {"delay", 0.2}, {"count", 0}});
  constexpr size_t kRequests = 30;
  HttpClient client({.max_in_flight = 5, .io_threads = 2});
  EXPECT_EQ(client.options().io_threads, 2u);
  std::vector<std::atomic<int>> calls(kRequests);
  std::mutex threads_mutex;
  std::map<std::thread::id, size_t> per_thread;
  for (size_t i = 0; i < kRequests; ++i)
    client.send_async(post(receiver.url("/slow?i=" + std::to_string(i))), [&, i](const HttpResponse& r) {
      EXPECT_EQ(r.status, 200);
      ++calls[i];
      std::lock_guard lock(threads_mutex);
      ++per_thread[std::this_thread::get_id()];
    });
  EXPECT_EQ(client.pending(), kRequests);
  ASSERT_TRUE(client.wait_idle(scaled(120s)));
  EXPECT_EQ(client.pending(), 0u);
  for (size_t i = 0; i < kRequests; ++i) EXPECT_EQ(calls[i].load(), 1) << "request " << i;
  ASSERT_EQ(per_thread.size(), 2u) << "callbacks run on both I/O threads";
  for (const auto& [thread, n] : per_thread) EXPECT_EQ(n, kRequests / 2) << "in turn: half each";
  const auto stats = receiver.stats();
  EXPECT_EQ(stats.requests, kRequests);
  EXPECT_LE(stats.max_in_flight, 5u) << "the limit is shared, not per thread";
  EXPECT_GE(stats.max_in_flight, 4u) << "both threads had requests on the wire at once";
  EXPECT_GE(stats.connections, 2u) << "each thread its own connections";
  EXPECT_LE(stats.connections, 5u);

  // A callback on either thread may not wait on its client; close() cuts both threads' work.
  receiver.script({{"path", "/hang"}, {"delay", 120}, {"count", 0}});
  std::atomic<int> refused{0}, cut{0};
  for (int i = 0; i < 2; ++i)
    client.send_async(post(receiver.url("/probe")), [&](const HttpResponse&) {
      try {
        client.wait_idle(1s);
      } catch (const std::logic_error&) {
        ++refused;
      }
    });
  ASSERT_TRUE(eventually([&] { return refused == 2; }));
  for (int i = 0; i < 4; ++i)
    client.send_async(post(receiver.url("/hang")), [&](HttpResponse r) {
      if (r.failure && r.failure->error == TransportError::Cancelled) ++cut;
    });
  ASSERT_TRUE(eventually([&] { return receiver.stats().in_flight >= 4; }));
  const auto t0 = std::chrono::steady_clock::now();
  client.close(200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, scaled(5s)) << "one drain for all threads";
  EXPECT_EQ(cut.load(), 4);
}

TEST_F(HttpClientTest, ACallbackMaySendAgainButNotWaitOnItsClient) {
  HttpClient client({});
  std::atomic<int> hops{0};
  std::atomic<bool> send_refused{false}, close_refused{false}, wait_refused{false};
  std::function<void(HttpResponse)> hop = [&](const HttpResponse& r) {
    EXPECT_EQ(r.status, 200);
    if (++hops == 1) {
      try {
        client.send(post(receiver.url("/never")));
      } catch (const std::logic_error&) {
        send_refused = true;
      }
      try {
        client.close();
      } catch (const std::logic_error&) {
        close_refused = true;
      }
      try {
        client.wait_idle(1s);
      } catch (const std::logic_error&) {
        wait_refused = true;
      }
    }
    if (hops < 3) client.send_async(post(receiver.url("/hop")), hop);
  };
  client.send_async(post(receiver.url("/hop")), hop);
  ASSERT_TRUE(eventually([&] { return hops == 3; }));
  ASSERT_TRUE(client.wait_idle(scaled(30s)));
  EXPECT_TRUE(send_refused);
  EXPECT_TRUE(close_refused);
  EXPECT_TRUE(wait_refused);
  EXPECT_EQ(receiver.requests("/hop").size(), 3u);
  EXPECT_TRUE(receiver.requests("/never").empty());
}

TEST_F(HttpClientTest, ACallbackThatThrowsIsReportedAndTheClientGoesOn) {
  std::mutex mutex;
  std::vector<std::string> errors;
  HttpClient client({.log_error = [&](const std::string& m) {
    std::lock_guard lock(mutex);
    errors.push_back(m);
  }});
  client.send_async(post(receiver.url("/a")),
                    [](const HttpResponse&) { throw std::runtime_error("boom in the sink"); });
  ASSERT_TRUE(client.wait_idle(scaled(30s)));
  EXPECT_EQ(client.send(post(receiver.url("/b"))).status, 200);
  std::lock_guard lock(mutex);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("boom in the sink"), std::string::npos) << errors[0];
}

// ---------------------------------------------------------------- close

TEST_F(HttpClientTest, CloseCutsWhatIsInFlightAndCallsEveryCallbackOnce) {
  receiver.script({{"path", "/hang"}, {"delay", 120}, {"count", 0}});
  HttpClient client({.max_in_flight = 2});
  Responses responses;
  for (int i = 0; i < 3; ++i)
    client.send_async(post(receiver.url("/hang"), "body " + std::to_string(i)), responses.collector());
  ASSERT_TRUE(eventually([&] { return receiver.stats().in_flight == 2; })) << "two on the wire, one queued";

  const auto started = std::chrono::steady_clock::now();
  client.close();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 100s) << "close() did not wait for the server's 120 s";
  ASSERT_EQ(responses.size(), 3u);
  int maybe_written = 0, retry = 0;
  for (const HttpResponse& r : responses.all) {
    ASSERT_TRUE(r.failure);
    EXPECT_EQ(r.failure->error, TransportError::Cancelled);
    const Outcome o = outcome_of(r);
    maybe_written += o == Outcome::MaybeWritten;
    retry += o == Outcome::Retry;
  }
  EXPECT_EQ(maybe_written, 2) << "the two the server was holding may have been written";
  EXPECT_EQ(retry, 1) << "the queued one never left";
  EXPECT_EQ(client.pending(), 0u);

  // Closed: new requests complete at once, on the calling thread, and nothing is sent.
  bool called = false;
  client.send_async(post(receiver.url("/late")), [&](HttpResponse r) {
    called = true;
    EXPECT_EQ(r.failure->error, TransportError::Cancelled);
    EXPECT_EQ(outcome_of(r), Outcome::Retry);
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(client.send(post(receiver.url("/late"))).failure->error, TransportError::Cancelled);
  client.close();  // again: nothing to do
  EXPECT_TRUE(receiver.requests("/late").empty());
}

TEST_F(HttpClientTest, CloseWithADrainLetsRequestsFinish) {
  receiver.script({{"path", "/slowish"}, {"delay", 0.3}, {"count", 0}});
  HttpClient client({.max_in_flight = 2});
  Responses responses;
  for (int i = 0; i < 5; ++i) client.send_async(post(receiver.url("/slowish")), responses.collector());
  client.close(scaled(60s));
  ASSERT_EQ(responses.size(), 5u);
  for (const HttpResponse& r : responses.all) EXPECT_EQ(outcome_of(r), Outcome::Written) << describe(r);
}

TEST_F(HttpClientTest, TheDestructorCutsToo) {
  receiver.script({{"path", "/hang"}, {"delay", 120}, {"count", 0}});
  Responses responses;
  {
    HttpClient client({});
    client.send_async(post(receiver.url("/hang")), responses.collector());
    client.send_async(post(receiver.url("/hang")), responses.collector());
    ASSERT_TRUE(eventually([&] { return receiver.stats().in_flight == 2; }));
  }
  ASSERT_EQ(responses.size(), 2u);
  for (const HttpResponse& r : responses.all) EXPECT_EQ(r.failure->error, TransportError::Cancelled);
}

// ---------------------------------------------------------------- redaction end to end

TEST_F(HttpClientTest, NoSecretReachesAReasonOrALogLine) {
  const std::string token = "tok-0123456789abcdef";
  const std::string url_password = "Zq9-userinfo-pass";
  const std::string query_secret = "qs-secret-123";
  const std::string url = "http://carol:" + url_password + "@127.0.0.1:" + std::to_string(receiver.port()) +
                          "/x?api_key=" + query_secret + "&page=1";
  // A server that echoes everything it was given, as error pages sometimes do.
  receiver.script({{"path", "/x"},
                   {"status", 401},
                   {"body", "denied: Bearer " + token + ", password " + url_password + ", api_key=" + query_secret}});
  std::mutex mutex;
  std::vector<std::string> logged;
  HttpClient client({.auth = BearerAuth{token}, .log_error = [&](const std::string& m) {
                       std::lock_guard lock(mutex);
                       logged.push_back(m);
                     }});
  std::vector<std::string> messages;
  const HttpResponse denied = client.send(post(url));
  const Classification c = OutcomeRules().classify(denied);
  EXPECT_EQ(c.outcome, Outcome::Fatal);
  messages.push_back(c.reason);
  EXPECT_NE(c.reason.find("denied: Bearer ***, password ***, api_key=***"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("http://***@127.0.0.1:"), std::string::npos) << c.reason;

  client.send_async(post(url), [](const HttpResponse&) { throw std::runtime_error("callback failure"); });
  ASSERT_TRUE(client.wait_idle(scaled(30s)));
  receiver.stop();  // and a transport failure on the same URL
  const Classification refused = OutcomeRules().classify(client.send(post(url)));
  EXPECT_EQ(refused.outcome, Outcome::Retry);
  messages.push_back(refused.reason);
  {
    std::lock_guard lock(mutex);
    messages.insert(messages.end(), logged.begin(), logged.end());
  }
  ASSERT_GE(messages.size(), 3u);
  for (const std::string& m : messages) {
    for (const std::string& secret : {token, url_password, query_secret}) {
      EXPECT_EQ(m.find(secret), std::string::npos) << m;
    }
  }
}

// ---------------------------------------------------------------- in a plugin

size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_F(HttpClientTest, WorksInsideAPluginThatIsLoadedAndUnloaded) {
  const size_t threads_before = thread_count();
  for (int round = 0; round < 3; ++round) {
    void* library = ::dlopen(SINKKIT_HTTP_PROBE, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << ::dlerror();
    auto round_trip = reinterpret_cast<long (*)(const char*)>(::dlsym(library, "sinkkit_probe_round_trip"));
    ASSERT_NE(round_trip, nullptr) << ::dlerror();
    EXPECT_EQ(round_trip(receiver.url("/probe").c_str()), 200) << "round " << round;
    EXPECT_EQ(::dlclose(library), 0);
    EXPECT_EQ(::dlopen(SINKKIT_HTTP_PROBE, RTLD_NOW | RTLD_NOLOAD), nullptr) << "unloaded: nothing pins it";
    EXPECT_EQ(thread_count(), threads_before) << "no thread left behind, round " << round;
  }
  HttpClient host({});
  EXPECT_EQ(host.send(post(receiver.url("/host"))).status, 200) << "libcurl still works for the host";
  EXPECT_EQ(receiver.requests("/probe").size(), 12u);
}

// ---------------------------------------------------------------- nginx, HTTP and TLS

TEST(HttpClientNginx, PlainHttpWritesAndReuses) {
  Nginx nginx;
  HttpClient client({});
  for (int i = 0; i < 10; ++i) {
    const HttpResponse r = client.send(post(nginx.base_url() + "/index/_doc"));
    ASSERT_EQ(r.status, 204) << describe(r);
    EXPECT_EQ(outcome_of(r), Outcome::Written);
  }
  HttpRequest get = post(nginx.base_url() + "/index/_doc", "");
  get.method = "GET";
  EXPECT_EQ(outcome_of(client.send(std::move(get))), Outcome::Fatal) << "405: the wrong method is configuration";
  const auto stats = nginx.stats();
  EXPECT_EQ(stats.requests, 11u);
  EXPECT_EQ(stats.accepted_connections, 1u);
}

// nginx.sh --proxy-to / --authorization: a TLS front with credential checks for a plain-HTTP test
// server (the upstream here: the receiver, which records what got through).
TEST(HttpClientNginx, AProxyFrontPassesOnlyAcceptedAuthorizationsToItsUpstream) {
  HttpReceiver upstream;
  Nginx proxy(
      {.tls = Nginx::Tls::On, .proxy_to = upstream.base_url(), .authorizations = {"Basic dTpw", "ApiKey a2V5"}});
  HttpClient client({.tls = {.ca_file = proxy.ca_file()}});
  auto with = [&](const std::string& authorization) {
    HttpRequest r = post(proxy.base_url() + "/index/_bulk", "{}\n");
    if (!authorization.empty()) r.headers.set("Authorization", authorization);
    return client.send(std::move(r));
  };
  const HttpResponse none = with("");
  EXPECT_EQ(none.status, 401) << describe(none);
  EXPECT_NE(none.body.find("security_exception"), std::string::npos) << none.body;
  EXPECT_EQ(with("Basic d3Jvbmc=").status, 401);
  EXPECT_TRUE(upstream.requests().empty()) << "refused at the front";
  EXPECT_EQ(with("Basic dTpw").status, 200);
  EXPECT_EQ(with("ApiKey a2V5").status, 200);
  const auto seen = upstream.requests("/index/_bulk");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].body, "{}\n") << "the body passed on";
  EXPECT_EQ(seen[1].headers.get("Authorization"), "ApiKey a2V5") << "passed on unchanged";
}

class HttpClientTls : public ::testing::Test {
 protected:
  Nginx nginx{Nginx::Tls::On};
};

TEST_F(HttpClientTls, VerifiedWithTheTestCaAndOverHttp2) {
  HttpClient client({.tls = {.ca_file = nginx.ca_file()}});
  const HttpResponse r = client.send(post(nginx.base_url() + "/doc"));
  ASSERT_EQ(r.status, 204) << describe(r);
  EXPECT_EQ(r.protocol, HttpProtocol::Http2) << "offered by ALPN, taken";
  EXPECT_GT(r.timings.tls_done.count(), 0);
  EXPECT_EQ(outcome_of(r), Outcome::Written) << describe(r);
}

TEST_F(HttpClientTls, WithoutTheCaTheCertificateIsFatal) {
  HttpClient client({});
  const HttpResponse r = client.send(post(nginx.base_url() + "/doc"));
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->error, TransportError::TlsCertificate) << describe(r);
  EXPECT_EQ(r.failure->sent, SendProgress::Nothing);
  EXPECT_EQ(outcome_of(r), Outcome::Fatal);
}

TEST_F(HttpClientTls, VerificationTurnedOffAcceptsTheCertificate) {
  HttpClient client({.tls = {.verify_peer = false, .verify_host = false}});
  EXPECT_EQ(client.send(post(nginx.base_url() + "/doc")).status, 204);
}

TEST_F(HttpClientTls, ClientCertificateWithAnEncryptedKey) {
  HttpClient without({.tls = {.ca_file = nginx.ca_file()}});
  EXPECT_EQ(outcome_of(without.send(post(nginx.base_url() + "/mtls/doc"))), Outcome::Fatal)
      << "403 without a certificate";

  HttpClient with({.tls = {.ca_file = nginx.ca_file(),
                           .client_cert_file = nginx.client_cert_file(),
                           .client_key_file = nginx.client_key_file(),
                           .client_key_password = Nginx::client_key_password()}});
  const HttpResponse r = with.send(post(nginx.base_url() + "/mtls/doc"));
  EXPECT_EQ(r.status, 204) << describe(r);

  HttpClient wrong_password({.tls = {.ca_file = nginx.ca_file(),
                                     .client_cert_file = nginx.client_cert_file(),
                                     .client_key_file = nginx.client_key_file(),
                                     .client_key_password = "not-the-password"}});
  const HttpResponse refused = wrong_password.send(post(nginx.base_url() + "/mtls/doc"));
  ASSERT_TRUE(refused.failure);
  EXPECT_EQ(refused.failure->error, TransportError::TlsCertificate) << describe(refused);
  EXPECT_EQ(outcome_of(refused), Outcome::Fatal);
  EXPECT_EQ(describe(refused).find("not-the-password"), std::string::npos);
}

TEST_F(HttpClientTls, Http2MultiplexesManyRequestsOnFewConnections) {
  HttpClient client({.tls = {.ca_file = nginx.ca_file()}, .max_in_flight = 8});
  Responses responses;
  for (int i = 0; i < 30; ++i) client.send_async(post(nginx.base_url() + "/doc"), responses.collector());
  ASSERT_TRUE(client.wait_idle(scaled(60s)));
  ASSERT_EQ(responses.size(), 30u);
  for (const HttpResponse& r : responses.all) {
    EXPECT_EQ(r.status, 204) << describe(r);
    EXPECT_EQ(r.protocol, HttpProtocol::Http2);
  }
  const auto stats = nginx.stats();
  EXPECT_EQ(stats.requests, 30u);
  EXPECT_LT(stats.accepted_connections, 30u);
}

TEST_F(HttpClientTls, Http11WhenAskedFor) {
  HttpClient client({.tls = {.ca_file = nginx.ca_file()}, .http_version = HttpVersion::Http1_1});
  const HttpResponse r = client.send(post(nginx.base_url() + "/doc"));
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.protocol, HttpProtocol::Http1_1);
}

}  // namespace
}  // namespace picomq::kit
