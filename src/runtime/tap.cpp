#include "runtime/tap.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "runtime/record_view.h"

namespace picomq::runtime {
namespace {

using nlohmann::ordered_json;

std::string_view view(pmq_bytes b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

// The values of secret-looking members replaced, at any depth.
void mask(ordered_json& value) {
  if (value.is_object()) {
    for (auto& [k, v] : value.items())
      if (is_secret_name(k)) v = "***";
      else mask(v);
  } else if (value.is_array()) {
    for (auto& v : value) mask(v);
  }
}

}  // namespace

bool is_secret_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::erase_if(lower, [](char c) { return c == '-' || c == '_' || c == '.'; });
  for (const char* word : {"password", "passwd", "secret", "token", "authorization", "cookie", "apikey", "credential"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

std::optional<Tap::Stage> Tap::stage_of(std::string_view name) {
  if (name == "decoded") return Stage::Decoded;
  if (name == "transformed") return Stage::Transformed;
  if (name == "written") return Stage::Written;
  return std::nullopt;
}

std::string_view Tap::name_of(Stage stage) {
  switch (stage) {
    case Stage::Decoded: return "decoded";
    case Stage::Transformed: return "transformed";
    case Stage::Written: return "written";
  }
  return "?";
}

void Tap::offer(Stage stage, const char* topic, int32_t partition, uint32_t block, const pmq_record& r,
                pmq_payload_format format, bool changes) {
  {
    std::lock_guard lock(mutex_);
    if (!running_ || stage != stage_ || records_.size() >= wanted_ ||
        (block_ >= 0 && static_cast<uint32_t>(block_) != block))
      return;
  }
  // Built outside the lock: a copy of one record.
  ordered_json j;
  j["stage"] = name_of(stage);
  j["topic"] = topic;
  j["partition"] = partition;
  j["offset"] = r.offset;
  j["block"] = block;
  if (r.timestamp_ms >= 0) j["timestamp"] = r.timestamp_ms;
  if (changes) j["op"] = op_name(r.op);
  j["key"] = bytes_json(r.key);
  if (r.key_json.data) {
    ordered_json key = ordered_json::parse(view(r.key_json), nullptr, false);
    mask(key);
    j["key_json"] = std::move(key);
  }
  auto headers = ordered_json::array();
  for (size_t i = 0; i < r.header_count; ++i) {
    const std::string name(view(r.headers[i].name));
    headers.push_back(
        ordered_json::array({name, is_secret_name(name) && r.headers[i].value.data ? ordered_json("***")
                                                                                   : bytes_json(r.headers[i].value)}));
  }
  j["headers"] = std::move(headers);
  if (!r.payload.data) {
    j["payload"] = nullptr;
  } else if (r.payload.size > kMaxPayloadBytes) {
    j["payload_bytes"] = r.payload.size;
    j["payload_cut"] = std::string(view(r.payload).substr(0, kMaxPayloadBytes));  // may end inside a character
  } else if (format == PMQ_PAYLOAD_JSON) {
    ordered_json payload = ordered_json::parse(view(r.payload), nullptr, false);
    mask(payload);
    j["payload"] = std::move(payload);
  } else {
    j["payload"] = bytes_json(r.payload);
  }
  std::string text = j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  std::lock_guard lock(mutex_);
  if (!running_ || stage != stage_ || records_.size() >= wanted_) return;
  records_.push_back(std::move(text));
  if (records_.size() >= wanted_) {
    armed_[static_cast<int>(stage)].store(false, std::memory_order_relaxed);
    cv_.notify_all();
  }
}

bool Tap::collect(Stage stage, int block, size_t count, std::chrono::milliseconds wait, std::vector<std::string>& out) {
  std::unique_lock lock(mutex_);
  if (running_) return false;
  running_ = true;
  stage_ = stage;
  block_ = block;
  wanted_ = std::clamp<size_t>(count, 1, kMaxRecords);
  records_.clear();
  armed_[static_cast<int>(stage)].store(true, std::memory_order_relaxed);
  cv_.wait_for(lock, std::min<std::chrono::milliseconds>(wait, kMaxWait), [&] { return records_.size() >= wanted_; });
  armed_[static_cast<int>(stage)].store(false, std::memory_order_relaxed);
  running_ = false;
  out = std::move(records_);
  records_.clear();
  return true;
}

}  // namespace picomq::runtime
