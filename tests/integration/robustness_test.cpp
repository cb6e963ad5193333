// Robustness: a slow or hung sink neither stalls others nor grows memory without bound; an
// unreachable broker is retried; bad definitions and plugins fail alone, with clear errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"

namespace picomq::test {
namespace {

TEST(Robustness, ASlowSinkDoesNotStallAnother) {
  auto& kafka = Kafka::shared();
  const auto slow_topic = unique_name("slow"), fast_topic = unique_name("fast");
  kafka.create_topic(slow_topic);
  kafka.create_topic(fast_topic);
  Runtime rt(kafka.bootstrap());
  rt.add_definition("slow.toml", testkit_definition("slow", "topics = [\"" + slow_topic + "\"]\nbatch_length = 5",
                                                    testkit_config(rt, "slow", "delay_ms = 10000")));
  rt.add_definition("fast.toml",
                    testkit_definition("fast", "topics = [\"" + fast_topic + "\"]", testkit_config(rt, "fast")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("slow", 30s) && rt.wait_assigned("fast", 30s)) << rt.log();
  kafka.produce_values(slow_topic, json_values(0, 50));
  std::this_thread::sleep_for(500ms);
  kafka.produce_values(fast_topic, json_values(0, 50));
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "fast.log").ids.size() == 50; }, 5s))
      << "the fast sink waited for the slow one";
  EXPECT_EQ(TestkitLog::read(rt.dir() / "slow.log").ids.size(), 0u) << "the slow sink is still in its first write";
  rt.signal(SIGKILL);
  rt.wait_exit(10s);
}

TEST(Robustness, HungSinkPausesTheConsumerWithinTheBufferLimitAndShutdownGivesUpAfterTheTimeout) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("hung");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 20000, 100));
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("max_buffered_records = 1000\nmax_buffered_bytes = \"8MiB\"\nshutdown_timeout = \"2s\"");
  rt.add_definition("h.toml", testkit_definition("hung", "topics = [\"" + topic + "\"]\nbatch_length = 100",
                                                 testkit_config(rt, "hung", "hang_on_call = 1")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.block_status("hung").value("paused", false); }, 30s)) << rt.log();
  std::this_thread::sleep_for(scaled(2s));
  auto block = rt.block_status("hung");
  EXPECT_TRUE(block.value("paused", false));
  EXPECT_LE(block.value("buffered_records", 0u), 1000u) << "what is buffered stays within max_buffered_records";
  EXPECT_GE(block.value("buffered_records", 0u), 100u);
  EXPECT_NE(rt.log().find("pausing the consumer until the sink catches up"), std::string::npos);
  EXPECT_EQ(kafka.committed("picomq-connect-sink-hung", topic), -1001);

  rt.signal(SIGTERM);
  auto code = rt.wait_exit(30s);
  ASSERT_TRUE(code.has_value()) << "shutdown must not hang on a hung sink";
  EXPECT_EQ(*code, 3);
  EXPECT_NE(rt.log().find("did not finish writing within shutdown_timeout"), std::string::npos) << rt.log();
  EXPECT_EQ(kafka.committed("picomq-connect-sink-hung", topic), -1001) << "the hung batch stays uncommitted";
}

// A sink slower than the consumer fills the buffer again and again: each pause must end with the
// partition fetched at once. librdkafka 2.12 left a resumed partition to its broker thread's next
// 1 s tick (measured: 40,000 records through a 5,000-record buffer took 38 s, 1.5 s with the wake).
TEST(Robustness, AResumedConsumerFetchesAtOnce) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("resume");
  kafka.create_topic(topic);
  constexpr int kRecords = 30000;
  kafka.produce_values(topic, json_values(0, kRecords, 100));
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("max_buffered_records = 1000");
  rt.add_definition("r.toml", testkit_definition("resume", "topics = [\"" + topic + "\"]\nbatch_length = 100",
                                                 testkit_config(rt, "resume", "delay_ms = 2")));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned("resume", 30s)) << rt.log();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-resume", topic) == kRecords; }, 120s))
      << rt.log();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t pauses = 0;
  const std::string log = rt.log();
  for (auto at = log.find("pausing the consumer"); at != std::string::npos;
       at = log.find("pausing the consumer", at + 1))
    ++pauses;
  std::printf("[ NOTE ] %d records through a 1000-record buffer: %.1f s, %zu pauses\n", kRecords, seconds, pauses);
  EXPECT_GE(pauses, 10u) << "the sink is slower than the consumer: the buffer fills again and again";
  // 300 batches of 2 ms take 0.6 s of writing; a second idle per pause would take minutes.
  EXPECT_LT(seconds, 0.25 * static_cast<double>(pauses) + 10) << "resumes wait for nothing";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

