// The built InfluxDB sink in the kit's fake host (as the runtime loads it), against the real
// InfluxDB 1.6.7 (v1 API, authentication on) and 2.8.0 (v2 API) servers of this test process,
// checked by reading points back with InfluxQL and Flux: tags vs fields, field types, times and
// precision, partial writes rejecting exactly the refused lines, credentials and names checked at
// open. The v3 API (/api/v3/write_lp) and fault injection (413, 503 + Retry-After, several
// requests in flight, gzip) against the kit's HTTP stub: no InfluxDB 3 server exists here.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "influx_server.h"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {
namespace {

using kit::testing::FakeHost;
using kit::testing::HttpReceiver;
using kit::testing::TestBatch;

std::unique_ptr<FakeHost> load() { return FakeHost::load(INFLUXDB_SINK_PLUGIN); }

::testing::AssertionResult has_problem(const std::vector<std::string>& problems, const std::string& fragment) {
  std::string all;
  for (const auto& p : problems) {
    if (p.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
    all += "\n  " + p;
  }
  return ::testing::AssertionFailure() << "no problem with '" << fragment << "' among:" << all;
}

TEST(InfluxdbConfig, ProblemsAcrossOptionsAreNamedByKey) {
  auto host = load();
  EXPECT_TRUE(has_problem(host->check(R"({})"), "url: missing required option"));
  EXPECT_TRUE(
      has_problem(host->check(R"({"url": "http://h:8086", "org": "o"})"), "bucket: api = \"v2\" needs the bucket"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:8086", "api": "v1"})"), "database: api = \"v1\" needs"));
  EXPECT_TRUE(
      has_problem(host->check(R"({"url": "http://h:8086", "api": "v3", "database": "d", "retention_policy": "r"})"),
                  "retention_policy: is for api = \"v1\""));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:8086", "org": "o", "bucket": "b", "compression": "zstd"})"),
                          "compression: InfluxDB takes gzip request bodies only"));
  EXPECT_TRUE(
      has_problem(host->check(R"({"url": "http://h:8086", "org": "o", "bucket": "b", "tag_metadata": ["pico_x"]})"),
                  "tag_metadata: unknown metadata \"pico_x\""));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://u:p@h:8086", "org": "o", "bucket": "b"})"),
                          "url: must not hold credentials"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:8086", "org": "o", "bucket": "b", "token": "t",
                                          "auth": "basic", "auth_user": "u", "auth_password": "p"})"),
                          "token: set either token or auth"));
  EXPECT_TRUE(
      host->check(R"({"url": "http://h:8086", "org": "o", "bucket": "b", "token": "t", "precision": "ns"})").empty());
}

TEST(InfluxdbConfig, AnUnreachableServerIsARetryNotAnError) {
  auto host = load();
  host->open(R"({"url": "http://127.0.0.1:1", "org": "o", "bucket": "b", "retry_timeout": "0s"})");
  EXPECT_TRUE(host->logged("not reachable now"));
  const auto out = host->write(TestBatch::json("t", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
}

// ------------------------------------------------------------------ InfluxDB 1.6.7 (v1)

std::string v1_config(const std::string& db, const std::string& extra = "") {
  return "{\"url\": \"" + InfluxServer::shared(1).url() + "\", \"api\": \"v1\", \"database\": \"" + db +
         "\", \"auth\": \"basic\", \"auth_user\": \"picomq\", \"auth_password\": \"picomq-secret\"" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(InfluxdbV1, TagsFieldsTypesAndTimesReadBackWithInfluxQL) {
  InfluxServer& server = InfluxServer::shared(1);
  const std::string db = server.fresh_database("v1");
  auto host = load();
  host->open(v1_config(db, R"("tags": ["host"], "tag_key": "key", "tag_metadata": ["pico_partition"],
                              "timestamp_field": "at", "timestamp_unit": "ns", "precision": "ns")"));
  EXPECT_TRUE(host->logged("connected to InfluxDB 1.6.7")) << host->logs().front();
  TestBatch batch(
      "cpu load", 2,
      {{.offset = 10,
        .payload =
            R"({"host":"web 1","usage":{"user":12,"sys":0.25},"ok":true,"note":"a \"q\", b=c","at":1700000000123456789})",
        .key = "k1"},
       {.offset = 11,
        .payload =
            R"({"host":"web,2","usage":{"user":7,"sys":1.5},"ok":false,"note":"x\ny","at":"2023-11-14T22:13:21.5Z"})",
        .key = "k2"}});
  const auto out = host->write(batch);
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_TRUE(out.rejected.empty());
  std::vector<std::string> tags = server.tag_keys(db, "cpu load");
  EXPECT_EQ(tags, (std::vector<std::string>{"host", "key", "pico_partition"}));
  EXPECT_EQ(server.field_types(db, "cpu load"),
            (std::map<std::string, std::string>{
                {"note", "string"}, {"ok", "boolean"}, {"usage_sys", "float"}, {"usage_user", "integer"}}));
  const auto series = server.influxql(
      db, "SELECT \"host\", \"key\", \"note\", \"ok\", \"usage_sys\", \"usage_user\" FROM \"cpu load\"");
  ASSERT_EQ(series.size(), 1u);
  const auto& v = series[0].at("values");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], nlohmann::json::parse(R"([1700000000123456789, "web 1", "k1", "a \"q\", b=c", true, 0.25, 12])"));
  EXPECT_EQ(v[1], nlohmann::json::parse(R"([1700000001500000000, "web,2", "k2", "x\ny", false, 1.5, 7])"));
}

TEST(InfluxdbV1, PrecisionSecondsRoundsRecordTimesDown) {
  InfluxServer& server = InfluxServer::shared(1);
  const std::string db = server.fresh_database("v1");
  auto host = load();
  host->open(v1_config(db, R"("precision": "s")"));
  const auto out =
      host->write(TestBatch("m", 0, {{.offset = 0, .payload = R"({"v":1})", .timestamp_ms = 1'700'000'000'999}}));
  ASSERT_TRUE(out.ok()) << out.error;
  const auto series = server.influxql(db, "SELECT v FROM m");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0]["values"], nlohmann::json::parse("[[1700000000000000000, 1]]"));
}

TEST(InfluxdbV1, APartialWriteRejectsExactlyTheRefusedLinesAndWritesTheRest) {
  InfluxServer& server = InfluxServer::shared(1);
  const std::string db = server.fresh_database("v1");
  auto host = load();
  host->open(v1_config(db, R"("timestamp_field": "t", "timestamp_unit": "s", "precision": "s")"));
  const auto seed = host->write(TestBatch::json("m", 0, 0, {R"({"v":1,"t":1})"}));
  ASSERT_TRUE(seed.ok()) << seed.error;
  // 1: a field type conflict (v is an integer); 3: only a field named time (InfluxDB drops a field
  // named time, and refuses a point left without fields).
  const auto out = host->write(TestBatch::json(
      "m", 0, 1,
      {R"({"v":2,"t":2})", R"({"v":"text","t":3})", R"({"v":4,"t":4})", R"({"time":5,"t":5})", R"({"v":6,"t":6})"}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 2u);
  std::set<size_t> refused{out.rejected[0].record_index, out.rejected[1].record_index};
  EXPECT_EQ(refused, (std::set<size_t>{1, 3}));
  for (const auto& r : out.rejected) {
    const std::string expected = r.record_index == 1 ? "field type conflict" : "time";
    EXPECT_NE(r.reason.find(expected), std::string::npos) << r.reason;
  }
  const auto series = server.influxql(db, "SELECT v FROM m");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0]["values"],
            nlohmann::json::parse("[[1000000000,1],[2000000000,2],[4000000000,4],[6000000000,6]]"));
}

