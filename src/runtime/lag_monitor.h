#pragma once
// Reads every sink's consumer-group lag from the broker every few seconds, running or not, into
// the status board (GET /sinks, the status page, /metrics' picomq_consumer_lag_records and
// picomq_consumer_lag_seconds): the signal an autoscaler reads must not drop to 0 because a sink
// is paused, stopped or failing (docs/operations.md, "Lag and autoscaling").
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace picomq::runtime {

class StatusBoard;
class Supervisor;

class LagMonitor {
 public:
  static constexpr std::chrono::milliseconds kEvery{5000};
  // A sink that committed since its last reading is read again this soon (not kEvery later): a
  // reading taken just before a commit would otherwise show its records as not committed.
  static constexpr std::chrono::milliseconds kAfterCommit{1000};
  LagMonitor(Supervisor& sinks, StatusBoard& status);
  ~LagMonitor();  // stops the thread (a reading in progress ends within the broker timeouts)
  LagMonitor(const LagMonitor&) = delete;
  LagMonitor& operator=(const LagMonitor&) = delete;

 private:
  void run();

  Supervisor& sinks_;
  StatusBoard& status_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace picomq::runtime
