// Change events (docs/changes.md, docs/sinks/elasticsearch.md "Change events") through the built
// Elasticsearch sink in the kit's fake host, against the real OpenSearch 2.19.6 and Elasticsearch
// 7.10.2 nodes of this test process: upserts, deletes (a tombstone's too), patches, truncates
// between rows, several changes of one key in one batch and across its requests, replays, and
// the options refused under `changes`. Every case reads the index back after a refresh. Against
// the kit's HTTP stub: what goes again after an item refused as transient. Through a real Kafka
// broker and the runtime: Debezium envelopes with a SIGKILL and a restart end equal to the source.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <random>

#include "harness.h"
#include "picomq/kit/testing/fake_host.hpp"
#include "picomq/kit/testing/http_stub.hpp"
#include "search_server.h"

namespace picomq::test {
namespace {

using kit::testing::FakeHost;
using kit::testing::TestBatch;
using kit::testing::TestRecord;
using Flavor = SearchServer::Flavor;

constexpr const char* kDebezium = R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])";

std::unique_ptr<FakeHost> load() { return FakeHost::load(ELASTICSEARCH_SINK_PLUGIN); }

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

class ElasticsearchChanges : public ::testing::TestWithParam<Flavor> {
 protected:
  SearchServer& server() { return SearchServer::shared(GetParam()); }
  // A sink opened on a block with changes = "debezium", writing payload documents into `index`.
  std::unique_ptr<FakeHost> open(const std::string& index, const std::string& extra = "") {
    auto host = load();
    host->subscriptions(kDebezium);
    host->open("{\"url\": \"" + server().url() + "\", \"index\": \"" + index + "\", \"document\": \"payload\"" +
               (extra.empty() ? "" : ", " + extra) + "}");
    return host;
  }
  // The index's documents (_source) by _id, after a refresh.
  std::map<std::string, nlohmann::json> rows(const std::string& index) {
    std::map<std::string, nlohmann::json> out;
    for (nlohmann::json doc : server().documents(index)) {
      const std::string id = doc["_id"];
      doc.erase("_id");
      out[id] = doc;
    }
    return out;
  }
  static nlohmann::json json(const char* text) { return nlohmann::json::parse(text); }
};

TEST_P(ElasticsearchChanges, UpsertsReplaceDeletesRemoveAndAMissingKeyIsNoError) {
  const std::string index = server().unique_index("changes");
  auto host = open(index);
  EXPECT_EQ(host->max_in_flight(), 1u) << "one batch at a time per block: a later change never lands first";
  const auto first = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","email":"a@x"})"),
       upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob"})"), upsert(2, R"({"id":3})", R"({"id":3,"name":"Cy"})")}));
  ASSERT_EQ(first.status, PMQ_WRITE_OK) << first.error;
  const auto second = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(3, R"({"id":1})", R"({"id":1,"name":"Anne"})"), erase(4, R"({"id":2})"), erase(5, R"({"id":99})")}));
  ASSERT_EQ(second.status, PMQ_WRITE_OK) << second.error;
  EXPECT_TRUE(second.rejected.empty());
  EXPECT_EQ(rows(index), (std::map<std::string, nlohmann::json>{{"1", json(R"({"id":1,"name":"Anne"})")},
                                                                {"3", json(R"({"id":3,"name":"Cy"})")}}))
      << "an upsert replaces the whole document (no email left); the delete of a key never written is no error";
}

