// The operations API (docs/operations.md) through a real Kafka broker: the runtime as a child
// process with [api] on a free port, driven with an HTTP client (Debian's cpp-httplib), checked
// against what a user observes — the test plugins' write logs, the offsets the group committed
// (read back from the broker, and with Kafka's own kafka-consumer-groups tool), /metrics parsed
// by the Prometheus Python client's parser, the lifecycle events of the sinks left alone.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "api.h"
#include "harness.h"
#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {
namespace {

using nlohmann::json;

std::string testkit_def(const Runtime& rt, const std::string& key, const std::string& topic,
                        const std::string& extra = "") {
  return testkit_definition(key, "topics = [\"" + topic + "\"]\npoll_interval = \"50ms\"\nbatch_length = 10",
                            testkit_config(rt, key, "secret_token = \"${SINK_SECRET}\"\n" + extra));
}

std::string lifecycle_def(const Runtime& rt, const std::string& key, const std::string& topic,
                          const std::string& extra = "") {
  return plugin_definition(key, "libpicomq_connector_lifecycle_sink",
                           "topics = [\"" + topic + "\"]\npoll_interval = \"50ms\"",
                           "events_path = \"" + (rt.dir() / (key + ".events")).string() + "\"\n" + extra);
}

size_t count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const auto& l) { return l.rfind(prefix, 0) == 0; }));
}

// /metrics through the Prometheus Python client's parser: "name{k=v,...} value" per sample, labels sorted.
std::map<std::string, double> parse_metrics(const std::string& text, std::string& error) {
  const auto dir = make_temp_dir("metrics");
  { std::ofstream(dir / "metrics.txt") << text; }
  const std::string script =
      "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n"
      "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
      "  for s in f.samples:\n"
      "    print(s.name + '{' + ','.join(k + '=' + v for k, v in sorted(s.labels.items())) + '} ' + "
      "repr(float(s.value)))\n";
  { std::ofstream(dir / "parse.py") << script; }
  const std::string cmd =
      "/usr/bin/python3 " + (dir / "parse.py").string() + " " + (dir / "metrics.txt").string() + " 2>&1";
  std::map<std::string, double> out;
  FILE* p = popen(cmd.c_str(), "r");
  char line[4096];
  std::string all;
  while (fgets(line, sizeof line, p)) {
    std::string l(line);
    all += l;
    const auto sp = l.rfind(' ');
    if (sp == std::string::npos) continue;
    try {
      out[l.substr(0, sp)] = std::stod(l.substr(sp + 1));
    } catch (...) {}
  }
  if (pclose(p) != 0) error = all;
  return out;
}

// Kafka's own tool: kafka-consumer-groups --describe, as "topic:partition" -> CURRENT-OFFSET.
std::map<std::string, int64_t> kafka_tool_offsets(const std::string& bootstrap, const std::string& group,
                                                  std::string& raw) {
  const std::string cmd = std::string(PICOMQ_KAFKA_CONSUMER_GROUPS) + " --bootstrap-server " + bootstrap +
                          " --describe --group " + group + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char line[4096];
  std::map<std::string, int64_t> out;
  std::vector<std::string> header;
  while (fgets(line, sizeof line, p)) {
    raw += line;
    std::istringstream in(line);
    std::vector<std::string> cols;
    for (std::string c; in >> c;) cols.push_back(c);
    if (!cols.empty() && cols[0] == "GROUP") {
      header = cols;
      continue;
    }
    if (header.empty() || cols.size() < 4) continue;
    const auto col = [&](const std::string& name) {
      auto it = std::find(header.begin(), header.end(), name);
      return it == header.end() ? std::string() : cols[static_cast<size_t>(it - header.begin())];
    };
    try {
      out[col("TOPIC") + ":" + col("PARTITION")] = std::stoll(col("CURRENT-OFFSET"));
    } catch (...) {}
  }
  pclose(p);
  return out;
}

