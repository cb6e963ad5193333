// The HTTP sink through a real Kafka broker and the runtime: records of a 3-partition topic land
// once each, with requests (and batches of a partition) in parallel and the offsets committed; a record the endpoint
// refuses reaches the dead-letter topic and the rest is written; an outage holds the offsets back and loses nothing;
// nginx takes a load. Compiled into tests/integration (one broker for the run).
#include <gtest/gtest.h>
#include <signal.h>

#include <map>

#include "harness.h"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {
namespace {

namespace kt = kit::testing;

std::string http_definition(const std::string& key, const std::string& topics_block, const std::string& config) {
  return plugin_definition(key, "libpicomq_connector_http_sink", topics_block, config);
}

// (partition, offset) of every record the receiver accepted on `path`, in arrival order.
std::vector<std::pair<int, int64_t>> accepted(const kt::HttpReceiver& receiver, const std::string& path) {
  std::vector<std::pair<int, int64_t>> out;
  for (const auto& r : receiver.requests(path)) {
    if (!r.answer.is_number() || r.answer.get<int>() / 100 != 2) continue;
    size_t start = 0;
    while (start < r.body.size()) {
      const size_t end = r.body.find('\n', start);
      const auto j = nlohmann::json::parse(r.body.substr(start, end - start));
      out.emplace_back(j["pico_partition"].get<int>(), j["pico_offset"].get<int64_t>());
      start = end == std::string::npos ? r.body.size() : end + 1;
    }
  }
  return out;
}

TEST(HttpSinkKafka, RecordsOfEveryPartitionArriveOnceWithRequestsInParallelAndEveryOffsetCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("http.orders");
  kafka.create_topic(topic, 3);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 300; ++i) records.push_back({"{\"n\":" + std::to_string(i) + "}", std::nullopt, {}, i % 3});
  kafka.produce(topic, records);
  kt::HttpReceiver receiver;
  // Each answer takes 50 ms, so requests sent side by side are seen side by side: an instant
  // answer let a loaded CI machine finish every request before the next was sent (max_in_flight 1).
  receiver.script({{"path", "/in"}, {"delay", 0.05}, {"count", 0}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "h.toml", http_definition("hooks", "topics = [\"" + topic + "\"]\nbatch_length = 40",
                                "url = \"" + receiver.url("/in") + "\"\nmax_request_records = 16\nmax_in_flight = 4"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("hooks"), topic, 3, 100); }, 60s)) << rt.log();
  const auto got = accepted(receiver, "/in");
  ASSERT_EQ(got.size(), 300u);
  std::map<std::pair<int, int64_t>, int> times;
  for (const auto& p : got) ++times[p];
  for (const auto& [p, n] : times) EXPECT_EQ(n, 1) << p.first << ":" << p.second;
  EXPECT_GT(receiver.stats().max_in_flight, 1u) << "requests went in parallel";
  // The status file shows the sink's counters (rewritten as they change).
  EXPECT_TRUE(wait_until([&] { return rt.sink_status("hooks")["counters"].value("requests", 0) >= 19; }, 10s))
      << rt.sink_status("hooks").dump();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(HttpSinkKafka, ARecordTheEndpointRefusesGoesToTheDeadLetterTopicAndTheRestIsWritten) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("http.bad"), dead = unique_name("http.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";
  kafka.produce_values(topic, values);
  kt::HttpReceiver receiver;
  receiver.script({{"path", "/in"},
                   {"when_body_contains", "seventeen"},
                   {"status", 422},
                   {"body", R"({"error":"n must be a number"})"},
                   {"count", 0}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("h.toml",
                    http_definition("refusing",
                                    "topics = [\"" + topic +
                                        "\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"",
                                    "url = \"" + receiver.url("/in") + "\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("refusing"), topic) == 50; }, 60s)) << rt.log();
  const auto got = accepted(receiver, "/in");
  EXPECT_EQ(got.size(), 49u);
  for (const auto& [p, offset] : got) EXPECT_NE(offset, 17);
  const auto dlq = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
  EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
  EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("n must be a number"), std::string::npos)
      << "the endpoint's answer is the reason";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(HttpSinkKafka, DuringAnOutageNothingIsCommittedAndEverythingLandsAfterIt) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("http.outage");
  kafka.create_topic(topic);
  kt::HttpReceiver receiver;
  receiver.set_default_answer(503, {{"Retry-After", "1"}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("h.toml", http_definition("outage", "topics = [\"" + topic + "\"]",
                                              "url = \"" + receiver.url("/in") + "\"\nretry_timeout = \"3s\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("outage", 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 20));
  ASSERT_TRUE(wait_until([&] { return receiver.requests("/in").size() >= 3; }, 30s)) << rt.log();
  EXPECT_LT(kafka.committed(group_of("outage"), topic), 1) << "nothing written, nothing committed";
  EXPECT_EQ(rt.sink_state("outage"), "running");
  receiver.set_default_answer(200);
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("outage"), topic) == 20; }, 60s)) << rt.log();
  EXPECT_EQ(accepted(receiver, "/in").size(), 20u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// The runtime's stop reaches a write waiting to resend (sink ABI 2.6 stop()): a SIGTERM while the
// endpoint asks for 25 s more does not wait them out; nothing is committed, and the next start
// writes every record once.
TEST(HttpSinkKafka, ASigtermDuringAResendWaitStopsAtOnceAndTheRecordsComeAgainOnTheNextStart) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("http.stop");
  kafka.create_topic(topic);
  kt::HttpReceiver receiver;
  receiver.set_default_answer(503, {{"Retry-After", "25"}});
  const std::string definition = http_definition("stopping", "topics = [\"" + topic + "\"]",
                                                 "url = \"" + receiver.url("/in") + "\"\nretry_timeout = \"60s\"");
  {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("h.toml", definition);
    rt.start();
    ASSERT_TRUE(rt.wait_assigned("stopping", 30s)) << rt.log();
    kafka.produce_values(topic, json_values(0, 20));
    ASSERT_TRUE(wait_until(
        [&] { return rt.sink_status("stopping").value("counters", nlohmann::json::object()).value("resends", 0) >= 1; },
        30s))
        << rt.log();
    const auto start = std::chrono::steady_clock::now();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(20s), 0) << rt.log();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the stop waited out the Retry-After";
    EXPECT_LT(kafka.committed(group_of("stopping"), topic), 1) << "nothing written, nothing committed";
  }
  receiver.set_default_answer(200);
  Runtime again(kafka.bootstrap());
  again.add_definition("h.toml", definition);
  again.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("stopping"), topic) == 20; }, 60s)) << again.log();
  EXPECT_EQ(accepted(receiver, "/in").size(), 20u);
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait_exit(30s), 0);
}

