// The built Quickwit sink in the kit's fake host (as the runtime loads it), against the contract
// server of this test process (quickwit_contract.py: Quickwit's documented REST API, written from
// its reference, not from the sink). Every case reads the index back through the search API:
// documents with their record ids, commit modes, parse failures rejected per record, splits,
// 429 / 503 retried, index creation from index_config, and what a replay does (duplicates).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {
namespace {

using kit::testing::FakeHost;
using kit::testing::HttpReceiver;
using kit::testing::TestBatch;
using nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<FakeHost> load() { return FakeHost::load(QUICKWIT_SINK_PLUGIN); }

class Quickwit {
 public:
  static Quickwit& shared() {
    static Quickwit q;
    return q;
  }
  std::string url() const { return server_.base_url(); }
  std::pair<long, json> call(const char* method, const std::string& path, const std::string& body = {}) const {
    auto [status, text] = server_.call(method, path, body);
    return {status, text.empty() ? json() : json::parse(text)};
  }
  // The committed (searchable) documents of an index, in ingest order.
  std::vector<json> search(const std::string& index, const std::string& query = "*") const {
    auto [status, body] = call("GET", "/api/v1/" + index + "/search?query=" + query + "&max_hits=100000");
    if (status != 200) throw std::runtime_error("search " + index + ": " + body.dump());
    return body["hits"].get<std::vector<json>>();
  }
  void create(const std::string& index, const std::string& doc_mapping, int commit_timeout_secs = 1) const {
    const auto [status, body] =
        call("POST", "/api/v1/indexes",
             R"({"version": "0.8", "index_id": ")" + index + R"(", "doc_mapping": )" + doc_mapping +
                 R"(, "indexing_settings": {"commit_timeout_secs": )" + std::to_string(commit_timeout_secs) + "}}");
    if (status != 200) throw std::runtime_error("create " + index + ": " + body.dump());
  }
  void config(const json& c) const { server_.call("POST", "/_control/config", c.dump()); }
  json stats() const { return call("GET", "/_control/stats").second; }
  std::string index(const std::string& stem) const { return stem + "-" + std::to_string(++n_); }

