// Outcome classification without a network: responses as the client would hand them over, the
// default table row by row, overrides, success sets, Retry-After, transport failures, reasons,
// and the step into the SDK's results. http_client_test.cpp runs the same against real servers.
#include "picomq/kit/outcome.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "picomq/kit/testing/http_stub.hpp"  // printers

namespace {

struct Captured {
  std::string error;
  std::vector<std::pair<size_t, std::string>> rejections;
  std::vector<pmq_write_status> completions;
};

}  // namespace

struct pmq_write_result {
  Captured* captured;
};

namespace picomq::kit {
namespace {

using namespace std::chrono_literals;

HttpResponse answer(long status, std::string body = "", HttpHeaders headers = {}) {
  HttpResponse r;
  r.method = "POST";
  r.url = "http://db.example:8080/bulk";
  r.status = status;
  r.status_line = "HTTP/1.1 " + std::to_string(status) + " Whatever";
  r.headers = std::move(headers);
  r.body = std::move(body);
  r.body_bytes = r.body.size();
  return r;
}

HttpResponse failed(TransportError error, SendProgress sent, std::string message = "curl says why") {
  HttpResponse r;
  r.method = "PUT";
  r.url = "https://bucket.example/key";
  r.failure = TransportFailure{error, sent, std::move(message), 7};
  return r;
}

Outcome outcome_of(long status) { return OutcomeRules().classify(answer(status)).outcome; }

// ---------------------------------------------------------------- the default table

TEST(OutcomeDefaults, EveryRowOfTheTable) {
  const std::vector<std::pair<std::vector<long>, Outcome>> table = {
      {{200, 201, 202, 204, 206, 299}, Outcome::Written},
      {{408, 421, 423, 425, 429}, Outcome::Retry},
      {{500, 502, 503, 504}, Outcome::Retry},
      {{506, 507, 508, 520, 599}, Outcome::Retry},  // other 5xx
      {{413}, Outcome::TooLarge},
      {{400, 409, 412, 422}, Outcome::Rejected},
      {{401, 403, 404, 405, 406, 407, 410, 411, 414, 415, 416, 417, 418, 426, 428, 431, 451, 499}, Outcome::Fatal},
      {{501, 505, 511}, Outcome::Fatal},
      {{100, 101, 199, 300, 301, 302, 304, 307, 308, 399, 600, 999}, Outcome::Fatal},
  };
  for (const auto& [statuses, expected] : table)
    for (long status : statuses) {
      EXPECT_EQ(outcome_of(status), expected) << status;
      EXPECT_EQ(default_outcome(status), expected) << status;
    }
}

TEST(OutcomeDefaults, TheReasonNamesRequestStatusAndBody) {
  const Classification c = OutcomeRules().classify(answer(503, R"({"error":"shard not ready"})"));
  EXPECT_EQ(c.outcome, Outcome::Retry);
  EXPECT_EQ(c.status, 503);
  EXPECT_EQ(c.reason, R"(POST http://db.example:8080/bulk: HTTP/1.1 503 Whatever: {"error":"shard not ready"})");
}

TEST(OutcomeDefaults, WithoutAStatusLineTheCodeIsShown) {
  HttpResponse r = answer(404);
  r.status_line.clear();
  EXPECT_EQ(OutcomeRules().classify(r).reason, "POST http://db.example:8080/bulk: HTTP 404");
}

TEST(OutcomeDefaults, ARedirectIsFatalAndQuotesWhereToRedacted) {
  const Classification c =
      OutcomeRules().classify(answer(301, "", {{"Location", "https://new.example/bulk?token=s3cr3t&x=1"}}));
  EXPECT_EQ(c.outcome, Outcome::Fatal);
  EXPECT_NE(c.reason.find("Location: https://new.example/bulk?token=***&x=1"), std::string::npos) << c.reason;
  EXPECT_EQ(c.reason.find("s3cr3t"), std::string::npos);
}

// ---------------------------------------------------------------- overrides and success sets

TEST(OutcomeRules, AnOverrideDecidesItsStatusAndIsNamedInTheReason) {
  const OutcomeRules rules =
      OutcomeRules().on(409, Outcome::Written, "Elasticsearch: version conflict on create = document already there");
  const Classification c = rules.classify(answer(409, "conflict"));
  EXPECT_EQ(c.outcome, Outcome::Written);
  EXPECT_NE(c.reason.find("[Elasticsearch: version conflict on create = document already there]"), std::string::npos)
      << c.reason;
  EXPECT_EQ(rules.classify(answer(400)).outcome, Outcome::Rejected) << "other statuses keep the defaults";
}

TEST(OutcomeRules, ABodyRuleMatchesOnlyWhenTheBodySaysSo) {
  const OutcomeRules rules = OutcomeRules()
                                 .on(500, "Code: 117", Outcome::Rejected, "ClickHouse: incorrect data")
                                 .on(500, "Code: 241", Outcome::Retry, "ClickHouse: memory limit");
  EXPECT_EQ(rules.classify(answer(500, "Code: 117. DB::Exception: Unknown field")).outcome, Outcome::Rejected);
  EXPECT_EQ(rules.classify(answer(500, "Code: 241. Memory limit exceeded")).outcome, Outcome::Retry);
  const Classification other = rules.classify(answer(500, "Code: 999"));
  EXPECT_EQ(other.outcome, Outcome::Retry) << "no rule: the default";
  EXPECT_EQ(other.reason.find('['), std::string::npos) << "and no rule named";
}

TEST(OutcomeRules, TheFirstMatchingRuleWins) {
  const OutcomeRules rules =
      OutcomeRules().on(404, Outcome::Written, "delete of a missing document").on(404, Outcome::Retry, "never used");
  EXPECT_EQ(rules.classify(answer(404)).outcome, Outcome::Written);
}

TEST(OutcomeRules, ASuccessSetReplacesEvery2xx) {
  const OutcomeRules rules = OutcomeRules().success_statuses({200, 404});
  EXPECT_EQ(rules.classify(answer(200)).outcome, Outcome::Written);
  EXPECT_EQ(rules.classify(answer(404)).outcome, Outcome::Written) << "a non-2xx can be declared a success";
  const Classification c = rules.classify(answer(204));
  EXPECT_EQ(c.outcome, Outcome::Fatal) << "a 2xx outside the set is not a success";
  EXPECT_NE(c.reason.find("not one of the success statuses"), std::string::npos) << c.reason;
  EXPECT_EQ(rules.classify(answer(503)).outcome, Outcome::Retry) << "the rest keep the defaults";
  EXPECT_EQ(rules.classify(answer(400)).outcome, Outcome::Rejected);
}

TEST(OutcomeRules, AnOverrideBeatsTheSuccessSet) {
  const OutcomeRules rules = OutcomeRules().success_statuses({200}).on(202, Outcome::Retry, "queued, not yet written");
  EXPECT_EQ(rules.classify(answer(202)).outcome, Outcome::Retry);
}

// ---------------------------------------------------------------- Retry-After

TEST(RetryAfter, DelaySeconds) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(parse_retry_after("7", now), 7s);
  EXPECT_EQ(parse_retry_after("  120 ", now), 120s);
  EXPECT_EQ(parse_retry_after("0", now), 0s);
  EXPECT_EQ(parse_retry_after("99999999999999999999", now), 999'999'999s) << "no overflow";
}

TEST(RetryAfter, HttpDatesInAllThreeFormats) {
  // RFC 9110 section 5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms.
  const auto at = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  const auto now = at - 90s;
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), 90s);
  EXPECT_EQ(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), 90s);
  EXPECT_EQ(parse_retry_after("Sun Nov  6 08:49:37 1994", now), 90s);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at + 1h), 0s) << "a date in the past: now";
}

