#pragma once
// What each sink is doing, readable by tests and (later) the HTTP API: kept in memory and
// mirrored to a JSON file (written atomically) whenever it changes.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace picomq::runtime {

enum class SinkState { Starting, Running, Stopping, Stopped, Error, Invalid, Disabled };
std::string_view to_string(SinkState);

// One assigned partition's consumer position against the broker's high watermark (the last
// one the consumer saw; -1 while unknown). Lag = high - position.
struct PartitionLag {
  std::string topic;
  int32_t partition = 0;
  int64_t position = -1;
  int64_t high = -1;
};

// A consumer group's lag on one partition as the broker has it (kafka::LagReader), whatever the
// sink is doing: the log end minus the committed offset, and the age of the record there.
struct GroupLag {
  std::string topic;
  int32_t partition = 0;
  int64_t committed = -1;  // -1: nothing committed (lag counts from the log start)
  int64_t end = -1;
  int64_t records = -1;    // -1 while unknown
  double seconds = -1;     // 0 without lag, -1 while unknown (as of the reading)
  int64_t oldest_ms = -1;  // the timestamp of the record at the committed offset, -1 unknown

  // The age of the oldest unwritten record now: it grows between readings (every 5 s) instead
  // of standing still at the reading's value.
  double seconds_at(int64_t now_ms) const {
    if (records == 0) return 0;
    if (oldest_ms >= 0) return std::max<double>(0, static_cast<double>(now_ms - oldest_ms) / 1000.0);
    return seconds;
  }
};

struct BlockStatus {
  std::string group_id;
  std::vector<std::string> assigned;  // "topic[partition]"
  bool paused = false;                // paused for back-pressure or by the operator
  bool paused_by_operator = false;    // POST /sinks/{key}/pause
  std::vector<PartitionLag> lag;
  uint64_t delivered_records = 0;
  uint64_t stored_batches = 0;     // batch offsets stored after their write (or bad-record handling)
  uint64_t committed_batches = 0;  // of those, the ones a successful commit covered
  uint64_t commits = 0;            // successful offset commits
  uint64_t failed_commits = 0;
  int64_t broker_unreachable_since_ms = 0;  // epoch ms; 0 while the broker answers
  uint64_t skipped_records = 0;             // bad records the `skip` policy stepped over
  uint64_t dead_lettered_records = 0;       // bad records confirmed in the dead-letter topic
  uint64_t filtered_records = 0;            // records a transform dropped
  uint64_t buffered_records = 0;            // polled, not yet written (buckets, queue, in flight)
  uint64_t buffered_bytes = 0;
  uint64_t rejected_records = 0;                // refused by the sink (then handled by on_bad_record)
  uint64_t consumed_records = 0;                // polled from the broker
  uint64_t consumed_bytes = 0;                  // their key + value bytes
  std::array<uint64_t, 6> write_attempts{};     // by pmq_write_status (ok, retry, partial, fatal, rejected)
  std::vector<uint64_t> write_latency_buckets;  // per LatencyHistogram bound, then +Inf (not cumulative)
  double write_latency_sum_seconds = 0;
  std::vector<uint64_t> end_to_end_latency_buckets;  // the same for record timestamp -> offset stored
  double end_to_end_latency_sum_seconds = 0;
};

struct SinkStatus {
  std::string key;
  std::string file;
  SinkState state = SinkState::Starting;
  std::string message;
  std::vector<BlockStatus> blocks;
  std::map<std::string, uint64_t> counters;  // what the sink counted (pmq_host_api.count)
  // A changed definition file that failed validation: the running version stays, this says why.
  std::string reload_error;
  // Per block, the group's lag read from the broker every few seconds (LagMonitor, with the
  // operations API); `lag_error` when the last reading failed (the previous one is kept).
  std::vector<std::vector<GroupLag>> group_lag;
  std::string lag_error;
};

// The sink's group lag as the status file and GET /sinks show it: one array per block, each entry
// {topic, partition, committed, end, lag, lag_seconds}; null while unread.
nlohmann::json group_lag_json(const SinkStatus& s);

class StatusBoard {
 public:
  explicit StatusBoard(std::optional<std::filesystem::path> file) : file_(std::move(file)) {}
  void set_state(const std::string& key, const std::string& file, SinkState state, std::string message = {});
  void set_block(const std::string& key, size_t index, BlockStatus block);
  void set_counters(const std::string& key, std::map<std::string, uint64_t> counters);
  // The process as a whole: "running", or "exiting" with why.
  void set_runtime(std::string state, std::string message = {});
  void set_reload_error(const std::string& key, std::string error);
  // The group lag of block `index` of a known sink (ignored for a sink no longer known).
  void set_group_lag(const std::string& key, size_t index, std::vector<GroupLag> lag, std::string error);
  // Forgets a sink (its definition was removed); clear_error lets an operator's stop or restart
  // replace a sticky Error.
  void remove(const std::string& key);
  void clear_error(const std::string& key);
  std::vector<SinkStatus> all() const;
  // The API's address once it listens ("http://127.0.0.1:8083"), in the status file too.
  void set_api_url(std::string url);
  // True while a sink is starting, running or stopping; false when each one is in error,
  // invalid or disabled (and none is known: no sink at all is not "no progress").
  bool any_sink_can_progress() const;
  bool any_sink_failed() const;
  std::optional<SinkStatus> get(const std::string& key) const;
  std::string to_json() const;
  void write_file() const;

 private:
  std::optional<std::filesystem::path> file_;
  mutable std::mutex mutex_;
  mutable std::mutex file_mutex_;
  std::map<std::string, SinkStatus> sinks_;
  std::string runtime_state_ = "running";
  std::string runtime_message_;
  std::string api_url_;
};

}  // namespace picomq::runtime