TEST(HttpSinkKafka, NginxTakesALoadAndEveryOffsetIsCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("http.nginx");
  kafka.create_topic(topic, 2);
  std::vector<std::string> values;
  for (int i = 0; i < 20000; ++i)
    values.push_back(R"({"id":)" + std::to_string(i) + R"(,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})");
  kafka.produce_values(topic, values);
  kt::Nginx nginx;
  Runtime rt(kafka.bootstrap());
  rt.add_definition("h.toml",
                    http_definition("nginx", "topics = [\"" + topic + "\"]",
                                    "url = \"" + nginx.base_url() + "/ingest/{topic}\"\ncompression = \"gzip\""));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        // A partition nothing was produced to has no committed offset (negative): count it as 0.
        return std::max<int64_t>(0, kafka.committed(group_of("nginx"), topic, 0)) +
                   std::max<int64_t>(0, kafka.committed(group_of("nginx"), topic, 1)) ==
               20000;
      },
      90s))
      << rt.log();
  const auto stats = nginx.stats();
  EXPECT_GE(stats.requests, 20000u / 500u) << "at most 500 records per request";
  EXPECT_TRUE(wait_until(
      [&] { return rt.sink_status("nginx")["counters"].value("requests", 0) == static_cast<int64_t>(stats.requests); },
      10s))
      << rt.sink_status("nginx").dump() << " vs nginx's " << stats.requests;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

}  // namespace
}  // namespace picomq::test
