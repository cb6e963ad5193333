#pragma once
// A live tap on a running sink (GET /sinks/{key}/tap, `picomq-connect ctl tap`): copies of the
// records passing one stage — decoded (after decoding and change events, before the transforms),
// transformed (what the sink is called with), written (what the sink acknowledged) — up to a
// count, for a while, with secrets masked. Disarmed (the normal case) it costs one relaxed atomic
// load per batch; armed it copies at most the records asked for.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::runtime {

class Tap {
 public:
  enum class Stage { Decoded = 0, Transformed = 1, Written = 2 };
  static constexpr size_t kMaxRecords = 1000;
  static constexpr std::chrono::seconds kMaxWait{60};
  static constexpr size_t kMaxPayloadBytes = 64 * 1024;  // a longer payload is cut, and says so

  static std::optional<Stage> stage_of(std::string_view name);  // "decoded" | "transformed" | "written"
  static std::string_view name_of(Stage stage);

  // Whether a tap of `stage` is armed: the hot path's only cost while none is.
  bool armed(Stage stage) const { return armed_[static_cast<int>(stage)].load(std::memory_order_relaxed); }

  // A record passing `stage` (any thread): copied while the tap wants more.
  void offer(Stage stage, const char* topic, int32_t partition, uint32_t block, const pmq_record& record,
             pmq_payload_format format, bool changes);

  // Arms the tap of `stage` (`block` < 0: every block), waits until `count` records came or
  // `wait` passed, disarms it and returns them, each a JSON object. False when a tap of this
  // sink runs already (one at a time).
  bool collect(Stage stage, int block, size_t count, std::chrono::milliseconds wait, std::vector<std::string>& out);

 private:
  std::atomic<bool> armed_[3] = {false, false, false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool running_ = false;
  Stage stage_ = Stage::Transformed;
  int block_ = -1;
  size_t wanted_ = 0;
  std::vector<std::string> records_;
};

// A header or field name that reads as a secret (password, secret, token, authorization, cookie,
// api key, credential): its value is shown as "***".
bool is_secret_name(std::string_view name);

}  // namespace picomq::runtime