TEST_P(ElasticsearchChanges, ATombstoneDeletesTheDocumentOfItsKey) {
  const std::string index = server().unique_index("tombstone");
  auto host = open(index);
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 1, {upsert(10, R"({"id":"a"})", R"({"v":1})")})).status,
            PMQ_WRITE_OK);
  ASSERT_EQ(server().document(index, "a").value(), json(R"({"v":1})"));
  // A tombstone under `changes`: no payload, the key, PMQ_OP_DELETE (the runtime's doing).
  const TestRecord tombstone{
      .offset = 11, .payload = std::nullopt, .key = R"({"id":"a"})", .op = PMQ_OP_DELETE, .key_json = R"({"id":"a"})"};
  const auto out = host->write(TestBatch("shop.public.customers", 1, {tombstone}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  EXPECT_FALSE(server().document(index, "a"));
  EXPECT_EQ(server().count(index), 0);
}

TEST_P(ElasticsearchChanges, SeveralChangesOfOneKeyInOneBatchApplyInOrder) {
  const std::string index = server().unique_index("order");
  auto host = open(index);
  const auto out = host->write(
      TestBatch("shop.public.customers", 0,
                {upsert(0, R"({"id":1})", R"({"id":1,"v":"first"})"), erase(1, R"({"id":1})"),
                 upsert(2, R"({"id":1})", R"({"id":1,"v":"again"})"), upsert(3, R"({"id":2})", R"({"id":2,"v":"x"})"),
                 patch(4, R"({"id":1})", R"({"v":"patched"})"), erase(5, R"({"id":2})"),
                 upsert(6, R"({"id":3})", R"({"id":3})"), erase(7, R"({"id":3})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  EXPECT_EQ(rows(index), (std::map<std::string, nlohmann::json>{{"1", json(R"({"id":1,"v":"patched"})")}}));
}

TEST_P(ElasticsearchChanges, ChangesOfOneKeyAcrossTheBatchsRequestsStayInOrder) {
  const std::string index = server().unique_index("requests");
  // Three items a request: 40 changes of four keys are 14 requests, each after the one before.
  auto host = open(index, R"("max_request_records": 3, "max_in_flight": 8)");
  std::vector<TestRecord> records;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "{\"id\":" + std::to_string(i % 4) + "}";
    if (i % 7 == 3) records.push_back(erase(i, key));
    else records.push_back(upsert(i, key, "{\"n\":" + std::to_string(i) + "}"));
  }
  const auto out = host->write(TestBatch("shop.public.customers", 0, records));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  // The last change of each key: 0 -> 36, 1 -> 37, 2 -> 38 (delete at 38: 38 % 7 == 3), 3 -> 39.
  EXPECT_EQ(rows(index), (std::map<std::string, nlohmann::json>{
                             {"0", json(R"({"n":36})")}, {"1", json(R"({"n":37})")}, {"3", json(R"({"n":39})")}}));
  EXPECT_GE(host->counter("requests"), 14u);
}

TEST_P(ElasticsearchChanges, ATruncateEmptiesTheIndexBetweenTheRowsBeforeAndAfterIt) {
  const std::string index = server().unique_index("truncate");
  // refresh_interval -1: nothing is searchable until a refresh, so the truncate must refresh
  // before it deletes (_delete_by_query searches).
  auto host = open(index, R"("index_settings": {"refresh_interval": "-1", "number_of_shards": 2})");
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 0,
                                  {upsert(0, R"({"id":9})", R"({"id":9})"), upsert(1, R"({"id":8})", R"({"id":8})")}))
                .status,
            PMQ_WRITE_OK);
  const auto out = host->write(TestBatch(
      "shop.public.customers", 0,
      {upsert(2, R"({"id":1})", R"({"id":1,"v":"old"})"), upsert(3, R"({"id":2})", R"({"id":2})"), truncate(4),
       upsert(5, R"({"id":3})", R"({"id":3})"), upsert(6, R"({"id":1})", R"({"id":1,"v":"new"})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  EXPECT_EQ(rows(index),
            (std::map<std::string, nlohmann::json>{{"1", json(R"({"id":1,"v":"new"})")}, {"3", json(R"({"id":3})")}}));
  EXPECT_EQ(host->counter("truncates"), 1u);
  EXPECT_EQ(host->counter("truncated_documents"), 4u) << "9, 8, 1 and 2";

  // A truncate that ends its batch (and one of an index whose rows were all just written).
  ASSERT_EQ(
      host->write(TestBatch("shop.public.customers", 0, {upsert(7, R"({"id":4})", R"({"id":4})"), truncate(8)})).status,
      PMQ_WRITE_OK);
  EXPECT_EQ(server().count(index), 0);
}

TEST_P(ElasticsearchChanges, APatchKeepsTheFieldsItDoesNotNameAndInsertsAMissingDocument) {
  const std::string index = server().unique_index("patch");
  auto host = open(index, R"("document": "flat")");
  const std::string body(8000, 'b');
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 0,
                                  {upsert(0, R"({"id":1})",
                                          R"({"id":1,"title":"draft","body":")" + body +
                                              R"(","meta":{"lang":"en","tags":["a"]}})")}))
                .status,
            PMQ_WRITE_OK);
  const auto out = host->write(TestBatch("shop.public.customers", 0,
                                         {patch(1, R"({"id":1})", R"({"id":1,"title":"final","meta":{"tags":["b"]}})"),
                                          patch(2, R"({"id":2})", R"({"id":2,"title":"new"})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << out.error << (out.rejected.empty() ? "" : out.rejected[0].reason);
  const auto docs = rows(index);
  ASSERT_EQ(docs.size(), 2u);
  const nlohmann::json& one = docs.at("1");
  EXPECT_EQ(one["title"], "final");
  EXPECT_EQ(one["body"], body) << "the column the patch does not name keeps its value";
  EXPECT_EQ(one["meta"], json(R"({"lang":"en","tags":["b"]})")) << "objects merge field by field";
  EXPECT_EQ(one["pico_offset"], 1) << "the metadata of the last change";
  const nlohmann::json& two = docs.at("2");
  EXPECT_EQ(two["title"], "new");
  EXPECT_FALSE(two.contains("body")) << "a patch of a missing document inserts what it names";
}

TEST_P(ElasticsearchChanges, CompositeKeysNameDocumentsByTheirCompactJson) {
  const std::string index = server().unique_index("composite");
  auto host = open(index);
  ASSERT_EQ(host->write(TestBatch("shop.public.customers", 0,
                                  {upsert(0, R"({"order_id":1,"line":2})", R"({"order_id":1,"line":2,"qty":5})"),
                                   upsert(1, R"({"order_id":1,"line":3})", R"({"order_id":1,"line":3,"qty":1})"),
                                   erase(2, R"({"order_id":1,"line":3})")}))
                .status,
            PMQ_WRITE_OK);
  EXPECT_EQ(rows(index), (std::map<std::string, nlohmann::json>{
                             {R"({"order_id":1,"line":2})", json(R"({"order_id":1,"line":2,"qty":5})")}}));
}

TEST_P(ElasticsearchChanges, AReplayFromTheCommittedOffsetEndsEqualToTheSource) {
  const std::string index = server().unique_index("replay");
  auto host = open(index);
  const TestBatch a("shop.public.customers", 0,
                    {upsert(0, R"({"id":1})", R"({"id":1,"v":1})"), upsert(1, R"({"id":2})", R"({"id":2,"v":1})"),
                     truncate(2), upsert(3, R"({"id":3})", R"({"id":3,"v":1})"), erase(4, R"({"id":3})")});
  const TestBatch b("shop.public.customers", 0,
                    {upsert(5, R"({"id":3})", R"({"id":3,"v":2})"), patch(6, R"({"id":3})", R"({"w":"p"})"),
                     upsert(7, R"({"id":4})", R"({"id":4,"v":1})"), erase(8, R"({"id":1})")});
  ASSERT_EQ(host->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  const auto source = rows(index);
  EXPECT_EQ(source, (std::map<std::string, nlohmann::json>{{"3", json(R"({"id":3,"v":2,"w":"p"})")},
                                                           {"4", json(R"({"id":4,"v":1})")}}));
  // The runtime restarted (a SIGKILL) and re-reads from the offset it committed: both again.
  host.reset();
  host = open(index);
  ASSERT_EQ(host->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(index), source);
  // Or only the second (committed after the first).
  ASSERT_EQ(host->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(index), source);
}

INSTANTIATE_TEST_SUITE_P(Servers, ElasticsearchChanges, ::testing::Values(Flavor::OpenSearch, Flavor::Elasticsearch),
                         [](const auto& info) { return flavor_name(info.param); });

// The pipeline a user runs: Debezium's envelopes (JsonConverter without schemas) on a topic, the
// runtime with changes = "debezium", killed with SIGKILL once documents landed and restarted; when
// everything is committed the index equals the source table the events describe (a model kept
// here), the truncate in the middle included.
class ElasticsearchChangesKafka : public ::testing::TestWithParam<Flavor> {
 protected:
  SearchServer& server() { return SearchServer::shared(GetParam()); }
};

TEST_P(ElasticsearchChangesKafka, DebeziumEventsWithASigkillEndEqualToTheSource) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.changes");
  const auto index = server().unique_index("debezium");
  kafka.create_topic(topic);
  std::mt19937 random(7);
  std::map<int, nlohmann::json> source;  // id -> row
  std::vector<ProducedRecord> records;
  auto event = [&](const char* op, const nlohmann::json& before, const nlohmann::json& after, int id) {
    const nlohmann::json value = {{"before", before},
                                  {"after", after},
                                  {"op", op},
                                  {"source", {{"connector", "postgresql"}, {"table", "customers"}}}};
    records.push_back({value.dump(), nlohmann::json{{"id", id}}.dump()});
  };
  const int n = 3000;
  for (int i = 0; i < n; ++i) {
    if (i == n / 2) {  // TRUNCATE customers: Debezium's 't' has no key
      records.push_back({R"({"before":null,"after":null,"op":"t","source":{"table":"customers"}})", std::nullopt});
      source.clear();
      continue;
    }
    const int id = static_cast<int>(random() % 60);
    const auto row = source.find(id);
    if (row != source.end() && random() % 4 == 0) {
      event("d", row->second, nullptr, id);
      records.push_back({"", nlohmann::json{{"id", id}}.dump(), {}, -1, true});  // the tombstone after it
      source.erase(row);
      continue;
    }
    const nlohmann::json after = {{"id", id}, {"name", "n" + std::to_string(i)}, {"visits", i}};
    event(row == source.end() ? "c" : "u", row == source.end() ? nlohmann::json() : row->second, after, id);
    source[id] = after;
  }
  kafka.produce(topic, records);
  const int64_t total = static_cast<int64_t>(records.size());
  const std::string k = std::string("eschg") + flavor_name(GetParam()).substr(0, 2);
  const std::string definition = plugin_definition(
      k, "libpicomq_connector_elasticsearch_sink",
      "topics = [\"" + topic +
          "\"]\nschema = \"json\"\nchanges = \"debezium\"\npoll_interval = \"50ms\"\n"
          // A commit per batch (not coalesced): the kill below falls between two of them mid-stream.
          "batch_length = 100\noffset_commit_interval = \"0s\"\nproperties = { \"group.instance.id\" = \"" +
          k + "\", \"session.timeout.ms\" = \"6000\" }",
      "url = \"" + server().url() + "\"\nindex = \"" + index +
          "\"\ndocument = \"payload\"\nmax_request_records = 40\n"
          "index_settings = { number_of_replicas = 0, number_of_shards = 3, refresh_interval = \"200ms\" }");
  auto documents = [&]() -> int64_t {
    const auto r = server().call("GET", "/" + index + "/_count");
    return r.status == 200 ? r.json["count"].get<int64_t>() : 0;
  };
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("e.toml", definition);
    rt.start();
    // Killed mid-stream: some batches committed, the ones after them written or on their way.
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) >= 500 && documents() > 0; }, 60s))
        << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
  }
  const int64_t committed_before = std::max<int64_t>(0, kafka.committed(group_of(k), topic));
  std::cout << "[          ] killed at " << committed_before << " of " << total << " committed\n";
  EXPECT_LT(committed_before, total) << "the kill came before the end";
  EXPECT_GE(committed_before, 500);
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("e.toml", definition);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == total; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::vector<nlohmann::json> expected;
  for (const auto& [id, row] : source) {
    nlohmann::json doc = row;
    doc["_id"] = std::to_string(id);
    expected.push_back(doc);
  }
  std::sort(expected.begin(), expected.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a["_id"] < b["_id"]; });
  EXPECT_EQ(server().documents(index), expected);
  EXPECT_GT(source.size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Servers, ElasticsearchChangesKafka,
                         ::testing::Values(Flavor::OpenSearch, Flavor::Elasticsearch),
                         [](const auto& info) { return flavor_name(info.param); });

::testing::AssertionResult has_problem(const std::vector<std::string>& problems, const std::string& fragment) {
  std::string all;
  for (const auto& p : problems) {
    if (p.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
    all += "\n  " + p;
  }
  return ::testing::AssertionFailure() << "no problem with '" << fragment << "' among:" << all;
}

TEST(ElasticsearchChangesConfig, OptionsThatNameOrKeepDocumentsOtherwiseAreRefused) {
  auto host = load();
  host->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"},
                          {"topics": ["shop.public.customers"], "pattern": null, "changes": "keyed"}])");
  const std::string url = R"("url": "http://h:9200")";
  auto check = [&](const std::string& extra) { return host->check("{" + url + ", " + extra + "}"); };
  EXPECT_TRUE(has_problem(check(R"("id": "none")"),
                          "id: change events (changes = ... in [[topics]]) name each document by its row's key"));
  EXPECT_TRUE(has_problem(check(R"("action": "create")"), "action: change events"));
  EXPECT_TRUE(has_problem(check(R"("id": "key", "version_type": "external")"), "version_type: change events"));
  EXPECT_TRUE(has_problem(check(R"("data_stream": true, "action": "create")"), "data_stream: change events"));
  EXPECT_TRUE(has_problem(check(R"("routing_field": "customer.id")"), "routing_field: change events"));
  EXPECT_TRUE(host->check("{" + url + "}").empty()) << kit::testing::joined(host->check("{" + url + "}"));
  // The host fills defaults in: id = "record" and tombstones are the defaults' values, not read
  // under changes (the row's key names the document, a tombstone is the runtime's delete).
  EXPECT_TRUE(check(R"("id": "key", "document": "envelope", "refresh": "wait_for", "tombstones": "delete")").empty());
  EXPECT_TRUE(check(R"("id": "record")").empty());

  // Without changes the same options are the sink's usual ones.
  auto plain = load();
  plain->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(plain->check("{" + url + R"(, "id": "record", "action": "create", "routing_field": "c"})").empty());
}

