#include "runtime/lag_monitor.h"

#include <spdlog/spdlog.h>

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
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    for (const auto& key : sinks_.keys()) {
      const auto definition = sinks_.definition(key);
      if (!definition) continue;
      const auto groups =
          kafka::sink_groups(*definition, sinks_.bootstrap_servers(), sinks_.config().client_properties);
      for (size_t i = 0; i < groups.size(); ++i) {
        const auto& spec = groups[i];
        std::string error;
        std::vector<GroupLag> lag;
        for (auto& p : reader.read(spec, error))
          lag.push_back({std::move(p.topic), p.partition, p.committed, p.end, p.records, p.seconds});
        // Said once per kind of failure (an outage is the consumers' to report), not every round.
        if (!error.empty() && error != last_error) spdlog::debug("lag of sink '{}': {}", key, error);
        last_error = error;
        status_.set_group_lag(key, i, std::move(lag), std::move(error));
      }
    }
    lock.lock();
    wake_.wait_for(lock, kEvery, [&] { return stop_; });
  }
}

}  // namespace picomq::runtime
