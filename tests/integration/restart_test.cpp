// Restarts after a crash. A SIGKILLed runtime leaves a group member behind that the broker only
// drops after session.timeout.ms (librdkafka's default 45 s): a restarted runtime gets no
// partitions until then. With [broker] group_instance_id (static membership) it takes the dead
// member's place at once.
#include <gtest/gtest.h>

#include <csignal>

#include "harness.h"

namespace picomq::test {
namespace {

// Seconds from start until the restarted runtime has its partition again.
double seconds_to_reassignment(const std::string& broker_lines, const std::string& key) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name(key);
  kafka.create_topic(topic);
  const std::string block = "topics = [\"" + topic + "\"]\nproperties = { \"session.timeout.ms\" = \"30000\" }";
  {
    Runtime rt(kafka.bootstrap(), key + "-a");
    rt.broker_settings(broker_lines);
    rt.add_definition("s.toml", testkit_definition(key, block, testkit_config(rt)));
    rt.start();
    EXPECT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
    rt.kill_hard();
  }
  Runtime rt(kafka.bootstrap(), key + "-b");
  rt.broker_settings(broker_lines);
  rt.add_definition("s.toml", testkit_definition(key, block, testkit_config(rt)));
  const auto t0 = std::chrono::steady_clock::now();
  rt.start();
  EXPECT_TRUE(rt.wait_assigned(key, 60s)) << rt.log();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kafka.produce_values(topic, json_values(0, 5));
  EXPECT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-" + key, topic) == 5; }, 30s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  return seconds;
}

TEST(Restart, StaticMembershipGetsThePartitionsBackAtOnceAfterASigkill) {
  const double with_static = seconds_to_reassignment("group_instance_id = \"host-a\"", "static");
  EXPECT_LT(with_static, 10.0) << "static member takes the dead member's place (session timeout is 30 s)";
  const double dynamic = seconds_to_reassignment("", "dynamic");
  EXPECT_GT(dynamic, 20.0) << "a dynamic member waits for the dead one's session to time out";
  std::printf("[ NOTE ] reassignment after SIGKILL: static %.1f s, dynamic %.1f s\n", with_static, dynamic);
}

}  // namespace
}  // namespace picomq::test