TEST(Robustness, APluginThatHangsInCloseIsLeftAfterShutdownTimeoutAndTheOthersStopCleanly) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("closing");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("shutdown_timeout = \"2s\"");
  rt.add_definition("stuck.toml", testkit_definition("stuck", "topics = [\"" + topic + "\"]",
                                                     testkit_config(rt, "stuck", "hang_in_close = true")));
  rt.add_definition("fine.toml",
                    testkit_definition("fine", "topics = [\"" + topic + "\"]", testkit_config(rt, "fine")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-stuck", topic) == 10; }, 30s)) << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-fine", topic) == 10; }, 30s)) << rt.log();
  const auto stop = std::chrono::steady_clock::now();
  rt.signal(SIGTERM);
  const auto code = rt.wait_exit(30s);
  ASSERT_TRUE(code.has_value()) << "a close() that never returns must not keep the process up\n" << rt.log();
  EXPECT_EQ(*code, 3) << rt.log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, scaled(10s)) << "bounded by shutdown_timeout (2 s)";
  EXPECT_NE(rt.log().find("sink 'stuck': the plugin's close() did not return within shutdown_timeout (2000 ms)"),
            std::string::npos)
      << rt.log();
  EXPECT_EQ(rt.log().find("sink 'fine': the plugin's close() did not return"), std::string::npos) << rt.log();
  EXPECT_NE(rt.log().find("exiting without cleanup: a sink was still writing or closing"), std::string::npos)
      << rt.log();
  EXPECT_EQ(kafka.committed("picomq-connect-sink-stuck", topic), 10) << "what was written stays committed";
}

TEST(Robustness, UnreachableOrVanishingBrokerIsRetriedWithClearLogLines) {
  Kafka late(make_temp_dir("picomq-kafka-late"), free_port());
  const auto topic = unique_name("late");
  Runtime rt(late.bootstrap());
  rt.add_definition("l.toml", testkit_definition("late", "topics = [\"" + topic + "\"]", testkit_config(rt, "late")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.log().find("broker unreachable") != std::string::npos; }, 20s)) << rt.log();
  EXPECT_NE(rt.log().find("retrying"), std::string::npos);
  EXPECT_TRUE(rt.running());
  late.start();
  late.create_topic(topic);
  late.produce_values(topic, json_values(0, 10));
  EXPECT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "late.log").ids.size() == 10; }, 60s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return late.committed("picomq-connect-sink-late", topic) == 10; }, 20s));

  // The broker goes away while the sink runs, and comes back.
  auto count = [&](const std::string& needle) {
    const auto log = rt.log();
    size_t n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  // The recovery from the outage at start is said once it held 2 s (LoggedClient::kRecoverySettleMs):
  // an outage that begins sooner is the same outage.
  ASSERT_TRUE(wait_until([&] { return count("broker reachable again") == 1; }, 10s)) << rt.log();
  const size_t before = count("broker unreachable");
  late.stop();
  ASSERT_TRUE(wait_until([&] { return count("broker unreachable") > before; }, 30s)) << rt.log();
  EXPECT_TRUE(rt.running());
  late.resume();
  late.produce_values(topic, json_values(10, 20));
  EXPECT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "late.log").ids.size() >= 20; }, 90s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return late.committed("picomq-connect-sink-late", topic) == 20; }, 30s));
  auto ids = TestkitLog::read(rt.dir() / "late.log").ids;
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 20u);
  // A handled outage is warnings, not errors: an operator alerting on error lines is not paged.
  // (librdkafka's own FAIL lines, one per reconnect attempt, come at debug level.)
  const std::regex error_line(R"((^|\n)\S+ error [^\n]*)");
  const auto log = rt.log();
  EXPECT_FALSE(std::regex_search(log, error_line)) << log;
  EXPECT_EQ(log.find(" FAIL: "), std::string::npos) << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  late.stop();
}

