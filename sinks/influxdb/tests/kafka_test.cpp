// The InfluxDB sink through a real Kafka broker and the runtime, into the real InfluxDB 1.6.7
// and 2.8.0 servers of the test process (sinks/influxdb/server.sh, one of each), read back with
// InfluxQL and Flux and the broker's committed offsets: the points of a 2-partition topic with
// their tags, fields and times; a partial write (a field type conflict) rejecting exactly the
// refused record under fail / skip / dead_letter while the rest is written; a SIGKILL mid-load and
// a restart leaving exactly one point per record (the same series and time overwrite). One broker
// and one server of each version for the binary.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "harness.h"
#include "influx_server.h"

namespace picomq::test {
namespace {

std::string target(int version, const std::string& db) {
  if (version == 1)
    return "url = \"" + InfluxServer::shared(1).url() + "\"\napi = \"v1\"\ndatabase = \"" + db +
           "\"\nauth = \"basic\"\nauth_user = \"picomq\"\nauth_password = \"picomq-secret\"\n";
  return "url = \"" + InfluxServer::shared(2).url() + "\"\napi = \"v2\"\norg = \"picomq\"\nbucket = \"" + db +
         "\"\ntoken = \"" + InfluxServer::kToken + "\"\n";
}

std::string definition(const std::string& key, const std::string& topic, int version, const std::string& db,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(key, "libpicomq_connector_influxdb_sink",
                           "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
                           target(version, db) + plugin_config);
}

class InfluxKafka : public ::testing::TestWithParam<int> {
 protected:
  InfluxServer& server() { return InfluxServer::shared(GetParam()); }
};

TEST_P(InfluxKafka, PointsOfEveryPartitionLandWithTheirTagsFieldsAndTimes) {
  auto& kafka = Kafka::shared();
  const int version = GetParam();
  const auto db = server().fresh_database("kpoints");
  const auto topic = unique_name("influx.metrics");
  kafka.create_topic(topic, 2);
  const int n = 2000;
  std::vector<ProducedRecord> records;
  records.reserve(n);
  for (int i = 0; i < n; ++i)
    records.push_back({"{\"host\": \"h" + std::to_string(i % 4) + "\", \"n\": " + std::to_string(i) +
                           ", \"load\": {\"avg\": " + std::to_string(i) +
                           ".25}, \"at\": " + std::to_string(1'700'000'000'000 + i) + "}",
                       "k" + std::to_string(i),
                       {},
                       i % 2});
  kafka.produce(topic, records);
  const std::string key = "ipoints" + std::to_string(version);
  Runtime rt(kafka.bootstrap(), "points");
  rt.add_definition("c.toml",
                    definition(key, topic, version, db,
                               "measurement = \"metrics\"\ntags = [\"host\"]\ntag_metadata = [\"pico_partition\"]\n"
                               "timestamp_field = \"at\"\nprecision = \"ms\"\nmax_request_lines = 300\n"
                               "compression = \"gzip\"",
                               "batch_length = 500"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == n; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_EQ(server().point_count(db, "metrics"), n);
  if (version == 1) {
    EXPECT_EQ(server().tag_keys(db, "metrics"), (std::vector<std::string>{"host", "pico_partition"}));
    EXPECT_EQ(server().field_types(db, "metrics"),
              (std::map<std::string, std::string>{{"load_avg", "float"}, {"n", "integer"}}));
    const auto s =
        server().influxql(db, "SELECT \"host\", \"pico_partition\", \"n\", \"load_avg\" FROM metrics WHERE n = 7");
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0]["values"], nlohmann::json::parse(R"([[1700000000007000000, "h3", "1", 7, 7.25]])"));
  } else {
    const auto rows = server().flux("from(bucket: \"" + db +
                                    "\") |> range(start: 0) |> filter(fn: (r) => r._measurement == \"metrics\") "
                                    "|> pivot(rowKey: [\"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\") "
                                    "|> filter(fn: (r) => r.n == 7)");
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].at("_time"), "2023-11-14T22:13:20.007Z");
    EXPECT_EQ(rows[0].at("host"), "h3");
    EXPECT_EQ(rows[0].at("pico_partition"), "1");
    EXPECT_EQ(rows[0].at("#type:n"), "long");
    EXPECT_EQ(rows[0].at("load_avg"), "7.25");
    EXPECT_EQ(rows[0].at("#type:load_avg"), "double");
  }
}

