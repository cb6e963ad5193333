// The Elasticsearch sink through a real Kafka broker and the runtime, into the real OpenSearch
// 2.19.6 and Elasticsearch 7.10.2 nodes of this test process, every case on both: a SIGKILL
// mid-load and a restart leave exactly one document per produced record (record ids); a document
// the index refuses goes where the bad-record policy says (the dead-letter topic, read back, with
// the rest written and committed; or the sink in Error before it with only earlier offsets
// committed); keyed records with tombstones end as the last state of each key.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <thread>

#include "harness.h"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/testing/http_stub.hpp"
#include "search_server.h"

namespace picomq::test {
namespace {

using Flavor = SearchServer::Flavor;

int64_t counter(Runtime& rt, const std::string& key, const std::string& name) {
  const auto s = rt.sink_status(key);
  if (!s.contains("counters") || !s["counters"].contains(name)) return 0;
  return s["counters"][name].get<int64_t>();
}

class ElasticsearchKafka : public ::testing::TestWithParam<Flavor> {
 protected:
  SearchServer& server() { return SearchServer::shared(GetParam()); }
  // A definition of sink `key` for `topic` (one block) writing into `index`.
  std::string definition(const std::string& key, const std::string& topic, const std::string& index,
                         const std::string& plugin_config = "", const std::string& block_extra = "") {
    return plugin_definition(
        key, "libpicomq_connector_elasticsearch_sink",
        "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"50ms\"\n" + block_extra,
        "url = \"" + server().url() + "\"\nindex = \"" + index + "\"\n" + plugin_config);
  }
  // A unique key per flavor: the consumer groups of the two runs stay apart.
  std::string key(const std::string& base) { return base + flavor_name(GetParam()).substr(0, 2); }
};

TEST_P(ElasticsearchKafka, SigkillMidLoadThenRestartLeavesOneDocumentPerRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.kill");
  const auto index = server().unique_index("kill");
  kafka.create_topic(topic);
  const int n = 20000;
  kafka.produce_values(topic, json_values(0, n, 100));
  const std::string k = key("eskill");
  const std::string block =
      "batch_length = 500\nproperties = { \"group.instance.id\" = \"" + k + "\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config = "index_settings = { number_of_replicas = 0, refresh_interval = \"200ms\" }";
  auto documents = [&]() -> int64_t {
    const auto r = server().call("GET", "/" + index + "/_count");
    return r.status == 200 ? r.json["count"].get<int64_t>() : 0;
  };
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("e.toml", definition(k, topic, index, config, block));
    rt.start();
    // Killed once documents landed and before the topic is done: some written, not all committed.
    ASSERT_TRUE(wait_until([&] { return documents() > 0; }, 60s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
  }
  const int64_t committed_before = std::max<int64_t>(0, kafka.committed(group_of(k), topic));
  const int64_t killed_with = server().count(index);
  std::cout << "[          ] killed with " << killed_with << " documents, " << committed_before << " committed\n";
  EXPECT_LT(committed_before, n) << "the kill came before the end";
  EXPECT_GT(killed_with, committed_before) << "written but uncommitted documents: the restart replays them";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("e.toml", definition(k, topic, index, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == n; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(server().count(index), n) << "count equals produced: the replayed window overwrote itself";
  const auto doc = server().document(index, topic + ":0:1234");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->at("n"), 1234);
  EXPECT_EQ(doc->at("pico_offset"), 1234);
}

TEST_P(ElasticsearchKafka, ARefusedDocumentGoesToTheDeadLetterTopicAndTheRestIsWritten) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.bad"), dead = unique_name("es.dead");
  const auto index = server().unique_index("dlq");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";
  kafka.produce_values(topic, values);
  const std::string k = key("esdlq");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml",
                    definition(k, topic, index, "index_mappings = { properties = { n = { type = \"long\" } } }",
                               "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == 50; }, 60s)) << rt.log();
  const auto dlq = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
  EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
  const std::string reason = dlq[0].header("pico_error_reason").value_or("");
  // Elasticsearch 8 puts the position first: "[1:177] failed to parse field ...".
  EXPECT_EQ(reason.find("index " + index + ": " + server().parsing_exception() + ": "), 0u) << reason;
  EXPECT_NE(reason.find("failed to parse field [n] of type [long]"), std::string::npos) << reason;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(server().count(index), 49);
  EXPECT_FALSE(server().document(index, topic + ":0:17"));
}

TEST_P(ElasticsearchKafka, UnderTheFailPolicyARefusedDocumentStopsTheSinkAndOnlyEarlierOffsetsCommit) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.fail");
  const auto index = server().unique_index("fail");
  kafka.create_topic(topic);
  auto values = json_values(0, 30);
  values[20] = R"({"n": {"not": "a number"}})";
  kafka.produce_values(topic, values);
  const std::string k = key("esfail");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml",
                    definition(k, topic, index, "index_mappings = { properties = { n = { type = \"long\" } } }",
                               "on_bad_record = \"fail\"\nbatch_length = 10"));
  rt.start();
  ASSERT_TRUE(rt.wait_state(k, "error", 60s)) << rt.log();
  const std::string message = rt.sink_status(k).value("message", "");
  EXPECT_NE(message.find(server().parsing_exception()), std::string::npos) << message;
  EXPECT_LE(kafka.committed(group_of(k), topic), 20) << "nothing past the refused record is committed";
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_FALSE(server().document(index, topic + ":0:20"));
}

TEST_P(ElasticsearchKafka, KeyedRecordsAndTombstonesEndAsTheLastStateOfEachKey) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.keys");
  const auto index = server().unique_index("keys");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  records.reserve(30);
  for (int i = 0; i < 30; ++i) records.push_back({"{\"v\": " + std::to_string(i) + "}", "k" + std::to_string(i % 10)});
  for (int i = 0; i < 10; i += 3)
    records.push_back({"", "k" + std::to_string(i), {}, -1, true});  // tombstones k0 k3 k6 k9
  kafka.produce(topic, records);
  const std::string k = key("eskeys");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml", definition(k, topic, index,
                                         "id = \"key\"\nversion_type = \"external\"\ntombstones = \"delete\"\n"
                                         "document = \"payload\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == 34; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  std::vector<nlohmann::json> expected;
  for (int key : {1, 2, 4, 5, 7, 8}) expected.push_back({{"_id", "k" + std::to_string(key)}, {"v", 20 + key}});
  EXPECT_EQ(server().documents(index), expected);
}

TEST_P(ElasticsearchKafka, UnderCreateASecondGroupsReplayFindsEveryDocumentAlreadyThere) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.create");
  const auto index = server().unique_index("create");
  kafka.create_topic(topic);
  const int n = 2000;
  kafka.produce_values(topic, json_values(0, n));
  for (const std::string base : {"escreatea", "escreateb"}) {  // two groups: the second replays everything
    const std::string k = key(base);
    Runtime rt(kafka.bootstrap(), base);
    rt.add_definition("e.toml", definition(k, topic, index, "action = \"create\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == n; }, 60s)) << rt.log();
    // The status file is rewritten once a second.
    const std::string counter_name = base == "escreatea" ? "written_records" : "already_written_records";
    EXPECT_TRUE(wait_until([&] { return counter(rt, k, counter_name) == n; }, 5s))
        << counter_name << ": " << counter(rt, k, counter_name) << "\n"
        << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
  }
  EXPECT_EQ(server().count(index), n);
}

TEST_P(ElasticsearchKafka, UnderTheSkipPolicyARefusedDocumentIsSkippedAndEverythingCommits) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.skip");
  const auto index = server().unique_index("skip");
  kafka.create_topic(topic);
  auto values = json_values(0, 40);
  values[3] = R"({"n": "three"})";
  values[33] = R"({"n": "thirty-three"})";
  kafka.produce_values(topic, values);
  const std::string k = key("esskip");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml",
                    definition(k, topic, index, "index_mappings = { properties = { n = { type = \"long\" } } }",
                               "on_bad_record = \"skip\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == 40; }, 60s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return counter(rt, k, "rejected_records") == 2; }, 5s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(server().count(index), 38);
  EXPECT_FALSE(server().document(index, topic + ":0:3"));
  EXPECT_FALSE(server().document(index, topic + ":0:33"));
}

// The node's write queue is 4 (search_server.cpp); 32 requests in flight into 6 shards overflow it:
// items come back 429, are resent alone, and the runtime sees every batch written.
TEST_P(ElasticsearchKafka, ItemsRefusedWith429AreRetriedWithoutLoss) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("es.queue");
  const auto index = server().unique_index("queue");
  kafka.create_topic(topic);
  const int n = 5000;
  kafka.produce_values(topic, json_values(0, n, 50));
  const std::string k = key("esqueue");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml", definition(k, topic, index,
                                         "max_in_flight = 32\nmax_request_records = 25\n"
                                         "index_settings = { number_of_shards = 6, number_of_replicas = 0 }",
                                         "batch_length = 100"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == n; }, 120s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return counter(rt, k, "item_retries") > 0; }, 5s))
      << "the queue refused items (else this test shows nothing)\n"
      << rt.log();
  EXPECT_EQ(rt.log().find("failed (attempt"), std::string::npos) << "resent here: no write attempt failed\n"
                                                                 << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(server().count(index), n);
}