TEST(Ops, TokenHealthSinksMetricsAndSecretsMaskedEverywhere) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ops");
  kafka.create_topic(topic, 2);
  Runtime rt(kafka.bootstrap(), "ops-basic");
  with_api(rt);
  rt.add_definition("basic.toml", testkit_def(rt, "basic", topic));
  // A second sink that refuses one record (skipped by its policy): the rejected and skipped counters.
  const auto rej_topic = unique_name("ops-rej");
  kafka.create_topic(rej_topic, 1);
  rt.add_definition(
      "rej.toml",
      testkit_definition(
          "rej", "topics = [\"" + rej_topic + "\"]\npoll_interval = \"50ms\"\non_bad_record = \"skip\"",
          testkit_config(rt, "rej", "fail_times = 1\nfail_offset = 3\nfail_status = \"reject\"\nreject_offset = 3\n")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("basic", 30s) && rt.wait_assigned("rej", 30s)) << rt.log();
  Api api(rt);
  kafka.produce_values(rej_topic, json_values(0, 6), 0);

  // Without the token, or with a wrong one: 401 with a JSON message, on every endpoint.
  httplib::Client anonymous(api.url);
  for (const char* path :
       {"/sinks", "/sinks/basic", "/metrics", "/health/ready", "/health/live", "/sinks/basic/offsets"}) {
    auto r = anonymous.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_TRUE(json::parse(r->body).contains("error")) << r->body;
  }
  httplib::Client wrong(api.url);
  wrong.set_bearer_token_auth("not-the-token");
  EXPECT_EQ(wrong.Post("/sinks/basic/stop", "", "application/json")->status, 401);
  EXPECT_EQ(rt.sink_state("basic"), "running") << "a refused request changes nothing";

  kafka.produce_values(topic, json_values(0, 30), 0);
  kafka.produce_values(topic, json_values(30, 50), 1);
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-basic", topic, 0) == 30; }, 20s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-basic", topic, 1) == 20; }, 20s))
      << rt.log();

  EXPECT_EQ(api.get("/health/live").status, 200);
  auto ready = api.get("/health/ready");
  EXPECT_EQ(ready.status, 200) << ready.body;

  // GET /sinks/{key}: state, per block group / assignment / counters, definition with the secret masked.
  json sink;
  ASSERT_TRUE(wait_until(
      [&] {
        sink = api.get("/sinks/basic").doc();
        return sink["blocks"][0]["counters"]["written_records"] == 50;
      },
      10s))
      << sink.dump(2);
  EXPECT_EQ(sink["state"], "running");
  EXPECT_EQ(sink["blocks"][0]["group_id"], "picomq-connect-sink-basic");
  EXPECT_EQ(sink["blocks"][0]["assigned"].size(), 2u);
  EXPECT_EQ(sink["blocks"][0]["counters"]["consumed_records"], 50);
  EXPECT_EQ(sink["definition"]["plugin_config"]["secret_token"], "***");
  EXPECT_EQ(sink["definition"]["plugin_config"]["log_path"], (rt.dir() / "basic.log").string());
  const auto all = api.get("/sinks");
  EXPECT_EQ(all.status, 200);
  EXPECT_EQ(all.body.find(kSecret), std::string::npos) << "masked in the list too";
  EXPECT_EQ(all.doc()["sinks"].size(), 2u);
  EXPECT_EQ(api.get("/sinks/nope").status, 404);
  EXPECT_TRUE(api.get("/sinks/nope").doc().contains("error"));

  // GET /sinks/{key}/offsets: committed, end, lag per partition, read from the broker.
  auto offsets = api.get("/sinks/basic/offsets").doc();
  ASSERT_EQ(offsets["blocks"][0]["partitions"].size(), 2u) << offsets.dump(2);
  EXPECT_EQ(offsets["blocks"][0]["partitions"][0]["committed"], 30);
  EXPECT_EQ(offsets["blocks"][0]["partitions"][0]["end"], 30);
  EXPECT_EQ(offsets["blocks"][0]["partitions"][1]["committed"], 20);
  EXPECT_EQ(offsets["blocks"][0]["partitions"][1]["lag"], 0);

  // /metrics through a real Prometheus parser, with the values produced.
  std::map<std::string, double> m;
  std::string parse_error;
  ASSERT_TRUE(wait_until(
      [&] {
        m = parse_metrics(api.get("/metrics").body, parse_error);
        return m["picomq_consumer_lag_records{block=0,partition=1,sink=basic,topic=" + topic + "}"] == 0 &&
               m.count("picomq_consumer_lag_records{block=0,partition=1,sink=basic,topic=" + topic + "}");
      },
      10s))
      << api.get("/metrics").body;
  ASSERT_TRUE(parse_error.empty()) << parse_error;
  EXPECT_EQ(m["picomq_records_rejected_total{block=0,sink=basic}"], 0);
  ASSERT_TRUE(wait_until(
      [&] {
        m = parse_metrics(api.get("/metrics").body, parse_error);
        return m["picomq_records_written_total{block=0,sink=rej}"] == 5;
      },
      10s))
      << api.get("/metrics").body;
  EXPECT_EQ(m["picomq_records_rejected_total{block=0,sink=rej}"], 1);
  EXPECT_EQ(m["picomq_records_skipped_total{block=0,sink=rej}"], 1);
  EXPECT_EQ(m["picomq_write_attempts_total{block=0,outcome=rejected,sink=rej}"], 1);
  EXPECT_EQ(m["picomq_records_written_total{block=0,sink=basic}"], 50);
  EXPECT_EQ(m["picomq_records_consumed_total{block=0,sink=basic}"], 50);
  EXPECT_EQ(m["picomq_sink_state{sink=basic,state=running}"], 1);
  EXPECT_EQ(m["picomq_sink_state{sink=basic,state=error}"], 0);
  EXPECT_EQ(m["picomq_broker_up{block=0,sink=basic}"], 1);
  EXPECT_GE(m["picomq_write_attempts_total{block=0,outcome=ok,sink=basic}"], 2);
  EXPECT_EQ(m["picomq_write_duration_seconds_count{block=0,sink=basic}"],
            m["picomq_write_attempts_total{block=0,outcome=ok,sink=basic}"]);
  EXPECT_GE(m["picomq_commits_total{block=0,sink=basic}"], 1);
  EXPECT_EQ(m["picomq_end_to_end_latency_seconds_count{block=0,sink=basic}"],
            m["picomq_batches_stored_total{block=0,sink=basic}"]);
  EXPECT_GT(m["picomq_end_to_end_latency_seconds_sum{block=0,sink=basic}"], 0);
  EXPECT_LT(m["picomq_end_to_end_latency_seconds_sum{block=0,sink=basic}"],
            60 * m["picomq_end_to_end_latency_seconds_count{block=0,sink=basic}"]);
  EXPECT_GT(m["process_resident_memory_bytes{}"], 1e6);

  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  // JSON logs: one object per line, with the sink where the line is about one; no secret anywhere.
  size_t with_sink = 0, lines = 0;
  for (const auto& line : read_lines(rt.dir() / "stderr.log")) {
    if (line.empty()) continue;
    ++lines;
    auto j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("message")) << line;
    if (j.value("sink", "") == "basic") ++with_sink;
  }
  EXPECT_GT(lines, 3u);
  EXPECT_GT(with_sink, 0u);
  EXPECT_EQ(rt.log().find(kSecret), std::string::npos);
  EXPECT_EQ(rt.log().find(kToken), std::string::npos);
  EXPECT_EQ(read_file(rt.dir() / "status.json").find(kSecret), std::string::npos);
}

