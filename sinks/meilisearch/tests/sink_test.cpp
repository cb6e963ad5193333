// The built Meilisearch sink in the kit's fake host (as the runtime loads it), against the
// contract server of this test process (meilisearch_contract.py: Meilisearch's documented API,
// written from its reference, not from the sink). Every case reads the index back through the
// documents API: documents with their ids, task waits (a write completes only when its task
// succeeded), bisection of a failed task down to the records Meilisearch refuses, retries,
// tombstones, splits, limits and the API key.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "picomq/kit/record_id.hpp"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {
namespace {

using kit::testing::FakeHost;
using kit::testing::HttpReceiver;
using kit::testing::TestBatch;
using nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<FakeHost> load() { return FakeHost::load(MEILISEARCH_SINK_PLUGIN); }

// The contract server (one per process, a second one with a master key and a small payload limit).
class Meili {
 public:
  explicit Meili(std::vector<std::string> args = {}) : server_(MEILISEARCH_CONTRACT, std::move(args)) {}
  static Meili& shared() {
    static Meili m;
    return m;
  }
  static Meili& guarded() {
    static Meili m({"--master-key", "s3cret-key", "--payload-limit", "4000"});
    return m;
  }
  std::string url() const { return server_.base_url(); }
  json get(const std::string& path) const {
    auto [status, body] = server_.call("GET", path);
    if (status != 200) throw std::runtime_error(path + ": " + std::to_string(status) + " " + body);
    return json::parse(body);
  }
  std::pair<long, json> raw(const char* method, const std::string& path, const std::string& body = {}) const {
    auto [status, text] = server_.call(method, path, body);
    return {status, json::parse(text)};
  }
  // Every document of an index (in insertion order), or an empty list when there is no index.
  std::vector<json> documents(const std::string& index) const {
    auto [status, body] = server_.call("GET", "/indexes/" + index + "/documents?limit=100000");
    if (status == 404) return {};
    return json::parse(body)["results"].get<std::vector<json>>();
  }
  void config(const json& c) const { server_.call("POST", "/_control/config", c.dump()); }
  json stats() const { return get("/_control/stats"); }
  std::string index(const std::string& stem) const { return stem + "-" + std::to_string(++n_); }

 private:
  HttpReceiver server_;
  mutable int n_ = 0;
};

std::string config(const std::string& url, const std::string& index, const std::string& extra = "") {
  return "{\"url\": \"" + url + "\", \"index\": \"" + index + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
}

::testing::AssertionResult has_problem(const std::vector<std::string>& problems, const std::string& fragment) {
  std::string all;
  for (const auto& p : problems) {
    if (p.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
    all += "\n  " + p;
  }
  return ::testing::AssertionFailure() << "no problem with '" << fragment << "' among:" << all;
}

TEST(MeilisearchConfig, ProblemsAreNamedByKey) {
  auto host = load();
  EXPECT_TRUE(has_problem(host->check(R"({})"), "url: missing required option"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://k:p@h:7700"})"), "url: must not hold credentials"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7700", "tombstones": "delete"})"),
                          "tombstones: delete needs id = \"key\""));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7700", "id": "field", "document": "envelope"})"),
                          "id: field needs"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7700", "compression": "zstd"})"),
                          "compression: Meilisearch takes gzip"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7700", "index_settings": [1]})"),
                          "index_settings: must be a table"));
  EXPECT_TRUE(host->check(R"({"url": "http://h:7700", "id": "key", "tombstones": "delete", "api_key": "k"})").empty());
}

TEST(MeilisearchSink, WritesDocumentsWithEncodedRecordIdsAndAReplayReplacesThem) {
  auto& m = Meili::shared();
  const auto index = m.index("ids");
  auto host = load();
  host->open(config(m.url(), index));
  EXPECT_TRUE(host->logged("connected to Meilisearch"));
  TestBatch batch("shop.orders", 2,
                  {{.offset = 40, .payload = R"({"id": 1, "name": "a"})", .key = "k1", .headers = {{"h", "v"}}},
                   {.offset = 41, .payload = R"({"id": 2, "name": "b"})"},
                   {.offset = 42, .payload = R"("not an object")"}});
  ASSERT_EQ(host->write(batch).status, PMQ_WRITE_OK);
  auto docs = m.documents(index);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], json::parse(R"({"pico_id":"shop_2Eorders-2-40","pico_topic":"shop.orders","pico_partition":2,
      "pico_offset":40,"pico_timestamp":1700000000000,"pico_key":"azE=","pico_headers":{"h":"v"},"id":1,"name":"a"})"));
  EXPECT_EQ(docs[2]["payload"], "not an object");
  // The id decodes back to the record's coordinates.
  EXPECT_EQ(kit::parse_url_safe_record_id(docs[1]["pico_id"].get<std::string>()),
            (kit::RecordCoordinates{"shop.orders", 2, 41}));
  EXPECT_EQ(m.get("/indexes/" + index)["primaryKey"], "pico_id");
  ASSERT_EQ(host->write(batch).status, PMQ_WRITE_OK);  // a replay
  EXPECT_EQ(m.documents(index).size(), 3u) << "the same ids: replaced, nothing doubles";
  EXPECT_EQ(host->counter("written_records"), 6u);
  EXPECT_EQ(host->counter("created_indexes"), 1u);
}