TEST(RetryAfter, AnythingElseIsNoDelay) {
  const auto now = std::chrono::system_clock::now();
  for (const char* value : {"", "soon", "-5", "1.5", "5s", "Sun, 99 Foo 1994"})
    EXPECT_EQ(parse_retry_after(value, now), std::nullopt) << "'" << value << "'";
}

TEST(RetryAfter, RetryOutcomesCarryItCapped) {
  EXPECT_EQ(OutcomeRules().classify(answer(429, "", {{"Retry-After", "3"}})).retry_after, 3s);
  EXPECT_EQ(OutcomeRules().classify(answer(503, "", {{"retry-after", "3600"}})).retry_after, 60s)
      << "capped at 60 s by default; the header name is case-insensitive";
  EXPECT_EQ(OutcomeRules().max_retry_after(10min).classify(answer(503, "", {{"Retry-After", "3600"}})).retry_after,
            10min);
  EXPECT_EQ(OutcomeRules().classify(answer(503)).retry_after, std::nullopt);
  EXPECT_EQ(OutcomeRules().classify(answer(201, "", {{"Retry-After", "3"}})).retry_after, std::nullopt)
      << "only a retry waits";
}

// ---------------------------------------------------------------- transport failures

TEST(OutcomeTransport, NothingSentRetriesSomethingSentMayBeWritten) {
  const std::vector<std::tuple<TransportError, SendProgress, Outcome>> table = {
      {TransportError::Connect, SendProgress::Nothing, Outcome::Retry},
      {TransportError::NameResolution, SendProgress::Nothing, Outcome::Retry},
      {TransportError::Timeout, SendProgress::Nothing, Outcome::Retry},
      {TransportError::Tls, SendProgress::Nothing, Outcome::Retry},
      {TransportError::Cancelled, SendProgress::Nothing, Outcome::Retry},
      {TransportError::Other, SendProgress::Nothing, Outcome::Retry},
      {TransportError::Timeout, SendProgress::Complete, Outcome::MaybeWritten},
      {TransportError::Timeout, SendProgress::Partial, Outcome::MaybeWritten},
      {TransportError::Receive, SendProgress::Complete, Outcome::MaybeWritten},
      {TransportError::Send, SendProgress::Partial, Outcome::MaybeWritten},
      {TransportError::Protocol, SendProgress::Complete, Outcome::MaybeWritten},
      {TransportError::Cancelled, SendProgress::Partial, Outcome::MaybeWritten},
      {TransportError::Other, SendProgress::Complete, Outcome::MaybeWritten},
      {TransportError::TlsCertificate, SendProgress::Nothing, Outcome::Fatal},
      {TransportError::InvalidRequest, SendProgress::Nothing, Outcome::Fatal},
  };
  for (const auto& [error, sent, expected] : table)
    EXPECT_EQ(OutcomeRules().classify(failed(error, sent)).outcome, expected)
        << to_string(error) << ", " << to_string(sent);
}

