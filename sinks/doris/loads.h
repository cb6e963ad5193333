#pragma once
// How the Doris sink cuts a batch into Stream Loads and names them (docs/sinks/doris.md, "Labels"):
// a load holds records of one topic-partition whose offsets lie in one block of `label_span`
// offsets, cut at those fixed boundaries, at max_load_bytes and at the batch's end; its label is
// {prefix}-{topic}-{partition}-{first}-{last}, so every retry and replay of the same records names
// the same load. No I/O.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/record_json.hpp"
#include "picomq/sink_abi.h"

namespace picomq::doris {

// One Stream Load: records of a batch (positions), their JSON lines, the offsets they span.
struct Load {
  std::vector<size_t> positions;
  std::vector<std::string> lines;
  int64_t first = 0, last = 0;
  bool ends_at_batch_end = false;  // its block may go on past the batch (a longer earlier batch)
};

struct Cut {
  std::vector<Load> loads;
  size_t tombstones = 0;  // skipped: Doris's JSON lines have no delete
};

// The batch's records as JSON lines (`writer`'s layout), cut into loads.
Cut cut_loads(const pmq_batch& raw, const kit::RecordJsonWriter& writer, int64_t label_span, size_t max_load_bytes);

// `load` without its records below offset `from` (loaded already); `last` and where it ends stay.
void trim_below(const pmq_batch& raw, Load& load, int64_t from);

// The label of the load of raw's topic-partition from `first` to `last` (at most Doris's 128 bytes).
std::string load_label(std::string_view prefix, const pmq_batch& raw, int64_t first, int64_t last);

}  // namespace picomq::doris
