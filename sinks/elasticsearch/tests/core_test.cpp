// The Elasticsearch sink's pure pieces: the _bulk lines of each id mode and action, what is refused
// before sending and why, and the per-item outcomes of real responses (captured from OpenSearch
// 2.19.6 and Elasticsearch 7.10.2; the 8.x type names from the 8.x documentation).
#include <gtest/gtest.h>

#include "elasticsearch/bulk.h"
#include "elasticsearch/items.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace picomq::elasticsearch {
namespace {

using kit::testing::TestBatch;

std::string render(const Settings& s, const TestBatch& b, std::string_view index = "idx",
                   std::vector<std::string> routing = {}) {
  BulkEncoder encoder(s, std::move(routing));
  const BatchPlan plan = encoder.plan(b.raw());
  auto r = encoder.begin(b.raw(), index);
  std::string out;
  for (const Item& item : plan.items) r.append(out, item);
  return out;
}

Settings settings() {
  Settings s;
  s.document = picomq::kit::JsonLayout::PayloadOnly;
  return s;
}

TEST(ElasticsearchBulk, RecordIdsAreTopicPartitionOffsetEscapedForJson) {
  const TestBatch b("shop.\"orders\"", 3,
                    {{.offset = 41, .payload = R"({"a":1})"}, {.offset = 42, .payload = R"({"a":2})"}});
  EXPECT_EQ(render(settings(), b),
            "{\"index\":{\"_index\":\"idx\",\"_id\":\"shop.\\\"orders\\\":3:41\"}}\n{\"a\":1}\n"
            "{\"index\":{\"_index\":\"idx\",\"_id\":\"shop.\\\"orders\\\":3:42\"}}\n{\"a\":2}\n");
}

TEST(ElasticsearchBulk, CreateAndNoIds) {
  Settings s = settings();
  s.action = Action::Create;
  s.id = IdMode::None;
  const TestBatch b = TestBatch::json("t", 0, 7, {R"({"a":1})"});
  EXPECT_EQ(render(s, b), "{\"create\":{\"_index\":\"idx\"}}\n{\"a\":1}\n");
}

TEST(ElasticsearchBulk, KeyIdsWithExternalVersionsAndTombstoneDeletes) {
  Settings s = settings();
  s.id = IdMode::Key;
  s.version_type = VersionType::External;
  s.tombstones = Tombstones::Delete;
  const TestBatch b(
      "t", 0,
      {{.offset = 5, .payload = R"({"a":1})", .key = "k\"1"}, {.offset = 6, .payload = std::nullopt, .key = "k2"}});
  EXPECT_EQ(
      render(s, b),
      "{\"index\":{\"_index\":\"idx\",\"_id\":\"k\\\"1\",\"version\":5,\"version_type\":\"external\"}}\n{\"a\":1}\n"
      "{\"delete\":{\"_index\":\"idx\",\"_id\":\"k2\",\"version\":6,\"version_type\":\"external\"}}\n");
}

TEST(ElasticsearchBulk, RefusesWhatCannotBeADocumentAndSaysWhy) {
  Settings s = settings();
  s.id = IdMode::Key;
  const TestBatch b("t", 0,
                    {{.offset = 0, .payload = R"({"a":1})"},                                  // no key
                     {.offset = 1, .payload = R"({"a":1})", .key = std::string("\xff\xfe")},  // not UTF-8
                     {.offset = 2, .payload = R"({"a":1})", .key = std::string(513, 'k')},
                     {.offset = 3, .payload = R"([1,2])", .key = "arr"},     // not an object
                     {.offset = 4, .payload = std::nullopt, .key = "gone"},  // tombstone: skipped
                     {.offset = 5, .payload = R"({"ok":true})", .key = "fine"}});
  BulkEncoder encoder(s, {});
  const BatchPlan plan = encoder.plan(b.raw());
  ASSERT_EQ(plan.refused.size(), 4u);
  EXPECT_EQ(plan.refused[0], (std::pair<size_t, std::string>{0, "id = \"key\": the record has no key"}));
  EXPECT_EQ(plan.refused[1].second, "id = \"key\": the record key is not valid UTF-8");
  EXPECT_EQ(plan.refused[2].second,
            "id = \"key\": the record key is 513 bytes, longer than a document _id may be (512)");
  EXPECT_EQ(plan.refused[3].second, "document = \"payload\": the payload is not a JSON object");
  EXPECT_EQ(plan.skipped, 1u);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].record, 5u);
}

