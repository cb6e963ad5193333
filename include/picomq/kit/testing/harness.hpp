#pragma once
// The integration harness: a real Kafka broker (Apache Kafka in KRaft mode started for the test
// run by a launcher script, or a running Kafka-protocol broker), a Kafka client to produce and
// to read committed offsets back from the group coordinator, and the picomq-connect binary run
// as a child process with its config written per test. Installed with the conformance kit
// (picomq::harness, brought by picomq::conformance); this tree's integration tests use it too.
//
// Where the binary, the plugins and the launcher are is given at run time (Locations): by the
// test executable's main(), each overridable from the environment.
#include <librdkafka/rdkafka.h>
#include <sys/types.h>

#include <algorithm>
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

// What the harness runs. Each field the environment sets replaces the one the test executable
// was built with, so one executable can run against another installation.
struct Locations {
  std::filesystem::path connect_binary;            // picomq-connect; PICOMQ_CONNECT_BIN
  std::vector<std::filesystem::path> plugin_dirs;  // the runtime's [plugins] path; PICOMQ_PLUGIN_PATH (':'-separated)
  std::filesystem::path kafka_launcher;            // `start|resume|stop <dir> [port]` script; PICOMQ_KAFKA_SH
};
// Sets the locations from `built_in` and the environment; the harness uses them from then on.
void use_locations(const Locations& built_in);
const Locations& locations();

// Timeouts scale with PICOMQ_TEST_TIMEOUT_MULTIPLIER (a loaded 2-core machine is slow).
Millis scaled(Millis m);

// Polls `condition` every 50 ms until it holds or `timeout` (scaled) passes.
bool wait_until(const std::function<bool()>& condition, Millis timeout);

std::string unique_name(const std::string& prefix);  // prefix + '.' + test name + random suffix
// A new directory under the temp dir, removed when the process exits if every test passed
// (kept for a look after a failure, or always with PICOMQ_KEEP_TEMP=1): runs leave no data behind
// to fill a machine that runs the suites again and again.
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
  int64_t timestamp_ms = 0;  // 0: the producer's clock
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

// A Kafka broker reachable at bootstrap(): one this process starts with the launcher script, or
// a running one it only talks to (external()). The shared one is set up by the test environment.
class Kafka {
 public:
  static Kafka& shared();  // the broker of this test run
  static void start_shared();
  static void use_shared(const std::string& bootstrap);  // a running broker instead
  static void stop_shared();

  // A broker the launcher runs on 127.0.0.1:port (and port+1 for its controller), data in `dir`.
  Kafka(std::filesystem::path dir, int port) : dir_(std::move(dir)), port_(port) {}
  // A running broker at host:port, which this process neither starts nor stops.
  explicit Kafka(std::string bootstrap) : port_(0), external_(std::move(bootstrap)) {}
  // start / resume / stop run the launcher; on an external broker start and resume throw and
  // stop only closes this process's client.
  void start();
  void resume();  // after stop(): the same log dir, an outage rather than a new broker
  void stop();
  std::string bootstrap() const { return external_ ? *external_ : "127.0.0.1:" + std::to_string(port_); }

  // `configs`: topic configs such as {"max.message.bytes", "200"}.
  void create_topic(const std::string& topic, int partitions = 1,
                    const std::vector<std::pair<std::string, std::string>>& configs = {});
  // Reads the topic from the beginning of every partition (no group) until `count` records are
  // in or `timeout` (scaled) passes; returns what it read, ordered by partition then offset.
  std::vector<ConsumedRecord> consume(const std::string& topic, size_t count, Millis timeout) const;
  void produce(const std::string& topic, const std::vector<ProducedRecord>& records);
  void produce_values(const std::string& topic, const std::vector<std::string>& values, int32_t partition = -1);
  // Offset committed by `group` for topic-partition, -1001 (RD_KAFKA_OFFSET_INVALID) when none.
  int64_t committed(const std::string& group, const std::string& topic, int32_t partition = 0) const;
  // True once `group` has committed `offset` on every one of the topic's `partitions`.
  bool all_committed(const std::string& group, const std::string& topic, int partitions, int64_t offset) const;
  // Commits `offset` for `group` on topic-partition, as an operator's offset reset does (the
  // group must have no member running).
  void commit(const std::string& group, const std::string& topic, int32_t partition, int64_t offset) const;
  // Deletes the records of topic-partition before `offset` (AdminClient DeleteRecords), as
  // retention does: the partition's log start moves there. Throws on an error.
  void delete_records(const std::string& topic, int32_t partition, int64_t offset) const;

 private:
  rd_kafka_t* producer();
  void launch(const std::string& command) const;
  std::filesystem::path dir_;
  int port_;
  std::optional<std::string> external_;  // host:port of a broker this process did not start
  rd_kafka_t* producer_ = nullptr;
};

int free_port();

// main() of a test binary whose tests share one fresh Kafka broker (started with the launcher
// before the first test, stopped after the last).
int run_tests_with_kafka(int argc, char** argv, const Locations& built_in);
// The same with a running broker at `bootstrap` (host:port), which is neither started nor stopped.
int run_tests_with_broker(int argc, char** argv, const Locations& built_in, const std::string& bootstrap);

// One picomq-connect process with a runtime config and a sinks folder of its own.
class Runtime {
 public:
  explicit Runtime(std::string bootstrap, const std::string& name = "rt");
  ~Runtime();

  // Adds sinks.d/<file> with this TOML text.
  void add_definition(const std::string& file, const std::string& toml);
  // Extra lines for the runtime config's [runtime] table.
  void runtime_settings(const std::string& lines) { runtime_extra_ = lines; }
  // Extra lines for the [broker] table (before its [broker.properties]).
  void broker_settings(const std::string& lines) { broker_extra_ = lines; }
  void env(const std::string& name, const std::string& value) { env_.emplace_back(name, value); }
  // The runtime config's log_level ("info" unless set).
  void log_level(std::string level) { log_level_ = std::move(level); }

  void start();
  // `picomq-connect --check` on the same config (no broker needed): its exit code and output.
  std::pair<int, std::string> check();
  void signal(int sig) const;
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
  long peak_rss_kb() const;

 private:
  void write_config();
  std::string bootstrap_;
  std::filesystem::path dir_;
  std::string runtime_extra_;
  std::string broker_extra_;
  std::string log_level_ = "info";
  std::vector<std::pair<std::string, std::string>> env_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Definition text: one [[topics]] block (`topics_block` is its body) for plugin library `plugin`
// (e.g. "libpicomq_connector_testkit_arrow_sink").
std::string plugin_definition(const std::string& key, const std::string& plugin, const std::string& topics_block,
                              const std::string& plugin_config);

// The consumer group of the sink whose definition key is `key` (the runtime's naming).
inline std::string group_of(const std::string& key) { return "picomq-connect-sink-" + key; }

// What `group` committed on `topic`, summed over partitions 0..partitions-1 (none yet: 0).
inline int64_t committed_sum(Kafka& kafka, const std::string& group, const std::string& topic, int partitions) {
  int64_t sum = 0;
  for (int p = 0; p < partitions; ++p) sum += std::max<int64_t>(0, kafka.committed(group, topic, p));
  return sum;
}

// A [[topics]] block line making the runtime a static group member named `key`: a restarted
// runtime takes the killed one's partitions at once instead of waiting out its session.
inline std::string static_member(const std::string& key) {
  return "properties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
}

}  // namespace picomq::test
