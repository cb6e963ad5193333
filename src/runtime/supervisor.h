#pragma once
// The sinks of a running process, each under its own control: started from the sinks
// directory, stopped / started / restarted / paused / resumed one at a time (the operations
// API), and reloaded from the directory (inotify, SIGHUP, PUT / DELETE) so that a changed,
// added or removed definition file starts, restarts or stops only that sink. Every sink has
// consumer groups of its own, so the others keep their membership and do not rebalance.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "runtime/redrive.h"
#include "runtime/sink_runner.h"
#include "runtime/status.h"

namespace picomq::runtime {

class Tap;

class Supervisor {
 public:
  Supervisor(const config::RuntimeConfig& config, std::string bootstrap_servers, StatusBoard& status);
  ~Supervisor();

  // What an operation did: an HTTP status (200 done, 404 unknown sink, 409 not in a state that
  // allows it, 500 failed) and a message.
  struct Outcome {
    int status = 200;
    std::string message;
  };
  Outcome stop(const std::string& key);
  Outcome start(const std::string& key);
  // Stop (flush + commit what was written) and start again on the same definition. A sink in
  // Error restarts from its committed offsets: the batch that failed is the first one written.
  Outcome restart(const std::string& key);
  Outcome pause(const std::string& key, bool paused);
  // The running sink's tap (runtime/tap.h), to wait on without holding the supervisor: null with
  // the outcome's reason (404 unknown, 409 not running) otherwise.
  std::shared_ptr<Tap> tap(const std::string& key, Outcome& why);

  // Redrives of a sink's dead letters (runtime/redrive.h): one runs per sink at a time, beside
  // the sink (running or not). Null with the outcome's reason (404, 409, 400, 502) when refused.
  std::shared_ptr<Redrive> start_redrive(const std::string& key, RedriveRequest request, Outcome& why);
  // This process's redrives of the sink, oldest first; one by id (null: none here).
  std::vector<std::shared_ptr<Redrive>> redrives(const std::string& key) const;
  std::shared_ptr<Redrive> redrive(const std::string& key, const std::string& id) const;

  struct ReloadReport {
    std::vector<std::string> started, restarted, stopped, unchanged;
    std::vector<std::string> errors;  // "file:line:col: key: message", the running versions kept
  };
  // Reads the sinks directory again and applies what changed, file by file.
  ReloadReport reload();

  bool known(const std::string& key) const;
  bool running(const std::string& key) const;
  std::optional<config::SinkDefinition> definition(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::string& bootstrap_servers() const { return bootstrap_; }
  const config::RuntimeConfig& config() const { return config_; }

  // Shutdown: every sink flushes and commits; false when one had to be abandoned.
  bool stop_all();

 private:
  struct Entry {
    config::SinkDefinition definition;
    std::string text;  // the file's text when loaded: a reload restarts the sink only when it changed
    std::unique_ptr<SinkRunner> runner;
  };
  // Under mutex_.
  Outcome stop_locked(Entry& e);
  Outcome start_locked(Entry& e);
  bool running_locked(const std::string& key) const;

  const config::RuntimeConfig& config_;
  std::string bootstrap_;
  StatusBoard& status_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> sinks_;
  std::set<std::string> invalid_;  // status keys (file names) of files that did not load
  // The definitions as the API reads them, apart from mutex_: a GET must not wait for a sink's
  // stop (up to shutdown_timeout) in another request or a reload.
  void publish_definitions_locked();
  mutable std::mutex definitions_mutex_;
  std::map<std::string, config::SinkDefinition> definitions_;
  bool abandoned_ = false;
  mutable std::mutex redrives_mutex_;  // apart from mutex_: a redrive starts without waiting for a sink's stop
  std::vector<std::shared_ptr<Redrive>> redrives_;
};

}  // namespace picomq::runtime