TEST(MeilisearchSink, AWriteCompletesOnlyWhenItsTaskSucceeded) {
  auto& m = Meili::shared();
  const auto index = m.index("wait");
  auto host = load();
  host->open(config(m.url(), index));
  ASSERT_EQ(host->write(TestBatch::json("t", 0, 0, {R"({"a":0})"})).status, PMQ_WRITE_OK);  // the index exists
  m.config({{"paused", true}});
  auto w = host->start_write(TestBatch::json("t", 0, 1, {R"({"a":1})", R"({"a":2})"}));
  std::this_thread::sleep_for(700ms);
  EXPECT_FALSE(w->completed()) << "the task is only enqueued: 202 is no write";
  EXPECT_EQ(m.documents(index).size(), 1u);
  m.config({{"paused", false}});
  EXPECT_EQ(w->wait().status, PMQ_WRITE_OK);
  EXPECT_EQ(m.documents(index).size(), 3u);
  EXPECT_GE(host->counter("task_polls"), 2u);
}

TEST(MeilisearchSink, ADocumentTheTaskFailsOnIsRejectedAloneByBisection) {
  auto& m = Meili::shared();
  const auto index = m.index("bad");
  auto host = load();
  host->open(config(m.url(), index, R"("id": "field", "primary_key": "sku", "document": "payload")"));
  std::vector<std::string> payloads;
  payloads.reserve(16);
  for (int i = 0; i < 16; ++i)
    payloads.push_back("{\"sku\": \"p" + std::to_string(i) + "\", \"n\": " + std::to_string(i) + "}");
  payloads[5] = R"({"sku": "not valid!", "n": 5})";  // invalid_document_id
  payloads[11] = R"({"n": 11})";                     // missing_document_id
  auto out = host->write(TestBatch::json("t", 0, 0, payloads));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 2u);
  // Found in whatever order the halves' tasks finish.
  std::sort(out.rejected.begin(), out.rejected.end(),
            [](const auto& a, const auto& b) { return a.record_index < b.record_index; });
  EXPECT_EQ(out.rejected[0].record_index, 5u);
  EXPECT_NE(out.rejected[0].reason.find("invalid_document_id: Document identifier `\"not valid!\"` is invalid"),
            std::string::npos)
      << out.rejected[0].reason;
  EXPECT_EQ(out.rejected[1].record_index, 11u);
  EXPECT_NE(out.rejected[1].reason.find("missing_document_id"), std::string::npos) << out.rejected[1].reason;
  const auto docs = m.documents(index);
  EXPECT_EQ(docs.size(), 14u);
  for (const auto& d : docs) EXPECT_NE(d["n"], 5);
  EXPECT_GE(host->counter("splits"), 4u);
  EXPECT_EQ(host->counter("rejected_records"), 2u);
}

