// The Doris sink through a real Kafka broker and the runtime, into the Doris contract server
// (doris_contract.py: an FE and a BE written from Doris's Stream Load manual: the 307 hop, labels
// and their states, two-phase commit, filtered rows with an ErrorURL), read back through the
// server's table and label state and the broker's committed offsets. One broker and one server
// for the binary:
//   - records of two partitions land once; a SIGKILL mid-load and a restart leave exactly the
//     produced rows (the replay's labels are recognised);
//   - a replay cut differently from the earlier run (an earlier load 0..149, the replay in
//     batches of 100) loads every record once;
//   - answers lost after the load was applied, 503s on the FE and the BE: re-sent with the same
//     label, nothing lost or doubled;
//   - a row Doris filters goes through each bad-record policy (mapped back from the ErrorURL);
//   - two-phase commit: loads visible only once committed, commit failures retried, a SIGKILL
//     replay exact;
//   - a load still RUNNING when its answer timed out is awaited (get_load_state), not sent twice.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "contract_server.h"
#include "harness.h"
#include "picomq/kit/record_id.hpp"

namespace picomq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const json kColumns = json::array({{{"name", "pico_partition"}, {"type", "INT"}, {"nullable", false}},
                                   {{"name", "pico_offset"}, {"type", "BIGINT"}, {"nullable", false}},
                                   {{"name", "n"}, {"type", "INT"}, {"nullable", false}},
                                   {{"name", "name"}, {"type", "VARCHAR(64)"}, {"nullable", true}}});

std::string definition(const std::string& key, const std::string& topic, const std::string& table,
                       const std::string& config = "", const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_doris_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
                           "url = \"" + doris_contract().base_url() + "\"\ndatabase = \"kdb\"\ntable = \"" + table +
                               "\"\npassword = \"pw\"\ntimeout = \"5s\"\nlabel_span = 500\n" +
                               (config.find("retry_timeout") == std::string::npos ? "retry_timeout = \"3s\"\n" : "") +
                               config);
}

std::vector<ProducedRecord> two_partitions(int per_partition) {
  std::vector<ProducedRecord> records;
  for (int p = 0; p < 2; ++p)
    for (int n = 0; n < per_partition; ++n)
      records.push_back(
          {"{\"n\": " + std::to_string(n) + ", \"name\": \"order-" + std::to_string(n) + "\"}", std::nullopt, {}, p});
  return records;
}

// (partition, offset) once each: true when every row is distinct.
std::pair<size_t, size_t> rows_and_distinct(const std::vector<json>& rows) {
  std::set<std::pair<int, int64_t>> seen;
  for (const auto& r : rows) seen.emplace(r.at("pico_partition").get<int>(), r.at("pico_offset").get<int64_t>());
  return {rows.size(), seen.size()};
}

