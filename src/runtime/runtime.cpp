#include "runtime/runtime.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/embedded_broker.h"
#include "runtime/kafka/client_logging.h"
#include "runtime/lag_monitor.h"
#include "runtime/ops/ops_module.h"
#include "runtime/sink_runner.h"
#include "runtime/status.h"
#include "runtime/supervisor.h"

namespace picomq::runtime {

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // reload the sinks directory (wait_for_stop)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// Changes in the sinks directory, seen through inotify (non-blocking; polled by the main loop).
class DirectoryWatch {
 public:
  explicit DirectoryWatch(const std::filesystem::path& dir) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) return;
    if (inotify_add_watch(fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE) < 0) {
      spdlog::warn("cannot watch {} for changes ({}); reload with SIGHUP or POST /reload", dir.string(),
                   std::strerror(errno));
      close(fd_);
      fd_ = -1;
    }
  }
  ~DirectoryWatch() {
    if (fd_ >= 0) close(fd_);
  }
  // True when a *.toml file (not a dot-file) changed since the last call, or a ConfigMap's `..data`.
  bool changed() const {  // reads the inotify descriptor; no member changes
    bool any = false;
    alignas(inotify_event) char buf[8192];
    for (;;) {
      const ssize_t n = fd_ >= 0 ? read(fd_, buf, sizeof buf) : -1;
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
        const std::string name = e->len ? e->name : "";
        if (name.size() > 5 && name[0] != '.' && name.ends_with(".toml")) any = true;
        // A Kubernetes ConfigMap volume swaps every file at once by renaming a `..data` symlink.
        if (name == "..data") any = true;
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    return any;
  }

 private:
  int fd_ = -1;
};

// Waits for SIGINT/SIGTERM, the deadline, or `give_up()` (checked every tick); SIGHUP and
// changed files in the sinks directory call `reload()` (after 300 ms without further change).
void wait_for_stop(const RunOptions& options, const std::function<bool()>& give_up, DirectoryWatch* watch,
                   const std::function<void(const char*)>& reload) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  const auto deadline = options.stop_after ? std::chrono::steady_clock::now() + *options.stop_after
                                           : std::chrono::steady_clock::time_point::max();
  timespec tick{0, 100 * 1000 * 1000};
  // When a change in the sinks directory is due to be read (max: none pending). Not an optional:
  // GCC 12 takes an engaged optional's time_point for uninitialized (-Wmaybe-uninitialized).
  constexpr auto kNoReload = std::chrono::steady_clock::time_point::max();
  auto reload_at = kNoReload;
  while (std::chrono::steady_clock::now() < deadline) {
    int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("{} received: flushing and committing", sig == SIGINT ? "SIGINT" : "SIGTERM");
      return;
    }
    if (sig == SIGHUP) {
      // systemd (Type=notify, ExecReload = SIGHUP) shows "reloading" until READY=1 follows.
      sd_notify(0, "RELOADING=1");
      reload("SIGHUP");
      sd_notify(0, "READY=1");
    }
    if (watch && watch->changed()) reload_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    if (reload_at != kNoReload && std::chrono::steady_clock::now() >= reload_at) {
      reload_at = kNoReload;
      reload("a change in the sinks directory");
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
  auto sinks = std::make_unique<Supervisor>(config, bootstrap, status);
  if (!sinks->reload().errors.empty()) exit_code = 1;
  if (sinks->keys().empty()) spdlog::warn("no sink is running (definitions in {})", config.sinks_dir.string());
  if (embedded) spdlog::info("embedded broker: {} — produce with: kcat -b {} -t orders.eu -P", bootstrap, bootstrap);

  std::unique_ptr<ApiServer> api;
  std::unique_ptr<DirectoryWatch> watch;
  if (config.api.enabled) {
    std::string error;
    if (const auto* ops = ops_module(error)) api = ops->start_api_server(config, *sinks, status, error);
    if (!api) {
      spdlog::error("{}", error);
      sinks->stop_all();
      return 2;
    }
    status.set_api_url(api->url());
    spdlog::info("operations API on {} ({})", api->url(),
                 config.api.token ? "bearer token required" : "no token: open to whoever reaches it");
  }
  // With the API on, every sink's group lag is read from the broker for /metrics and GET /sinks.
  std::unique_ptr<LagMonitor> lag_monitor;
  if (api) lag_monitor = std::make_unique<LagMonitor>(*sinks, status);
  if (config.api.watch_sinks_dir) watch = std::make_unique<DirectoryWatch>(config.sinks_dir);
  // The readiness contract with systemd (Type=notify; a no-op without NOTIFY_SOCKET): READY=1
  // once the config is loaded, every definition opened or refused and the API listening. Whether
  // the sinks then reach their brokers and destinations is /health/ready's answer, not this one.
  sd_notifyf(0, "READY=1\nSTATUS=%zu sink(s) started%s", sinks->keys().size(),
             api ? (" - API on " + api->url()).c_str() : "");

  // A process whose every sink failed would idle until signalled, and no supervisor would
  // notice: it exits 1 instead, unless told to stay up.
  bool gave_up = false;
  wait_for_stop(
      options,
      [&] {
        if (config.keep_running_on_error || status.any_sink_can_progress() || !status.any_sink_failed()) return false;
        gave_up = true;
        const std::string why =
            "no sink can make progress (each one is in error or invalid); exiting with 1 "
            "([runtime] keep_running_on_error = true keeps the process up)";
        spdlog::error("{}", why);
        status.set_runtime("exiting", why);
        return true;
      },
      watch.get(),
      [&](const char* why) {
        spdlog::info("reloading the sinks directory ({})", why);
        sinks->reload();
      });
  if (!gave_up) status.set_runtime("stopping");
  sd_notify(0, "STOPPING=1\nSTATUS=flushing and committing");
  api.reset();  // no operation starts a sink while they stop
  lag_monitor.reset();

  for (const auto& st : status.all())
    if (st.state == SinkState::Error) exit_code = 1;
  const bool clean = sinks->stop_all();
  for (const auto& st : status.all())
    if (st.state == SinkState::Error) exit_code = 1;
  if (!clean) {
    spdlog::error("exiting without cleanup: a sink was still writing or closing when shutdown_timeout ran out");
    spdlog::shutdown();
    std::_Exit(3);
  }
  sinks.reset();
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