 private:
  HttpReceiver server_{QUICKWIT_CONTRACT};
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

TEST(QuickwitConfig, ProblemsAreNamedByKey) {
  auto host = load();
  EXPECT_TRUE(has_problem(host->check(R"({})"), "url: missing required option"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "commit": "later"})"), "commit:"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "max_request_bytes": "20MiB"})"),
                          "max_request_bytes: must be between"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "index_config": {"version": "0.8"}})"),
                          "index_config: must hold doc_mapping"));
  EXPECT_TRUE(
      has_problem(host->check(R"({"url": "http://h:7280", "compression": "gzip"})"), "compression: must be \"none\""));
  EXPECT_TRUE(
      host->check(
              R"({"url": "http://h:7280", "commit": "wait_for", "index_config": {"doc_mapping": {"mode": "dynamic"}}})")
          .empty());
}

TEST(QuickwitSink, WaitForAnswersWhenTheDocumentsAreSearchableWithTheirRecordIds) {
  auto& q = Quickwit::shared();
  const auto index = q.index("docs");
  q.create(index, R"({"mode": "dynamic"})");
  auto host = load();
  host->open(config(q.url(), index, R"("commit": "wait_for")"));
  EXPECT_TRUE(host->logged("connected to Quickwit"));
  TestBatch batch("shop.orders", 2,
                  {{.offset = 40, .payload = R"({"id": 1, "name": "a"})", .key = "k1", .headers = {{"h", "v"}}},
                   {.offset = 41, .payload = R"({"id": 2, "name": "b"})"},
                   {.offset = 42, .payload = std::nullopt}});
  ASSERT_EQ(host->write(batch).status, PMQ_WRITE_OK);
  const auto docs = q.search(index);  // no waiting: wait_for answered after the commit
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], json::parse(R"({"pico_id":"shop.orders:2:40","pico_topic":"shop.orders","pico_partition":2,
      "pico_offset":40,"pico_timestamp":1700000000000,"pico_key":"azE=","pico_headers":{"h":"v"},"id":1,"name":"a"})"));
  EXPECT_EQ(host->counter("skipped_tombstones"), 1u);
  EXPECT_EQ(host->counter("written_records"), 2u);
  // A replay writes the records again: Quickwit has no document ids. Readers drop repeats by pico_id.
  ASSERT_EQ(host->write(batch).status, PMQ_WRITE_OK);
  const auto again = q.search(index);
  EXPECT_EQ(again.size(), 4u);
  EXPECT_EQ(q.search(index, "pico_id:shop.orders:2:41").size(), 2u);
}

TEST(QuickwitSink, AutoAnswersOnceInTheWriteAheadLogAndForceCommitsAtOnce) {
  auto& q = Quickwit::shared();
  const auto index = q.index("modes");
  q.create(index, R"({"mode": "dynamic"})", 3);
  auto host = load();
  host->open(config(q.url(), index));  // commit = auto
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(host->write(TestBatch::json("t", 0, 0, {R"({"a":1})"})).status, PMQ_WRITE_OK);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "auto does not wait for the commit";
  EXPECT_EQ(q.search(index).size(), 0u) << "accepted, not yet searchable";
  auto forced = load();
  forced->open(config(q.url(), index, R"("commit": "force")"));
  ASSERT_EQ(forced->write(TestBatch::json("t", 0, 1, {R"({"a":2})"})).status, PMQ_WRITE_OK);
  EXPECT_EQ(q.search(index).size(), 2u) << "force commits both at once";
}

TEST(QuickwitSink, DocumentsTheMappingRefusesAreRejectedAloneAndTheRestIsWritten) {
  auto& q = Quickwit::shared();
  const auto index = q.index("strict");
  q.create(
      index,
      R"({"mode": "lenient", "field_mappings": [{"name": "n", "type": "i64"}, {"name": "when", "type": "datetime", "fast": true}]})");
  auto host = load();
  host->open(config(q.url(), index, R"("commit": "force", "document": "payload", "id_field": "")"));
  const auto out = host->write(TestBatch::json(
      "t", 0, 0,
      {R"({"n": 1})", R"({"n": "two"})", R"({"n": 3})", R"({"n": 1})", R"({"when": "yesterday"})", R"({"n": 6})"}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 2u);
  EXPECT_EQ(out.rejected[0].record_index, 1u);
  EXPECT_NE(out.rejected[0].reason.find("index " + index + ": invalid_schema: "), std::string::npos)
      << out.rejected[0].reason;
  EXPECT_EQ(out.rejected[1].record_index, 4u);
  const auto docs = q.search(index);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[3]["n"], 6);
  EXPECT_EQ(host->counter("rejected_records"), 2u);
}

TEST(QuickwitSink, RateLimitedAndUnavailableAnswersAreResentAndADocumentOverTheLimitIsRejected) {
  auto& q = Quickwit::shared();
  const auto index = q.index("flaky");
  q.create(index, R"({"mode": "dynamic"})");
  auto host = load();
  host->open(config(q.url(), index, R"("commit": "force", "max_request_bytes": "1KiB")"));
  q.config({{"fail_requests",
             {{{"path_prefix", "/api/v1/" + index + "/ingest"}, {"status", 429}, {"count", 2}, {"retry_after", 1}},
              {{"path_prefix", "/api/v1/" + index + "/ingest"}, {"status", 503}, {"count", 1}}}}});
  std::vector<std::string> payloads;
  payloads.reserve(30);
  for (int i = 0; i < 30; ++i)
    payloads.push_back("{\"n\": " + std::to_string(i) + ", \"pad\": \"" + std::string(100, 'x') + "\"}");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(host->write(TestBatch::json("t", 0, 0, payloads)).status, PMQ_WRITE_OK);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s) << "Retry-After honoured";
  auto docs = q.search(index);
  ASSERT_EQ(docs.size(), 30u) << "every document once: a 429 / 503 wrote nothing";
  EXPECT_GE(host->counter("resends"), 3u);
  EXPECT_GE(q.stats()["requests"]["POST /api/v1/{index}/ingest"].get<int>(), 7)
      << "30 documents of ~190 bytes in 1 KiB bodies";
  // Without time to resend, a 429 fails the write as a retry.
  auto quick = load();
  quick->open(config(q.url(), index, R"("retry_timeout": "0s")"));
  q.config({{"wal_capacity_docs", 0}});
  const auto out = quick->write(TestBatch::json("t", 0, 100, {R"({"n": 100})"}));
  q.config({{"wal_capacity_docs", nullptr}});
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("429"), std::string::npos) << out.error;
  // A document larger than Quickwit's 10 MiB ingest limit: 413, refused alone.
  const auto big = host->write(TestBatch::json(
      "t", 0, 200, {R"({"n": 200})", "{\"big\": \"" + std::string(11u << 20, 'x') + "\"}", R"({"n": 202})"}));
  ASSERT_EQ(big.status, PMQ_WRITE_REJECTED) << big.error;
  ASSERT_EQ(big.rejected.size(), 1u);
  EXPECT_EQ(big.rejected[0].record_index, 1u);
  EXPECT_NE(big.rejected[0].reason.find("larger than Quickwit's ingest limit"), std::string::npos)
      << big.rejected[0].reason;
  EXPECT_EQ(q.search(index).size(), 32u);
}