TEST(ElasticsearchBulk, FlatDocumentsCarryMetadataAndDataStreamsATimestamp) {
  Settings s;
  s.action = Action::Create;
  s.data_stream = true;
  const TestBatch b("logs.app", 0, {{.offset = 9, .payload = R"({"msg":"hi"})", .timestamp_ms = 1700000000123}});
  EXPECT_EQ(render(s, b, "logs.app"),
            "{\"create\":{\"_index\":\"logs.app\",\"_id\":\"logs.app:0:9\"}}\n"
            "{\"@timestamp\":1700000000123,\"pico_topic\":\"logs.app\",\"pico_partition\":0,\"pico_offset\":9,"
            "\"pico_timestamp\":1700000000123,\"msg\":\"hi\"}\n");
}

TEST(ElasticsearchBulk, RoutingFromAPayloadFieldStringOrNumber) {
  const TestBatch b = TestBatch::json("t", 0, 0, {R"({"c":{"id":"eu-1"}})", R"({"c":{"id":42}})", R"({"c":{}})"});
  EXPECT_EQ(render(settings(), b, "i", {"c", "id"}),
            "{\"index\":{\"_index\":\"i\",\"_id\":\"t:0:0\",\"routing\":\"eu-1\"}}\n{\"c\":{\"id\":\"eu-1\"}}\n"
            "{\"index\":{\"_index\":\"i\",\"_id\":\"t:0:1\",\"routing\":\"42\"}}\n{\"c\":{\"id\":42}}\n"
            "{\"index\":{\"_index\":\"i\",\"_id\":\"t:0:2\"}}\n{\"c\":{}}\n");
}

// Captured from Elasticsearch 7.10.2 (OpenSearch 2.19.6 is the same without _type).
constexpr const char* kMixedResponse = R"json({"took":1477,"errors":true,"items":[
{"index":{"_index":"t1","_type":"_doc","_id":"a","_version":1,"result":"created","_shards":{"total":2,"successful":1,"failed":0},"_seq_no":0,"_primary_term":1,"status":201}},
{"create":{"_index":"t1","_type":"_doc","_id":"a","status":409,"error":{"type":"version_conflict_engine_exception","reason":"[a]: version conflict, document already exists (current version [1])","index_uuid":"Pkn","shard":"0","index":"t1"}}},
{"index":{"_index":"t1","_type":"_doc","_id":"b","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [x] of type [long] in document with id 'b'. Preview of field's value: 'notanumber'","caused_by":{"type":"illegal_argument_exception","reason":"For input string: \"notanumber\""}}}},
{"index":{"_index":"q1","_id":"V","status":429,"error":{"type":"rejected_execution_exception","reason":"rejected execution of TransportShardBulkAction on OpenSearchThreadPoolExecutor[name = node/write, queue capacity = 2]"}}},
{"delete":{"_index":"t1","_type":"_doc","_id":"z","_version":1,"result":"not_found","status":404}}]})json";

TEST(ElasticsearchItems, EveryItemOfAMixedResponseGetsItsOutcome) {
  auto parsed = parse_bulk_response(kMixedResponse, 5);
  ASSERT_TRUE(parsed) << parsed.error();
  const auto& items = parsed.value().items;
  EXPECT_TRUE(parsed.value().errors);
  std::string reason;
  EXPECT_EQ(classify_item(items[0], Op::Index, false, &reason), ItemOutcome::Written);
  EXPECT_EQ(classify_item(items[1], Op::Create, false, &reason), ItemOutcome::AlreadyThere);
  EXPECT_EQ(reason,
            "version_conflict_engine_exception: [a]: version conflict, document already exists (current version [1])");
  EXPECT_EQ(classify_item(items[1], Op::Index, true, &reason), ItemOutcome::AlreadyThere) << "external versioning";
  EXPECT_EQ(classify_item(items[1], Op::Index, false, &reason), ItemOutcome::Rejected);
  EXPECT_EQ(classify_item(items[2], Op::Index, false, &reason), ItemOutcome::Rejected);
  EXPECT_EQ(reason,
            "mapper_parsing_exception: failed to parse field [x] of type [long] in document with id 'b'. Preview of "
            "field's value: 'notanumber' (caused by illegal_argument_exception: For input string: \"notanumber\")");
  EXPECT_EQ(classify_item(items[3], Op::Index, false, &reason), ItemOutcome::Retry);
  EXPECT_EQ(classify_item(items[4], Op::Delete, false, &reason), ItemOutcome::Written) << "already gone";
}

