#include "runtime/status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "transform/time.h"

namespace picomq::runtime {

std::string_view to_string(SinkState s) {
  switch (s) {
    case SinkState::Starting: return "starting";
    case SinkState::Running: return "running";
    case SinkState::Stopping: return "stopping";
    case SinkState::Stopped: return "stopped";
    case SinkState::Error: return "error";
    case SinkState::Invalid: return "invalid";
    case SinkState::Disabled: return "disabled";
  }
  return "unknown";
}

void StatusBoard::set_state(const std::string& key, const std::string& file, SinkState state, std::string message) {
  {
    std::lock_guard lock(mutex_);
    auto& s = sinks_[key];
    s.key = key;
    if (!file.empty()) s.file = file;
    // An Error is sticky: a later clean stop must not hide why the sink stopped.
    if (s.state == SinkState::Error && (state == SinkState::Stopping || state == SinkState::Stopped)) return;
    s.state = state;
    s.message = std::move(message);
    // A stopped sink consumes nothing: it is not paused (a pause before the stop ends with it,
    // and a start begins unpaused), whatever its blocks said last.
    if (state == SinkState::Stopped)
      for (auto& b : s.blocks) b.paused = b.paused_by_operator = false;
  }
  write_file();
}

void StatusBoard::set_block(const std::string& key, size_t index, BlockStatus block) {
  {
    std::lock_guard lock(mutex_);
    auto& s = sinks_[key];
    if (s.blocks.size() <= index) s.blocks.resize(index + 1);
    s.blocks[index] = std::move(block);
  }
  write_file();
}

void StatusBoard::set_group_lag(const std::string& key, size_t index, std::vector<GroupLag> lag, std::string error) {
  {
    std::lock_guard lock(mutex_);
    auto it = sinks_.find(key);
    if (it == sinks_.end()) return;
    auto& s = it->second;
    s.lag_error = std::move(error);
    if (!s.lag_error.empty()) return;
    if (s.group_lag.size() <= index) s.group_lag.resize(index + 1);
    s.group_lag[index] = std::move(lag);
  }
  write_file();
}

std::optional<SinkStatus> StatusBoard::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) return std::nullopt;
  return it->second;
}

namespace {
nlohmann::json broker_json(int64_t unreachable_since_ms) {
  if (!unreachable_since_ms) return {{"reachable", true}};
  return {{"reachable", false},
          {"unreachable_since", transform::time::to_rfc3339(transform::time::from_millis(unreachable_since_ms))}};
}
}  // namespace

void StatusBoard::set_counters(const std::string& key, std::map<std::string, uint64_t> counters) {
  {
    std::lock_guard lock(mutex_);
    auto& s = sinks_[key];
    if (s.counters == counters) return;
    s.counters = std::move(counters);
  }
  write_file();
}

void StatusBoard::set_runtime(std::string state, std::string message) {
  {
    std::lock_guard lock(mutex_);
    runtime_state_ = std::move(state);
    runtime_message_ = std::move(message);
  }
  write_file();
}

void StatusBoard::set_reload_error(const std::string& key, std::string error) {
  {
    std::lock_guard lock(mutex_);
    auto it = sinks_.find(key);
    if (it == sinks_.end()) return;
    it->second.reload_error = std::move(error);
  }
  write_file();
}

void StatusBoard::remove(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    sinks_.erase(key);
  }
  write_file();
}

void StatusBoard::clear_error(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it != sinks_.end() && it->second.state == SinkState::Error) it->second.state = SinkState::Stopping;
}

std::vector<SinkStatus> StatusBoard::all() const {
  std::lock_guard lock(mutex_);
  std::vector<SinkStatus> out;
  for (const auto& [key, s] : sinks_) out.push_back(s);
  return out;
}

void StatusBoard::set_api_url(std::string url) {
  {
    std::lock_guard lock(mutex_);
    api_url_ = std::move(url);
  }
  write_file();
}