TEST(InfluxdbV1, WrongCredentialsAndUnknownDatabasesStopTheSinkAtOpen) {
  InfluxServer& server = InfluxServer::shared(1);
  auto host = load();
  try {
    host->open("{\"url\": \"" + server.url() +
               "\", \"api\": \"v1\", \"database\": \"x\", \"auth\": \"basic\", "
               "\"auth_user\": \"picomq\", \"auth_password\": \"wrong-password\"}");
    ADD_FAILURE() << "opened with a wrong password";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("refused the credentials"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("wrong-password"), std::string::npos) << "secret in: " << e.what();
  }
  auto other = load();
  try {
    other->open(v1_config("no_such_database"));
    ADD_FAILURE() << "opened on a database that does not exist";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("database no_such_database not found"), std::string::npos) << e.what();
  }
}

TEST(InfluxdbV1, AnUnknownRetentionPolicyStopsTheSinkAtOpenNotARetry) {
  InfluxServer& server = InfluxServer::shared(1);
  const std::string db = server.fresh_database("v1");
  auto host = load();
  try {
    host->open(v1_config(db, R"("retention_policy": "no_such_rp")"));
    ADD_FAILURE() << "opened on a retention policy that does not exist";
  } catch (const std::exception& e) {
    // 1.x answers 500 "retention policy not found": configuration, not a server failure.
    EXPECT_NE(std::string(e.what()).find("retention policy not found: no_such_rp"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------ InfluxDB 2.8.0 (v2)

std::string v2_config(const std::string& bucket, const std::string& extra = "") {
  return "{\"url\": \"" + InfluxServer::shared(2).url() + "\", \"org\": \"picomq\", \"bucket\": \"" + bucket +
         "\", \"token\": \"" + InfluxServer::kToken + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(InfluxdbV2, TagsFieldsTypesAndTimesReadBackWithFlux) {
  InfluxServer& server = InfluxServer::shared(2);
  const std::string bucket = server.fresh_database("v2");
  auto host = load();
  host->open(
      v2_config(bucket, R"("tags": ["host"], "tag_headers": ["source"], "precision": "us", "compression": "gzip")"));
  EXPECT_TRUE(host->logged("connected to InfluxDB 2.8.0")) << host->logs().front();
  TestBatch batch("weather", 0,
                  {{.offset = 0,
                    .payload = R"({"host":"a b","temp":21.5,"count":3,"big":18446744073709551615,"ok":true,"s":"x"})",
                    .headers = {{"source", "station=1"}},
                    .timestamp_ms = 1'700'000'000'123}});
  const auto out = host->write(batch);
  ASSERT_TRUE(out.ok()) << out.error;
  const auto rows = server.flux_points(bucket, "weather");
  ASSERT_EQ(rows.size(), 5u);
  std::map<std::string, std::pair<std::string, std::string>> fields;  // field -> type, value
  for (const auto& r : rows) {
    fields[r.at("_field")] = {r.at("#type:_value"), r.at("_value")};
    EXPECT_EQ(r.at("host"), "a b");  // tags are columns of every row
    EXPECT_EQ(r.at("source"), "station=1");
    EXPECT_EQ(r.at("_time"), "2023-11-14T22:13:20.123Z");
  }
  EXPECT_EQ(fields, (std::map<std::string, std::pair<std::string, std::string>>{
                        {"big", {"unsignedLong", "18446744073709551615"}},
                        {"count", {"long", "3"}},
                        {"ok", {"boolean", "true"}},
                        {"s", {"string", "x"}},
                        {"temp", {"double", "21.5"}}}));
}

TEST(InfluxdbV2, APartialWrite422RejectsExactlyTheConflictingLines) {
  InfluxServer& server = InfluxServer::shared(2);
  const std::string bucket = server.fresh_database("v2");
  auto host = load();
  host->open(v2_config(bucket,
                       R"("timestamp_field": "t", "timestamp_unit": "s", "precision": "s", "max_request_lines": 100)"));
  const auto seed = host->write(TestBatch::json("m", 0, 0, {R"({"v":1.5,"t":1})"}));
  ASSERT_TRUE(seed.ok()) << seed.error;
  const auto out = host->write(TestBatch::json(
      "m", 0, 1, {R"({"v":2.5,"t":2})", R"({"v":"no","t":3})", R"({"v":true,"t":4})", R"({"v":5.5,"t":5})"}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  std::set<size_t> refused;
  for (const auto& r : out.rejected) refused.insert(r.record_index);
  EXPECT_EQ(refused, (std::set<size_t>{1, 2}));
  EXPECT_EQ(server.point_count(bucket, "m"), 3);
}

TEST(InfluxdbV2, WrongTokenAndUnknownBucketStopTheSinkAtOpen) {
  InfluxServer& server = InfluxServer::shared(2);
  auto host = load();
  try {
    host->open("{\"url\": \"" + server.url() +
               "\", \"org\": \"picomq\", \"bucket\": \"picomq\", \"token\": \"bad-token-1\"}");
    ADD_FAILURE() << "opened with a wrong token";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("refused the credentials"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("bad-token-1"), std::string::npos) << "secret in: " << e.what();
  }
  auto other = load();
  try {
    other->open(v2_config("no_such_bucket"));
    ADD_FAILURE() << "opened on a bucket that does not exist";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bucket no_such_bucket not found"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------ the HTTP stub: v3, faults

TEST(InfluxdbStub, V3WritesLineProtocolWithBearerAndRejectsTheNumberedLines) {
  HttpReceiver stub;
  auto host = load();
  host->open("{\"url\": \"" + stub.base_url() +
             "\", \"api\": \"v3\", \"database\": \"sensors db\", \"token\": \"tok3\", "
             "\"precision\": \"us\"}");
  stub.reset();
  stub.script(
      {{"path", "/api/v3/write_lp"},
       {"status", 400},
       {"headers", {{"Content-Type", "application/json"}}},
       {"body",
        R"({"error":"partial write of line protocol occurred","data":[{"original_line":"m v=2i 1700000000000001","line_number":2,"error_message":"invalid column type for column 'v'"}]})"}});
  const auto out = host->write(TestBatch("m", 0,
                                         {{.offset = 0, .payload = R"({"v":1})", .timestamp_ms = 1'700'000'000'000},
                                          {.offset = 1, .payload = R"({"v":2})", .timestamp_ms = 1'700'000'000'001},
                                          {.offset = 2, .payload = R"({"v":3})", .timestamp_ms = 1'700'000'000'002}}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 1u);
  EXPECT_NE(out.rejected[0].reason.find("invalid column type"), std::string::npos);
  const auto seen = stub.requests("/api/v3/write_lp");
  ASSERT_EQ(seen.size(), 1u);  // the rest was written: nothing resent
  EXPECT_EQ(seen[0].query, "db=sensors%20db&precision=microsecond&accept_partial=true");
  EXPECT_EQ(seen[0].headers.get("Authorization").value_or(""), "Bearer tok3");
  EXPECT_EQ(seen[0].body, "m v=1i 1700000000000000\nm v=2i 1700000000001000\nm v=3i 1700000000002000\n");
}

TEST(InfluxdbStub, SplitsOn413ResendsAfterRetryAfterGzipsAndKeepsRequestsInFlight) {
  HttpReceiver stub;
  auto host = load();
  host->open("{\"url\": \"" + stub.base_url() +
             "\", \"org\": \"o\", \"bucket\": \"b\", \"token\": \"t\", "
             "\"max_request_lines\": 2, \"max_in_flight\": 4, \"compression\": \"gzip\"}");
  stub.reset();
  // Every gzip body over 120 bytes is too large: one line (a field of 64 random hex digits) is
  // ~100 bytes gzipped, two are ~145, so each line ends up alone.
  stub.script({{{"path", "/api/v2/write"}, {"when_body_over", 120}, {"status", 413}, {"count", 0}}});
  std::vector<std::string> payloads;
  std::mt19937_64 random(42);
  for (int i = 0; i < 8; ++i) {
    char note[65];
    std::snprintf(note, sizeof note, "%016llx%016llx%016llx%016llx", static_cast<unsigned long long>(random()),
                  static_cast<unsigned long long>(random()), static_cast<unsigned long long>(random()),
                  static_cast<unsigned long long>(random()));
    payloads.push_back("{\"value\":" + std::to_string(i) + ",\"note\":\"" + note + "\"}");
  }
  auto out = host->write(TestBatch::json("m", 0, 0, payloads));
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_GT(host->counter("splits"), 0u);
  std::multiset<std::string> written;
  for (const auto& r : stub.requests("/api/v2/write")) {
    EXPECT_EQ(r.content_encoding, "gzip");
    EXPECT_EQ(r.headers.get("Authorization").value_or(""), "Token t");
    if (r.answer == 204 || r.answer == 200) written.insert(r.body);
  }
  EXPECT_EQ(written.size(), 8u) << "every line alone, once";

  stub.reset();
  stub.script({{{"path", "/api/v2/write"}, {"status", 503}, {"headers", {{"Retry-After", "1"}}}, {"count", 1}}});
  const auto start = std::chrono::steady_clock::now();
  out = host->write(TestBatch::json("m", 0, 8, {R"({"v":1})"}));
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900)) << "waited for Retry-After";
  EXPECT_EQ(stub.requests("/api/v2/write").size(), 2u);

  stub.reset();
  stub.script({{{"path", "/api/v2/write"}, {"delay", 0.3}, {"count", 0}}});
  std::vector<std::shared_ptr<kit::testing::Write>> writes;
  writes.reserve(4);
  for (int i = 0; i < 4; ++i) writes.push_back(host->start_write(TestBatch::json("m", 0, 100 + i, {R"({"v":1})"})));
  for (auto& w : writes) EXPECT_TRUE(w->wait().ok());
  EXPECT_GE(stub.stats().max_in_flight, 2u);
}

TEST(InfluxdbStub, CredentialsOrNamesRefusedAtWriteTimeStopTheSink) {
  HttpReceiver stub;
  auto host = load();
  host->open("{\"url\": \"" + stub.base_url() +
             "\", \"org\": \"o\", \"bucket\": \"b\", \"token\": \"secret-token-9\"}");
  stub.reset();
  // The token was revoked after the sink started.
  stub.script({{"path", "/api/v2/write"},
               {"status", 401},
               {"body", R"({"code":"unauthorized","message":"unauthorized access"})"}});
  auto out = host->write(TestBatch::json("m", 0, 0, {R"({"v":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("InfluxDB refused the credentials (check token"), std::string::npos) << out.error;
  EXPECT_EQ(out.error.find("secret-token-9"), std::string::npos) << out.error;
  // The bucket was deleted after the sink started.
  stub.script({{"path", "/api/v2/write"},
               {"status", 404},
               {"body", R"({"code":"not found","message":"bucket \"b\" not found"})"}});
  out = host->write(TestBatch::json("m", 0, 1, {R"({"v":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("org o / bucket b not found"), std::string::npos) << out.error;
}

TEST(InfluxdbStub, ServerErrorsAreRetriedThenTheWriteIsARetry) {
  HttpReceiver stub;
  auto host = load();
  host->open("{\"url\": \"" + stub.base_url() + "\", \"org\": \"o\", \"bucket\": \"b\", \"retry_timeout\": \"1s\"}");
  stub.reset();
  stub.set_default_answer(500, nlohmann::json::object(), R"({"code":"internal error","message":"engine: cache full"})");
  const auto out = host->write(TestBatch::json("m", 0, 0, {R"({"v":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_GE(stub.requests("/api/v2/write").size(), 2u) << "resent within retry_timeout";
}

}  // namespace
}  // namespace picomq::test