TEST(OutcomeTransport, TheReasonSaysWhatFailedAndHowFarTheRequestGot) {
  const Classification c = OutcomeRules().classify(
      failed(TransportError::Receive, SendProgress::Complete, "Recv failure: Connection reset by peer"));
  EXPECT_EQ(c.reason,
            "PUT https://bucket.example/key: receive failed after the request was sent, before a complete response: "
            "Recv failure: Connection reset by peer");
  EXPECT_EQ(c.status, 0);
  EXPECT_EQ(c.retry_after, std::nullopt);
}

TEST(OutcomeTransport, AFailureOutranksAStatusAlreadyReceived) {
  HttpResponse r = answer(200, "{\"items\":[");  // the response was cut in its body
  r.failure = TransportFailure{TransportError::Receive, SendProgress::Complete, "connection reset", 56};
  EXPECT_EQ(OutcomeRules().classify(r).outcome, Outcome::MaybeWritten);
}

// ---------------------------------------------------------------- excerpts

TEST(OutcomeExcerpt, BoundedOneLineAndRedacted) {
  auto redactor = std::make_shared<Redactor>();
  redactor->add("hunter2-password");
  HttpResponse r =
      answer(401, "bad credentials\r\nfor user x with password hunter2-password\t!" + std::string(2000, 'z'));
  r.redactor = redactor;
  const Classification c = OutcomeRules().excerpt_bytes(80).classify(r);
  EXPECT_EQ(c.reason.find("hunter2"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("bad credentials  for user x with password *** !zzz"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("... (" + std::to_string(r.body.size()) + " bytes)"), std::string::npos)
      << "cut, with the size: " << c.reason;
  EXPECT_LT(c.reason.size(), 200u);
}

TEST(OutcomeExcerpt, ASecretAcrossTheCutIsNotHalfShown) {
  auto redactor = std::make_shared<Redactor>();
  redactor->add("ABCDEFGHIJKLMNOP");
  HttpResponse r = answer(500, std::string(10, '.') + "ABCDEFGHIJKLMNOP" + std::string(10, '.'));
  r.redactor = redactor;
  const std::string excerpt = r.body_excerpt(14);  // the cut falls inside the secret
  EXPECT_EQ(excerpt.find("ABCD"), std::string::npos) << excerpt;
  EXPECT_EQ(excerpt.rfind("..........***", 0), 0u) << excerpt;
}

TEST(OutcomeExcerpt, ATruncatedCaptureSaysSo) {
  HttpResponse r = answer(500, "short");
  r.body_bytes = 10'000'000;
  r.body_truncated = true;
  EXPECT_EQ(r.body_excerpt(), "short... (10000000 bytes)");
  EXPECT_EQ(answer(500, "").body_excerpt(), "");
}

TEST(OutcomeExcerpt, NotCutInsideAUtf8Sequence) {
  HttpResponse r = answer(500, "ab\xc3\xa9\xc3\xa9");  // "abéé"
  EXPECT_EQ(r.body_excerpt(3), "ab... (6 bytes)");
}

// ---------------------------------------------------------------- into the SDK

Classification of(Outcome outcome) { return {outcome, "because", std::nullopt, 0}; }

TEST(OutcomeToSdk, ASynchronousRecordWriteThrowsTheMatchingException) {
  EXPECT_NO_THROW(throw_unless_written(of(Outcome::Written), 3));
  EXPECT_THROW(throw_unless_written(of(Outcome::Retry), 3), sdk::RetryableError);
  EXPECT_THROW(throw_unless_written(of(Outcome::MaybeWritten), 3), sdk::PartialWriteError);
  EXPECT_THROW(throw_unless_written(of(Outcome::Fatal), 3), sdk::FatalError);
  for (Outcome refused : {Outcome::Rejected, Outcome::TooLarge}) {
    try {
      throw_unless_written(of(refused), 3);
      ADD_FAILURE() << "expected RecordRejected";
    } catch (const sdk::RecordRejected& e) {
      EXPECT_EQ(e.index, 3u);
      EXPECT_NE(std::string(e.what()).find("because"), std::string::npos);
    }
  }
}

TEST(OutcomeToSdk, ASynchronousBatchWriteRejectsEachRecordOfTheRequest) {
  std::vector<std::pair<size_t, std::string>> rejected;
  const RejectRecord reject = [&](size_t i, const std::string& why) { rejected.emplace_back(i, why); };
  const std::array<size_t, 3> records{4, 5, 9};
  throw_unless_written(of(Outcome::Rejected), records, reject);
  EXPECT_EQ(rejected, (std::vector<std::pair<size_t, std::string>>{{4, "because"}, {5, "because"}, {9, "because"}}));

  rejected.clear();
  const std::array<size_t, 1> one{7};
  throw_unless_written(of(Outcome::TooLarge), one, reject);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].second, "too large for the destination: because");

  EXPECT_THROW(throw_unless_written(of(Outcome::TooLarge), records, reject), sdk::FatalError) << "should have split";
  EXPECT_THROW(throw_unless_written(of(Outcome::Rejected), {}, reject), sdk::FatalError) << "no records to set aside";
  EXPECT_THROW(throw_unless_written(of(Outcome::Retry), records, reject), sdk::RetryableError);
  EXPECT_THROW(throw_unless_written(of(Outcome::MaybeWritten), records, reject), sdk::PartialWriteError);
  EXPECT_THROW(throw_unless_written(of(Outcome::Fatal), records, reject), sdk::FatalError);
  EXPECT_NO_THROW(throw_unless_written(of(Outcome::Written), records, reject));
  EXPECT_EQ(rejected.size(), 1u) << "nothing more rejected";
}