TEST(ElasticsearchItems, TypesByNameThenUnknownTypesByStatus) {
  auto outcome = [](int status, std::string type) {
    return classify_item({.status = status, .type = std::move(type), .reason = "r"}, Op::Index, false, nullptr);
  };
  EXPECT_EQ(outcome(400, "document_parsing_exception"), ItemOutcome::Rejected);  // Elasticsearch 8.8+
  EXPECT_EQ(outcome(400, "strict_dynamic_mapping_exception"), ItemOutcome::Rejected);
  EXPECT_EQ(outcome(400, "action_request_validation_exception"), ItemOutcome::Rejected);
  EXPECT_EQ(outcome(429, "es_rejected_execution_exception"), ItemOutcome::Retry);
  EXPECT_EQ(outcome(429, "circuit_breaking_exception"), ItemOutcome::Retry);
  EXPECT_EQ(outcome(503, "unavailable_shards_exception"), ItemOutcome::Retry);
  EXPECT_EQ(outcome(404, "index_not_found_exception"), ItemOutcome::Fatal);
  EXPECT_EQ(outcome(403, "cluster_block_exception"), ItemOutcome::Fatal);
  EXPECT_EQ(outcome(429, "cluster_block_exception"), ItemOutcome::Retry) << "flood stage: lifts by itself";
  EXPECT_EQ(outcome(500, "something_new_exception"), ItemOutcome::Retry);
  EXPECT_EQ(outcome(400, "something_new_exception"), ItemOutcome::Rejected);
  EXPECT_EQ(outcome(401, "something_new_exception"), ItemOutcome::Fatal);
  // A missing ingest pipeline comes back on every item as an illegal_argument_exception (OpenSearch
  // 2.19.6's text): configuration, not a bad document. A processor's own refusal stays Rejected.
  const ItemResult missing{
      .status = 400, .type = "illegal_argument_exception", .reason = "pipeline with id [enrich] does not exist"};
  EXPECT_EQ(classify_item(missing, Op::Index, false, nullptr), ItemOutcome::Fatal);
  const ItemResult convert{
      .status = 400, .type = "illegal_argument_exception", .reason = "unable to convert [many] to integer"};
  EXPECT_EQ(classify_item(convert, Op::Index, false, nullptr), ItemOutcome::Rejected);
}

TEST(ElasticsearchItems, AResponseThatDoesNotMatchTheRequestIsAnError) {
  EXPECT_EQ(parse_bulk_response(R"({"errors":false,"items":[{"index":{"status":201}}]})", 2).error(),
            "the _bulk response has 1 items for 2 sent");
  EXPECT_FALSE(parse_bulk_response("<html>proxy error</html>", 1));
  EXPECT_FALSE(parse_bulk_response(R"({"took":3})", 1));
  // The sink's filter_path subset.
  auto small = parse_bulk_response(R"({"errors":false,"items":[{"index":{"status":201,"result":"created"}}]})", 1);
  ASSERT_TRUE(small);
  EXPECT_EQ(small.value().items[0].result, "created");
}

// ---- change events (docs/changes.md, docs/sinks/elasticsearch.md "Change events") -----------