// The autoscaling signal (docs/operations.md, "Lag and autoscaling"): a sink that does not write —
// paused by the operator, stopped — is behind, and /metrics and GET /sinks say by how much, in
// records and in seconds, read from the broker rather than from its consumer.
TEST(Ops, LagOfAPausedAndOfAStoppedSinkIsWhatItHasNotWrittenInRecordsAndSeconds) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("lag");
  kafka.create_topic(topic, 2);
  Runtime rt(kafka.bootstrap(), "ops-lag");
  with_api(rt);
  rt.add_definition("lagging.toml", testkit_def(rt, "lagging", topic));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("lagging", 30s)) << rt.log();
  Api api(rt);
  const std::string group = "picomq-connect-sink-lagging";
  kafka.produce_values(topic, json_values(0, 10), 0);
  kafka.produce_values(topic, json_values(10, 20), 1);
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, 2, 10); }, 30s)) << rt.log();

  std::map<std::string, double> m;
  std::string parse_error;
  const auto series = [&](const std::string& name, int partition) {
    return name + "{block=0,partition=" + std::to_string(partition) + ",sink=lagging,topic=" + topic + "}";
  };
  const auto metrics_show = [&](int64_t lag0, int64_t lag1) {
    return wait_until(
        [&] {
          m = parse_metrics(api.get("/metrics").body, parse_error);
          return m.count(series("picomq_consumer_lag_records", 0)) &&
                 m[series("picomq_consumer_lag_records", 0)] == lag0 &&
                 m[series("picomq_consumer_lag_records", 1)] == lag1;
        },
        30s);
  };
  ASSERT_TRUE(metrics_show(0, 0)) << api.get("/metrics").body;
  EXPECT_EQ(m[series("picomq_consumer_lag_seconds", 0)], 0);

  // Paused: 600 records arrive and stay unwritten.
  ASSERT_EQ(api.post("/sinks/lagging/pause").status, 200);
  ASSERT_TRUE(
      wait_until([&] { return api.get("/sinks/lagging").doc()["blocks"][0]["paused_by_operator"] == true; }, 10s));
  kafka.produce_values(topic, json_values(100, 700), 0);
  std::this_thread::sleep_for(scaled(2000ms));
  ASSERT_TRUE(metrics_show(600, 0)) << api.get("/metrics").body << rt.log();
  EXPECT_TRUE(parse_error.empty()) << parse_error;
  EXPECT_GE(m[series("picomq_consumer_lag_seconds", 0)], 1.5) << "the oldest unwritten record is ~2 s old";
  EXPECT_LT(m[series("picomq_consumer_lag_seconds", 0)], 60);
  EXPECT_EQ(m[series("picomq_consumer_lag_seconds", 1)], 0);
  auto sink = api.get("/sinks/lagging").doc();
  EXPECT_EQ(sink["group_lag"][0][0]["lag"], 600) << sink.dump(2);
  EXPECT_EQ(sink["group_lag"][0][0]["committed"], 10) << sink.dump(2);
  EXPECT_EQ(sink["group_lag"][0][0]["end"], 610) << sink.dump(2);
  EXPECT_EQ(kafka.committed(group, topic, 0), 10) << "paused: nothing written";

  // Stopped: 400 more on the other partition; the lag still counts both.
  ASSERT_EQ(api.post("/sinks/lagging/stop").status, 200);
  kafka.produce_values(topic, json_values(1000, 1400), 1);
  ASSERT_TRUE(metrics_show(600, 400)) << api.get("/metrics").body << rt.log();
  EXPECT_EQ(api.get("/sinks/lagging").doc()["state"], "stopped");
  EXPECT_GE(m[series("picomq_consumer_lag_seconds", 0)], 1.5);
  const auto status_file = rt.status();
  EXPECT_TRUE(status_file.dump().find("\"group_lag\"") != std::string::npos) << status_file.dump(2);

  // Started again: it catches up and the lag goes back to 0.
  ASSERT_EQ(api.post("/sinks/lagging/start").status, 200);
  ASSERT_TRUE(metrics_show(0, 0)) << api.get("/metrics").body << rt.log();
  EXPECT_EQ(m[series("picomq_consumer_lag_seconds", 1)], 0);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Ops, StopStartPauseResumeAndRestartOfASinkInErrorWritesTheFailedBatchFirst) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ops");
  kafka.create_topic(topic, 1);
  const std::string group = "picomq-connect-sink-flaky";
  Runtime rt(kafka.bootstrap(), "ops-ctl");
  with_api(rt);
  const auto down = rt.dir() / "destination-down";
  rt.add_definition(
      "flaky.toml",
      testkit_def(rt, "flaky", topic, "fail_status = \"fatal\"\nfail_while_exists = \"" + down.string() + "\"\n"));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("flaky", 30s)) << rt.log();
  Api api(rt);

  kafka.produce_values(topic, json_values(0, 10), 0);
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 10; }, 20s)) << rt.log();

  // pause: nothing more is written; resume: the rest comes.
  auto r = api.post("/sinks/flaky/pause");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(
      wait_until([&] { return api.get("/sinks/flaky").doc()["blocks"][0]["paused_by_operator"] == true; }, 10s));
  kafka.produce_values(topic, json_values(10, 15), 0);
  std::this_thread::sleep_for(scaled(1500ms));
  EXPECT_EQ(kafka.committed(group, topic), 10) << "paused: nothing consumed";
  EXPECT_EQ(TestkitLog::read(rt.dir() / "flaky.log").ids.size(), 10u);
  ASSERT_EQ(api.post("/sinks/flaky/resume").status, 200);
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 15; }, 20s)) << rt.log();

  // stop: flushes, commits, leaves the group; start: joins again.
  r = api.post("/sinks/flaky/stop");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.doc()["sink"]["state"], "stopped");
  EXPECT_EQ(api.post("/sinks/flaky/pause").status, 409);
  EXPECT_EQ(api.get("/health/ready").status, 503) << "a stopped sink is not ready";
  kafka.produce_values(topic, json_values(15, 20), 0);
  std::this_thread::sleep_for(scaled(500ms));
  EXPECT_EQ(kafka.committed(group, topic), 15);
  r = api.post("/sinks/flaky/start");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(api.post("/sinks/flaky/start").status, 409) << "already running";
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 20; }, 30s)) << rt.log();

  // The destination goes down: the batch fails permanently and the sink stops in Error.
  { std::ofstream(down) << "down"; }
  kafka.produce_values(topic, json_values(20, 27), 0);
  ASSERT_TRUE(rt.wait_state("flaky", "error", 30s)) << rt.log();
  EXPECT_EQ(kafka.committed(group, topic), 20) << "the failed batch is not committed";
  auto st = api.get("/sinks/flaky").doc();
  EXPECT_EQ(st["state"], "error");
  EXPECT_FALSE(st["error"].get<std::string>().empty());
  EXPECT_EQ(api.get("/health/ready").status, 503);
  EXPECT_TRUE(rt.running()) << "the process stays up for the operator";

  // Back up; the operator restarts the sink without restarting the process.
  std::filesystem::remove(down);
  const size_t calls_before = read_calls(rt.dir() / "flaky.calls").size();
  r = api.post("/sinks/flaky/restart");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 27; }, 30s)) << rt.log();
  const auto calls = read_calls(rt.dir() / "flaky.calls");
  ASSERT_GT(calls.size(), calls_before);
  EXPECT_EQ(calls[calls_before].first, 20) << "the first write after the restart is the batch that failed";
  EXPECT_EQ(calls[calls_before].status, "ok");
  EXPECT_EQ(api.get("/sinks/flaky").doc()["state"], "running");
  // Every record written exactly once overall, except the failed one which was not written.
  const auto log = TestkitLog::read(rt.dir() / "flaky.log");
  EXPECT_EQ(std::set<std::string>(log.ids.begin(), log.ids.end()).size(), 27u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

TEST(Ops, OffsetResetToATimestampAndToExplicitOffsetsIsWhatKafkasToolReports) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ops");
  kafka.create_topic(topic, 2);
  const std::string group = "picomq-connect-sink-replay";
  Runtime rt(kafka.bootstrap(), "ops-offsets");
  with_api(rt);
  rt.add_definition("replay.toml", testkit_def(rt, "replay", topic));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("replay", 30s)) << rt.log();
  Api api(rt);

  kafka.produce_values(topic, json_values(0, 5), 0);
  kafka.produce_values(topic, json_values(5, 10), 1);
  std::this_thread::sleep_for(1100ms);
  const auto mark =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::this_thread::sleep_for(100ms);
  kafka.produce_values(topic, json_values(10, 15), 0);
  kafka.produce_values(topic, json_values(15, 25), 1);
  ASSERT_TRUE(
      wait_until([&] { return kafka.committed(group, topic, 0) == 10 && kafka.committed(group, topic, 1) == 15; }, 30s))
      << rt.log();

  auto r = api.post("/sinks/replay/offsets", R"({"to":"earliest"})");
  EXPECT_EQ(r.status, 409) << "only while stopped: " << r.body;
  ASSERT_EQ(api.post("/sinks/replay/stop").status, 200);

  // earliest / latest: the log's start and end.
  r = api.post("/sinks/replay/offsets", R"({"to":"earliest"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.doc()["blocks"][0]["partitions"][0]["committed"], 0);
  EXPECT_EQ(r.doc()["blocks"][0]["partitions"][1]["committed"], 0);
  EXPECT_EQ(kafka.committed(group, topic, 1), 0);
  r = api.post("/sinks/replay/offsets", R"({"to":"latest", "block": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(kafka.committed(group, topic, 0), 10);
  EXPECT_EQ(kafka.committed(group, topic, 1), 15);
  EXPECT_EQ(api.post("/sinks/replay/offsets", R"({"to":"latest", "block": 3})").status, 400);

  // To a timestamp: the first offset at or after it, per partition.
  r = api.post("/sinks/replay/offsets", json{{"timestamp", mark}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.doc()["blocks"][0]["partitions"][0]["committed"], 5);
  EXPECT_EQ(r.doc()["blocks"][0]["partitions"][1]["committed"], 5);
  std::string raw;
  auto tool = kafka_tool_offsets(kafka.bootstrap(), group, raw);
  EXPECT_EQ(tool[topic + ":0"], 5) << raw;
  EXPECT_EQ(tool[topic + ":1"], 5) << raw;

  // To explicit offsets.
  r = api.post("/sinks/replay/offsets", json{{"offsets",
                                              {{{"topic", topic}, {"partition", 0}, {"offset", 2}},
                                               {{"topic", topic}, {"partition", 1}, {"offset", 12}}}}}
                                            .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  raw.clear();
  tool = kafka_tool_offsets(kafka.bootstrap(), group, raw);
  EXPECT_EQ(tool[topic + ":0"], 2) << raw;
  EXPECT_EQ(tool[topic + ":1"], 12) << raw;
  EXPECT_EQ(api.post("/sinks/replay/offsets",
                     json{{"offsets", {{{"topic", topic}, {"partition", 0}, {"offset", 99}}}}}.dump())
                .status,
            409)
      << "an offset past the end is refused";
  EXPECT_EQ(api.post("/sinks/replay/offsets", R"({"to":"sideways"})").status, 400);

  // Started again, the sink reads from there: offsets 2.. of p0 and 12.. of p1 are written again.
  const size_t before = TestkitLog::read(rt.dir() / "replay.log").ids.size();
  ASSERT_EQ(api.post("/sinks/replay/start").status, 200);
  ASSERT_TRUE(
      wait_until([&] { return kafka.committed(group, topic, 0) == 10 && kafka.committed(group, topic, 1) == 15; }, 30s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "replay.log").ids.size() == before + 8 + 3; }, 10s));
  const auto ids = TestkitLog::read(rt.dir() / "replay.log").ids;
  std::set<std::string> replayed(ids.begin() + static_cast<long>(before), ids.end());
  EXPECT_TRUE(replayed.count(topic + ":0:2") && replayed.count(topic + ":1:12") && !replayed.count(topic + ":0:1"));
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

TEST(Ops, ReloadOfOneDefinitionRestartsOnlyThatSinkAndTheOthersDoNotRebalance) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ops");
  kafka.create_topic(topic, 2);
  Runtime rt(kafka.bootstrap(), "ops-reload");
  with_api(rt);
  rt.add_definition("a.toml", lifecycle_def(rt, "a", topic));
  rt.add_definition("b.toml", lifecycle_def(rt, "b", topic));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("a", 30s) && rt.wait_assigned("b", 30s)) << rt.log();
  Api api(rt);
  auto events = [&](const std::string& key) { return read_lines(rt.dir() / (key + ".events")); };
  ASSERT_TRUE(wait_until([&] { return count_prefix(events("b"), "assigned") == 1; }, 10s));

  // a's file changes on disk (inotify): a restarts, b keeps its partitions.
  std::ofstream(rt.dir() / "sinks.d" / "a.toml") << lifecycle_def(rt, "a", topic, "max_held = 0");
  ASSERT_TRUE(
      wait_until([&] { return count_prefix(events("a"), "open") == 2 && rt.sink_state("a") == "running"; }, 30s))
      << rt.log();
  ASSERT_TRUE(rt.wait_assigned("a", 30s));
  ASSERT_TRUE(wait_until([&] { return count_prefix(events("a"), "assigned") == 2; }, 30s)) << rt.log();

  // A broken edit of b: the running version stays, the status says why.
  std::ofstream(rt.dir() / "sinks.d" / "b.toml") << lifecycle_def(rt, "b", topic, "max_held = \"lots\"");
  ASSERT_TRUE(wait_until([&] { return api.get("/sinks/b").doc().contains("reload_error"); }, 30s)) << rt.log();
  EXPECT_NE(api.get("/sinks/b").doc()["reload_error"].get<std::string>().find("max_held"), std::string::npos);
  EXPECT_EQ(rt.sink_state("b"), "running");

  // SIGHUP: nothing changed for a, b still broken: nothing restarts.
  rt.signal(SIGHUP);
  std::this_thread::sleep_for(scaled(500ms));
  EXPECT_EQ(count_prefix(events("a"), "open"), 2u);

  // PUT adds a sink (validated first), DELETE removes one.
  auto bad = api.put("/sinks/c",
                     "type = \"sink\"\nkey = \"c\"\nversion = 0\npath = "
                     "\"libpicomq_connector_lifecycle_sink\"\n[[topics]]\ntopics = [\"" +
                         topic + "\"]\npoll_interval = \"soon\"\n[plugin_config]\nevents_path = \"x\"\n");
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_FALSE(std::filesystem::exists(rt.dir() / "sinks.d" / "c.toml")) << "nothing written";
  auto put = api.put("/sinks/c", lifecycle_def(rt, "c", topic));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_FALSE(put.doc()["errors"].empty()) << "b's broken file is reported with the reload: " << put.body;
  EXPECT_EQ(put.doc()["started"], json::array({"c"}));
  ASSERT_TRUE(rt.wait_assigned("c", 30s)) << rt.log();
  auto del = api.del("/sinks/a");
  EXPECT_EQ(del.doc()["stopped"], json::array({"a"})) << del.body;
  EXPECT_FALSE(std::filesystem::exists(rt.dir() / "sinks.d" / "a.toml"));
  EXPECT_EQ(api.get("/sinks/a").status, 404);
  EXPECT_EQ(count_prefix(events("a"), "close"), 2u);

  // POST /validate: the errors --check gives, with file, line and key.
  auto v = api.post("/validate?file=new.toml",
                    "type = \"sink\"\nkey = \"v\"\nversion = 0\npath = "
                    "\"libpicomq_connector_lifecycle_sink\"\n[[topics]]\ntopics = [\"" +
                        topic + "\"]\n[plugin_config]\nevents_path = \"x\"\nmax_held = \"lots\"\n")
               .doc();
  EXPECT_EQ(v["valid"], false);
  ASSERT_FALSE(v["errors"].empty()) << v.dump(2);
  EXPECT_EQ(v["errors"][0]["file"], "new.toml");
  EXPECT_EQ(v["errors"][0]["line"], 9);
  EXPECT_NE(v["errors"][0]["key"].get<std::string>().find("max_held"), std::string::npos) << v.dump(2);
  EXPECT_EQ(api.post("/validate", lifecycle_def(rt, "v", topic)).doc()["valid"], true);

  // Through all of it, b was never revoked nor re-assigned: it kept its group membership.
  const auto b = events("b");
  EXPECT_EQ(count_prefix(b, "revoked"), 0u) << read_file(rt.dir() / "b.events");
  EXPECT_EQ(count_prefix(b, "assigned"), 1u) << read_file(rt.dir() / "b.events");
  EXPECT_EQ(count_prefix(b, "open"), 1u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// [api] tls_cert / tls_key: HTTPS with a certificate made here by openssl; the token still applies.
TEST(Ops, HttpsWithTheConfiguredCertificate) {
  Kafka& kafka = Kafka::shared();
  Runtime rt(kafka.bootstrap(), "ops-tls");
  const auto crt = rt.dir() / "api.crt", key = rt.dir() / "api.key";
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
      "-keyout " +
      key.string() + " -out " + crt.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  rt.env("OPS_TOKEN", kToken);
  rt.runtime_settings(
      "keep_running_on_error = true\n[api]\nenabled = true\nlisten = \"127.0.0.1:0\"\ntoken = "
      "\"${OPS_TOKEN}\"\ntls_cert = \"" +
      crt.string() + "\"\ntls_key = \"" + key.string() + "\"\n");
  rt.start();
  const std::string url = wait_api_url(rt);
  ASSERT_EQ(url.rfind("https://", 0), 0u) << url;
  httplib::Client client(url);
  client.set_ca_cert_path(crt.c_str());
  client.enable_server_certificate_verification(true);
  auto anonymous = client.Get("/health/live");
  ASSERT_TRUE(anonymous) << httplib::to_string(anonymous.error());
  EXPECT_EQ(anonymous->status, 401);
  client.set_bearer_token_auth(kToken);
  auto live = client.Get("/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  httplib::Client plain("http://" + url.substr(8));
  auto refused = plain.Get("/health/live");
  EXPECT_TRUE(!refused || refused->status != 200) << "no plain HTTP on the HTTPS port";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// The status page in headless Chromium: the sink in Error is shown with its error, its restart
// button brings it back (the failed batch written first, everything committed), screenshots kept.
TEST(Ops, StatusPageInChromiumShowsTheSinkInErrorAndItsRestartButtonBringsItBack) {
  if (!std::filesystem::exists("/usr/bin/chromedriver") || !std::filesystem::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "Debian's chromium and chromium-driver are not installed (scripts/setup.sh installs them)";
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ops");
  kafka.create_topic(topic, 1);
  const std::string group = "picomq-connect-sink-page";
  Runtime rt(kafka.bootstrap(), "ops-page");
  with_api(rt);
  const auto down = rt.dir() / "destination-down";
  { std::ofstream(down) << "down"; }
  rt.add_definition(
      "page.toml",
      testkit_def(rt, "page", topic, "fail_status = \"fatal\"\nfail_while_exists = \"" + down.string() + "\"\n"));
  // A second sink dead-letters two records it cannot decode: the page lists them.
  const auto bad_topic = topic + ".bad";
  kafka.create_topic(bad_topic, 1);
  kafka.create_topic(bad_topic + ".dead", 1);
  rt.add_definition("letters.toml",
                    testkit_definition("letters",
                                       "topics = [\"" + bad_topic +
                                           "\"]\npoll_interval = \"50ms\"\non_bad_record = \"dead_letter\"\n"
                                           "dead_letter_topic = \"" +
                                           bad_topic + ".dead\"",
                                       testkit_config(rt, "letters")));
  kafka.produce_values(bad_topic, {"{\"n\":1}", "not json", "{\"n\":3}", "{broken"});
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("page", 30s)) << rt.log();
  Api api(rt);
  kafka.produce_values(topic, json_values(0, 12), 0);
  ASSERT_TRUE(rt.wait_state("page", "error", 30s)) << rt.log();
  std::filesystem::remove(down);  // the destination is back; the page's button restarts the sink

  const std::string cmd = std::string(PICOMQ_STATUS_PAGE_PY) + " " + api.url + " " + kToken + " page " +
                          rt.dir().string() + " letters 2 'decode: schema json: payload is not valid JSON' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group, topic) == 12; }, 30s)) << rt.log();
  const auto calls = read_calls(rt.dir() / "page.calls");
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[0].status, "fatal");
  EXPECT_EQ(calls[1].first, calls[0].first) << "after the restart the failed batch is written first";
  EXPECT_EQ(calls[1].status, "ok");
  for (const char* shot : {"status-error.png", "status-running.png", "status-dead-letters.png", "status-redrive.png"}) {
    const auto png = read_file(rt.dir() / shot);
    ASSERT_GT(png.size(), 5000u) << shot;
    EXPECT_EQ(png.substr(1, 3), "PNG") << shot;
    std::filesystem::copy_file(rt.dir() / shot, std::filesystem::path(PICOMQ_SCREENSHOT_DIR) / shot,
                               std::filesystem::copy_options::overwrite_existing);
  }
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// systemd's notify socket, as the service manager holds it: a Unix datagram socket whose
// messages (READY=1, RELOADING=1, STOPPING=1, STATUS=...) are collected as they come.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
  }
  ~NotifySocket() {
    close(fd_);
    std::filesystem::remove(path_);
  }
  // Every message so far, one string each.
  const std::vector<std::string>& messages() {
    char buf[4096];
    for (ssize_t n; (n = recv(fd_, buf, sizeof buf, 0)) > 0;) got_.emplace_back(buf, static_cast<size_t>(n));
    return got_;
  }
  bool wait_for(const std::string& field, size_t occurrences, Millis timeout) {
    return wait_until(
        [&] {
          size_t seen = 0;
          for (const auto& m : messages())
            if (m.find(field) != std::string::npos) ++seen;
          return seen >= occurrences;
        },
        timeout);
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::string> got_;
};

// packaging/systemd/picomq-connect.service is Type=notify: READY=1 once the definitions are
// opened and the API listens, RELOADING=1 then READY=1 around a SIGHUP reload, STOPPING=1 when
// a stop begins; the clean stop still exits 0.
TEST(Service, TypeNotifyReadinessReloadAndStopReachTheServiceManager) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("svc");
  kafka.create_topic(topic, 1);
  Runtime rt(kafka.bootstrap(), "svc-notify");
  with_api(rt);
  // sun_path holds 108 bytes: the socket lives in a short temp folder, not the runtime's.
  const auto sock_dir = make_temp_dir("sd");
  NotifySocket notify(sock_dir / "notify");
  rt.env("NOTIFY_SOCKET", (sock_dir / "notify").string());
  rt.add_definition("a.toml", lifecycle_def(rt, "a", topic));
  rt.start();
  ASSERT_TRUE(notify.wait_for("READY=1", 1, 30s)) << rt.log();
  const auto& first = notify.messages();
  EXPECT_NE(first.front().find("STATUS=1 sink(s) started - API on http://127.0.0.1:"), std::string::npos)
      << first.front();
  EXPECT_TRUE(rt.wait_assigned("a", 30s)) << rt.log();

  rt.signal(SIGHUP);
  ASSERT_TRUE(notify.wait_for("RELOADING=1", 1, 10s)) << rt.log();
  ASSERT_TRUE(notify.wait_for("READY=1", 2, 10s)) << rt.log();
  rt.signal(SIGTERM);
  ASSERT_TRUE(notify.wait_for("STOPPING=1", 1, 10s)) << rt.log();
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::vector<std::string> order;
  for (const auto& m : notify.messages()) order.push_back(m.substr(0, m.find('\n')));
  EXPECT_EQ(order, (std::vector<std::string>{"READY=1", "RELOADING=1", "READY=1", "STOPPING=1"}));
}

// `picomq-connect --health URL`, the image's HEALTHCHECK: 0 on 200 (the token from
// PICOMQ_API_TOKEN), 1 on a refusal or when nothing listens.
TEST(Service, TheHealthProbeAnswersZeroOnlyForAReadyRuntimeItMayAsk) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("svc");
  kafka.create_topic(topic, 1);
  Runtime rt(kafka.bootstrap(), "svc-health");
  with_api(rt);
  rt.add_definition("a.toml", lifecycle_def(rt, "a", topic));
  rt.start();
  Api api(rt);
  ASSERT_TRUE(rt.wait_assigned("a", 30s)) << rt.log();
  const std::string bin = locations().connect_binary.string();
  auto probe = [&](const std::string& url, const std::string& token) {
    const std::string cmd =
        (token.empty() ? std::string("env -u PICOMQ_API_TOKEN ") : "env PICOMQ_API_TOKEN=" + token + " ") + bin +
        " --health " + url + " 2>/dev/null";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_TRUE(wait_until([&] { return probe(api.url + "/health/ready", kToken) == 0; }, 30s)) << rt.log();
  EXPECT_EQ(probe(api.url + "/health/live", kToken), 0);
  EXPECT_EQ(probe(api.url + "/health/ready", ""), 1) << "no token: 401";
  EXPECT_EQ(probe(api.url + "/health/ready", "wrong"), 1);
  ASSERT_EQ(api.post("/sinks/a/stop").status, 200);
  EXPECT_EQ(probe(api.url + "/health/ready", kToken), 1) << "a sink stopped by the operator: not ready";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(probe(api.url + "/health/live", kToken), 1) << "nothing listens any more";
  EXPECT_EQ(probe("ftp://x", kToken), 1);
}

// The token's scheme is case-insensitive (RFC 9110 §11.1), as curl users write it either way.
TEST(Ops, TheBearerSchemeIsCaseInsensitiveWithCurl) {
  Kafka& kafka = Kafka::shared();
  Runtime rt(kafka.bootstrap(), "ops-bearer");
  with_api(rt);
  rt.start();
  Api api(rt);
  auto status = [&](const std::string& authorization) {
    return kit::testing::run_shell("curl -s -o /dev/null -w '%{http_code}' -H " +
                                   kit::testing::shell_quote("Authorization: " + authorization) + " " + api.url +
                                   "/sinks");
  };
  EXPECT_EQ(status("Bearer " + kToken), "200");
  EXPECT_EQ(status("bearer " + kToken), "200");
  EXPECT_EQ(status("BEARER " + kToken), "200");
  EXPECT_EQ(status("Bearer  " + kToken), "200") << "more than one space";
  EXPECT_EQ(status("Basic " + kToken), "401");
  EXPECT_EQ(status("Bearer wrong"), "401");
  EXPECT_EQ(status("bearer"), "401");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// `curl -X POST` sends no body and no Content-Length (docs/operations.md's commands): a request
// without a body, answered at once by its route, not after a read timeout with a 400.
TEST(Ops, ABodilessPostWithCurlIsAnsweredAtOnceByItsRoute) {
  Kafka& kafka = Kafka::shared();
  Runtime rt(kafka.bootstrap(), "ops-bodiless");
  with_api(rt);
  rt.start();
  Api api(rt);
  auto post = [&](const std::string& path) {
    const auto start = std::chrono::steady_clock::now();
    std::string code =
        kit::testing::run_shell("curl -s --max-time 20 -o /dev/null -w '%{http_code}' -X POST -H " +
                                kit::testing::shell_quote("Authorization: Bearer " + kToken) + " " + api.url + path);
    return std::pair{std::move(code), std::chrono::steady_clock::now() - start};
  };
  const auto [reload, reload_took] = post("/reload");
  EXPECT_EQ(reload, "200");
  EXPECT_LT(reload_took, 2s) << "the server waited for a body that never comes";
  const auto [stop, stop_took] = post("/sinks/nothing-here/stop");
  EXPECT_EQ(stop, "404") << "routed: no such sink";
  EXPECT_LT(stop_took, 2s);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// Definitions from a Kubernetes ConfigMap volume (the Helm chart): kubelet writes a new
// timestamped folder, points a `..data_tmp` symlink at it and renames that over `..data`; the
// visible a.toml is a symlink through `..data`. That rename alone must reload.
TEST(Service, AConfigMapVolumeSwapReloadsTheChangedDefinition) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("svc");
  kafka.create_topic(topic, 1);
  Runtime rt(kafka.bootstrap(), "svc-configmap");
  with_api(rt);
  const auto sinks = rt.dir() / "sinks.d";
  std::filesystem::create_directories(sinks / "..2026_12_04_1");
  std::ofstream(sinks / "..2026_12_04_1" / "a.toml") << lifecycle_def(rt, "a", topic);
  std::filesystem::create_directory_symlink("..2026_12_04_1", sinks / "..data");
  std::filesystem::create_symlink("..data/a.toml", sinks / "a.toml");
  rt.start();
  auto events = [&] { return read_lines(rt.dir() / "a.events"); };
  ASSERT_TRUE(rt.wait_assigned("a", 30s)) << rt.log();
  EXPECT_EQ(count_prefix(events(), "open"), 1u);

  std::filesystem::create_directories(sinks / "..2026_12_04_2");
  std::ofstream(sinks / "..2026_12_04_2" / "a.toml") << lifecycle_def(rt, "a", topic, "max_held = 0");
  std::filesystem::create_directory_symlink("..2026_12_04_2", sinks / "..data_tmp");
  std::filesystem::rename(sinks / "..data_tmp", sinks / "..data");
  std::filesystem::remove_all(sinks / "..2026_12_04_1");
  ASSERT_TRUE(wait_until([&] { return count_prefix(events(), "open") == 2 && rt.sink_state("a") == "running"; }, 30s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// Dead letters read back over the API (docs/operations.md, "Dead letters"): what each one is,
// where it came from and why, filtered, paged and counted — against the records the test put
// on the source topic.
TEST(Ops, DeadLettersAreListedWithTheirSourceStageAndReasonFilteredPagedAndCounted) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("dlq-src");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  Runtime rt(kafka.bootstrap(), "ops-dead-letters");
  with_api(rt);
  // Offsets 2 and 7 cannot be decoded; the sink rejects offset 5.
  rt.add_definition(
      "dl.toml",
      testkit_definition(
          "dl",
          "topics = [\"" + topic +
              "\"]\npoll_interval = \"50ms\"\non_bad_record = \"dead_letter\"\n"
              "dead_letter_topic = \"" +
              dead + "\"",
          testkit_config(rt, "dl", "fail_times = 1000\nfail_offset = 5\nfail_status = \"reject\"\nreject_offset = 5")));
  rt.add_definition("plain.toml", testkit_def(rt, "plain", topic + ".other"));
  std::vector<ProducedRecord> records;
  auto values = json_values(0, 10);
  values[2] = "{\"n\": 2, broken";
  values[7] = std::string("\xff\xfe not json", 11);
  records.reserve(values.size());
  for (int i = 0; i < 10; ++i) records.push_back({values[i], "k" + std::to_string(i), {}});
  records[2].headers = {{"trace", "t-2"}};
  kafka.produce(topic, records);
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("dl"), topic) == 10; }, 30s)) << rt.log();
  Api api(rt);

  auto r = api.get("/sinks/dl/dead-letters");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = r.doc();
  EXPECT_EQ(doc["topic"], dead);
  ASSERT_EQ(doc["records"].size(), 3u) << r.body;
  EXPECT_TRUE(doc["next_cursor"].is_null()) << "one page holds them all";
  const auto& first = doc["records"][0];
  EXPECT_EQ(first["id"], "0:0");
  EXPECT_EQ(first["stage"], "decode");
  EXPECT_NE(first["reason"].get<std::string>().find("payload is not valid JSON"), std::string::npos) << first;
  EXPECT_EQ(first["source"]["topic"], topic);
  EXPECT_EQ(first["source"]["partition"], 0);
  EXPECT_EQ(first["source"]["offset"], 2);
  EXPECT_EQ(first["key"], "k2");
  EXPECT_EQ(first["payload"], values[2]);
  EXPECT_EQ(first["headers"], json::array({json::array({"trace", "t-2"})})) << "its own headers, not pico_error_*";
  std::set<int64_t> offsets;
  for (const auto& d : doc["records"]) offsets.insert(d["source"]["offset"].get<int64_t>());
  EXPECT_EQ(offsets, (std::set<int64_t>{2, 5, 7}));
  for (const auto& d : doc["records"])
    if (d["source"]["offset"] == 7) {
      EXPECT_EQ(d["payload"]["base64"], "//4gbm90IGpzb24=") << "bytes that are not UTF-8";
    }

  // Filters: by stage, by a part of the reason, by source offsets, by ids.
  r = api.get("/sinks/dl/dead-letters?stage=sink");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.doc()["records"].size(), 1u) << r.body;
  EXPECT_EQ(r.doc()["records"][0]["source"]["offset"], 5);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?reason=not%20valid%20JSON").doc()["records"].size(), 2u);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?from_offset=3&to_offset=7").doc()["records"].size(), 2u);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?topic=elsewhere").doc()["records"].size(), 0u);
  r = api.get("/sinks/dl/dead-letters?ids=0:2");
  ASSERT_EQ(r.doc()["records"].size(), 1u) << r.body;
  EXPECT_EQ(r.doc()["records"][0]["id"], "0:2");

  // Pages of one: three pages, each cursor where the next starts, the last without one.
  std::vector<std::string> ids;
  std::string cursor;
  for (int page = 0; page < 4; ++page) {
    r = api.get("/sinks/dl/dead-letters?limit=1" + (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(r.status, 200) << r.body;
    const auto page_doc = r.doc();
    for (const auto& d : page_doc["records"]) ids.push_back(d["id"]);
    if (page_doc["next_cursor"].is_null()) break;
    cursor = page_doc["next_cursor"];
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"0:0", "0:1", "0:2"}));

  // Counts per stage and reason.
  r = api.get("/sinks/dl/dead-letters/counts");
  ASSERT_EQ(r.status, 200) << r.body;
  doc = r.doc();
  EXPECT_EQ(doc["matched"], 3);
  int64_t decode = 0, sink = 0;
  for (const auto& c : doc["counts"]) (c["stage"] == "decode" ? decode : sink) += c["count"].get<int64_t>();
  EXPECT_EQ(decode, 2);
  EXPECT_EQ(sink, 1);
  // Asked again (as the status page does every 30 s): only what came since is read.
  r = api.get("/sinks/dl/dead-letters/counts");
  EXPECT_EQ(r.doc()["matched"], 3) << r.body;
  EXPECT_EQ(r.doc()["scanned"], 0) << "nothing new to read: " << r.body;

  // A redrive's dry run: with the definition unchanged, the two undecodable records would be bad
  // again at the same stage; the one the sink refused would go to it (the runtime cannot know
  // what the sink will say).
  r = api.post("/sinks/dl/dead-letters/redrive", R"({"dry_run": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  doc = r.doc();
  EXPECT_EQ(doc["summary"]["bad"], 2) << r.body;
  EXPECT_EQ(doc["summary"]["write"], 1) << r.body;
  for (const auto& d : doc["records"])
    if (d["source"]["offset"] == 2) {
      EXPECT_EQ(d["outcome"], "bad");
      EXPECT_EQ(d["stage"], "decode");
      EXPECT_EQ(d["was"]["stage"], "decode");
    }
  EXPECT_EQ(api.post("/sinks/dl/dead-letters/redrive", R"({"chunk": 0})").status, 400);
  EXPECT_EQ(api.post("/sinks/dl/dead-letters/redrive", R"({"resume": 7})").status, 400);
  // After a fix (payloads read as text instead of JSON): every one would now be written.
  auto fixed =
      testkit_definition("dl",
                         "topics = [\"" + topic +
                             "\"]\nschema = \"text\"\npoll_interval = \"50ms\"\non_bad_record = \"dead_letter\"\n"
                             "dead_letter_topic = \"" +
                             dead + "\"",
                         testkit_config(rt, "dl"));
  ASSERT_EQ(api.put("/sinks/dl", fixed).status, 200);
  r = api.post("/sinks/dl/dead-letters/redrive?stage=decode", R"({"dry_run": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  doc = r.doc();
  EXPECT_EQ(doc["summary"]["write"], 1) << "offset 2 decodes as text; offset 7 is not UTF-8: " << r.body;
  EXPECT_EQ(doc["summary"]["bad"], 1) << r.body;
  const auto dl_written = TestkitLog::read(rt.dir() / "dl.log").ids.size();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(TestkitLog::read(rt.dir() / "dl.log").ids.size(), dl_written) << "a dry run writes nothing";

  // One more dead letter (not UTF-8 text): the counts read it alone.
  kafka.produce_values(topic, {std::string("\xff\xfe", 2)});
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("dl"), topic) == 11; }, 30s)) << rt.log();
  r = api.get("/sinks/dl/dead-letters/counts");
  EXPECT_EQ(r.doc()["matched"], 4) << r.body;
  EXPECT_EQ(r.doc()["scanned"], 1) << "the one dead letter since: " << r.body;
  EXPECT_EQ(api.get("/sinks/dl/dead-letters/counts?stage=decode").doc()["matched"], 3) << "a filter counts its own";
  // Retention removes the two oldest: the counts are made again from what is left.
  kafka.delete_records(dead, 0, 2);
  r = api.get("/sinks/dl/dead-letters/counts");
  EXPECT_EQ(r.doc()["matched"], 2) << r.body;
  EXPECT_EQ(r.doc()["scanned"], 2) << "counted again from the log start: " << r.body;

  // What cannot be answered says why.
  EXPECT_EQ(api.get("/sinks/plain/dead-letters").status, 404);
  EXPECT_EQ(api.get("/sinks/nope/dead-letters").status, 404);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?stage=later").status, 400);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?limit=0").status, 400);
  EXPECT_EQ(api.get("/sinks/dl/dead-letters?cursor=x").status, 502);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// `picomq-connect ctl` against running runtimes, as an on-call engineer types it: tables to read,
