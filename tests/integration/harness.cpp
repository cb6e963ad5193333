// The integration harness (picomq/kit/testing/harness.hpp), installed as libpicomq-harness.a.
#include "picomq/kit/testing/harness.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {

namespace {
Locations g_locations;

std::filesystem::path from_env(const char* name, const std::filesystem::path& built_in) {
  const char* v = std::getenv(name);
  return v && *v ? std::filesystem::path(v) : built_in;
}
}  // namespace

void use_locations(const Locations& built_in) {
  g_locations.connect_binary = from_env("PICOMQ_CONNECT_BIN", built_in.connect_binary);
  g_locations.kafka_launcher = from_env("PICOMQ_KAFKA_SH", built_in.kafka_launcher);
  g_locations.plugin_dirs = built_in.plugin_dirs;
  if (const char* v = std::getenv("PICOMQ_PLUGIN_PATH"); v && *v) {
    g_locations.plugin_dirs.clear();
    std::stringstream dirs(v);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty()) g_locations.plugin_dirs.emplace_back(dir);
  }
}

const Locations& locations() { return g_locations; }

Millis scaled(Millis m) {
  static const double factor = [] {
    const char* v = std::getenv("PICOMQ_TEST_TIMEOUT_MULTIPLIER");
    return v ? std::max(1.0, std::atof(v)) : 1.0;
  }();
  return Millis(static_cast<int64_t>(m.count() * factor));
}

bool wait_until(const std::function<bool()>& condition, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return condition();
}

std::string unique_name(const std::string& prefix) {
  static std::mt19937_64 rng(std::random_device{}());
  std::string test = "t";
  if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) test = info->name();
  for (auto& c : test)
    if (!isalnum(static_cast<unsigned char>(c))) c = '-';
  return prefix + "." + test + "-" + std::to_string(rng() % 1000000);
}

namespace {
// Destroyed at exit, before gtest's UnitTest (constructed earlier), which it still asks.
class TempDirs {
 public:
  void add(std::filesystem::path dir) {
    std::lock_guard lock(mutex_);
    dirs_.push_back(std::move(dir));
  }
  ~TempDirs() {
    const char* keep = std::getenv("PICOMQ_KEEP_TEMP");
    if ((keep && *keep && std::string(keep) != "0") || !::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ignored;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ignored);
  }

 private:
  std::mutex mutex_;
  std::vector<std::filesystem::path> dirs_;
};
}  // namespace

std::filesystem::path make_temp_dir(const std::string& prefix) {
  static TempDirs made;
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  made.add(tmpl);
  return tmpl;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::vector<std::string> lines;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<std::string> json_values(int from, int to, size_t pad) {
  std::vector<std::string> v;
  v.reserve(to > from ? to - from : 0);
  for (int i = from; i < to; ++i)
    v.push_back("{\"n\":" + std::to_string(i) + (pad ? ",\"pad\":\"" + std::string(pad, 'x') + "\"" : std::string()) +
                "}");
  return v;
}

namespace {
bool can_bind(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}
}  // namespace

// A port p with p and p+1 free (broker + controller), taken below Linux's ephemeral range
// (32768+): a client's outgoing connection could otherwise take the controller port first.
int free_port() {
  static std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 31998);
  for (int i = 0; i < 1000; ++i) {
    const int port = pick(rng);
    if (can_bind(port) && can_bind(port + 1)) return port;
  }
  throw std::runtime_error("no free port pair found in 20000..31999");
}

// ------------------------------------------------------------------ Kafka

namespace {
Kafka* g_shared = nullptr;

rd_kafka_t* new_client(rd_kafka_type_t type, const std::string& bootstrap,
                       std::vector<std::pair<std::string, std::string>> props = {}) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  props.insert(props.begin(), {"bootstrap.servers", bootstrap});
  for (const auto& [k, v] : props)
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
      throw std::runtime_error("conf " + k + ": " + err);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (!rk) throw std::runtime_error(std::string("rd_kafka_new: ") + err);
  return rk;
}
}  // namespace