// A record whose field has another type than the measurement already has: the server refuses that
// line (1.x 400 / 2.x 422 "partial write: field type conflict"), and only its record goes through
// the policy.
class InfluxBadRecords : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(InfluxBadRecords, APartialWriteRejectsExactlyTheRefusedRecordAndTheRestIsWritten) {
  const auto [version, policy] = GetParam();
  auto& kafka = Kafka::shared();
  InfluxServer& server = InfluxServer::shared(version);
  const auto db = server.fresh_database("kbad");
  const auto topic = unique_name("influx.bad"), dead = unique_name("influx.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  std::vector<std::string> values;
  values.reserve(50);
  for (int i = 0; i < 50; ++i)
    values.push_back("{\"v\": " + std::to_string(i) + ", \"t\": " + std::to_string(i + 1) + "}");
  values[17] = R"({"v": "seventeen", "t": 18})";
  kafka.produce_values(topic, values);
  const std::string key = "ibad" + std::to_string(version) + policy;
  std::string block = "on_bad_record = \"" + policy + "\"\nbatch_length = 50";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "c.toml",
      definition(key, topic, version, db,
                 "measurement = \"m\"\ntimestamp_field = \"t\"\ntimestamp_unit = \"s\"\nprecision = \"s\"", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("field type conflict"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    EXPECT_EQ(server.point_count(db, "m"), 49);
    if (version == 1) {
      EXPECT_TRUE(server.influxql(db, "SELECT v FROM m WHERE time = 18s").empty());
    } else {
      EXPECT_TRUE(server
                      .flux("from(bucket: \"" + db +
                            "\") |> range(start: 0) |> filter(fn: (r) => r._time == 1970-01-01T00:00:18Z)")
                      .empty());
    }
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("field type conflict"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// A SIGKILL as soon as points landed (their offsets not yet committed), then a restart that replays
// the window: the same series and time overwrite, so the point count is exactly the records'.
TEST_P(InfluxKafka, SigkillMidLoadThenRestartLeavesOnePointPerRecord) {
  const int version = GetParam();
  auto& kafka = Kafka::shared();
  const auto db = server().fresh_database("kkill");
  const auto topic = unique_name("influx.kill");
  kafka.create_topic(topic, 2);
  // Large enough that a run is still loading when its first points are seen and it is killed
  // (with 10000 a fast load could finish and commit everything first, in all of the runs).
  const int chunk = 30000;
  int64_t produced = 0;  // per partition
  auto produce_chunk = [&] {
    std::vector<ProducedRecord> records;
    for (int p = 0; p < 2; ++p)
      for (int64_t i = produced; i < produced + chunk; ++i)
        records.push_back({"{\"n\": " + std::to_string(i) + ", \"p\": \"" + std::to_string(p) +
                               "\", \"t\": " + std::to_string(1'700'000'000'000 + i) + "}",
                           std::nullopt,
                           {},
                           p});
    kafka.produce(topic, records);
    produced += chunk;
  };
  const std::string key = "ikill" + std::to_string(version);
  const std::string block =
      "batch_length = 500\nproperties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config = "measurement = \"k\"\ntags = [\"p\"]\ntimestamp_field = \"t\"\nmax_request_lines = 500";
  auto points = [&] { return server().point_count(db, "k"); };
  int64_t window = 0;
  for (int run = 0; run < 15 && window <= 0; ++run) {  // a kill lands in the window only sometimes under load
    produce_chunk();
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(run));
    rt.add_definition("c.toml", definition(key, topic, version, db, config, block));
    rt.start();
    const int64_t before = points();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (points() <= before && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    ASSERT_GT(points(), before) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    std::this_thread::sleep_for(500ms);
    window = points() - committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] run " << run << ": killed with " << points() << " points, "
              << committed_sum(kafka, group_of(key), topic, 2) << " committed\n";
  }
  ASSERT_GT(window, 0) << "no kill left written points uncommitted";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition(key, topic, version, db, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == 2 * produced; }, 120s))
      << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(points(), 2 * produced) << "the replayed window overwrote its points: one per record";
}

INSTANTIATE_TEST_SUITE_P(Versions, InfluxKafka, ::testing::Values(1, 2),
                         [](const auto& info) { return "v" + std::to_string(info.param); });
INSTANTIATE_TEST_SUITE_P(Policies, InfluxBadRecords,
                         ::testing::Values(std::tuple{2, std::string("fail")}, std::tuple{2, std::string("skip")},
                                           std::tuple{2, std::string("dead_letter")},
                                           std::tuple{1, std::string("dead_letter")}),
                         [](const auto& info) {
                           return "v" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace picomq::test
