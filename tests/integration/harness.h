#pragma once
// Integration test kit: a real Apache Kafka broker (KRaft, started fresh for the test run),
// a Kafka client to produce and to read committed offsets back from the group coordinator,
// and the picomq-connect binary run as a child process with its config written per test.
#include <librdkafka/rdkafka.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace picomq::test {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Timeouts scale with PICOMQ_TEST_TIMEOUT_MULTIPLIER (a loaded 2-core machine is slow).
Millis scaled(Millis m);

// Polls `condition` every 50 ms until it holds or `timeout` (scaled) passes.
bool wait_until(const std::function<bool()>& condition, Millis timeout);

std::string unique_name(const std::string& prefix);  // prefix + '.' + test name + random suffix
std::filesystem::path make_temp_dir(const std::string& prefix);
std::string read_file(const std::filesystem::path& p);
std::vector<std::string> read_lines(const std::filesystem::path& p);

// Payloads {"n":from} .. {"n":to-1}, optionally padded with a string field of `pad` bytes.
std::vector<std::string> json_values(int from, int to, size_t pad = 0);

struct ProducedRecord {
  std::string value;
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::string>> headers;
  int32_t partition = -1;  // -1: partitioner decides (by key)
  bool null_value = false;
};

struct ConsumedRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = 0;
  std::optional<std::string> value;  // nullopt: a null value
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::string>> headers;
  // The value of the first header called `name`, or nullopt.
  std::optional<std::string> header(const std::string& name) const;
};

// A Kafka broker reachable at bootstrap(); the default one is started by the test environment.
class Kafka {
 public:
  static Kafka& shared();  // the broker of this test run
  static void start_shared();
  static void stop_shared();

  Kafka(std::filesystem::path dir, int port) : dir_(std::move(dir)), port_(port) {}
  void start();
  void resume();  // after stop(): the same log dir, an outage rather than a new broker
  void stop();
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }

  // `configs`: topic configs such as {"max.message.bytes", "200"}.
  void create_topic(const std::string& topic, int partitions = 1,
                    const std::vector<std::pair<std::string, std::string>>& configs = {});
  // Reads the topic from the beginning of every partition (no group) until `count` records are
  // in or `timeout` (scaled) passes; returns what it read, ordered by partition then offset.
  std::vector<ConsumedRecord> consume(const std::string& topic, size_t count, Millis timeout);
  void produce(const std::string& topic, const std::vector<ProducedRecord>& records);
  void produce_values(const std::string& topic, const std::vector<std::string>& values, int32_t partition = -1);
  // Offset committed by `group` for topic-partition, -1001 (RD_KAFKA_OFFSET_INVALID) when none.
  int64_t committed(const std::string& group, const std::string& topic, int32_t partition = 0);
  // True once `group` has committed `offset` on every one of the topic's `partitions`.
  bool all_committed(const std::string& group, const std::string& topic, int partitions, int64_t offset);

 private:
  rd_kafka_t* producer();
  std::filesystem::path dir_;
  int port_;
  rd_kafka_t* producer_ = nullptr;
};

int free_port();

// main() of a test binary whose tests share one fresh Kafka broker (started before the first
// test, stopped after the last).
int run_tests_with_kafka(int argc, char** argv);

// One picomq-connect process with a runtime config and a sinks folder of its own.
class Runtime {
 public:
  explicit Runtime(std::string bootstrap, std::string name = "rt");
  ~Runtime();

  // Adds sinks.d/<file> with this TOML text.
  void add_definition(const std::string& file, const std::string& toml);
  // Extra lines for the runtime config's [runtime] table.
  void runtime_settings(const std::string& lines) { runtime_extra_ = lines; }
  // Extra lines for the [broker] table (before its [broker.properties]).
  void broker_settings(const std::string& lines) { broker_extra_ = lines; }
  void env(const std::string& name, const std::string& value) { env_.emplace_back(name, value); }

  void start();
  void signal(int sig);
  void kill_hard();  // SIGKILL
  // Waits for the process to exit; its exit code, or nullopt on timeout.
  std::optional<int> wait_exit(Millis timeout);
  bool running();
  pid_t pid() const { return pid_; }

  nlohmann::json status();  // the status file ({} until it exists)
  std::string sink_state(const std::string& key);
  nlohmann::json sink_status(const std::string& key);
  nlohmann::json block_status(const std::string& key, size_t block = 0);  // {} until known
  bool wait_state(const std::string& key, const std::string& state, Millis timeout);
  // Waits until the block has at least one partition assigned.
  bool wait_assigned(const std::string& key, Millis timeout, size_t block = 0);
  std::string log();  // the process's stderr
  std::string out();  // the process's stdout
  const std::filesystem::path& dir() const { return dir_; }
  long peak_rss_kb();

 private:
  std::string bootstrap_;
  std::filesystem::path dir_;
  std::string runtime_extra_;
  std::string broker_extra_;
  std::vector<std::pair<std::string, std::string>> env_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// What the testkit plugin wrote: ids "topic:partition:offset" and payloads, in write order.
struct TestkitLog {
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  static TestkitLog read(const std::filesystem::path& p);
};

struct TestkitCall {
  int64_t at_ms;
  int64_t call;
  std::string tp;
  int64_t first, last;
  size_t count;
  std::string status;
};
std::vector<TestkitCall> read_calls(const std::filesystem::path& p);

// [plugin_config] lines for the testkit plugin logging to <rt dir>/<name>.log and <name>.calls.
std::string testkit_config(const Runtime& rt, const std::string& name = "records", const std::string& extra = "");

// Definition text: one [[topics]] block (`topics_block` is its body) for plugin library `plugin`
// (e.g. "libpicomq_connector_testkit_arrow_sink").
std::string plugin_definition(const std::string& key, const std::string& plugin, const std::string& topics_block,
                              const std::string& plugin_config);

// Definition text for the testkit plugin.
std::string testkit_definition(const std::string& key, const std::string& topics_block,
                               const std::string& plugin_config);

}  // namespace picomq::test