// An asynchronous sink whose write completes its Pending with the classification it is told.
Classification g_classification;
std::vector<size_t> g_records;

struct CompletingSink : sdk::BaseSink<CompletingSink> {
  static constexpr std::string_view sink_name = "completing";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr uint32_t max_in_flight = 4;
  void write(const sdk::Record&) {}
  sdk::Pending write_batch(const sdk::Batch&) {
    sdk::Pending p = pending();
    complete(p, g_classification, g_records);
    complete(p, of(Outcome::Fatal), g_records);  // a second completion is ignored
    return p;
  }
};

Captured run(Outcome outcome, std::vector<size_t> records) {
  Captured captured;
  pmq_host_api host{};
  host.struct_size = sizeof host;
  host.abi_version = PMQ_SINK_ABI_VERSION;
  host.log = [](void*, int32_t, const char*) {};
  host.set_error = [](pmq_write_result* r, const char* m) { r->captured->error = m; };
  host.reject_record = [](pmq_write_result* r, size_t i, const char* m) { r->captured->rejections.emplace_back(i, m); };
  host.complete = [](pmq_write_result* r, pmq_write_status st) { r->captured->completions.push_back(st); };
  const auto& d = sdk::descriptor<CompletingSink>();
  char err[128] = {0};
  void* instance = d.open(&host, "{}", err, sizeof err);
  EXPECT_NE(instance, nullptr) << err;
  std::vector<pmq_record> rows(10);
  pmq_batch batch{};
  batch.struct_size = sizeof batch;
  batch.topic = "t";
  batch.schema = "json";
  batch.records = rows.data();
  batch.record_count = rows.size();
  batch.record_size = sizeof(pmq_record);
  pmq_write_result result{&captured};
  g_classification = of(outcome);
  g_records = std::move(records);
  EXPECT_EQ(d.write_batch(instance, &batch, &result), PMQ_WRITE_PENDING);
  d.close(instance);
  return captured;
}

