// The runtime killed with SIGKILL at random moments while consuming, restarted, repeated:
// nothing is lost, and records are delivered twice only from the uncommitted window.
// PICOMQ_CRASH_ITERATIONS sets the number of kills (CI: 5; the soak command: 200).
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "harness.h"

namespace picomq::test {
namespace {

int iterations() {
  const char* v = std::getenv("PICOMQ_CRASH_ITERATIONS");
  return v ? std::max(1, std::atoi(v)) : 5;
}

int64_t offset_of(const std::string& id) { return std::stoll(id.substr(id.rfind(':') + 1)); }
int32_t partition_of(const std::string& id) {
  auto last = id.rfind(':');
  auto prev = id.rfind(':', last - 1);
  return std::stoi(id.substr(prev + 1, last - prev - 1));
}

TEST(Crash, SigkillAtRandomMomentsLosesNothingAndDuplicatesOnlyTheUncommittedWindow) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("crash");
  const int partitions = 2;
  const int64_t per_partition = 15000;
  kafka.create_topic(topic, partitions);
  std::vector<ProducedRecord> records;
  for (int p = 0; p < partitions; ++p)
    for (int64_t i = 0; i < per_partition; ++i)
      records.push_back({"{\"i\":" + std::to_string(i) + "}", std::nullopt, {}, p});
  kafka.produce(topic, records);

  const std::string group = "picomq-connect-sink-crash";
  // Static membership: a restarted runtime takes its old place at once instead of waiting for
  // the killed member's session to time out.
  const std::string block = "topics = [\"" + topic +
                            "\"]\nbatch_length = 100\nproperties = { \"group.instance.id\" = \"crash-test\", "
                            "\"session.timeout.ms\" = \"6000\" }";
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> kill_after_ms(0, 800);
  std::map<int32_t, std::set<int64_t>> seen;
  size_t delivered = 0, duplicates = 0;

  auto committed = [&](int32_t p) { return std::max<int64_t>(0, kafka.committed(group, topic, p)); };
  bool finished = false;
  for (int run = 0; !finished; ++run) {
    std::map<int32_t, int64_t> start_at;
    for (int p = 0; p < partitions; ++p) start_at[p] = committed(p);
    const bool last_run = run >= iterations();
    Runtime rt(kafka.bootstrap(), "crash-" + std::to_string(run));
    rt.add_definition("c.toml",
                      testkit_definition("crash", block,
                                         "log_path = \"" + (rt.dir() / "records.log").string() + "\"\ndelay_ms = 15"));
    rt.start();
    if (!last_run) {
      // Kill while it is consuming: after its first write, at a random moment.
      ASSERT_TRUE(wait_until([&] { return !read_lines(rt.dir() / "records.log").empty(); }, 60s)) << rt.log();
      std::this_thread::sleep_for(Millis(kill_after_ms(rng)));
      rt.kill_hard();
    } else {
      ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, partitions, per_partition); }, 120s))
          << rt.log();
      rt.signal(SIGTERM);
      ASSERT_EQ(rt.wait_exit(30s), 0);
      finished = true;
    }
    // Per partition, this run's records are one contiguous range that starts exactly at the
    // offset committed before it started: nothing skipped, nothing replayed from before it.
    std::map<int32_t, std::vector<int64_t>> offsets;
    for (const auto& id : TestkitLog::read(rt.dir() / "records.log").ids)
      offsets[partition_of(id)].push_back(offset_of(id));
    std::cout << "run " << run << ":";
    for (auto& [p, list] : offsets) std::cout << " p" << p << " " << list.front() << ".." << list.back();
    std::cout << "\n";
    for (auto& [p, list] : offsets) {
      ASSERT_FALSE(list.empty());
      EXPECT_EQ(list.front(), start_at[p]) << "run " << run << " partition " << p;
      for (size_t i = 1; i < list.size(); ++i)
        ASSERT_EQ(list[i], list[i - 1] + 1) << "run " << run << " partition " << p;
      for (auto o : list) {
        ++delivered;
        if (!seen[p].insert(o).second) ++duplicates;
      }
      // The commit never runs ahead of what was written.
      EXPECT_LE(committed(p), list.back() + 1) << "run " << run << " partition " << p;
    }
  }
  for (int p = 0; p < partitions; ++p) {
    EXPECT_EQ(seen[p].size(), size_t(per_partition)) << "partition " << p << ": every record delivered";
    EXPECT_EQ(*seen[p].rbegin(), per_partition - 1);
  }
  std::cout << "crash test: " << iterations() << " kills, " << delivered << " deliveries, " << duplicates
            << " duplicates (uncommitted window)\n";
}

}  // namespace
}  // namespace picomq::test