TEST(QuickwitSink, IndexesAreCreatedFromIndexConfigOrAMissingOneStopsTheSink) {
  auto& q = Quickwit::shared();
  auto host = load();
  host->open(config(q.url(), "qw-{topic}", R"("commit": "force",
      "index_config": {"doc_mapping": {"mode": "dynamic", "field_mappings": [{"name": "pico_offset", "type": "i64", "fast": true}]},
                       "indexing_settings": {"commit_timeout_secs": 5}})"));
  ASSERT_EQ(host->write(TestBatch::json("shop.orders/eu", 0, 0, {R"({"a":1})"})).status, PMQ_WRITE_OK);
  const auto [status, meta] = q.call("GET", "/api/v1/indexes/qw-shop.orders_eu");
  ASSERT_EQ(status, 200) << meta.dump();
  EXPECT_EQ(meta["index_config"]["indexing_settings"]["commit_timeout_secs"], 5);
  EXPECT_EQ(meta["index_config"]["version"], "0.8");
  EXPECT_EQ(q.search("qw-shop.orders_eu").size(), 1u);
  EXPECT_EQ(host->counter("created_indexes"), 1u);

  auto bad = load();
  bad->open(config(q.url(), "{topic}",
                   R"("index_config": {"doc_mapping": {"field_mappings": [{"name": "n", "type": "no_such_type"}]}})"));
  auto out = bad->write(TestBatch::json("badmapping", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("creating index badmapping from index_config"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("no_such_type"), std::string::npos) << out.error;

  auto none = load();
  none->open(config(q.url(), "{topic}"));
  out = none->write(TestBatch::json("x", 0, 0, {R"({"a":1})"}));  // "x" is index id "x__"
  EXPECT_EQ(out.status, PMQ_WRITE_FATAL);
  EXPECT_NE(out.error.find("index x__ does not exist"), std::string::npos) << out.error;
}

TEST(QuickwitConfig, YamlIndexConfigsAreCheckedWithWhereTheProblemIs) {
  auto host = load();
  EXPECT_TRUE(
      has_problem(host->check(R"({"url": "http://h:7280", "index_config_yaml": "doc_mapping:\n  mode: [dynamic\n"})"),
                  "index_config_yaml: index config not valid YAML:"));
  EXPECT_TRUE(has_problem(
      host->check(R"({"url": "http://h:7280", "index_config_yaml": "doc_mapping:\n  mode: [dynamic\n"})"), "line 3"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "index_config_yaml": "version: 0.8\n"})"),
                          "must hold doc_mapping"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "index_config_yaml": "- doc_mapping\n"})"),
                          "must be a mapping"));
  EXPECT_TRUE(has_problem(
      host->check(R"({"url": "http://h:7280", "index_config_yaml": "doc_mapping: {}\n---\ndoc_mapping: {}\n"})"),
      "more than one YAML document"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "index_config_file": "/nonexistent/index.yaml"})"),
                          "index_config_file: cannot read /nonexistent/index.yaml"));
  const std::string file = ::testing::TempDir() + "quickwit-check.yaml";
  std::ofstream(file) << "doc_mapping: {}\n";
  EXPECT_TRUE(has_problem(
      host->check(R"({"url": "http://h:7280", "index_config_yaml": "doc_mapping: {}", "index_config_file": ")" + file +
                  "\"}"),
      "index_config_file: set one of"));
  EXPECT_TRUE(has_problem(host->check(R"({"url": "http://h:7280", "endpoint": "bulk"})"), "endpoint:"));
  EXPECT_TRUE(
      host->check(
              R"({"url": "http://h:7280", "endpoint": "elastic_bulk", "index_config_yaml": "doc_mapping:\n  mode: dynamic\n"})")
          .empty());
}

TEST(QuickwitSink, IndexesAreCreatedFromYamlInlineOrInAFileWithTheSinksIndexId) {
  auto& q = Quickwit::shared();
  // Quickwit's own format, comments and all; the user's index_id is replaced by the topic's.
  const std::string yaml =
      "# the orders index\n"
      "index_id: not-this-one\n"
      "doc_mapping:\n"
      "  mode: lenient\n"
      "  field_mappings:\n"
      "    - name: n\n"
      "      type: i64\n"
      "      fast: true\n"
      "indexing_settings:\n"
      "  commit_timeout_secs: 7\n";
  auto host = load();
  host->open(config(q.url(), "yaml-{topic}", R"("commit": "force", "index_config_yaml": )" + json(yaml).dump()));
  const auto out = host->write(TestBatch::json("inline", 0, 0, {R"({"n": 1})", R"({"n": "x"})"}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;  // the YAML mapping is what the index got
  auto [status, meta] = q.call("GET", "/api/v1/indexes/yaml-inline");
  ASSERT_EQ(status, 200) << meta.dump();
  EXPECT_EQ(meta["index_config"]["index_id"], "yaml-inline");
  EXPECT_EQ(meta["index_config"]["version"], "0.8");
  EXPECT_EQ(meta["index_config"]["indexing_settings"]["commit_timeout_secs"], 7) << "a YAML integer stays one";
  EXPECT_EQ(meta["index_config"]["doc_mapping"]["field_mappings"][0]["fast"], true);
  EXPECT_EQ(q.call("GET", "/api/v1/indexes/not-this-one").first, 404);
  EXPECT_EQ(q.search("yaml-inline").size(), 1u);

  const std::string path = ::testing::TempDir() + "quickwit-index-config.yaml";
  {
    std::ofstream file(path);
    file << "version: 0.7\ndoc_mapping:\n  mode: dynamic\n";
  }
  auto from_file = load();
  from_file->open(config(q.url(), "file-{topic}", R"("commit": "force", "index_config_file": ")" + path + "\""));
  ASSERT_EQ(from_file->write(TestBatch::json("cfg", 0, 0, {R"({"a": 1})"})).status, PMQ_WRITE_OK);
  std::tie(status, meta) = q.call("GET", "/api/v1/indexes/file-cfg");
  ASSERT_EQ(status, 200) << meta.dump();
  EXPECT_EQ(meta["index_config"]["version"].dump(), "0.7") << "the file's version is kept, as written (a YAML number)";
  EXPECT_EQ(q.search("file-cfg").size(), 1u);
}

TEST(QuickwitSink, TheElasticBulkEndpointWritesTheSameDocumentsAndResendsRefusedRequests) {
  auto& q = Quickwit::shared();
  const auto index = q.index("bulk");
  q.create(index, R"({"mode": "lenient", "field_mappings": [{"name": "n", "type": "i64"}]})");
  auto host = load();
  host->open(config(q.url(), index,
                    R"("endpoint": "elastic_bulk", "commit": "force", "max_request_records": 2, "max_in_flight": 1)"));
  const auto before = q.stats()["requests"];
  q.config(
      {{"fail_requests", {{{"path_prefix", "/api/v1/_elastic/" + index + "/_bulk"}, {"status", 429}, {"count", 1}}}}});
  const auto out =
      host->write(TestBatch::json("shop", 1, 10, {R"({"n": 1})", R"({"n": 2})", R"({"n": "three"})", R"({"n": 4})"}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error;
  auto docs = q.search(index);
  std::sort(docs.begin(), docs.end(), [](const json& a, const json& b) { return a["pico_offset"] < b["pico_offset"]; });
  // As documented, _bulk reports no per-document errors: Quickwit drops the document its mapping
  // refuses (and logs it); the sink cannot tell, and counts it written.
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]["pico_id"], "shop:1:10");
  EXPECT_EQ(docs[0]["n"], 1);
  EXPECT_EQ(docs[2]["pico_id"], "shop:1:13");
  EXPECT_EQ(host->counter("written_records"), 4u);
  EXPECT_EQ(host->counter("resends"), 1u);
  const auto stats = q.stats()["requests"];
  EXPECT_EQ(
      stats["POST /api/v1/_elastic/{index}/_bulk"].get<int>() - before.value("POST /api/v1/_elastic/{index}/_bulk", 0),
      3)
      << stats.dump() << ": two requests of two documents, one resent";
  EXPECT_EQ(stats.value("POST /api/v1/{index}/ingest", 0), before.value("POST /api/v1/{index}/ingest", 0))
      << stats.dump();

  auto missing = load();
  missing->open(config(q.url(), "absent-index", R"("endpoint": "elastic_bulk")"));
  q.call("POST", "/api/v1/indexes",
         R"({"version": "0.8", "index_id": "absent-index", "doc_mapping": {"mode": "dynamic"}})");
  const auto created = missing->write(TestBatch::json("t", 0, 0, {R"({"a": 1})"}));
  ASSERT_EQ(created.status, PMQ_WRITE_OK) << created.error;
  q.call("DELETE", "/api/v1/indexes/absent-index");
  const auto gone = missing->write(TestBatch::json("t", 0, 1, {R"({"a": 2})"}));
  EXPECT_EQ(gone.status, PMQ_WRITE_FATAL) << gone.error;
  EXPECT_NE(gone.error.find("index absent-index not found"), std::string::npos) << gone.error;
}

TEST(QuickwitSink, AnUnreachableServerIsARetry) {
  auto host = load();
  host->open(R"({"url": "http://127.0.0.1:1", "retry_timeout": "0s"})");
  EXPECT_TRUE(host->logged("not reachable now"));
  const auto out = host->write(TestBatch::json("topic", 0, 0, {R"({"a":1})"}));
  EXPECT_EQ(out.status, PMQ_WRITE_RETRY) << out.error;
  EXPECT_NE(out.error.find("index topic"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace picomq::test
