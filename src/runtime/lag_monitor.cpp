#include "runtime/lag_monitor.h"

#include <spdlog/spdlog.h>

#include <map>

#include "runtime/kafka/lag_reader.h"
#include "runtime/status.h"
#include "runtime/supervisor.h"

namespace picomq::runtime {

LagMonitor::LagMonitor(Supervisor& sinks, StatusBoard& status)
    : sinks_(sinks), status_(status), thread_([this] { run(); }) {}

LagMonitor::~LagMonitor() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LagMonitor::run() {
  kafka::LagReader reader(sinks_.bootstrap_servers(), sinks_.config().client_properties);
  std::string last_error;
  // Per sink: when it was last read, and its blocks' commits then.
  struct Reading {
    std::chrono::steady_clock::time_point at;
    uint64_t commits = 0;
  };
  std::map<std::string, Reading> readings;
  auto commits_of = [&](const std::string& key) {
    uint64_t n = 0;
    if (auto st = status_.get(key))
      for (const auto& b : st->blocks) n += b.commits;
    return n;
  };
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    for (const auto& key : sinks_.keys()) {
      const uint64_t commits = commits_of(key);
      auto it = readings.find(key);
      const bool due = it == readings.end() || now - it->second.at >= kEvery ||
                       (commits != it->second.commits && now - it->second.at >= kAfterCommit);
      if (!due) continue;
      const auto definition = sinks_.definition(key);
      if (!definition) continue;
      readings[key] = {now, commits};
      const auto groups =
          kafka::sink_groups(*definition, sinks_.bootstrap_servers(), sinks_.config().client_properties);
      for (size_t i = 0; i < groups.size(); ++i) {
        const auto& spec = groups[i];
        std::string error;
        std::vector<GroupLag> lag;
        for (auto& p : reader.read(spec, error))
          lag.push_back({std::move(p.topic), p.partition, p.committed, p.end, p.records, p.seconds, p.oldest_ms});
        // Said once per kind of failure (an outage is the consumers' to report), not every round.
        if (!error.empty() && error != last_error) spdlog::debug("lag of sink '{}': {}", key, error);
        last_error = error;
        status_.set_group_lag(key, i, std::move(lag), std::move(error));
      }
    }
    lock.lock();
    wake_.wait_for(lock, kAfterCommit, [&] { return stop_; });
  }
}

}  // namespace picomq::runtime