int64_t settled(const std::function<int64_t()>& count) {
  int64_t last = count();
  for (int stable = 0; stable < 4;) {
    std::this_thread::sleep_for(250ms);
    const int64_t now = count();
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

std::pair<int64_t, int64_t> kill_and_restart(Kafka& kafka, const std::string& key, const std::string& topic,
                                             const std::string& def, const std::function<int64_t()>& rows,
                                             int64_t total) {
  int64_t at_kill = 0, committed = 0;
  {
    Runtime rt(kafka.bootstrap(), "kill");
    rt.add_definition("c.toml", def);
    rt.start();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (rows() < total / 4 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    EXPECT_GT(rows(), 0) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    at_kill = settled(rows);
    committed = committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] killed with " << at_kill << " rows, " << committed << " offsets committed\n";
  }
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", def);
  rt.start();
  EXPECT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == total; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  return {at_kill, committed};
}

void kill_replay_case(const std::string& key, const std::string& table, const std::string& extra) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.orders");
  kafka.create_topic(topic, 2);
  doris_create_table("kdb", table, kColumns);
  const int per = 2000;
  kafka.produce(topic, two_partitions(per));
  auto rows = [&] { return static_cast<int64_t>(doris_rows("kdb", table).size()); };
  const auto [at_kill, committed] = kill_and_restart(
      kafka, key, topic, definition(key, topic, table, extra, "batch_length = 250\n" + static_member(key)), rows,
      2 * per);
  EXPECT_LE(committed, at_kill) << "no offset is committed before its load is visible";
  const auto all = doris_rows("kdb", table);
  EXPECT_EQ(rows_and_distinct(all), (std::pair<size_t, size_t>{2u * per, 2u * per}))
      << "exactly the produced rows: the replay's labels were recognised";
  int64_t sum = 0;
  for (const auto& r : all) sum += r["n"].get<int64_t>();
  EXPECT_EQ(sum, 2 * int64_t{per} * (per - 1) / 2);
  for (const auto& r : all)
    if (r["pico_partition"] == 1 && r["pico_offset"] == 7) EXPECT_EQ(r["name"], "order-7");
  const json labels = doris_labels("kdb");
  for (auto it = labels.begin(); it != labels.end(); ++it)
    if (it.key().find(kit::url_safe(topic)) != std::string::npos)
      EXPECT_TRUE(it.value()["state"] == "VISIBLE" || it.value()["state"] == "ABORTED")
          << it.key() << " " << it.value().dump();
}

TEST(DorisKafka, RecordsLandOnceAndASigkillReplayLoadsEachRecordOnce) { kill_replay_case("dkill", "orders_kill", ""); }

TEST(DorisKafka, TwoPhaseCommitMakesLoadsVisibleOnlyWhenCommittedAndASigkillReplayIsExact) {
  kill_replay_case("d2pc", "orders_2pc", "two_phase_commit = true");
  const auto stats = json::parse(doris_contract().call("GET", "/_control/stats").second);
  EXPECT_GE(stats["requests"]["fe PUT /api/{db}/_stream_load_2pc"].get<int>(), 16)
      << "every load committed by _stream_load_2pc";
}

TEST(DorisKafka, TwoPhaseCommitFailuresAreRetriedAndABatchIsVisibleOnlyOnceCommitted) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.2pcfail");
  kafka.create_topic(topic);
  doris_create_table("kdb", "twopc_fail", kColumns);
  kafka.produce_values(topic, json_values(0, 300));
  doris_control("config", {{"fail_requests",
                            {{{"path_prefix", "/api/kdb/_stream_load_2pc"}, {"status", 503}, {"count", 1000}}}}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml",
                    definition("d2pcf", topic, "twopc_fail", "two_phase_commit = true", "batch_length = 100"));
  rt.start();
  std::this_thread::sleep_for(scaled(4s));
  EXPECT_TRUE(doris_rows("kdb", "twopc_fail").empty()) << "pre-committed loads are invisible until committed";
  EXPECT_LT(kafka.committed(group_of("d2pcf"), topic), 0) << "nothing committed before the loads are";
  doris_control("config", {{"clear_failures", true}});
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("d2pcf"), topic) == 300; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rows_and_distinct(doris_rows("kdb", "twopc_fail")), (std::pair<size_t, size_t>{300, 300}));
  int precommitted = 0;
  const json labels = doris_labels("kdb");
  for (auto it = labels.begin(); it != labels.end(); ++it)
    if (it.key().find(kit::url_safe(topic)) != std::string::npos && it.value()["state"] == "PRECOMMITTED")
      ++precommitted;
  EXPECT_EQ(precommitted, 0) << "every pre-committed load was committed or aborted";
}

TEST(DorisKafka, AReplayCutDifferentlyFromTheEarlierRunLoadsEachRecordOnce) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.cut");
  kafka.create_topic(topic);
  doris_create_table("kdb", "cut", kColumns);
  kafka.produce_values(topic, json_values(0, 400));
  // An earlier run loaded offsets 0..149 in one load (its label as the sink makes them) and
  // died before committing: the replay comes in batches of 100.
  std::string body;
  for (int i = 0; i < 150; ++i)
    body += "{\"pico_partition\":0,\"pico_offset\":" + std::to_string(i) + ",\"n\":" + std::to_string(i) + "}\n";
  const std::string label = "picomq-dcut-" + kit::url_safe(topic) + "-0-0-149";
  kit::HttpClient client({.auth = kit::BasicAuth{"root", "pw"}});
  kit::HttpHeaders h{{"Expect", "100-continue"}, {"label", label}, {"format", "json"}, {"read_json_by_line", "true"}};
  auto r = client.send(
      {.method = "PUT", .url = doris_contract().url("/api/kdb/cut/_stream_load"), .headers = h, .body = body});
  ASSERT_EQ(r.status, 307) << "the FE hands the load to a BE";
  r = client.send({.method = "PUT", .url = std::string(*r.headers.get("Location")), .headers = h, .body = body});
  ASSERT_EQ(json::parse(r.body)["Status"], "Success") << r.body;
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("dcut", topic, "cut", "", "batch_length = 100"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("dcut"), topic) == 400; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto all = doris_rows("kdb", "cut");
  EXPECT_EQ(rows_and_distinct(all), (std::pair<size_t, size_t>{400, 400}))
      << "0..149 once (the earlier load), 150..399 once";
  EXPECT_NE(rt.log().find("were loaded already"), std::string::npos) << rt.log();
}

