// Renderings of typed option defaults into the descriptor's JSON (picomq/kit/options.hpp).
#include "picomq/kit/options.hpp"

#include "picomq/kit/encoding.hpp"

namespace picomq::kit {

std::string json_string(std::string_view text) {
  std::string out;
  append_json_escaped(out, text);
  return out;
}

// The largest unit that divides the value, so the docs show "30s" and not "30000ms"; the
// runtime's duration parser reads every one of these back.
std::string format_duration(std::chrono::milliseconds value) {
  const int64_t ms = value.count();
  if (ms == 0) return "0s";
  struct Unit {
    int64_t ms;
    const char* suffix;
  };
  for (Unit u : {Unit{3'600'000, "h"}, Unit{60'000, "m"}, Unit{1000, "s"}})
    if (ms % u.ms == 0) return std::to_string(ms / u.ms) + u.suffix;
  return std::to_string(ms) + "ms";
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes == 0) return "0B";
  struct Unit {
    uint64_t bytes;
    const char* suffix;
  };
  for (Unit u : {Unit{1ull << 30, "GiB"}, Unit{1ull << 20, "MiB"}, Unit{1ull << 10, "KiB"}})
    if (bytes % u.bytes == 0) return std::to_string(bytes / u.bytes) + u.suffix;
  return std::to_string(bytes) + "B";
}

}  // namespace picomq::kit
