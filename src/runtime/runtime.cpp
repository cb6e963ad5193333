#include "runtime/runtime.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <vector>

#include "runtime/embedded_broker.h"
#include "runtime/kafka/client_logging.h"
#include "runtime/sink_runner.h"
#include "runtime/status.h"

namespace picomq::runtime {

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// Waits for SIGINT/SIGTERM, the deadline, or `give_up()` (checked every tick).
void wait_for_stop(const RunOptions& options, const std::function<bool()>& give_up) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const auto deadline = options.stop_after ? std::chrono::steady_clock::now() + *options.stop_after
                                           : std::chrono::steady_clock::time_point::max();
  timespec tick{0, 100 * 1000 * 1000};
  while (std::chrono::steady_clock::now() < deadline) {
    int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("{} received: flushing and committing", sig == SIGINT ? "SIGINT" : "SIGTERM");
      return;
    }
    if (give_up()) return;
  }
  spdlog::info("stop_after reached: flushing and committing");
}

}  // namespace

int run(const config::RuntimeConfig& config, const RunOptions& options) {
  StatusBoard status(config.status_file);
  std::unique_ptr<EmbeddedBroker> embedded;
  std::string bootstrap = config.bootstrap_servers;
  if (config.embedded) {
    std::string error;
    embedded = EmbeddedBroker::start(config, error);
    if (!embedded) {
      spdlog::error("{}", error);
      return 2;
    }
    bootstrap = embedded->bootstrap_servers();
  }

  int exit_code = 0;
  auto directory = config::load_sink_directory(config.sinks_dir, config::process_env());
  for (const auto& e : directory.errors) {
    spdlog::error("invalid sink definition: {}", e.to_string());
    const std::string key = std::filesystem::path(e.file).filename().string();
    status.set_state(key, e.file, SinkState::Invalid, e.to_string());
    exit_code = 1;
  }

  std::vector<std::unique_ptr<SinkRunner>> sinks;
  for (auto& def : directory.definitions) {
    if (!def.enabled) {
      spdlog::info("sink '{}' ({}) is disabled", def.key, def.file);
      status.set_state(def.key, def.file, SinkState::Disabled);
      continue;
    }
    auto runner = std::make_unique<SinkRunner>(std::move(def), config, bootstrap, status);
    runner->start();
    sinks.push_back(std::move(runner));
  }
  if (sinks.empty()) spdlog::warn("no sink is running (definitions in {})", config.sinks_dir.string());
  if (embedded)
    spdlog::info("embedded broker: {} — produce with: kcat -b {} -t orders.eu -P", bootstrap, bootstrap);

  // A process whose every sink failed would idle until signalled, and no supervisor would
  // notice: it exits 1 instead, unless told to stay up.
  bool gave_up = false;
  wait_for_stop(options, [&] {
    if (config.keep_running_on_error || status.any_sink_can_progress() || !status.any_sink_failed()) return false;
    gave_up = true;
    const std::string why = "no sink can make progress (each one is in error or invalid); exiting with 1 "
                            "([runtime] keep_running_on_error = true keeps the process up)";
    spdlog::error("{}", why);
    status.set_runtime("exiting", why);
    return true;
  });
  if (!gave_up) status.set_runtime("stopping");

  for (auto& s : sinks) s->request_stop();
  bool abandoned = false;
  for (auto& s : sinks) abandoned = !s->join() || abandoned;
  for (auto& s : sinks)
    if (auto st = status.get(s->key()); st && st->state == SinkState::Error) exit_code = 1;
  if (abandoned) {
    spdlog::error("exiting without cleanup: a sink was still writing or closing when shutdown_timeout ran out");
    spdlog::shutdown();
    std::_Exit(3);
  }
  sinks.clear();
  embedded.reset();
  if (kafka::handles_left_behind() > 0) {
    // Their librdkafka threads still run (and may log): static destructors must not run under
    // them, and the logger stays.
    spdlog::default_logger()->flush();
    std::_Exit(exit_code);
  }
  return exit_code;
}

}  // namespace picomq::runtime