// A 429 item cannot be made to happen on demand on a real node between two items of one request:
// the stub answers the first _bulk with item 0 refused as transient, item 2 refused for its
// mapping. Item 0 goes again with item 1 after it (a later change of its key, applied already,
// must not be overtaken by the earlier one) and item 3; item 2 is a bad record.
TEST(ElasticsearchChangesStub, AnItemRefusedAsTransientGoesAgainWithTheItemsAfterItInOrder) {
  kit::testing::HttpReceiver stub;
  stub.script(
      {{"path", "/_bulk"},
       {"method", "POST"},
       {"status", 200},
       {"body", R"({"errors":true,"items":[)"
                R"({"index":{"status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}},)"
                R"({"index":{"status":200,"result":"updated"}},)"
                R"({"index":{"status":400,"error":{"type":"mapper_parsing_exception","reason":"bad n"}}},)"
                R"({"delete":{"status":404,"result":"not_found"}}]})"}});
  stub.script({{"path", "/_bulk"},
               {"method", "POST"},
               {"status", 200},
               {"body", R"({"errors":false,"items":[{"index":{"status":200}},{"index":{"status":200}},)"
                        R"({"delete":{"status":404,"result":"not_found"}}]})"}});
  auto host = load();
  host->subscriptions(kDebezium);
  host->open("{\"url\": \"" + stub.base_url() + "\", \"index\": \"customers\", \"document\": \"payload\"}");
  const auto out =
      host->write(TestBatch("shop.public.customers", 0,
                            {upsert(0, R"({"id":1})", R"({"v":1})"), upsert(1, R"({"id":1})", R"({"v":2})"),
                             upsert(2, R"({"id":2})", R"({"n":"x"})"), erase(3, R"({"id":3})")}));
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 2u);
  const auto bulks = stub.requests("/_bulk");
  ASSERT_EQ(bulks.size(), 2u);
  EXPECT_EQ(bulks[1].body,
            "{\"index\":{\"_index\":\"customers\",\"_id\":\"1\"}}\n{\"v\":1}\n"
            "{\"index\":{\"_index\":\"customers\",\"_id\":\"1\"}}\n{\"v\":2}\n"
            "{\"delete\":{\"_index\":\"customers\",\"_id\":\"3\"}}\n");
  EXPECT_EQ(host->counter("written_records"), 3u) << "each item once: the ones resent count when written again";
}

}  // namespace
}  // namespace picomq::test