// Topic names Kafka accepts and an index may not have (upper case, a leading '_' or '-', 240+
// characters): through the broker, each topic's documents land in a legal index of its own,
// created by the sink, and keep the exact topic name.
TEST_P(ElasticsearchKafka, HostileTopicNamesThroughTheBrokerGetLegalDistinctIndices) {
  auto& kafka = Kafka::shared();
  const std::string u = std::to_string(::getpid()) + flavor_name(GetParam()).substr(0, 2);
  const std::vector<std::string> topics{"Shop.Orders-EU." + u, "_Private.Topic." + u, "-Dash.Leading." + u,
                                        std::string(236, 'Q') + "." + u};
  std::string list;
  for (const auto& t : topics) {
    kafka.create_topic(t);
    kafka.produce_values(t, json_values(0, 3));
    list += (list.empty() ? "\"" : ", \"") + t + "\"";
  }
  const std::string k = key("eshostile");
  Runtime rt(kafka.bootstrap());
  rt.add_definition("e.toml", plugin_definition(k, "libpicomq_connector_elasticsearch_sink",
                                                "topics = [" + list + "]\nschema = \"json\"\npoll_interval = \"50ms\"",
                                                "url = \"" + server().url() +
                                                    "\"\nindex = \"{topic}\"\n"
                                                    "index_settings = { number_of_replicas = 0 }"));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& t : topics)
          if (kafka.committed(group_of(k), t) != 3) return false;
        return true;
      },
      90s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  const std::vector<std::string> expected{"shop.orders-eu." + u, "i_private.topic." + u, "i-dash.leading." + u,
                                          std::string(236, 'q') + "." + u};
  for (size_t i = 0; i < topics.size(); ++i) {
    SCOPED_TRACE(topics[i]);
    const auto docs = server().documents(expected[i]);
    ASSERT_EQ(docs.size(), 3u);
    for (const auto& d : docs) EXPECT_EQ(d["pico_topic"], topics[i]) << "the exact topic name";
  }
}