TEST(OutcomeToSdk, AnAsynchronousWriteCompletesItsPendingOnce) {
  const std::vector<std::pair<Outcome, pmq_write_status>> table = {
      {Outcome::Written, PMQ_WRITE_OK},           {Outcome::Retry, PMQ_WRITE_RETRY},
      {Outcome::MaybeWritten, PMQ_WRITE_PARTIAL}, {Outcome::Fatal, PMQ_WRITE_FATAL},
      {Outcome::Rejected, PMQ_WRITE_REJECTED},
  };
  for (const auto& [outcome, status] : table) {
    const Captured c = run(outcome, {1, 2});
    EXPECT_EQ(c.completions, std::vector{status}) << to_string(outcome);
    if (outcome != Outcome::Written && outcome != Outcome::Rejected) {
      EXPECT_EQ(c.error, "because");
    }
  }
  const Captured rejected = run(Outcome::Rejected, {1, 2});
  EXPECT_EQ(rejected.rejections, (std::vector<std::pair<size_t, std::string>>{{1, "because"}, {2, "because"}}));

  const Captured one_too_large = run(Outcome::TooLarge, {6});
  EXPECT_EQ(one_too_large.completions, std::vector{PMQ_WRITE_REJECTED});
  ASSERT_EQ(one_too_large.rejections.size(), 1u);
  EXPECT_EQ(one_too_large.rejections[0].first, 6u);

  const Captured unsplit = run(Outcome::TooLarge, {1, 2, 3});
  EXPECT_EQ(unsplit.completions, std::vector{PMQ_WRITE_FATAL});
  EXPECT_NE(unsplit.error.find("3 records in one request were not split"), std::string::npos) << unsplit.error;
  EXPECT_TRUE(unsplit.rejections.empty());
}

}  // namespace
}  // namespace picomq::kit