TEST(DorisKafka, LostAnswersAndOutagesAreResentWithTheSameLabelNothingLostOrDoubled) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.outage");
  kafka.create_topic(topic);
  doris_create_table("kdb", "outage", kColumns);
  kafka.produce_values(topic, json_values(0, 600));
  // Loads applied whose answers never come, 503s from the FE and the BE, a load still running.
  doris_control("config",
                {{"drop_after_load", 3},
                 {"publish_timeout", 1},
                 {"fail_requests",
                  {{{"where", "fe"}, {"path_prefix", "/api/kdb/outage/_stream_load"}, {"status", 503}, {"count", 3}},
                   {{"where", "be"}, {"path_prefix", "/api/kdb/outage/_stream_load"}, {"status", 0}, {"count", 2}}}}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("doutage", topic, "outage", "", "batch_length = 100"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("doutage"), topic) == 600; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  doris_control("config", {{"clear_failures", true}});
  const auto all = doris_rows("kdb", "outage");
  EXPECT_EQ(rows_and_distinct(all), (std::pair<size_t, size_t>{600, 600})) << "every record once";
  const auto stats = json::parse(doris_contract().call("GET", "/_control/stats").second);
  EXPECT_GE(stats["requests"]["fe PUT /api/{db}/{table}/_stream_load"].get<int>(), 6 + 3 + 2 + 3);
}

TEST(DorisKafka, ALoadStillRunningWhenItsAnswerTimedOutIsAwaitedNotSentTwice) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.running");
  kafka.create_topic(topic);
  doris_create_table("kdb", "running", kColumns);
  kafka.produce_values(topic, json_values(0, 100));
  // Loads take 7 s in the BE; the sink's request gives up after 6 s (load_timeout 1 s + 5 s) and
  // re-sends: the label is RUNNING, so it waits for that load instead of loading again.
  doris_control("config", {{"running_ms", 7000}});
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition("drunning", topic, "running", "load_timeout = \"1s\"", "batch_length = 100"));
  rt.start();
  const bool done = wait_until([&] { return kafka.committed(group_of("drunning"), topic) == 100; }, 60s);
  doris_control("config", {{"running_ms", 0}});
  ASSERT_TRUE(done) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(rows_and_distinct(doris_rows("kdb", "running")), (std::pair<size_t, size_t>{100, 100}));
}

// The runtime's stop reaches a load waiting to be re-sent (sink ABI 2.6 stop()): with the FE
// refusing every load and 60 s of retry_timeout, a SIGTERM does not wait them out; nothing is
// committed, and the next start loads every record once.
TEST(DorisKafka, ASigtermDuringAResendWaitStopsAtOnceAndTheNextStartLoadsEveryRecordOnce) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.stop");
  kafka.create_topic(topic);
  doris_create_table("kdb", "stopping", kColumns);
  kafka.produce_values(topic, json_values(0, 50));
  doris_control(
      "config",
      {{"fail_requests",
        {{{"where", "fe"}, {"path_prefix", "/api/kdb/stopping/_stream_load"}, {"status", 503}, {"count", 100000}}}}});
  const std::string def = definition("dstop", topic, "stopping", "retry_timeout = \"60s\"");
  {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("c.toml", def);
    rt.start();
    ASSERT_TRUE(wait_until(
        [&] { return rt.sink_status("dstop").value("counters", json::object()).value("resends", 0) >= 2; }, 60s))
        << rt.log();
    const auto start = std::chrono::steady_clock::now();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the stop waited for retry_timeout";
    EXPECT_LT(kafka.committed(group_of("dstop"), topic), 1) << "nothing loaded, nothing committed";
  }
  doris_control("config", {{"clear_failures", true}});
  Runtime again(kafka.bootstrap());
  again.add_definition("c.toml", def);
  again.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("dstop"), topic) == 50; }, 60s)) << again.log();
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait_exit(30s), 0) << again.log();
  EXPECT_EQ(rows_and_distinct(doris_rows("kdb", "stopping")), (std::pair<size_t, size_t>{50, 50}));
}

class DorisBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(DorisBadRecords, ARowDorisFiltersGoesThroughThePolicyAndTheRestIsLoaded) {
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("doris.bad"), dead = unique_name("doris.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  const std::string key = "dbad" + policy, table = "bad_" + policy;
  doris_create_table("kdb", table, kColumns);
  auto values = json_values(0, 50);
  values[17] = R"({"n": "seventeen"})";  // not an INT: NULL in a NOT NULL column, the row is filtered
  kafka.produce_values(topic, values);
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, table, "", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("not nullable"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    const auto all = doris_rows("kdb", table);
    EXPECT_EQ(rows_and_distinct(all), (std::pair<size_t, size_t>{49, 49}));
    for (const auto& r : all) EXPECT_NE(r["pico_offset"], 17);
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("not nullable"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, DorisBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

}  // namespace
}  // namespace picomq::test