TEST(MeilisearchSink, ATaskFailedAsInternalIsEnqueuedAgainAndACanceledOneIsARetry) {
  auto& m = Meili::shared();
  const auto index = m.index("internal");
  auto host = load();
  host->open(config(m.url(), index));
  m.config({{"fail_tasks", 1}});
  EXPECT_EQ(host->write(TestBatch::json("t", 0, 0, {R"({"a":1})"})).status, PMQ_WRITE_OK);
  EXPECT_EQ(host->counter("failed_tasks"), 1u);
  EXPECT_EQ(m.documents(index).size(), 1u);
  m.config({{"cancel_tasks", 1}});
  const auto out = host->write(TestBatch::json("t", 0, 1, {R"({"a":2})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("was canceled"), std::string::npos) << out.error;
  EXPECT_EQ(m.documents(index).size(), 1u);
  // With no time to resend, an internal failure fails the write as a retry, nothing written.
  auto quick = load();
  quick->open(config(m.url(), index, R"("retry_timeout": "0s")"));
  m.config({{"fail_tasks", 1}});
  const auto failed = quick->write(TestBatch::json("t", 0, 2, {R"({"a":3})"}));
  EXPECT_EQ(failed.status, PMQ_WRITE_RETRY) << failed.error;
  EXPECT_NE(failed.error.find("internal"), std::string::npos) << failed.error;
  EXPECT_EQ(m.documents(index).size(), 1u);
}

TEST(MeilisearchSink, TransientAnswersToTheEnqueueAreResent) {
  auto& m = Meili::shared();
  const auto index = m.index("flaky");
  auto host = load();
  host->open(config(m.url(), index));
  ASSERT_EQ(host->write(TestBatch::json("t", 0, 0, {R"({"a":0})"})).status, PMQ_WRITE_OK);
  m.config(
      {{"fail_requests",
        {{{"method", "POST"}, {"path_prefix", "/indexes/" + index + "/documents"}, {"status", 503}, {"count", 2}},
         {{"method", "POST"}, {"path_prefix", "/indexes/" + index + "/documents"}, {"status", 0}, {"count", 1}}}}});
  EXPECT_EQ(host->write(TestBatch::json("t", 0, 1, {R"({"a":1})", R"({"a":2})"})).status, PMQ_WRITE_OK);
  EXPECT_EQ(m.documents(index).size(), 3u);
  // 2 resends at least: libcurl itself sends again once on a reused connection closed unanswered.
  EXPECT_GE(host->counter("resends"), 2u);
}

TEST(MeilisearchSink, KeyIdsUpdateAndTombstonesDeleteInRecordOrder) {
  auto& m = Meili::shared();
  const auto index = m.index("keys");
  auto host = load();
  host->open(
      config(m.url(), index, R"("id": "key", "tombstones": "delete", "method": "update", "document": "payload")"));
  ASSERT_EQ(host->write(TestBatch("t", 0,
                                  {{.offset = 1, .payload = R"({"v": 1, "keep": true})", .key = "a.1"},
                                   {.offset = 2, .payload = R"({"v": 1})", .key = "b"}}))
                .status,
            PMQ_WRITE_OK);
  // An update of a.1, b deleted then written again, and a tombstone for a key never written.
  const auto out = host->write(TestBatch("t", 0,
                                         {{.offset = 3, .payload = R"({"v": 2})", .key = "a.1"},
                                          {.offset = 4, .payload = std::nullopt, .key = "b"},
                                          {.offset = 5, .payload = R"({"v": 3})", .key = "b"},
                                          {.offset = 6, .payload = std::nullopt, .key = "never"},
                                          {.offset = 7, .payload = R"({"v": 4})"}}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 4u);
  EXPECT_NE(out.rejected[0].reason.find("no key"), std::string::npos);
  EXPECT_EQ(m.get("/indexes/" + index + "/documents/a_2E1"), json::parse(R"({"pico_id":"a_2E1","v":2,"keep":true})"))
      << "PUT merges fields";
  EXPECT_EQ(m.get("/indexes/" + index + "/documents/b"), json::parse(R"({"pico_id":"b","v":3})"))
      << "the delete ran before the later write of the same key";
  EXPECT_EQ(m.documents(index).size(), 2u);
  EXPECT_EQ(host->counter("deleted_records"), 2u);
}

TEST(MeilisearchSink, BatchesAreSplitByRecordsAndBytesAndGzipped) {
  auto& m = Meili::shared();
  const auto index = m.index("split");
  auto host = load();
  host->open(config(m.url(), index, R"("max_request_records": 7, "max_request_bytes": "2KiB", "compression": "gzip")"));
  std::vector<std::string> payloads;
  payloads.reserve(50);
  for (int i = 0; i < 50; ++i)
    payloads.push_back("{\"n\": " + std::to_string(i) + ", \"pad\": \"" + std::string(i == 9 ? 3000 : 10, 'x') + "\"}");
  const auto before = m.stats()["requests"].value("POST /indexes/{uid}/documents", 0);
  ASSERT_EQ(host->write(TestBatch::json("t", 0, 0, payloads)).status, PMQ_WRITE_OK);
  const auto docs = m.documents(index);
  ASSERT_EQ(docs.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(docs[static_cast<size_t>(i)]["n"], i);
  EXPECT_GE(m.stats()["requests"].value("POST /indexes/{uid}/documents", 0) - before, 8)
      << "50 records / 7, the big one alone";
}

TEST(MeilisearchSink, TheApiKeyIsSentAndAWrongOneStopsTheSinkAtStart) {
  auto& m = Meili::guarded();
  auto wrong = load();
  try {
    wrong->open(config(m.url(), "x", R"("api_key": "wrong-key")"));
    FAIL() << "a wrong key: the sink must not start";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("invalid_api_key"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("wrong-key"), std::string::npos)
        << "the key is never in a message: " << e.what();
  }
  auto none = load();
  try {
    none->open(config(m.url(), "x"));
    FAIL() << "no key: the sink must not start";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("api_key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing_authorization_header"), std::string::npos) << e.what();
  }
  auto host = load();
  host->open(config(m.url(), "keyed", R"("api_key": "s3cret-key")"));
  for (const auto& line : host->logs()) EXPECT_EQ(line.find("s3cret-key"), std::string::npos) << line;
  // The server's payload limit is 4000 bytes: a larger document alone is rejected as too large.
  const auto out =
      host->write(TestBatch::json("t", 0, 0, {R"({"a":1})", "{\"big\": \"" + std::string(5000, 'x') + "\"}"}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 1u);
  EXPECT_NE(out.rejected[0].reason.find("payload limit"), std::string::npos) << out.rejected[0].reason;
}

TEST(MeilisearchSink, AnIndexWithAnotherPrimaryKeyOrRefusedSettingsStopTheSink) {
  auto& m = Meili::shared();
  const auto index = m.index("otherpk");
  ASSERT_EQ(m.raw("POST", "/indexes", R"({"uid": ")" + index + R"(", "primaryKey": "sku"})").first, 202);
  std::this_thread::sleep_for(300ms);
  auto host = load();
  host->open(config(m.url(), index));
  auto out = host->write(TestBatch::json("t", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("has the primary key sku, not primary_key = \"pico_id\""), std::string::npos) << out.error;

  const auto index2 = m.index("settings");
  auto bad = load();
  bad->open(config(m.url(), index2, R"("index_settings": {"sortableAttributes": "pico_topic"})"));
  out = bad->write(TestBatch::json("t", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("index_settings"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("invalid_settings_sortable_attributes"), std::string::npos) << out.error;

  const auto index3 = m.index("settings");
  auto good = load();
  good->open(config(m.url(), index3, R"("index_settings": {"filterableAttributes": ["pico_topic"]})"));
  ASSERT_EQ(good->write(TestBatch::json("shop.orders", 0, 0, {R"({"a":1})"})).status, PMQ_WRITE_OK);
  EXPECT_EQ(m.get("/indexes/" + index3 + "/settings")["filterableAttributes"], json::parse(R"(["pico_topic"])"));
}

TEST(MeilisearchSink, IndexUidsFollowTheUidRules) {
  auto& m = Meili::shared();
  auto host = load();
  host->open(config(m.url(), "{topic}"));
  ASSERT_EQ(host->write(TestBatch::json("shop.orders/eu", 0, 0, {R"({"a":1})"})).status, PMQ_WRITE_OK);
  EXPECT_EQ(m.documents("shop_orders_eu").size(), 1u);
}

TEST(MeilisearchSink, AnUnreachableServerIsARetry) {
  auto host = load();
  host->open(R"({"url": "http://127.0.0.1:1", "retry_timeout": "0s"})");
  EXPECT_TRUE(host->logged("not reachable now"));
  const auto out = host->write(TestBatch::json("t", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("index t"), std::string::npos) << out.error;
}

// ------------------------------------------------------------------ change events (docs/changes.md)

constexpr const char* kDebezium = R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])";
using kit::testing::TestRecord;

TestRecord upsert(int64_t offset, const std::string& key, const std::string& row) {
  return {.offset = offset, .payload = row, .op = PMQ_OP_UPSERT, .key_json = key};
}
TestRecord patch(int64_t offset, const std::string& key, const std::string& columns) {
  return {.offset = offset, .payload = columns, .op = PMQ_OP_PATCH, .key_json = key};
}
TestRecord erase(int64_t offset, const std::string& key) {
  return {.offset = offset, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = key};
}
TestRecord truncate(int64_t offset) { return {.offset = offset, .op = PMQ_OP_TRUNCATE}; }

// A sink opened on a block with changes = "debezium", writing payload documents into `index`.
std::unique_ptr<FakeHost> open_changes(const std::string& index, const std::string& extra = "") {
  auto host = load();
  host->subscriptions(kDebezium);
  host->open(config(Meili::shared().url(), index, "\"document\": \"payload\"" + (extra.empty() ? "" : ", " + extra)));
  return host;
}

// The index's documents by id (pico_id taken out).
std::map<std::string, json> rows(const std::string& index) {
  std::map<std::string, json> out;
  for (json doc : Meili::shared().documents(index)) {
    const std::string id = doc["pico_id"];
    doc.erase("pico_id");
    out[id] = doc;
  }
  return out;
}

std::string first_reason(const kit::testing::WriteOutcome& out) {
  return out.error + (out.rejected.empty() ? "" : " / " + out.rejected[0].reason);
}

TEST(MeilisearchChanges, UpsertsReplaceDeletesRemoveAndAMissingKeyIsNoError) {
  const std::string index = Meili::shared().index("changes");
  auto host = open_changes(index);
  EXPECT_EQ(host->max_in_flight(), 1u) << "one batch at a time per block: a later change never lands first";
  const auto first = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","email":"a@x"})"),
       upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob"})"), upsert(2, R"({"id":3})", R"({"id":3,"name":"Cy"})")}));
  ASSERT_EQ(first.status, PMQ_WRITE_OK) << first_reason(first);
  const auto second = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(3, R"({"id":1})", R"({"id":1,"name":"Anne"})"), erase(4, R"({"id":2})"), erase(5, R"({"id":99})")}));
  ASSERT_EQ(second.status, PMQ_WRITE_OK) << first_reason(second);
  EXPECT_TRUE(second.rejected.empty());
  EXPECT_EQ(rows(index), (std::map<std::string, json>{{"1", json::parse(R"({"id":1,"name":"Anne"})")},
                                                      {"3", json::parse(R"({"id":3,"name":"Cy"})")}}))
      << "an upsert replaces the whole document (no email left); the delete of a key never written is no error";
  EXPECT_EQ(host->counter("deleted_records"), 2u);
}

