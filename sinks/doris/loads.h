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
  size_t tombstones = 0;       // skipped: records without a payload, not change events
  size_t keyless_deletes = 0;  // skipped: a delete without a key deletes nothing (pmq_change_op)
};

// The names of the columns a change load fills (docs/sinks/doris.md, "Change events"): the
// record's offset, the table's sequence source (function_column.sequence_col), and 1 for a
// delete (the MERGE load's delete condition).
inline constexpr std::string_view kVersionColumn = "pico_version";
inline constexpr std::string_view kDeletedColumn = "pico_deleted";

// The batch's records as JSON lines (`writer`'s layout), cut into loads. A batch of change events
// (pmq_batch_has_changes) gives each upsert its row's line with "pico_version": offset and
// "pico_deleted": 0 first, and each delete a line of its key's fields with "pico_deleted": 1.
Cut cut_loads(const pmq_batch& raw, const kit::RecordJsonWriter& writer, int64_t label_span, size_t max_load_bytes);

// `load` without its records below offset `from` (loaded already); `last` and where it ends stay.
void trim_below(const pmq_batch& raw, Load& load, int64_t from);

// The label of the load of raw's topic-partition from `first` to `last` (at most Doris's 128 bytes).
std::string load_label(std::string_view prefix, const pmq_batch& raw, int64_t first, int64_t last);

}  // namespace picomq::doris