// Through the runtime, over HTTPS with basic auth (the kit's nginx front, as in sink_test.cpp):
// the documents land, and the password, given through an environment variable, is in no log line,
// the status file, nor the dead-letter headers of the one refused record.
TEST_P(ElasticsearchKafka, OverTlsWithBasicAuthTheRuntimeWritesAndNeverShowsThePassword) {
  auto& kafka = Kafka::shared();
  const std::string password = "Kafka-pw-Secret-9931";
  const std::string basic = kit::base64_encode(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>("writer:Kafka-pw-Secret-9931"), std::strlen("writer:Kafka-pw-Secret-9931")));
  kit::testing::Nginx proxy(
      {.tls = kit::testing::Nginx::Tls::On, .proxy_to = server().url(), .authorizations = {"Basic " + basic}});
  const auto topic = unique_name("es.tls"), dead = unique_name("es.tlsdead");
  const auto index = server().unique_index("tls");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 200);
  values[7] = R"({"n": "seven"})";
  kafka.produce_values(topic, values);
  const std::string k = key("estls");
  Runtime rt(kafka.bootstrap());
  rt.env("PICOMQ_TEST_SEARCH_PASSWORD", password);
  rt.add_definition(
      "e.toml",
      plugin_definition(
          k, "libpicomq_connector_elasticsearch_sink",
          "topics = [\"" + topic +
              "\"]\nschema = \"json\"\npoll_interval = \"50ms\"\n"
              "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" +
              dead + "\"",
          "url = \"" + proxy.base_url() + "\"\nindex = \"" + index + "\"\ntls_ca_file = \"" + proxy.ca_file().string() +
              "\"\n"
              "auth = \"basic\"\nauth_user = \"writer\"\nauth_password = \"${PICOMQ_TEST_SEARCH_PASSWORD}\"\n"
              "index_mappings = { properties = { n = { type = \"long\" } } }"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == 200; }, 60s)) << rt.log();
  const auto dlq = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dlq.size(), 1u);
  const std::string status = rt.sink_status(k).dump();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(server().count(index), 199);
  const std::string log = rt.log();
  EXPECT_NE(log.find("connected to"), std::string::npos) << log;
  for (const std::string& secret : {password, basic}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "the runtime's log shows a secret";
    EXPECT_EQ(status.find(secret), std::string::npos) << status;
    for (const auto& [name, value] : dlq[0].headers)
      EXPECT_EQ(value.find(secret), std::string::npos) << name << ": " << value;
  }
}

