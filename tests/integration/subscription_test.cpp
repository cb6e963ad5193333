// Subscriptions: explicit lists, anchored patterns re-evaluated while running, their union,
// auto_offset_reset, and two runtimes with one definition (one works, one idles, then takes over).
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>
#include <thread>

#include "harness.h"

namespace picomq::test {
namespace {

std::string regex_escape(const std::string& s) { return std::regex_replace(s, std::regex(R"([.\-])"), R"(\$&)"); }

size_t count_lines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

size_t count_prefix(const std::vector<std::string>& ids, const std::string& prefix) {
  return std::count_if(ids.begin(), ids.end(), [&](const std::string& id) { return id.rfind(prefix, 0) == 0; });
}

TEST(Subscription, PatternIsAnchoredReEvaluatedAndUnitedWithTheExplicitList) {
  auto& kafka = Kafka::shared();
  const auto base = unique_name("pat");
  const auto eu = base + ".eu", us = base + ".us", decoy = "x" + base + ".eu", other = base + "-other";
  kafka.create_topic(eu);
  kafka.create_topic(decoy);
  kafka.create_topic(other);
  kafka.produce_values(eu, json_values(0, 5));
  kafka.produce_values(decoy, json_values(0, 5));
  kafka.produce_values(other, json_values(0, 5));

  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "p.toml",
      testkit_definition("pat", "topics = [\"" + other + "\"]\npattern = '" + regex_escape(base) + "\\.[a-z]+'",
                         testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "records.log").ids.size() >= 10; }, 30s)) << rt.log();

  // A topic created after the sink started is consumed within the 2 s refresh plus a rebalance.
  kafka.create_topic(us);
  const auto created = std::chrono::steady_clock::now();
  kafka.produce_values(us, json_values(0, 5));
  ASSERT_TRUE(
      wait_until([&] { return count_prefix(TestkitLog::read(rt.dir() / "records.log").ids, us + ":") == 5; }, 30s))
      << rt.log();
  const auto took = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - created);
  EXPECT_LE(took.count(), scaled(12s).count()) << "2 s pattern refresh + group rebalance";
  EXPECT_NE(rt.log().find("subscribing to '" + us + "'"), std::string::npos);

  kafka.produce_values(eu, json_values(5, 8));
  ASSERT_TRUE(
      wait_until([&] { return count_prefix(TestkitLog::read(rt.dir() / "records.log").ids, eu + ":") == 8; }, 20s));
  auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  EXPECT_EQ(count_prefix(ids, decoy), 0u) << "the pattern is anchored: x<base>.eu must not match";
  EXPECT_EQ(count_prefix(ids, other + ":"), 5u) << "explicit topics are united with the pattern";
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "no record twice across the rebalance";
  const std::string group = "picomq-connect-sink-pat";
  EXPECT_TRUE(wait_until([&] { return kafka.committed(group, us) == 5 && kafka.committed(group, eu) == 8; }, 10s));
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Subscription, LatestStartsAtTheTailEarliestAtTheBeginning) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("latest");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5));
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "l.toml",
      testkit_definition("latest", "topics = [\"" + topic + "\"]\nauto_offset_reset = \"latest\"", testkit_config(rt)));
  rt.add_definition("e.toml",
                    testkit_definition("earliest", "topics = [\"" + topic + "\"]", testkit_config(rt, "early")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("latest", 30s)) << rt.log();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "early.log").ids.size() == 5; }, 30s));
  std::this_thread::sleep_for(scaled(1s));  // the latest consumer has fetched its start position
  kafka.produce_values(topic, json_values(5, 8));
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "records.log").ids.size() >= 3; }, 20s)) << rt.log();
  std::this_thread::sleep_for(scaled(500ms));
  auto ids = TestkitLog::read(rt.dir() / "records.log").ids;
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], topic + ":0:5");
  EXPECT_EQ(TestkitLog::read(rt.dir() / "early.log").ids.size(), 8u);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Subscription, SecondRuntimeWithTheSameDefinitionIdlesThenTakesOver) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("twin");
  kafka.create_topic(topic);
  Runtime a(kafka.bootstrap(), "twin-a"), b(kafka.bootstrap(), "twin-b");
  a.add_definition("t.toml", testkit_definition("twin", "topics = [\"" + topic + "\"]", testkit_config(a)));
  b.add_definition("t.toml", testkit_definition("twin", "topics = [\"" + topic + "\"]", testkit_config(b)));
  a.start();
  ASSERT_TRUE(a.wait_assigned("twin", 30s)) << a.log();
  b.start();
  ASSERT_TRUE(b.wait_state("twin", "running", 30s)) << b.log();
  std::this_thread::sleep_for(scaled(4s));  // b joined the group; the rebalance kept a as owner
  kafka.produce_values(topic, json_values(0, 50));
  ASSERT_TRUE(wait_until(
      [&] {
        return TestkitLog::read(a.dir() / "records.log").ids.size() +
                   TestkitLog::read(b.dir() / "records.log").ids.size() ==
               50;
      },
      30s));
  const auto first_owner_a = TestkitLog::read(a.dir() / "records.log").ids.size();
  const auto first_owner_b = TestkitLog::read(b.dir() / "records.log").ids.size();
  EXPECT_TRUE((first_owner_a == 50 && first_owner_b == 0) || (first_owner_a == 0 && first_owner_b == 50))
      << "one runtime consumes everything, the other idles: " << first_owner_a << " / " << first_owner_b;
  Runtime& owner = first_owner_a == 50 ? a : b;
  Runtime& idle = first_owner_a == 50 ? b : a;
  EXPECT_TRUE(idle.block_status("twin").value("assigned", nlohmann::json::array()).empty());

  owner.signal(SIGTERM);
  ASSERT_EQ(owner.wait_exit(30s), 0) << owner.log();
  kafka.produce_values(topic, json_values(50, 100));
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(idle.dir() / "records.log").ids.size() == 50; }, 60s))
      << idle.log();
  auto taken = TestkitLog::read(idle.dir() / "records.log").ids;
  EXPECT_EQ(taken.front(), topic + ":0:50") << "the idle runtime takes over from the committed offset";
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-twin", topic) == 100; }, 10s));
  idle.signal(SIGTERM);
  EXPECT_EQ(idle.wait_exit(30s), 0);
}