namespace {
// What a test run cannot do without, checked before the first test so that a missing piece is
// one clear message rather than a failure in every test.
std::string missing_pieces(bool launches_kafka) {
  const Locations& where = locations();
  std::string missing;
  if (where.connect_binary.empty() || access(where.connect_binary.c_str(), X_OK) != 0)
    missing += "no picomq-connect at '" + where.connect_binary.string() + "': set PICOMQ_CONNECT_BIN to the binary\n";
  if (launches_kafka && (where.kafka_launcher.empty() || !std::filesystem::exists(where.kafka_launcher)))
    missing += "no Kafka launcher at '" + where.kafka_launcher.string() +
               "': set PICOMQ_CONFORMANCE_BOOTSTRAP=host:port to use a running Kafka-protocol broker, or "
               "PICOMQ_KAFKA_SH to a launcher script\n";
  return missing;
}

[[noreturn]] void give_up(const std::string& why) {
  std::cerr << "picomq test harness: " << why << std::flush;
  std::exit(1);
}

class KafkaEnvironment : public ::testing::Environment {
 public:
  explicit KafkaEnvironment(std::optional<std::string> bootstrap) : bootstrap_(std::move(bootstrap)) {}
  // Without its broker or runtime no test can run: one message and exit, rather than every test
  // reported as skipped.
  void SetUp() override {
    if (const auto missing = missing_pieces(!bootstrap_); !missing.empty()) give_up(missing);
    try {
      if (bootstrap_) Kafka::use_shared(*bootstrap_);
      else Kafka::start_shared();
    } catch (const std::exception& e) {
      Kafka::stop_shared();  // a broker that started but did not answer
      give_up(std::string(e.what()) + "\n");
    }
  }
  void TearDown() override { Kafka::stop_shared(); }

 private:
  std::optional<std::string> bootstrap_;
};

int run_tests(int argc, char** argv, const Locations& built_in, std::optional<std::string> bootstrap) {
  use_locations(built_in);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new KafkaEnvironment(std::move(bootstrap)));
  return RUN_ALL_TESTS();
}
}  // namespace

int run_tests_with_kafka(int argc, char** argv, const Locations& built_in) {
  return run_tests(argc, argv, built_in, std::nullopt);
}

int run_tests_with_broker(int argc, char** argv, const Locations& built_in, const std::string& bootstrap) {
  return run_tests(argc, argv, built_in, bootstrap);
}

Kafka& Kafka::shared() {
  if (!g_shared) throw std::runtime_error("the shared Kafka broker is not started");
  return *g_shared;
}

void Kafka::start_shared() {
  g_shared = new Kafka(make_temp_dir("picomq-kafka"), free_port());
  g_shared->start();
}

void Kafka::use_shared(const std::string& bootstrap) { g_shared = new Kafka(bootstrap); }

void Kafka::stop_shared() {
  if (g_shared) g_shared->stop();
  delete g_shared;
  g_shared = nullptr;
}

void Kafka::launch(const std::string& command) const {
  if (external_)
    throw std::logic_error("the broker at " + *external_ + " was not started by this test run: it cannot be " +
                           command);
  const std::string cmd = locations().kafka_launcher.string() + " " + command;
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error(
        "could not " + command.substr(0, command.find(' ')) + " Kafka: " + cmd +
        " (its output is above); PICOMQ_CONFORMANCE_BOOTSTRAP=host:port uses a running broker instead");
}

void Kafka::start() { launch("start " + dir_.string() + " " + std::to_string(port_)); }

void Kafka::resume() { launch("resume " + dir_.string() + " " + std::to_string(port_)); }

void Kafka::stop() {
  if (producer_) {
    rd_kafka_flush(producer_, 5000);
    rd_kafka_destroy(producer_);
    producer_ = nullptr;
  }
  if (!external_) (void)std::system((locations().kafka_launcher.string() + " stop " + dir_.string()).c_str());
}

rd_kafka_t* Kafka::producer() {
  // Idempotent: a retried batch cannot land after the next one, so records keep the order they
  // were produced in (tests read offsets as positions in what they produced).
  if (!producer_)
    producer_ = new_client(RD_KAFKA_PRODUCER, bootstrap(),
                           {{"linger.ms", "5"}, {"acks", "all"}, {"enable.idempotence", "true"}});
  return producer_;
}