// OpenSearch alone: Elasticsearch 7.10.2's ingest processors (its ingest-common module) are not on
// Maven Central, OpenSearch's are (fetch-servers.sh adds them to the test node).
TEST(ElasticsearchKafkaOpenSearch, AnIngestPipelineRoutingFromAFieldAndWaitForRefreshShowInTheDocuments) {
  auto& kafka = Kafka::shared();
  auto& os = SearchServer::shared(Flavor::OpenSearch);
  const auto topic = unique_name("es.pipe"), dead = unique_name("es.pipedead");
  const auto index = os.unique_index("pipe");
  const std::string pipeline = index + "-enrich";
  // The pipeline's effects are visible in each document: a field set, a field lower-cased, a
  // string converted to an integer (a value that does not convert is the pipeline's refusal).
  os.ok("PUT", "/_ingest/pipeline/" + pipeline,
        "{\"processors\": [{\"set\": {\"field\": \"via\", \"value\": \"" + pipeline +
            "\"}}, "
            "{\"lowercase\": {\"field\": \"name\"}}, {\"convert\": {\"field\": \"qty\", \"type\": \"integer\"}}]}");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  const int n = 60;
  std::vector<std::string> values;
  values.reserve(n);
  for (int i = 0; i < n; ++i)
    values.push_back("{\"name\": \"Item-" + std::to_string(i) + "-ABC\", \"qty\": \"" +
                     (i == 42 ? std::string("many") : std::to_string(i)) + "\", \"customer\": {\"id\": \"c" +
                     std::to_string(i % 5) + "\"}}");
  kafka.produce_values(topic, values);
  const std::string k = "espipe";
  Runtime rt(kafka.bootstrap());
  // refresh_interval 5s: without wait_for, the last documents would not be searchable at the commit.
  rt.add_definition(
      "e.toml", plugin_definition(
                    k, "libpicomq_connector_elasticsearch_sink",
                    "topics = [\"" + topic +
                        "\"]\nschema = \"json\"\npoll_interval = \"50ms\"\nbatch_length = 20\n"
                        "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" +
                        dead + "\"",
                    "url = \"" + os.url() + "\"\nindex = \"" + index + "\"\npipeline = \"" + pipeline +
                        "\"\n"
                        "routing_field = \"customer.id\"\nrefresh = \"wait_for\"\n"
                        "index_settings = { number_of_shards = 3, number_of_replicas = 0, refresh_interval = \"5s\" }\n"
                        // 6 requests, all waiting for the same refresh (index.max_refresh_listeners is 1000 per shard).
                        "max_request_records = 10\nmax_in_flight = 8"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(k), topic) == n; }, 120s)) << rt.log();
  // No _refresh: what the commit covers was made searchable by the index's own refresh, which
  // each request's wait_for waited for.
  const auto found = os.ok("POST", "/" + index + "/_search", R"({"size": 100, "sort": [{"pico_offset": "asc"}]})");
  const auto& hits = found["hits"]["hits"];
  ASSERT_EQ(hits.size(), static_cast<size_t>(n - 1)) << "searchable at the commit, all but the refused one\n"
                                                     << found.dump();
  for (const auto& hit : hits) {
    const int64_t offset = hit["_source"]["pico_offset"];
    SCOPED_TRACE("offset " + std::to_string(offset));
    EXPECT_NE(offset, 42);
    EXPECT_EQ(hit["_source"]["via"], pipeline);
    EXPECT_EQ(hit["_source"]["name"], "item-" + std::to_string(offset) + "-abc");
    EXPECT_EQ(hit["_source"]["qty"], offset) << "a number now, not a string";
    EXPECT_EQ(hit.value("_routing", ""), "c" + std::to_string(offset % 5));
  }
  const auto dlq = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].header("pico_error_offset"), "42");
  const std::string reason = dlq[0].header("pico_error_reason").value_or("");
  EXPECT_NE(reason.find("unable to convert [many] to integer"), std::string::npos) << reason;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

std::string name_of(const ::testing::TestParamInfo<Flavor>& info) { return flavor_name(info.param); }
INSTANTIATE_TEST_SUITE_P(Servers, ElasticsearchKafka, ::testing::Values(Flavor::OpenSearch, Flavor::Elasticsearch),
                         name_of);

}  // namespace
}  // namespace picomq::test