TEST(ElasticsearchChanges, TheDocumentIdIsTheKeyFieldOrTheCompactKeyObject) {
  EXPECT_EQ(change_document_id(R"({"id":7})").value(), "7");
  EXPECT_EQ(change_document_id(R"({"sku":"a-1"})").value(), "a-1");
  EXPECT_EQ(change_document_id(R"({"key":"caf\u00e9"})").value(), "caf\xc3\xa9");
  EXPECT_EQ(change_document_id(R"({"id":-12345678901234})").value(), "-12345678901234");
  EXPECT_EQ(change_document_id(R"({"order_id":1,"line":2})").value(), R"({"order_id":1,"line":2})");
  EXPECT_EQ(change_document_id(R"( { "region" : "eu", "id" : 7 } )").value(), R"({"region":"eu","id":7})")
      << "the same key, whitespace or not, names the same document";
  EXPECT_NE(change_document_id(R"({"a":"1|2","b":"3"})").value(), change_document_id(R"({"a":"1","b":"2|3"})").value());
  EXPECT_EQ(change_document_id("").error(), "the change event has no key");
  EXPECT_FALSE(change_document_id("7"));
  EXPECT_FALSE(change_document_id("{}"));
  EXPECT_EQ(change_document_id(R"({"id":""})").error(), "the change event's key gives an empty document _id");
  EXPECT_NE(change_document_id(R"({"id":")" + std::string(513, 'x') + R"("})").error().find("longer than"),
            std::string::npos);
}

TEST(ElasticsearchChanges, EachOperationIsItsBulkActionByKeyAndATruncateIsNoBulkItem) {
  Settings s;  // flat documents, id = record: a change is named by its key all the same
  const TestBatch b("shop.customers", 0,
                    {{.offset = 5, .payload = R"({"id":7,"name":"a"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":7})"},
                     {.offset = 6, .payload = R"({"name":"b"})", .op = PMQ_OP_PATCH, .key_json = R"({"id":7})"},
                     {.offset = 7, .op = PMQ_OP_TRUNCATE},
                     {.offset = 8, .op = PMQ_OP_DELETE, .key_json = R"({"id":7})"},
                     {.offset = 9, .payload = R"({"id":8})", .op = PMQ_OP_UPSERT, .key_json = R"({"nope":)"}});
  BulkEncoder encoder(s, {});
  const BatchPlan plan = encoder.plan(b.raw());
  EXPECT_TRUE(plan.changes);
  ASSERT_EQ(plan.items.size(), 4u);
  EXPECT_EQ(plan.items[0].op, Op::Index);
  EXPECT_EQ(plan.items[1].op, Op::Update);
  EXPECT_EQ(plan.items[2].op, Op::Truncate);
  EXPECT_EQ(plan.items[3].op, Op::Delete);
  ASSERT_EQ(plan.refused.size(), 1u);
  EXPECT_EQ(plan.refused[0].first, 4u);
  EXPECT_NE(plan.refused[0].second.find("not a JSON object"), std::string::npos) << plan.refused[0].second;
  auto r = encoder.begin(b.raw(), "customers");
  std::string out;
  for (const Item& item : plan.items) r.append(out, item);
  EXPECT_EQ(
      out,
      "{\"index\":{\"_index\":\"customers\",\"_id\":\"7\"}}\n"
      "{\"pico_topic\":\"shop.customers\",\"pico_partition\":0,\"pico_offset\":5,\"pico_timestamp\":1700000000000,"
      "\"pico_op\":\"upsert\",\"pico_row_key\":{\"id\":7},\"id\":7,\"name\":\"a\"}\n"
      "{\"update\":{\"_index\":\"customers\",\"_id\":\"7\"}}\n"
      "{\"doc\":{\"pico_topic\":\"shop.customers\",\"pico_partition\":0,\"pico_offset\":6,"
      "\"pico_timestamp\":1700000000000,\"pico_op\":\"patch\",\"pico_row_key\":{\"id\":7},\"name\":\"b\"},"
      "\"doc_as_upsert\":true}\n"
      "{\"delete\":{\"_index\":\"customers\",\"_id\":\"7\"}}\n");
}

TEST(ElasticsearchChanges, ADeleteOfAMissingDocumentIsWritten) {
  ItemResult missing{.status = 404, .result = "not_found"};
  EXPECT_EQ(classify_item(missing, Op::Delete, false, nullptr), ItemOutcome::Written);
  EXPECT_EQ(classify_item({.status = 201, .result = "created"}, Op::Update, false, nullptr), ItemOutcome::Written);
}

}  // namespace
}  // namespace picomq::elasticsearch