TEST(MeilisearchChanges, ATombstoneDeletesTheDocumentOfItsKey) {
  auto& m = Meili::shared();
  const std::string index = m.index("tombstone");
  auto host = open_changes(index);
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 1, {upsert(10, R"({"id":"a"})", R"({"v":1})")})).status,
            PMQ_WRITE_OK);
  EXPECT_EQ(m.get("/indexes/" + index + "/documents/a"), json::parse(R"({"pico_id":"a","v":1})"));
  // A tombstone under `changes`: no payload, the key, PMQ_OP_DELETE (the runtime's doing).
  const TestRecord tombstone{
      .offset = 11, .payload = std::nullopt, .key = R"({"id":"a"})", .op = PMQ_OP_DELETE, .key_json = R"({"id":"a"})"};
  const auto out = host->write(TestBatch("shop.public.customers", 1, {tombstone}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << first_reason(out);
  EXPECT_TRUE(m.documents(index).empty());
}

TEST(MeilisearchChanges, SeveralChangesOfOneKeyInOneBatchApplyInOrderAcrossItsTasks) {
  const std::string index = Meili::shared().index("order");
  auto host = open_changes(index);
  const auto out = host->write(
      TestBatch("shop.public.customers", 0,
                {upsert(0, R"({"id":1})", R"({"id":1,"v":"first"})"), erase(1, R"({"id":1})"),
                 upsert(2, R"({"id":1})", R"({"id":1,"v":"again"})"), upsert(3, R"({"id":2})", R"({"id":2,"v":"x"})"),
                 patch(4, R"({"id":1})", R"({"v":"patched"})"), erase(5, R"({"id":2})"),
                 upsert(6, R"({"id":3})", R"({"id":3})"), erase(7, R"({"id":3})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << first_reason(out);
  EXPECT_EQ(rows(index), (std::map<std::string, json>{{"1", json::parse(R"({"id":1,"v":"patched"})")}}));

  // Three documents a request: 40 changes of four keys are 20-odd tasks, each after the one before.
  const std::string many = Meili::shared().index("requests");
  auto split = open_changes(many, R"("max_request_records": 3)");
  std::vector<TestRecord> records;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "{\"id\":" + std::to_string(i % 4) + "}";
    if (i % 7 == 3) records.push_back(erase(i, key));
    else records.push_back(upsert(i, key, "{\"n\":" + std::to_string(i) + "}"));
  }
  const auto written = split->write(TestBatch("shop.public.customers", 0, records));
  ASSERT_EQ(written.status, PMQ_WRITE_OK) << first_reason(written);
  // The last change of each key: 0 -> 36, 1 -> 37, 2 -> 38 (delete at 38: 38 % 7 == 3), 3 -> 39.
  EXPECT_EQ(rows(many), (std::map<std::string, json>{{"0", json::parse(R"({"n":36})")},
                                                     {"1", json::parse(R"({"n":37})")},
                                                     {"3", json::parse(R"({"n":39})")}}));
  EXPECT_GE(split->counter("tasks"), 14u);
}

TEST(MeilisearchChanges, ATaskThatFailsAndIsResentNeverLandsAfterALaterChange) {
  auto& m = Meili::shared();
  const std::string index = m.index("resent");
  auto host = open_changes(index, R"("max_request_records": 1)");
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 0, {upsert(0, R"({"id":0})", "{}")})).status,
            PMQ_WRITE_OK);  // the index exists
  // The first task fails as internal and is resent: the second change of the key must wait for
  // it (a pipelined second task would land first, and the resent first one overwrite it).
  m.config({{"fail_tasks", 1}});
  const auto out = host->write(TestBatch("shop.public.customers", 0,
                                         {upsert(1, R"({"id":1})", R"({"v":"old"})"),
                                          upsert(2, R"({"id":1})", R"({"v":"new"})"), erase(3, R"({"id":0})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << first_reason(out);
  EXPECT_EQ(host->counter("failed_tasks"), 1u);
  EXPECT_EQ(rows(index), (std::map<std::string, json>{{"1", json::parse(R"({"v":"new"})")}}));
}

TEST(MeilisearchChanges, ATruncateEmptiesTheIndexBetweenTheRowsBeforeAndAfterIt) {
  auto& m = Meili::shared();
  const std::string index = m.index("truncate");
  auto host = open_changes(index);
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 0,
                                  {upsert(0, R"({"id":9})", R"({"id":9})"), upsert(1, R"({"id":8})", R"({"id":8})")}))
                .status,
            PMQ_WRITE_OK);
  const auto out = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(2, R"({"id":1})", R"({"id":1,"v":"old"})"), upsert(3, R"({"id":2})", R"({"id":2})"), truncate(4),
       upsert(5, R"({"id":3})", R"({"id":3})"), upsert(6, R"({"id":1})", R"({"id":1,"v":"new"})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << first_reason(out);
  EXPECT_EQ(rows(index), (std::map<std::string, json>{{"1", json::parse(R"({"id":1,"v":"new"})")},
                                                      {"3", json::parse(R"({"id":3})")}}));
  EXPECT_EQ(host->counter("truncates"), 1u);
  // A truncate that ends its batch.
  ASSERT_EQ(
      host->write(TestBatch("shop.public.customers", 0, {upsert(7, R"({"id":4})", R"({"id":4})"), truncate(8)})).status,
      PMQ_WRITE_OK);
  EXPECT_TRUE(m.documents(index).empty());
  EXPECT_EQ(host->counter("truncates"), 2u);
}

TEST(MeilisearchChanges, APatchKeepsTheFieldsItDoesNotNameAndInsertsAMissingDocument) {
  const std::string index = Meili::shared().index("patch");
  auto host = open_changes(index, R"("document": "flat")");
  const std::string body(8000, 'b');
  ASSERT_EQ(
      host->write(TestBatch("shop.public.customers", 0,
                            {upsert(0, R"({"id":1})",
                                    R"({"id":1,"title":"draft","body":")" + body + R"(","meta":{"lang":"en"}})")}))
          .status,
      PMQ_WRITE_OK);
  const auto out = host->write(TestBatch(
      "shop.public.customers", 0,
      {patch(1, R"({"id":1})", R"({"id":1,"title":"final"})"), patch(2, R"({"id":2})", R"({"id":2,"title":"new"})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << first_reason(out);
  const auto docs = rows(index);
  ASSERT_EQ(docs.size(), 2u);
  const json& one = docs.at("1");
  EXPECT_EQ(one["title"], "final");
  EXPECT_EQ(one["body"], body) << "the column the patch does not name keeps its value";
  EXPECT_EQ(one["meta"], json::parse(R"({"lang":"en"})"));
  EXPECT_EQ(one["pico_offset"], 1) << "the metadata of the last change";
  EXPECT_EQ(one["pico_op"], "patch");
  const json& two = docs.at("2");
  EXPECT_EQ(two["title"], "new");
  EXPECT_FALSE(two.contains("body")) << "a patch of a missing document inserts what it names";
}

TEST(MeilisearchChanges, CompositeKeysAndKeysOutsideTheIdAlphabetAreEncoded) {
  auto& m = Meili::shared();
  const std::string index = m.index("composite");
  auto host = open_changes(index);
  const auto out =
      host->write(TestBatch("shop.public.customers", 0,
                            {upsert(0, R"({"order_id":1,"line":2})", R"({"order_id":1,"line":2,"qty":5})"),
                             upsert(1, R"({"order_id":1,"line":3})", R"({"order_id":1,"line":3,"qty":1})"),
                             erase(2, R"({"order_id":1,"line":3})"), upsert(3, R"({"sku":"a.b/c"})", R"({"q":1})"),
                             upsert(4, "{\"sku\":\"" + std::string(600, 'x') + "\"}", R"({"q":2})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 4u);
  EXPECT_NE(out.rejected[0].reason.find("more than Meilisearch's 511"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(rows(index), (std::map<std::string, json>{{"_7B_22order_5Fid_22_3A1_2C_22line_22_3A2_7D",
                                                       json::parse(R"({"order_id":1,"line":2,"qty":5})")},
                                                      {"a_2Eb_2Fc", json::parse(R"({"q":1})")}}));
  // The ids decode back to the key's text.
  EXPECT_EQ(kit::from_url_safe("_7B_22order_5Fid_22_3A1_2C_22line_22_3A2_7D"),
            std::optional<std::string>(R"({"order_id":1,"line":2})"));
}

TEST(MeilisearchChanges, AReplayFromTheCommittedOffsetEndsEqualToTheSource) {
  const std::string index = Meili::shared().index("replay");
  auto host = open_changes(index);
  const TestBatch a("shop.public.customers", 0,
                    {upsert(0, R"({"id":1})", R"({"id":1,"v":1})"), upsert(1, R"({"id":2})", R"({"id":2,"v":1})"),
                     truncate(2), upsert(3, R"({"id":3})", R"({"id":3,"v":1})"), erase(4, R"({"id":3})")});
  const TestBatch b("shop.public.customers", 0,
                    {upsert(5, R"({"id":3})", R"({"id":3,"v":2})"), patch(6, R"({"id":3})", R"({"w":"p"})"),
                     upsert(7, R"({"id":4})", R"({"id":4,"v":1})"), erase(8, R"({"id":1})")});
  ASSERT_EQ(host->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  const auto source = rows(index);
  EXPECT_EQ(source, (std::map<std::string, json>{{"3", json::parse(R"({"id":3,"v":2,"w":"p"})")},
                                                 {"4", json::parse(R"({"id":4,"v":1})")}}));
  // The runtime restarted (a SIGKILL) and re-reads from the offset it committed: both again.
  host.reset();
  host = open_changes(index);
  ASSERT_EQ(host->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(index), source);
  // Or only the second (committed after the first).
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(index), source);
}

TEST(MeilisearchChangesConfig, OptionsThatNameOrMergeDocumentsOtherwiseAreRefused) {
  auto host = load();
  host->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"},
                          {"topics": ["shop.public.customers"], "pattern": null, "changes": "keyed"}])");
  const std::string url = R"("url": "http://h:7700")";
  auto check = [&](const std::string& extra) { return host->check("{" + url + ", " + extra + "}"); };
  EXPECT_TRUE(has_problem(check(R"("id": "field", "primary_key": "sku")"),
                          "id: change events (changes = ... in [[topics]]) name each document by its row's key"));
  EXPECT_TRUE(has_problem(check(R"("method": "update")"), "method: change events"));
  EXPECT_TRUE(has_problem(check(R"("document": "envelope")"), "document: change events"));
  EXPECT_TRUE(host->check("{" + url + "}").empty());
  // The host fills defaults in: id = "record", method = "replace", tombstones = "skip" are the
  // defaults' values; id = "key" and tombstones = "delete" say nothing else under changes.
  EXPECT_TRUE(check(R"("id": "record", "method": "replace", "tombstones": "skip", "document": "flat")").empty());
  EXPECT_TRUE(check(R"("id": "key", "tombstones": "delete")").empty());
  EXPECT_TRUE(check(R"("tombstones": "delete")").empty()) << "tombstones are not read under changes";

  // Without changes the same options are the sink's usual ones.
  auto plain = load();
  plain->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(plain->check("{" + url + R"(, "method": "update", "document": "envelope"})").empty());
}

}  // namespace
}  // namespace picomq::test