// An outage is one warning and one recovery line, even while the sink still writes records
// fetched before the broker went away: those come out of librdkafka's queue during the outage
// and say nothing about the broker (a fleet on Kafka 4.4 logged unreachable, "reachable again
// after 0.0 s", unreachable again for one outage).
TEST(Robustness, ABrokerOutageIsOneLineEvenWhileRecordsFetchedBeforeItAreWritten) {
  Kafka broker(make_temp_dir("picomq-kafka-outage"), free_port());
  broker.start();
  const auto topic = unique_name("outage");
  broker.create_topic(topic);
  Runtime rt(broker.bootstrap());
  // Five records a batch, a second a write, at most two batches waiting: what was fetched beyond
  // them waits in librdkafka's queue.
  rt.add_definition("o.toml", testkit_definition("outage", "topics = [\"" + topic + "\"]\nbatch_length = 5",
                                                 testkit_config(rt, "outage", "delay_ms = 1000")));
  rt.start();
  broker.produce_values(topic, json_values(0, 40));
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "outage.log").ids.size() >= 5; }, 30s)) << rt.log();
  auto count = [&](const std::string& needle) {
    const auto log = rt.log();
    size_t n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  broker.stop();
  ASSERT_TRUE(wait_until([&] { return count("broker unreachable") == 1; }, 30s)) << rt.log();
  const size_t written_at_outage = TestkitLog::read(rt.dir() / "outage.log").ids.size();
  // The sink keeps writing what it fetched before; the outage stays one outage.
  EXPECT_TRUE(
      wait_until([&] { return TestkitLog::read(rt.dir() / "outage.log").ids.size() >= written_at_outage + 10; }, 30s))
      << rt.log();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(count("broker unreachable"), 1u) << rt.log();
  EXPECT_EQ(count("reachable again"), 0u) << "not while the broker is down: " << rt.log();
  broker.resume();
  EXPECT_TRUE(wait_until([&] { return count("reachable again") == 1; }, 60s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return broker.committed("picomq-connect-sink-outage", topic) == 40; }, 90s)) << rt.log();
  EXPECT_EQ(count("broker unreachable"), 1u) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  broker.stop();
}