void Kafka::create_topic(const std::string& topic, int partitions,
                         const std::vector<std::pair<std::string, std::string>>& configs) {
  rd_kafka_t* rk = producer();
  char err[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  if (!nt) throw std::runtime_error(err);
  for (const auto& [name, value] : configs)
    if (rd_kafka_NewTopic_set_config(nt, name.c_str(), value.c_str()))
      throw std::runtime_error(std::string("create topic ").append(topic).append(": bad config ").append(name));
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  std::string error;
  if (!ev) {
    error = "CreateTopics timed out";
  } else {
    const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t** results = res ? rd_kafka_CreateTopics_result_topics(res, &n) : nullptr;
    if (rd_kafka_event_error(ev)) error = rd_kafka_event_error_string(ev);
    else if (n == 1 && rd_kafka_topic_result_error(results[0]) &&
             rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
      error = rd_kafka_topic_result_error_string(results[0]);
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_queue_destroy(q);
  if (!error.empty()) throw std::runtime_error("create topic " + topic + ": " + error);
  // Wait until the broker lists it with all partitions led.
  wait_until(
      [&] {
        rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
        const rd_kafka_metadata_t* md = nullptr;
        bool ok = rd_kafka_metadata(rk, 0, t, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 &&
                  md->topics[0].err == 0 && md->topics[0].partition_cnt == partitions;
        if (ok)
          for (int i = 0; i < md->topics[0].partition_cnt; ++i) ok = ok && md->topics[0].partitions[i].leader >= 0;
        if (md) rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(t);
        return ok;
      },
      20s);
}

std::optional<std::string> ConsumedRecord::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return std::nullopt;
}

std::vector<ConsumedRecord> Kafka::consume(const std::string& topic, size_t count, Millis timeout) const {
  rd_kafka_t* rk = new_client(
      RD_KAFKA_CONSUMER, bootstrap(),
      {{"group.id", "picomq-test-reader"}, {"enable.auto.commit", "false"}, {"enable.partition.eof", "false"}});
  std::vector<ConsumedRecord> out;
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1) {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; ++i)
      rd_kafka_topic_partition_list_add(list, topic.c_str(), md->topics[0].partitions[i].id)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    const auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
      if (!m) continue;
      if (!m->err) {
        ConsumedRecord r;
        r.partition = m->partition;
        r.offset = m->offset;
        r.timestamp_ms = rd_kafka_message_timestamp(m, nullptr);
        if (m->payload) r.value = std::string(static_cast<const char*>(m->payload), m->len);
        if (m->key) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
        rd_kafka_headers_t* hdrs = nullptr;
        if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          const char* name;
          const void* value;
          size_t size;
          for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
            r.headers.emplace_back(name, value ? std::string(static_cast<const char*>(value), size) : std::string());
        }
        out.push_back(std::move(r));
      }
      rd_kafka_message_destroy(m);
    }
  }
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  std::sort(out.begin(), out.end(), [](const ConsumedRecord& a, const ConsumedRecord& b) {
    return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
  });
  return out;
}

void Kafka::produce(const std::string& topic, const std::vector<ProducedRecord>& records) {
  rd_kafka_t* rk = producer();
  for (const auto& r : records) {
    rd_kafka_headers_t* hdrs = rd_kafka_headers_new(r.headers.size());
    for (const auto& [k, v] : r.headers) rd_kafka_header_add(hdrs, k.data(), k.size(), v.data(), v.size());
    void* value = r.null_value ? nullptr : const_cast<char*>(r.value.data());
    const size_t value_size = r.null_value ? 0 : r.value.size();
    const void* key = r.key ? r.key->data() : nullptr;
    const size_t key_size = r.key ? r.key->size() : 0;
    for (;;) {
      auto err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
                                   RD_KAFKA_V_VALUE(value, value_size), RD_KAFKA_V_KEY(key, key_size),
                                   RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_TIMESTAMP(r.timestamp_ms),
                                   RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 10);
        continue;
      }
      if (err) throw std::runtime_error(std::string("produce: ") + rd_kafka_err2str(err));
      break;
    }
  }
  if (rd_kafka_flush(rk, static_cast<int>(scaled(60s).count())) != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("produce: flush timed out");
}

