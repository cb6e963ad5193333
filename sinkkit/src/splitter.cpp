#include "picomq/kit/splitter.hpp"

namespace picomq::kit {

std::vector<Chunk> split_records(size_t first, size_t count, SplitLimits limits, Framing framing,
                                 const RenderRecord& render) {
  std::vector<Chunk> chunks;
  if (count == 0) return chunks;
  auto start_chunk = [&](size_t index) {
    Chunk& c = chunks.emplace_back();
    c.first = index;
    c.body.append(framing.open);
    return &c;
  };
  Chunk* current = start_chunk(first);
  std::string carried;  // a record that did not fit its chunk, moving to the next
  for (size_t i = first; i < first + count; ++i) {
    const size_t before = current->body.size();
    if (current->count) current->body.append(framing.between);
    render(i, current->body);
    current->body.append(framing.after_each);
    const bool over_records = limits.max_records && current->count + 1 > limits.max_records;
    const bool over_bytes = limits.max_bytes && current->body.size() + framing.close.size() > limits.max_bytes;
    if (current->count && (over_records || over_bytes)) {
      // Move this record to a new chunk; the current one ends before it.
      const size_t item_start = before + (current->count ? framing.between.size() : 0);
      carried.assign(current->body, item_start, std::string::npos);
      current->body.resize(before);
      current->body.append(framing.close);
      current = start_chunk(i);
      current->body.append(carried);
    }
    ++current->count;
  }
  current->body.append(framing.close);
  return chunks;
}

}  // namespace picomq::kit