// --json to script, exit codes to branch on.

// The row of `table` whose first cells are `first` (split on runs of spaces).
std::vector<std::string> row_of(const std::string& table, const std::vector<std::string>& first) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string c; cells >> c;) row.push_back(c);
    if (row.size() >= first.size() && std::equal(first.begin(), first.end(), row.begin())) return row;
  }
  return {};
}

TEST(Ctl, StatusLagControlOffsetsDeadLettersValidateAndApplyOnOneRuntimeAndAFleet) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("ctl");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  Runtime a(kafka.bootstrap(), "ctl-a");
  with_api(a);
  a.add_definition("orders.toml", testkit_definition("orders",
                                                     "topics = [\"" + topic +
                                                         "\"]\npoll_interval = \"50ms\"\non_bad_record = "
                                                         "\"dead_letter\"\ndead_letter_topic = \"" +
                                                         dead + "\"",
                                                     testkit_config(a, "orders")));
  Runtime b(kafka.bootstrap(), "ctl-b");
  with_api(b);
  b.add_definition("other.toml", testkit_def(b, "other", topic + ".other"));
  auto values = json_values(0, 6);
  values[3] = "not json";
  kafka.produce_values(topic, values);
  a.start();
  b.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("orders"), topic) == 6; }, 30s)) << a.log();
  const std::string url_a = Api(a).url, url_b = Api(b).url;

  // status: one row per sink; the lag read from the broker soon after the commit.
  CtlRun r;
  ASSERT_TRUE(wait_until(
      [&] {
        r = ctl({url_a}, "status");
        const auto row = row_of(r.out, {"orders"});
        return row.size() >= 7 && row[4] == "0";
      },
      10s))
      << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto row = row_of(r.out, {"orders"});
  EXPECT_EQ(row[1], "running") << r.out;
  EXPECT_EQ(row[5], "5") << "written: " << r.out;
  EXPECT_EQ(row[6], "1") << "dead-lettered: " << r.out;
  // A fleet: each runtime's sinks, the runtime named.
  r = ctl({url_a, url_b}, "status");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(row_of(r.out, {url_a, "orders", "running"}).empty()) << r.out;
  EXPECT_FALSE(row_of(r.out, {url_b, "other", "running"}).empty()) << r.out;
  r = ctl({url_a, url_b}, "--json lag");
  auto doc = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_array() && doc.size() == 2) << r.out;
  EXPECT_EQ(doc[0]["sinks"][0]["group_lag"][0][0]["committed"], 6) << r.out;
  r = ctl({url_a}, "lag orders");
  EXPECT_EQ(row_of(r.out, {"orders", "0", topic, "0"}),
            (std::vector<std::string>{"orders", "0", topic, "0", "6", "6", "0", "0.0"}))
      << r.out;

  // Dead letters: listed and counted.
  r = ctl({url_a}, "dead-letters list orders");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  row = row_of(r.out, {"0:0"});
  ASSERT_GE(row.size(), 4u) << r.out;
  EXPECT_EQ(row[2], "decode");
  EXPECT_EQ(row[3], topic + "[0]@3");
  r = ctl({url_a}, "dead-letters counts orders --stage decode");
  EXPECT_NE(r.out.find("1 dead letter(s) of sink 'orders' in " + dead), std::string::npos) << r.out;
  EXPECT_EQ(ctl({url_a}, "dead-letters list other").exit_code, 1) << "no dead-letter topic: refused";
  r = ctl({url_a}, "dead-letters redrive orders --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("dry run: 0 would be written, 1 bad again"), std::string::npos) << r.out;
  // The redrive that writes: the record is still not JSON, so it is bad again (exit 1), and
  // dead-lettered again with its history.
  r = ctl({url_a}, "dead-letters redrive orders");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find(" done: 0 written, 1 bad again"), std::string::npos) << r.out;
  r = ctl({url_a}, "dead-letters redrives orders");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("done"), std::string::npos) << r.out;
  EXPECT_EQ(ctl({url_a}, "dead-letters redrive orders --chunk 0").exit_code, 2) << "a usage error";

  // pause, then stop: the state says stopped, and nothing says paused any more.
  EXPECT_EQ(ctl({url_a}, "pause orders").exit_code, 0);
  r = ctl({url_a}, "stop orders");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = ctl({url_a}, "status");
  EXPECT_EQ(r.exit_code, 4) << "a stopped sink: " << r.out;
  EXPECT_EQ(row_of(r.out, {"orders"}).at(1), "stopped") << r.out;
  doc = json::parse(ctl({url_a}, "--json status orders").out, nullptr, false);
  for (const auto& block : doc[0]["blocks"]) EXPECT_FALSE(block["paused"].get<bool>()) << doc.dump();
  std::string error;
  EXPECT_EQ(parse_metrics(Api(a).get("/metrics").body, error)["picomq_paused{block=0,sink=orders}"], 0) << error;

  // offsets: reset while stopped, shown, then the sink reads again from there.
  r = ctl({url_a}, "offsets reset orders --offset " + topic + ":0=4");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(kafka.committed(group_of("orders"), topic), 4);
  r = ctl({url_a}, "offsets show orders");
  EXPECT_EQ(row_of(r.out, {group_of("orders"), topic, "0"}).at(3), "4") << r.out;
  EXPECT_EQ(ctl({url_a}, "offsets reset orders").exit_code, 2) << "which offsets: a usage error";
  EXPECT_EQ(ctl({url_a}, "start orders").exit_code, 0);
  EXPECT_TRUE(wait_until([&] { return kafka.committed(group_of("orders"), topic) == 6; }, 30s)) << a.log();

  // validate and apply a definition file.
  const auto bad = a.dir() / "bad.toml";
  std::ofstream(bad) << "type = \"sink\"\nkey = \"third\"\npath = \"libpicomq_connector_testkit_sink\"\n";
  r = ctl({url_a}, "validate " + bad.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("topics"), std::string::npos) << "names what is missing: " << r.out;
  const auto good = a.dir() / "third.toml";
  std::ofstream(good) << testkit_def(a, "third", topic + ".third");
  EXPECT_EQ(ctl({url_a}, "validate " + good.string()).exit_code, 0);
  r = ctl({url_a}, "apply " + good.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("sink 'third' applied: started [\"third\"]"), std::string::npos) << r.out;
  EXPECT_TRUE(wait_until([&] { return row_of(ctl({url_a}, "status third").out, {"third"}).at(1) == "running"; }, 30s));

  // What cannot be done says so, with an exit code to branch on.
  EXPECT_EQ(ctl({url_a}, "stop nope").exit_code, 1);
  EXPECT_EQ(ctl({"http://127.0.0.1:9"}, "status").exit_code, 3);
  EXPECT_EQ(ctl({url_a}, "frobnicate").exit_code, 2);
  a.signal(SIGTERM);
  b.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(30s), 0) << a.log();
  EXPECT_EQ(b.wait_exit(30s), 0) << b.log();
}