void Kafka::produce_values(const std::string& topic, const std::vector<std::string>& values, int32_t partition) {
  std::vector<ProducedRecord> records;
  records.reserve(values.size());
  for (const auto& v : values) records.push_back({v, std::nullopt, {}, partition});
  produce(topic, records);
}

int64_t Kafka::committed(const std::string& group, const std::string& topic, int32_t partition) const {
  rd_kafka_t* rk = new_client(RD_KAFKA_CONSUMER, bootstrap(), {{"group.id", group}});
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), partition);
  int64_t offset = -1001;
  if (rd_kafka_committed(rk, list, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR && !list->elems[0].err)
    offset = list->elems[0].offset;
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return offset;
}

void Kafka::commit(const std::string& group, const std::string& topic, int32_t partition, int64_t offset) const {
  rd_kafka_t* rk = new_client(RD_KAFKA_CONSUMER, bootstrap(), {{"group.id", group}});
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = offset;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  // The coordinator of a group that has not been seen for a while may need a moment, and a static
  // member (group.instance.id) that stopped cleanly stays in its group until its session times
  // out (the tests' 6 s): until then the group refuses a commit from outside ("Unknown member").
  for (int attempt = 0; attempt < 60; ++attempt) {
    err = rd_kafka_commit(rk, list, 0);
    if (!err && !list->elems[0].err) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const rd_kafka_resp_err_t partition_err = list->elems[0].err;
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  if (err || partition_err)
    throw std::runtime_error("committing offset " + std::to_string(offset) + " for " + group + " on " + topic + "[" +
                             std::to_string(partition) + "]: " + rd_kafka_err2str(err ? err : partition_err));
}

void Kafka::delete_records(const std::string& topic, int32_t partition, int64_t offset) const {
  rd_kafka_t* rk = new_client(RD_KAFKA_PRODUCER, bootstrap());
  rd_kafka_topic_partition_list_t* before = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(before, topic.c_str(), partition)->offset = offset;
  rd_kafka_DeleteRecords_t* request = rd_kafka_DeleteRecords_new(before);
  rd_kafka_topic_partition_list_destroy(before);
  rd_kafka_queue_t* results = rd_kafka_queue_new(rk);
  rd_kafka_DeleteRecords(rk, &request, 1, nullptr, results);
  rd_kafka_DeleteRecords_destroy(request);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(results, 30000);
  std::string error = !ev ? "no answer within 30 s" : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev) : "";
  if (ev && error.empty()) {
    const rd_kafka_topic_partition_list_t* done =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
    if (done && done->cnt > 0 && done->elems[0].err) error = rd_kafka_err2str(done->elems[0].err);
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(results);
  rd_kafka_destroy(rk);
  if (!error.empty())
    throw std::runtime_error("deleting the records of " + topic + "[" + std::to_string(partition) + "] before " +
                             std::to_string(offset) + ": " + error);
}

bool Kafka::all_committed(const std::string& group, const std::string& topic, int partitions, int64_t offset) const {
  for (int p = 0; p < partitions; ++p)
    if (committed(group, topic, p) != offset) return false;
  return true;
}

// ------------------------------------------------------------------ Runtime

Runtime::Runtime(std::string bootstrap, const std::string& name)
    : bootstrap_(std::move(bootstrap)), dir_(make_temp_dir("picomq-" + name)) {
  std::filesystem::create_directories(dir_ / "sinks.d");
}

Runtime::~Runtime() {
  if (pid_ > 0 && !exit_code_) {
    if (::testing::Test::HasFailure()) {
      // A test that failed with the runtime still up: a hang is found from where its threads
      // stand, and a rare one (seen only under CI's load) from nothing else.
      std::string threads;
      try {
        threads =
            kit::testing::run_shell("{ timeout 120 gdb -p " + std::to_string(pid_) +
                                    " -batch -nx -ex 'thread apply all bt 16' 2>&1 | grep -v '^\\[New LWP'; true; }");
      } catch (const std::exception& e) {
        threads = e.what();
      }
      std::cerr << "---- runtime " << dir_.string() << " still running after a failure (pid " << pid_
                << "); its threads:\n"
                << threads << "---- its status file:\n"
                << status().dump(1) << "\n----\n";
    }
    ::kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
}

void Runtime::add_definition(const std::string& file, const std::string& toml) {
  std::ofstream(dir_ / "sinks.d" / file) << toml;
}

void Runtime::write_config() {
  std::string plugin_path;
  for (const auto& dir : locations().plugin_dirs)
    plugin_path += (plugin_path.empty() ? "\"" : ", \"") + dir.string() + "\"";
  {
    std::ofstream cfg(dir_ / "runtime.toml");
    cfg << "[broker]\nbootstrap_servers = \"" << bootstrap_ << "\"\n"
        << broker_extra_ << "\n"
        << "[plugins]\npath = [" << plugin_path << "]\n"
        << "[sinks]\ndir = \"sinks.d\"\n"
        << "[runtime]\nstatus_file = \"" << (dir_ / "status.json").string() << "\"\n"
        << "log_level = \"" << log_level_ << "\"\n"
        << runtime_extra_ << "\n";
  }
}

std::pair<int, std::string> Runtime::check() {
  write_config();
  const std::string binary = locations().connect_binary.string();
  const std::string command = "'" + binary + "' --config '" + (dir_ / "runtime.toml").string() + "' --check >'" +
                              (dir_ / "check.log").string() + "' 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir_ / "check.log")};
}

void Runtime::start() {
  write_config();
  const std::string binary = locations().connect_binary.string();
  exit_code_.reset();
  pid_ = fork();
  if (pid_ == 0) {
    int out = ::open((dir_ / "stdout.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = ::open((dir_ / "stderr.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
    const std::string cfg = (dir_ / "runtime.toml").string();
    execl(binary.c_str(), binary.c_str(), "--config", cfg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

void Runtime::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

void Runtime::kill_hard() {
  signal(SIGKILL);
  wait_exit(10s);
}

std::optional<int> Runtime::wait_exit(Millis timeout) {
  if (exit_code_) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return exit_code_;
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

bool Runtime::running() {
  if (exit_code_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

nlohmann::json Runtime::status() {
  auto text = read_file(dir_ / "status.json");
  if (text.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

nlohmann::json Runtime::sink_status(const std::string& key) {
  auto s = status();
  if (s.contains("sinks"))
    for (auto& sink : s["sinks"])
      if (sink.value("key", "") == key) return sink;
  return nlohmann::json::object();
}

nlohmann::json Runtime::block_status(const std::string& key, size_t block) {
  auto s = sink_status(key);
  if (s.contains("blocks") && s["blocks"].size() > block && s["blocks"][block].is_object()) return s["blocks"][block];
  return nlohmann::json::object();
}

std::string Runtime::sink_state(const std::string& key) { return sink_status(key).value("state", ""); }

bool Runtime::wait_state(const std::string& key, const std::string& state, Millis timeout) {
  return wait_until([&] { return sink_state(key) == state; }, timeout);
}

bool Runtime::wait_assigned(const std::string& key, Millis timeout, size_t block) {
  return wait_until(
      [&] {
        auto s = sink_status(key);
        return s.contains("blocks") && s["blocks"].size() > block && !s["blocks"][block]["assigned"].empty();
      },
      timeout);
}

std::string Runtime::log() { return read_file(dir_ / "stderr.log"); }
std::string Runtime::out() { return read_file(dir_ / "stdout.log"); }

long Runtime::peak_rss_kb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

std::string plugin_definition(const std::string& key, const std::string& plugin, const std::string& topics_block,
                              const std::string& plugin_config) {
  return "type = \"sink\"\nkey = \"" + key + "\"\nenabled = true\nversion = 0\nname = \"" + key + "\"\npath = \"" +
         plugin + "\"\n\n[[topics]]\n" + topics_block + "\n\n[plugin_config]\n" + plugin_config + "\n";
}

}  // namespace picomq::test
