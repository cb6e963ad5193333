#pragma once
// The request splitter: a batch's records rendered into request bodies of at most max_bytes and
// max_records each, every body with the record-index range it holds, so a per-item result
// (a bulk response's items, a 413, a bisected 400) maps back to reject_record() on the right
// records. A record that alone exceeds max_bytes gets a body of its own (the destination then
// refuses it, and only it).
//
//   auto chunks = kit::split_records(0, batch.size(), {.max_bytes = 5 << 20}, kit::Framing::ndjson(),
//                                    [&](size_t i, std::string& out) { writer.append(out, raw, rec(i)); });
//   for (auto& c : chunks) send(c.body);          // c.first, c.count: the records in it
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace picomq::kit {

// How items sit in a body: open + item (+ after_each) + between + item ... + close.
struct Framing {
  std::string_view open, between, close, after_each;
  static constexpr Framing ndjson() { return {"", "", "", "\n"}; }
  static constexpr Framing json_array() { return {"[", ",", "]", ""}; }
  static constexpr Framing none() { return {"", "", "", ""}; }
};

struct SplitLimits {
  uint64_t max_bytes = 0;  // 0: no limit
  size_t max_records = 0;  // 0: no limit
};

struct Chunk {
  size_t first = 0;  // index of its first record in the batch
  size_t count = 0;  // records in it
  std::string body;
};

using RenderRecord = std::function<void(size_t index, std::string& out)>;

// Renders records [first, first + count) into chunks (none when count is 0). Each record is
// rendered once, straight into its chunk; only a record that overflows a chunk is moved.
std::vector<Chunk> split_records(size_t first, size_t count, SplitLimits limits, Framing framing,
                                 const RenderRecord& render);

// The two halves of a chunk's range, for bisecting a refused request down to the records the
// destination refuses: [first, first + count/2) and the rest.
struct Halves {
  size_t first_a, count_a, first_b, count_b;
};
inline Halves halves(size_t first, size_t count) {
  const size_t a = count / 2;
  return {first, a, first + a, count - a};
}

}  // namespace picomq::kit
