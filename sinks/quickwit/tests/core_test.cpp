// The Quickwit sink's pure pieces, without a server: index ids, request paths, the index config
// bodies, the document lines, and the reading of Quickwit's answers (shapes from its REST API
// reference: the ingest API's detailed response, the Elasticsearch-compatible _bulk).
#include <gtest/gtest.h>

#include <set>

#include "picomq/kit/testing/fake_host.hpp"
#include "quickwit/answers.h"
#include "quickwit/config.h"
#include "quickwit/documents.h"

namespace picomq::quickwit {
namespace {

using kit::testing::TestBatch;

std::string rendered(const Settings& s, const TestBatch& b) {
  kit::RecordJsonOptions o;
  o.layout = s.document;
  kit::RecordJsonWriter writer(o);
  const kit::BatchJsonWriter json = writer.begin(b.raw());
  std::string out;
  for (size_t i = 0; i < b.raw().record_count; ++i)
    render_document(out, s, json, b.raw(), *pmq_batch_record(&b.raw(), i));
  return out;
}

Settings payload_documents() {
  Settings s;
  s.document = kit::JsonLayout::PayloadOnly;
  s.id_field = "pico_id";
  return s;
}

TEST(QuickwitIndexId, FollowsQuickwitsRules) {
  EXPECT_EQ(index_id("shop.orders"), "shop.orders");
  EXPECT_EQ(index_id("orders/eu"), "orders_eu");
  EXPECT_EQ(index_id("9lives"), "i9lives") << "starts with a letter";
  EXPECT_EQ(index_id("a"), "a__") << "at least 3 characters";
  EXPECT_LE(index_id(std::string(400, 'x')).size(), 255u);
}

TEST(QuickwitRequests, PathsAndQueriesFollowEndpointAndCommit) {
  Settings s;
  EXPECT_EQ(write_path(s) + "idx" + write_query(s), "/api/v1/idx/ingest?detailed_response=true&commit=auto");
  s.commit = Commit::WaitFor;
  EXPECT_EQ(write_query(s), "/ingest?detailed_response=true&commit=wait_for");
  s.endpoint = Endpoint::ElasticBulk;
  s.commit = Commit::Force;
  EXPECT_EQ(write_path(s) + "idx" + write_query(s), "/api/v1/_elastic/idx/_bulk?refresh=true");
}

TEST(QuickwitIndexConfig, ATableBecomesTheMembersAfterTheIndexIdWithAVersion) {
  Settings s;
  s.index_config.text = R"({"index_id":"ignored","doc_mapping":{"mode":"dynamic"}})";
  const IndexConfig c = index_config(s);
  EXPECT_TRUE(c.creates_indexes());
  EXPECT_FALSE(c.yaml);
  EXPECT_EQ(c.json_members, R"(,"doc_mapping":{"mode":"dynamic"},"version":"0.8")");
  s.index_config.text = R"({"version":"0.9"})";
  EXPECT_EQ(index_config(s).json_members, R"(,"version":"0.9")");
  s.index_config.text = "null";
  EXPECT_FALSE(index_config(s).creates_indexes());
  s.index_config_file = "/nonexistent/index.yaml";
  EXPECT_THROW(index_config(s), sdk::FatalError);
}

TEST(QuickwitDocuments, TheRecordIdGoesFirstAndTheBulkEndpointGetsItsActionLine) {
  const auto b = TestBatch::json("shop.orders", 1, 7, {R"({"a":1})", "{}"});
  EXPECT_EQ(rendered(payload_documents(), b),
            "{\"pico_id\":\"shop.orders:1:7\",\"a\":1}\n{\"pico_id\":\"shop.orders:1:8\"}\n");
  Settings s = payload_documents();
  s.id_field.clear();
  s.endpoint = Endpoint::ElasticBulk;
  EXPECT_EQ(rendered(s, b), "{\"create\":{}}\n{\"a\":1}\n{\"create\":{}}\n{}\n");
}

TEST(QuickwitAnswers, ParseFailuresAreMatchedToTheLinesSentEachOnce) {
  const std::string sent = "{\"n\":1}\n{\"n\":\"x\"}\n{\"n\":\"x\"}\n{\"n\":4}\n";
  const auto a = read_ingest_answer(
      R"({"num_docs_for_processing":4,"num_ingested_docs":2,"num_rejected_docs":2,"parse_failures":[)"
      R"({"document":"{\"n\":\"x\"}","message":"failed to parse field `n`","reason":"doc_parsing"},)"
      R"({"document":"{\"n\":\"x\"}","message":"failed to parse field `n`","reason":"doc_parsing"}]})",
      sent, 4);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->ingested, 2u);
  EXPECT_EQ(a->rejected, 2u);
  ASSERT_EQ(a->failures.size(), 2u);
  std::set<size_t> lines{a->failures[0].first, a->failures[1].first};
  EXPECT_EQ(lines, (std::set<size_t>{1, 2}));
  EXPECT_EQ(a->failures[0].second, "doc_parsing: failed to parse field `n`");

  const auto unnamed = read_ingest_answer(R"({"num_ingested_docs":3,"num_rejected_docs":1})", sent, 4);
  ASSERT_TRUE(unnamed);
  EXPECT_TRUE(unnamed->failures.empty()) << "the sink fails the write: the refused one cannot be told apart";
  const auto counts_absent = read_ingest_answer("{}", sent, 4);
  ASSERT_TRUE(counts_absent);
  EXPECT_EQ(counts_absent->ingested, 4u);
  EXPECT_FALSE(read_ingest_answer("<html>502</html>", sent, 4));
}

TEST(QuickwitAnswers, TheBulkAnswerCountsOrNamesItsFirstFailedItem) {
  const auto taken = read_bulk_answer(R"({"num_docs_for_processing":3})", 3);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->taken, 3u);
  EXPECT_FALSE(taken->failed_item);
  const auto failed = read_bulk_answer(
      R"({"errors":true,"items":[{"create":{"status":201}},)"
      R"({"create":{"status":404,"error":{"type":"index_not_found_exception","reason":"no such index [x]"}}}]})",
      2);
  ASSERT_TRUE(failed && failed->failed_item);
  EXPECT_EQ(failed->failed_item->first, 404u);
  EXPECT_EQ(failed->failed_item->second, "no such index [x]");
  EXPECT_FALSE(read_bulk_answer("[]", 1));
}

}  // namespace
}  // namespace picomq::quickwit