// A live tap (docs/operations.md, "Tap"): copies of the records passing each stage of a running
// sink, secrets masked, bounded in count and time, one tap of a sink at a time.
TEST(Ops, TapShowsTheRecordsPassingEachStageWithSecretsMasked) {
  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("tap");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap(), "ops-tap");
  with_api(rt);
  rt.add_definition("tapped.toml",
                    testkit_definition("tapped",
                                       "topics = [\"" + topic +
                                           "\"]\npoll_interval = \"50ms\"\n\n[[transforms]]\n"
                                           "type = \"add_fields\"\nfields = [ { path = \"seen\", value = true } ]",
                                       testkit_config(rt, "tapped")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("tapped", 30s)) << rt.log();
  Api api(rt);
  // Each stage: a tap armed first, then records produced.
  for (const std::string stage : {"decoded", "transformed", "written"}) {
    std::promise<Api::Reply> answer;
    auto done = answer.get_future();
    std::thread waiter([&] {  // a client of its own: httplib's is one connection
      const Api tapper(rt);
      answer.set_value(tapper.get("/sinks/tapped/tap?stage=" + stage + "&limit=2&wait=20"));
    });
    std::this_thread::sleep_for(300ms);  // armed by now
    if (stage == "decoded") EXPECT_EQ(api.get("/sinks/tapped/tap?stage=written&wait=1").status, 409) << "one at a time";
    std::vector<ProducedRecord> records;
    records.reserve(3);
    for (int i = 0; i < 3; ++i)
      records.push_back({R"({"n":)" + std::to_string(i) + R"(,"password":"hunter2","user":{"api_key":"k-1"}})",
                         "key-" + std::to_string(i),
                         {{"authorization", "Bearer xyz"}, {"trace", "t-" + std::to_string(i)}}});
    kafka.produce(topic, records);
    ASSERT_EQ(done.wait_for(30s), std::future_status::ready);
    waiter.join();
    const auto r = done.get();
    ASSERT_EQ(r.status, 200) << r.body;
    const auto doc = r.doc();
    ASSERT_EQ(doc["records"].size(), 2u) << "the limit: " << r.body;
    const auto& first = doc["records"][0];
    EXPECT_EQ(first["stage"], stage);
    EXPECT_EQ(first["topic"], topic);
    EXPECT_EQ(first["payload"]["password"], "***") << first;
    EXPECT_EQ(first["payload"]["user"]["api_key"], "***") << first;
    EXPECT_EQ(first["headers"][0], json::array({"authorization", "***"})) << first;
    EXPECT_EQ(first["headers"][1][0], "trace") << first;
    EXPECT_TRUE(first["key"].get<std::string>().rfind("key-", 0) == 0) << first;
    // Before the transforms the field is not there yet; after them it is.
    EXPECT_EQ(first["payload"].contains("seen"), stage != "decoded") << first;
    ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "tapped.log").ids.size() % 3 == 0; }, 10s));
  }
  // Nothing passing: the wait ends with what came (nothing).
  auto r = api.get("/sinks/tapped/tap?stage=transformed&wait=0.5");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.doc()["records"].size(), 0u);
  EXPECT_EQ(api.get("/sinks/tapped/tap?stage=later").status, 400);
  EXPECT_EQ(api.get("/sinks/tapped/tap?limit=5000").status, 400);
  EXPECT_EQ(api.get("/sinks/tapped/tap?wait=600").status, 400);
  EXPECT_EQ(api.get("/sinks/nope/tap").status, 404);
  ASSERT_EQ(api.post("/sinks/tapped/stop").status, 200);
  EXPECT_EQ(api.get("/sinks/tapped/tap?wait=1").status, 409) << "a stopped sink has nothing to tap";
  EXPECT_EQ(TestkitLog::read(rt.dir() / "tapped.log").ids.size(), 9u) << "the tap took copies: every record written";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

}  // namespace
}  // namespace picomq::test

int main(int argc, char** argv) { return picomq::test::run_tests_with_kafka(argc, argv); }