TEST(Robustness, BadDefinitionsAndPluginsFailAloneWithClearErrors) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("good");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 10));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("good.toml",
                    testkit_definition("good", "topics = [\"" + topic + "\"]", testkit_config(rt, "good")));
  rt.add_definition(
      "misspelled.toml",
      testkit_definition("misspelled", "topics = [\"" + topic + "\"]\nbach_length = 10", testkit_config(rt, "m")));
  rt.add_definition("proto.toml", testkit_definition("proto", "topics = [\"" + topic + "\"]\nschema = \"proto\"",
                                                     testkit_config(rt, "p")));
  auto missing = testkit_definition("missing", "topics = [\"" + topic + "\"]", testkit_config(rt, "x"));
  missing.replace(missing.find("libpicomq_connector_testkit_sink"), 32, "libpicomq_connector_nope_sink");
  rt.add_definition("missing.toml", missing);
  auto future = testkit_definition("future", "topics = [\"" + topic + "\"]", testkit_config(rt, "f"));
  future.replace(future.find("libpicomq_connector_testkit_sink"), 32, "libpicomq_connector_testkit_future_abi_sink");
  rt.add_definition("future.toml", future);
  rt.add_definition("openfail.toml",
                    testkit_definition("openfail", "topics = [\"" + topic + "\"]",
                                       testkit_config(rt, "o", "open_error = \"cannot reach db:5432\"")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "good.log").ids.size() == 10; }, 30s)) << rt.log();

  auto misspelled = rt.sink_status("misspelled.toml");
  EXPECT_EQ(misspelled.value("state", ""), "invalid");
  const auto m = misspelled.value("message", "");
  EXPECT_NE(m.find("misspelled.toml:10:"), std::string::npos) << m;
  EXPECT_NE(m.find("bach_length"), std::string::npos) << m;
  EXPECT_NE(m.find("did you mean 'batch_length'"), std::string::npos) << m;

  const auto p = rt.sink_status("proto.toml").value("message", "");
  EXPECT_NE(p.find("schema = \"proto\" needs 'proto_files'"), std::string::npos) << p;

  EXPECT_EQ(rt.sink_state("missing"), "error");
  EXPECT_NE(rt.sink_status("missing").value("message", "").find("libpicomq_connector_nope_sink.so"), std::string::npos);
  EXPECT_EQ(rt.sink_state("future"), "error");
  EXPECT_NE(rt.sink_status("future").value("message", "").find("built for sink ABI 3.0"), std::string::npos);
  EXPECT_EQ(rt.sink_state("openfail"), "error");
  EXPECT_NE(rt.sink_status("openfail").value("message", "").find("cannot reach db:5432"), std::string::npos);
  EXPECT_EQ(rt.sink_state("good"), "running");

  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 1) << "invalid definitions make the exit code 1";
}

TEST(Robustness, EnvironmentVariablesAreInterpolatedIntoDefinitions) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("env");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 3));
  Runtime rt(kafka.bootstrap());
  rt.env("PICOMQ_TEST_TOPIC", topic);
  rt.env("PICOMQ_TEST_LOG", (rt.dir() / "from-env.log").string());
  rt.add_definition(
      "e.toml", testkit_definition("env", "topics = [\"${PICOMQ_TEST_TOPIC}\"]", "log_path = \"${PICOMQ_TEST_LOG}\""));
  rt.start();
  EXPECT_TRUE(wait_until([&] { return TestkitLog::read(rt.dir() / "from-env.log").ids.size() == 3; }, 30s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

}  // namespace
}  // namespace picomq::test

namespace picomq::test {
namespace {

// Nothing can make progress once every sink is in Error: the process exits 1 (a supervisor
// restarts or alerts) and the status says why; keep_running_on_error is tested in Commit.*.
TEST(Robustness, AProcessWhoseEverySinkFailedExitsNonZeroAndSaysWhy) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("allfail");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 3));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("a.toml", testkit_definition("allfail", "topics = [\"" + topic + "\"]",
                                                 testkit_config(rt, "a", "fail_times = 1\nfail_status = \"fatal\"")));
  rt.add_definition("b.toml", testkit_definition("openfails", "topics = [\"" + topic + "\"]",
                                                 testkit_config(rt, "b", "open_error = \"no such database\"")));
  rt.start();
  EXPECT_EQ(rt.wait_exit(30s), 1) << rt.log();
  EXPECT_NE(rt.log().find("no sink can make progress"), std::string::npos) << rt.log();
  EXPECT_EQ(rt.status()["runtime"].value("state", ""), "exiting");
  EXPECT_NE(rt.status()["runtime"].value("message", "").find("keep_running_on_error"), std::string::npos);
  EXPECT_EQ(rt.sink_state("allfail"), "error") << "sticky: the stop keeps the reason";
  EXPECT_NE(rt.sink_status("allfail").value("message", "").find("failed permanently"), std::string::npos);
}

}  // namespace
}  // namespace picomq::test