bool StatusBoard::any_sink_can_progress() const {
  std::lock_guard lock(mutex_);
  return std::any_of(sinks_.begin(), sinks_.end(), [](const auto& kv) {
    const SinkState s = kv.second.state;
    return s == SinkState::Starting || s == SinkState::Running || s == SinkState::Stopping;
  });
}

bool StatusBoard::any_sink_failed() const {
  std::lock_guard lock(mutex_);
  return std::any_of(sinks_.begin(), sinks_.end(), [](const auto& kv) {
    return kv.second.state == SinkState::Error || kv.second.state == SinkState::Invalid;
  });
}

nlohmann::json group_lag_json(const SinkStatus& s) {
  if (s.group_lag.empty()) return nullptr;
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& block : s.group_lag) {
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& l : block)
      parts.push_back(
          {{"topic", l.topic},
           {"partition", l.partition},
           {"committed", l.committed < 0 ? nlohmann::json(nullptr) : nlohmann::json(l.committed)},
           {"end", l.end},
           {"lag", l.records},
           {"lag_seconds", l.seconds_at(now_ms) < 0 ? nlohmann::json(nullptr)
                                                    : nlohmann::json(std::round(l.seconds_at(now_ms) * 1000) / 1000)}});
    blocks.push_back(std::move(parts));
  }
  return blocks;
}

std::string StatusBoard::to_json() const {
  nlohmann::json doc;
  std::lock_guard lock(mutex_);
  doc["runtime"] = {{"state", runtime_state_}, {"message", runtime_message_}};
  if (!api_url_.empty()) doc["runtime"]["api"] = api_url_;
  doc["sinks"] = nlohmann::json::array();
  for (const auto& [key, s] : sinks_) {
    nlohmann::json j{{"key", key}, {"file", s.file}, {"state", to_string(s.state)}, {"message", s.message}};
    if (!s.reload_error.empty()) j["reload_error"] = s.reload_error;
    j["blocks"] = nlohmann::json::array();
    for (const auto& b : s.blocks) {
      nlohmann::json lag = nlohmann::json::array();
      for (const auto& l : b.lag)
        lag.push_back({{"topic", l.topic},
                       {"partition", l.partition},
                       {"position", l.position},
                       {"high", l.high},
                       {"lag", l.position >= 0 && l.high >= 0 ? std::max<int64_t>(0, l.high - l.position) : -1}});
      j["blocks"].push_back({{"group_id", b.group_id},
                             {"assigned", b.assigned},
                             {"paused", b.paused},
                             {"paused_by_operator", b.paused_by_operator},
                             {"lag", std::move(lag)},
                             {"delivered_records", b.delivered_records},
                             {"stored_batches", b.stored_batches},
                             {"committed_batches", b.committed_batches},
                             {"commits", b.commits},
                             {"failed_commits", b.failed_commits},
                             {"skipped_records", b.skipped_records},
                             {"dead_lettered_records", b.dead_lettered_records},
                             {"filtered_records", b.filtered_records},
                             {"buffered_records", b.buffered_records},
                             {"buffered_bytes", b.buffered_bytes},
                             {"consumed_records", b.consumed_records},
                             {"consumed_bytes", b.consumed_bytes},
                             {"broker", broker_json(b.broker_unreachable_since_ms)}});
    }
    j["group_lag"] = group_lag_json(s);
    if (!s.lag_error.empty()) j["lag_error"] = s.lag_error;
    j["counters"] = s.counters;
    doc["sinks"].push_back(std::move(j));
  }
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void StatusBoard::write_file() const {
  if (!file_) return;
  std::lock_guard lock(file_mutex_);  // one writer at a time, and the newest state written last
  const std::string json = to_json();
  auto tmp = *file_;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << '\n';
    if (!out) {
      spdlog::warn("cannot write status file {}", tmp.string());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, *file_, ec);
  if (ec) spdlog::warn("cannot replace status file {}: {}", file_->string(), ec.message());
}

}  // namespace picomq::runtime
