// A fleet: five runtimes with the same two definitions, each sink a consumer group, on a
// 24-partition topic, records produced throughout, runtimes joining, leaving with SIGTERM and
// dying with SIGKILL, once per group protocol (KIP-848, classic cooperative-sticky, classic
// eager). One sink appends (the testkit's record log), one is idempotent (PostgreSQL, insert
// mode: pico_id is the primary key). Nothing is lost in either; the append sink writes nothing
// twice across the graceful joins and leaves, and after the SIGKILL only what the killed runtime
// wrote and had not committed; the table holds each record once. Per protocol it prints
// the longest commit gap of the partitions that did not change owner, and how long a departed
// runtime's partitions wait before someone consumes them again (docs/runtime.md, "Fleets").
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPartitions = 24;

struct FleetCase {
  std::string name;
  std::string broker_lines;  // [broker] settings, then [broker.properties]
  bool incremental = true;   // a rebalance leaves the partitions that do not move alone
};

int64_t offset_of(const std::string& id) { return std::stoll(id.substr(id.rfind(':') + 1)); }
int32_t partition_of(const std::string& id) {
  const auto last = id.rfind(':');
  const auto prev = id.rfind(':', last - 1);
  return std::stoi(id.substr(prev + 1, last - prev - 1));
}

// The group's committed offsets, sampled every 100 ms from outside the group (a client with the
// group's id that never joins it), and which runtime owns each partition (their status files).
class FleetWatch {
 public:
  FleetWatch(const std::string& bootstrap, const std::string& group, const std::string& topic,
             std::vector<Runtime*> runtimes, const std::string& key)
      : topic_(topic), runtimes_(std::move(runtimes)), key_(key) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof err);
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    thread_ = std::thread([this] { run(); });
  }
  ~FleetWatch() {
    stop_ = true;
    thread_.join();
    rd_kafka_destroy(rk_);
  }

  struct Sample {
    Clock::time_point at;
    std::array<int64_t, kPartitions> committed{};
    std::array<int, kPartitions> owner{};  // index into runtimes, -1 none
  };
  // Before a runtime is stopped or killed (its process is the main thread's to wait for).
  void departed(size_t runtime) { alive_[runtime] = false; }
  std::vector<Sample> samples() {
    std::lock_guard lock(mutex_);
    return samples_;
  }

 private:
  void run() {
    while (!stop_) {
      // Who was alive before the sample's time: a runtime departing while this sample reads its
      // offsets is still its partitions' owner in it (samples before a kill must show the killed).
      std::array<bool, 8> alive{};
      for (size_t r = 0; r < alive.size(); ++r) alive[r] = alive_[r];
      Sample s;
      s.at = Clock::now();
      rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(kPartitions);
      for (int p = 0; p < kPartitions; ++p) rd_kafka_topic_partition_list_add(list, topic_.c_str(), p);
      const bool ok = rd_kafka_committed(rk_, list, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
      for (int p = 0; p < kPartitions; ++p) s.committed[p] = ok ? list->elems[p].offset : -1;
      rd_kafka_topic_partition_list_destroy(list);
      s.owner.fill(-1);
      for (size_t r = 0; r < runtimes_.size(); ++r) {
        if (!alive[r]) continue;  // a stopped or killed runtime's status file keeps its last assignment
        for (const auto& tp : runtimes_[r]->block_status(key_).value("assigned", nlohmann::json::array())) {
          const std::string name = tp.get<std::string>();
          const int p = std::stoi(name.substr(name.rfind('[') + 1));
          if (p >= 0 && p < kPartitions) s.owner[p] = static_cast<int>(r);
        }
      }
      if (ok) {
        std::lock_guard lock(mutex_);
        samples_.push_back(s);
      }
      std::this_thread::sleep_for(100ms);
    }
  }

  std::string topic_;
  std::vector<Runtime*> runtimes_;
  std::string key_;
  rd_kafka_t* rk_ = nullptr;
  std::atomic<bool> stop_{false};
  std::array<std::atomic<bool>, 8> alive_{true, true, true, true, true, true, true, true};
  std::mutex mutex_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

// Owners just before `at`.
std::array<int, kPartitions> owners_before(const std::vector<FleetWatch::Sample>& samples, Clock::time_point at) {
  std::array<int, kPartitions> owners{};
  owners.fill(-1);
  for (const auto& s : samples)
    if (s.at < at) owners = s.owner;
  return owners;
}

// The longest time, within [from, to], that one of `partitions` went without its committed offset
// advancing (while records were produced to all of them).
double longest_commit_gap(const std::vector<FleetWatch::Sample>& samples, const std::set<int>& partitions,
                          Clock::time_point from, Clock::time_point to) {
  double longest = 0;
  for (int p : partitions) {
    std::optional<Clock::time_point> last_advance;
    int64_t last = -1;
    for (const auto& s : samples) {
      if (s.committed[p] != last) {
        if (last_advance && s.at >= from && *last_advance <= to)
          longest = std::max(longest,
                             std::chrono::duration<double>(std::min(s.at, to) - std::max(*last_advance, from)).count());
        last = s.committed[p];
        last_advance = s.at;
      }
    }
  }
  return longest;
}

// How long after `at` until every one of `partitions` had its committed offset advance past where
// it stood at `settled` (once the departed runtime could commit no more: its exit, or its death).
double consumed_again_after(const std::vector<FleetWatch::Sample>& samples, const std::set<int>& partitions,
                            Clock::time_point at, Clock::time_point settled) {
  double slowest = 0;
  for (int p : partitions) {
    int64_t at_settled = -2;
    double after = -1;
    for (const auto& s : samples) {
      if (s.at <= settled) {
        at_settled = s.committed[p];
        continue;
      }
      if (s.committed[p] != at_settled) {
        after = std::chrono::duration<double>(s.at - at).count();
        break;
      }
    }
    if (after < 0) return -1;  // never
    slowest = std::max(slowest, after);
  }
  return slowest;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class Fleet : public ::testing::TestWithParam<FleetCase> {};

TEST_P(Fleet, JoinsLeavesAndAKillLoseNothingAndDuplicateOnlyTheKilledRuntimesUncommittedRecords) {
  const auto& protocol = GetParam();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("fleet");
  kafka.create_topic(topic, kPartitions);
  const std::string key = "fleet", table_key = "fleetpg";
  const std::string group = "picomq-connect-sink-" + key, table_group = "picomq-connect-sink-" + table_key;
  auto& pg = Postgres::shared();
  const std::string db = pg.create_database("fleet");

  std::vector<std::unique_ptr<Runtime>> fleet;
  for (const char* name : {"fleet-a", "fleet-b", "fleet-c", "fleet-d", "fleet-e"}) {
    auto rt = std::make_unique<Runtime>(kafka.bootstrap(), name);
    rt->broker_settings(protocol.broker_lines);
    rt->add_definition(
        "f.toml", testkit_definition(key, "topics = [\"" + topic + "\"]\nbatch_length = 50\npoll_interval = \"200ms\"",
                                     testkit_config(*rt)));
    const std::string table_definition = postgres_definition(
        table_key, "\"" + topic + "\"", db, "schema = \"json\"\nbatch_length = 50\npoll_interval = \"200ms\"",
        "target_table = \"fleet\"");
    rt->add_definition("pg.toml", table_definition);
    fleet.push_back(std::move(rt));
  }
  Runtime &a = *fleet[0], &b = *fleet[1], &c = *fleet[2], &d = *fleet[3], &e = *fleet[4];

  // ~1000 records/s over the 24 partitions until told to stop.
  std::atomic<bool> producing{true};
  std::array<std::atomic<int64_t>, kPartitions> produced{};
  std::thread producer([&] {
    int64_t seq = 0;
    while (producing) {
      std::vector<ProducedRecord> burst;
      for (int p = 0; p < kPartitions; ++p)
        for (int i = 0; i < 2; ++i) burst.push_back({"{\"seq\":" + std::to_string(seq++) + "}", std::nullopt, {}, p});
      kafka.produce(topic, burst);
      for (int p = 0; p < kPartitions; ++p) produced[p] += 2;
      std::this_thread::sleep_for(50ms);
    }
  });

  a.start();
  b.start();
  c.start();
  e.start();
  FleetWatch watch(kafka.bootstrap(), group, topic, {&a, &b, &c, &d, &e}, key);
  auto all_owned = [&](std::initializer_list<Runtime*> members) {
    for (const auto& k : {key, table_key}) {
      size_t total = 0;
      for (Runtime* rt : members) {
        const auto n = rt->block_status(k).value("assigned", nlohmann::json::array()).size();
        if (n == 0) return false;
        total += n;
      }
      if (total != kPartitions) return false;
    }
    return true;
  };
  ASSERT_TRUE(wait_until([&] { return all_owned({&a, &b, &c, &e}); }, 60s)) << a.log() << b.log() << c.log();
  std::this_thread::sleep_for(4s);

  const std::string revoked = ": revoked " + topic + "[";
  auto revocations = [&] {
    // The append sink's block only (each sink's log lines name it).
    const std::string mine = "sink '" + key + "' topics[0]" + revoked;
    return count_of(a.log(), mine) + count_of(b.log(), mine) + count_of(c.log(), mine) + count_of(e.log(), mine);
  };
  const size_t revoked_before_join = revocations();
  const auto joined_at = Clock::now();
  d.start();
  ASSERT_TRUE(wait_until([&] { return all_owned({&a, &b, &c, &d, &e}); }, 60s)) << d.log();
  std::this_thread::sleep_for(6s);
  const size_t revoked_by_the_join = revocations() - revoked_before_join;
  const size_t taken_by_d = d.block_status(key).value("assigned", nlohmann::json::array()).size();

  const auto left_at = Clock::now();
  watch.departed(1);
  b.signal(SIGTERM);
  ASSERT_EQ(b.wait_exit(30s), 0) << b.log();
  const auto b_exited = Clock::now();
  ASSERT_TRUE(wait_until([&] { return all_owned({&a, &c, &d, &e}); }, 60s)) << a.log();
  std::this_thread::sleep_for(6s);

  const auto killed_at = Clock::now();
  const auto owners_at_kill = owners_before(watch.samples(), killed_at);
  watch.departed(2);
  c.kill_hard();
  std::this_thread::sleep_for(3s);
  // What the group had committed when C died (its last requests landed): C's partitions stay its
  // own until the broker drops it, 10 s after its last heartbeat.
  const auto committed_at_kill = watch.samples().back().committed;
  ASSERT_TRUE(wait_until([&] { return all_owned({&a, &d, &e}); }, 60s)) << a.log() << d.log();
  std::this_thread::sleep_for(4s);

  producing = false;
  producer.join();
  ASSERT_TRUE(wait_until(
      [&] {
        for (int p = 0; p < kPartitions; ++p)
          if (kafka.committed(group, topic, p) != produced[p] || kafka.committed(table_group, topic, p) != produced[p])
            return false;
        return true;
      },
      90s))
      << a.log() << d.log() << e.log();
  const auto samples = watch.samples();
  for (Runtime* rt : {&a, &d, &e}) rt->signal(SIGTERM);
  for (Runtime* rt : {&a, &d, &e}) EXPECT_EQ(rt->wait_exit(30s), 0) << rt->log();

  // The idempotent sink: each record once, by its pico_id (topic:partition:offset), whatever was
  // delivered again after the kill.
  int64_t total = 0;
  for (int p = 0; p < kPartitions; ++p) total += produced[p];
  const auto rows =
      pg.query("SELECT count(*), count(DISTINCT pico_id), count(*) FILTER (WHERE payload ? 'seq') FROM fleet", db);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(std::stoll(*rows[0][0]), total) << "the table holds every record";
  EXPECT_EQ(std::stoll(*rows[0][1]), total) << "once each";
  EXPECT_EQ(std::stoll(*rows[0][2]), total) << "with its payload";

  // Every record written at least once; twice only where C was killed, past what it committed.
  std::map<std::pair<int, int64_t>, int> writes;
  std::map<int, int64_t> written_by_c;  // partition -> records C wrote past the commit at its death
  for (size_t r = 0; r < fleet.size(); ++r)
    for (const auto& id : TestkitLog::read(fleet[r]->dir() / "records.log").ids) {
      const int p = partition_of(id);
      const int64_t o = offset_of(id);
      ++writes[{p, o}];
      if (r == 2 && o >= committed_at_kill[p]) ++written_by_c[p];
    }
  int64_t lost = 0, duplicates = 0, duplicates_outside_the_kill = 0, bound = 0;
  for (int p = 0; p < kPartitions; ++p) {
    for (int64_t o = 0; o < produced[p]; ++o) {
      const int n = writes.count({p, o}) ? writes[{p, o}] : 0;
      if (n == 0) ++lost;
      if (n > 1) {
        duplicates += n - 1;
        if (owners_at_kill[p] != 2 || o < committed_at_kill[p]) duplicates_outside_the_kill += n - 1;
      }
    }
    if (owners_at_kill[p] == 2) bound += written_by_c[p];
  }
  EXPECT_EQ(lost, 0) << "nothing lost";
  EXPECT_EQ(duplicates_outside_the_kill, 0) << "graceful joins and leaves write nothing twice";
  EXPECT_LE(duplicates, bound) << "after the kill, only what C wrote past its last commit";

  // Per event: the partitions that kept their owner, and the departed runtime's partitions.
  auto kept_owner = [&](Clock::time_point at, int departed) {
    const auto before = owners_before(samples, at);
    const auto after = owners_before(samples, at + 8s);
    std::set<int> kept, moved_from_departed;
    for (int p = 0; p < kPartitions; ++p) {
      if (before[p] == departed) moved_from_departed.insert(p);
      else if (before[p] >= 0 && before[p] == after[p]) kept.insert(p);
    }
    return std::pair{kept, moved_from_departed};
  };
  const auto [kept_join, none] = kept_owner(joined_at, -2);
  const auto [kept_leave, from_b] = kept_owner(left_at, 1);
  const auto [kept_kill, from_c] = kept_owner(killed_at, 2);
  const double gap_join = longest_commit_gap(samples, kept_join, joined_at, joined_at + 8s);
  const double gap_leave = longest_commit_gap(samples, kept_leave, left_at, left_at + 8s);
  const double gap_kill = longest_commit_gap(samples, kept_kill, killed_at, killed_at + 15s);
  const double again_leave = consumed_again_after(samples, from_b, left_at, b_exited);
  // C's last commit requests can still land a moment after its death (a loaded broker took more
  // than 300 ms in CI); nobody else can own its partitions before the 10 s session timeout.
  const double again_kill = consumed_again_after(samples, from_c, killed_at, killed_at + 3s);
  const auto quiet_from = joined_at - 4s;
  std::set<int> all;
  for (int p = 0; p < kPartitions; ++p) all.insert(p);
  const double gap_quiet = longest_commit_gap(samples, all, quiet_from, joined_at);
  std::printf(
      "[ NOTE ] fleet %s: %zu records over %d partitions, lost %lld, duplicates %lld (bound %lld), table rows %lld. D "
      "joining: %zu "
      "partitions revoked for the %zu it took. Longest commit gap of partitions that kept their owner: no event %.1f "
      "s, "
      "D joins %.1f s, B leaves (SIGTERM) %.1f s, C killed %.1f s. A departed runtime's partitions consumed again "
      "after: SIGTERM %.1f s, SIGKILL %.1f s\n",
      protocol.name.c_str(), writes.size(), kPartitions, static_cast<long long>(lost),
      static_cast<long long>(duplicates), static_cast<long long>(bound), static_cast<long long>(total),
      revoked_by_the_join, taken_by_d, gap_quiet, gap_join, gap_leave, gap_kill, again_leave, again_kill);
  EXPECT_GE(again_leave, 0) << "B's partitions are consumed again";
  EXPECT_LT(again_leave, 10) << "a SIGTERM leaves the group: no session timeout to wait for";
  EXPECT_FALSE(from_c.empty()) << "C owned partitions when it was killed";
  EXPECT_GE(again_kill, 5) << "a killed member keeps its partitions until its session times out (10 s)";
  EXPECT_LT(again_kill, 30);
  if (protocol.incremental)
    EXPECT_EQ(revoked_by_the_join, taken_by_d) << "only the partitions D takes are revoked; the others keep flowing";
  else EXPECT_EQ(revoked_by_the_join, size_t(kPartitions)) << "an eager rebalance revokes every partition";
  EXPECT_LT(gap_join, 10);
  EXPECT_LT(gap_leave, 10);
}

INSTANTIATE_TEST_SUITE_P(
    Fleets, Fleet,
    ::testing::Values(FleetCase{"Kip848", "group_protocol = \"consumer\"\n"},
                      FleetCase{"ClassicCooperativeSticky",
                                "group_protocol = \"classic\"\n[broker.properties]\n\"session.timeout.ms\" = 10000\n"},
                      FleetCase{"ClassicEager",
                                "group_protocol = \"classic\"\n[broker.properties]\n\"session.timeout.ms\" = 10000\n"
                                "\"partition.assignment.strategy\" = \"range\"\n",
                                false}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace picomq::test