// The three ways a group can rebalance: KIP-848 (what "auto" picks on the tests' Kafka 4.x), the
// classic protocol with the cooperative-sticky assignor (the runtime's classic default), and the
// classic eager one (range, which librdkafka 2.0 used by default).
struct GroupProtocolCase {
  std::string name;
  std::string broker_lines;  // [broker] settings
  std::string properties;    // [broker.properties] lines
  std::string logged;        // the consumer's "group protocol ..." line
  bool incremental = true;   // a join revokes only what moves
};

class RebalanceByProtocol : public ::testing::TestWithParam<GroupProtocolCase> {};

TEST_P(RebalanceByProtocol, HandsPartitionsOverWithoutGapsOrDuplicates) {
  const auto& protocol = GetParam();
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("rebal");
  const int partitions = 4, per_partition = 1500;
  kafka.create_topic(topic, partitions);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < per_partition; ++i)
    for (int p = 0; p < partitions; ++p) records.push_back({"{\"i\":" + std::to_string(i) + "}", std::nullopt, {}, p});
  kafka.produce(topic, records);

  // Slow enough that the second runtime joins while the first still has plenty buffered.
  const std::string block = "topics = [\"" + topic + "\"]\nbatch_length = 50";
  Runtime a(kafka.bootstrap(), "rebal-a"), b(kafka.bootstrap(), "rebal-b");
  for (Runtime* rt : {&a, &b}) {
    rt->broker_settings(protocol.broker_lines +
                        (protocol.properties.empty() ? "" : "[broker.properties]\n" + protocol.properties));
    rt->add_definition("r.toml", testkit_definition("rebal", block, testkit_config(*rt) + "\ndelay_ms = 60"));
  }
  a.start();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(a.dir() / "records.log").ids.size() >= 300; }, 30s)) << a.log();
  EXPECT_NE(a.log().find(protocol.logged), std::string::npos) << a.log();
  b.start();
  const std::string group = "picomq-connect-sink-rebal";
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group, topic, partitions, per_partition); }, 120s))
      << a.log() << b.log();
  auto ids_a = TestkitLog::read(a.dir() / "records.log").ids, ids_b = TestkitLog::read(b.dir() / "records.log").ids;
  EXPECT_GT(ids_b.size(), 0u) << "the second runtime got partitions";
  const std::string log_a = a.log();
  const size_t revoked = count_lines(log_a, ": revoked " + topic);
  EXPECT_GE(revoked, 1u) << log_a;
  if (protocol.incremental)
    EXPECT_LT(revoked, size_t(partitions)) << "an incremental rebalance moves only what changes owner\n" << log_a;
  else EXPECT_EQ(revoked, size_t(partitions)) << "an eager rebalance revokes everything\n" << log_a;
  std::multiset<std::string> all(ids_a.begin(), ids_a.end());
  all.insert(ids_b.begin(), ids_b.end());
  std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), size_t(partitions * per_partition)) << "nothing skipped";
  EXPECT_EQ(all.size(), unique.size()) << "nothing delivered twice: revoked partitions commit before they go";
  EXPECT_EQ(std::set<std::string>(ids_a.begin(), ids_a.end()).size(), ids_a.size());
  a.signal(SIGTERM);
  b.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(30s), 0);
  EXPECT_EQ(b.wait_exit(30s), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Subscription, RebalanceByProtocol,
    ::testing::Values(
        GroupProtocolCase{"Kip848ChosenByAuto", "", "", "group protocol consumer (auto: the broker offers KIP-848)"},
        GroupProtocolCase{"ClassicCooperativeSticky", "group_protocol = \"classic\"\n", "",
                          "group protocol classic (group_protocol = \"classic\")"},
        GroupProtocolCase{"ClassicEager", "", "\"partition.assignment.strategy\" = \"range\"\n",
                          "group protocol classic (auto: property 'partition.assignment.strategy'", false}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace picomq::test