namespace picomq::test {
namespace {

// Every line the runtime writes to stderr is its logger's (a timestamp, a level, the sink and
// block): librdkafka's own lines ("%3|1700000000.123|FAIL|...") come through it too, for the
// consumers and the dead-letter producer alike, whether the broker answers or not.
void expect_only_formatted_lines(const std::string& log) {
  const std::regex formatted(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} (trace|debug|info|warning|error|critical) .*)");
  std::istringstream in(log);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == ' ') continue;  // a continuation of a multi-line message
    ++lines;
    EXPECT_TRUE(std::regex_match(line, formatted)) << "not the runtime's format: " << line;
  }
  EXPECT_GT(lines, 3u);
}

TEST(Robustness, LibrdkafkaLinesGoThroughTheRuntimesLoggerWithTheirSink) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("logs");
  const auto dead = unique_name("logs-dlq");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  kafka.produce_values(topic, {R"({"n":0})", "not json", R"({"n":2})"});
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "s.toml",
      testkit_definition(
          "logs", "topics = [\"" + topic + "\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"",
          testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.block_status("logs").value("dead_lettered_records", 0) == 1; }, 30s))
      << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  expect_only_formatted_lines(rt.log());

  // A broker that is not there: librdkafka's connection failures, through the logger.
  Runtime lonely("127.0.0.1:" + std::to_string(free_port()), "lonely");
  lonely.log_level("debug");  // each failed connection attempt is a debug line (one warning says the outage)
  lonely.add_definition("s.toml", testkit_definition("lonely", "topics = [\"" + topic + "\"]", testkit_config(lonely)));
  lonely.start();
  ASSERT_TRUE(wait_until([&] { return lonely.log().find("broker unreachable") != std::string::npos; }, 20s));
  EXPECT_TRUE(wait_until(
      [&] {
        return lonely.block_status("lonely").value("broker", nlohmann::json::object()).value("reachable", true) ==
               false;
      },
      10s))
      << "the status says the broker is unreachable: " << lonely.block_status("lonely");
  EXPECT_FALSE(lonely.block_status("lonely")["broker"].value("unreachable_since", "").empty());
  lonely.signal(SIGTERM);
  EXPECT_EQ(lonely.wait_exit(30s), 0) << lonely.log();
  expect_only_formatted_lines(lonely.log());
  EXPECT_NE(lonely.log().find("sink 'lonely' topics[0]: kafka "), std::string::npos)
      << "librdkafka's line, with its sink";
}

// The dead-letter producer's own librdkafka lines (it meets a broker that just went away).
TEST(Robustness, TheDeadLetterProducersLibrdkafkaLinesGoThroughTheLoggerToo) {
  Kafka own(make_temp_dir("picomq-kafka-dlq-logs"), free_port());
  own.start();
  const auto topic = unique_name("dlqlogs");
  const auto dead = unique_name("dlqlogs-dead");
  own.create_topic(topic);
  own.create_topic(dead);
  own.produce_values(topic, {R"({"n":0})", "not json"});
  Runtime rt(own.bootstrap());
  rt.log_level("debug");  // librdkafka's line for each failed connection attempt is a debug line
  // The write takes 3 s; the broker goes away meanwhile, so the dead-letter producer (created
  // on first use, after the write) finds nobody.
  rt.add_definition("s.toml",
                    testkit_definition("dlqlogs",
                                       "topics = [\"" + topic +
                                           "\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"",
                                       testkit_config(rt, "records", "delay_ms = 3000")));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.block_status("dlqlogs").value("buffered_records", 0) == 2; }, 30s))
      << rt.log();
  own.stop();
  ASSERT_TRUE(wait_until([&] { return rt.log().find("dead-letter producer: kafka") != std::string::npos; }, 30s))
      << rt.log();
  const auto t0 = std::chrono::steady_clock::now();
  rt.signal(SIGTERM);
  EXPECT_TRUE(rt.wait_exit(30s).has_value()) << "within the default shutdown_timeout\n" << rt.log();
  std::printf("[ NOTE ] stop with the broker gone took %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  expect_only_formatted_lines(rt.log());
}

}  // namespace
}  // namespace picomq::test
