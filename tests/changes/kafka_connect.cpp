#include "kafka_connect.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace picomq::test {
namespace {

// The folder the fetch script keeps the jars in.
std::string libs_dir() {
  const std::string command = std::string("bash '") + PICOMQ_KC_FETCH + "' --print-dir";
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

KafkaConnect::KafkaConnect(std::filesystem::path dir, std::string bootstrap, std::string plugin)
    : dir_(std::move(dir)), bootstrap_(std::move(bootstrap)), plugin_(std::move(plugin)) {}

KafkaConnect::~KafkaConnect() { stop(); }

void KafkaConnect::start(const std::string& connector, const std::string& worker) {
  const std::string fetch = std::string("bash '") + PICOMQ_KC_FETCH + "' >&2";
  if (std::system(fetch.c_str()) != 0)
    throw std::runtime_error("cannot fetch the Kafka Connect jars (tools/kafka-connect/fetch-kafka-connect.sh)");
  const std::string libs = libs_dir();
  if (!std::filesystem::is_directory(std::filesystem::path(libs) / "plugins" / plugin_))
    throw std::runtime_error("Kafka Connect plugin " + plugin_ + " is not in " + libs);
  std::filesystem::create_directories(dir_ / "plugins");
  std::error_code ec;
  std::filesystem::create_directory_symlink(std::filesystem::path(libs) / "plugins" / plugin_,
                                            dir_ / "plugins" / plugin_, ec);
  write_file(dir_ / "worker.properties",
             "bootstrap.servers=" + bootstrap_ + "\n" + worker +
                 "\noffset.storage.file.filename=" + (dir_ / "connect.offsets").string() +
                 "\noffset.flush.interval.ms=1000\nplugin.path=" + (dir_ / "plugins").string() +
                 "\nplugin.discovery=service_load\nlisteners=http://127.0.0.1:0\n");
  write_file(dir_ / "connector.properties", connector);
  write_file(dir_ / "log4j2.properties",
             "rootLogger.level=INFO\nrootLogger.appenderRef.stdout.ref=STDOUT\nappender.stdout.type=Console\n"
             "appender.stdout.name=STDOUT\nappender.stdout.layout.type=PatternLayout\n"
             "appender.stdout.layout.pattern=[%d] %p %m (%c)%n\n");
  const std::string log4j = "-Dlog4j2.configurationFile=" + (dir_ / "log4j2.properties").string();
  const std::string classpath = libs + "/runtime/*";
  const std::string worker_file = (dir_ / "worker.properties").string();
  const std::string connector_file = (dir_ / "connector.properties").string();
  const std::string log_file = (dir_ / "connect.log").string();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the worker goes with the test process
    const int out = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(out, 2);
    std::vector<std::string> args = {"java",
                                     "-Xms128m",
                                     "-Xmx768m",
                                     "-XX:+UseSerialGC",
                                     "-XX:TieredStopAtLevel=1",
                                     "-Djava.awt.headless=true",
                                     log4j,
                                     "-cp",
                                     classpath,
                                     "org.apache.kafka.connect.cli.ConnectStandalone",
                                     worker_file,
                                     connector_file};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("java", argv.data());
    _exit(127);
  }
}

void KafkaConnect::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string KafkaConnect::log() const {
  std::ifstream in(dir_ / "connect.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool KafkaConnect::failed() const {
  const std::string text = log();
  return text.find("unrecoverable exception") != std::string::npos ||
         text.find("Task is being killed") != std::string::npos;
}

}  // namespace picomq::test
