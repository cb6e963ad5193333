#include "doris/loads.h"

#include "picomq/kit/record_id.hpp"
#include "picomq/kit/sanitize.hpp"

namespace picomq::doris {

namespace {
constexpr size_t kMaxLabelBytes = 128;  // Doris: ^[-_A-Za-z0-9:]{1,128}$
}  // namespace

Cut cut_loads(const pmq_batch& raw, const kit::RecordJsonWriter& writer, int64_t label_span, size_t max_load_bytes) {
  Cut out;
  std::vector<Load>& loads = out.loads;
  auto json = writer.begin(raw);
  const bool changes = pmq_batch_has_changes(&raw) != 0;
  size_t bytes = 0;
  for (size_t i = 0; i < raw.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&raw, i);
    std::string line;
    const int32_t op = changes ? pmq_record_op(&raw, &r) : PMQ_OP_APPEND;
    if (op == PMQ_OP_DELETE) {
      const pmq_bytes key = pmq_record_key_json(&raw, &r);
      const auto body =
          key.data ? kit::json_object_body({reinterpret_cast<const char*>(key.data), key.size}) : std::nullopt;
      if (!body) {
        ++out.keyless_deletes;
        continue;
      }
      line = "{\"" + std::string(kVersionColumn) + "\":" + std::to_string(r.offset) + ",\"" +
             std::string(kDeletedColumn) + "\":1";
      if (!body->empty) line += ',';
      line += body->members;
    } else if (r.payload.data == nullptr) {
      ++out.tombstones;
      continue;
    } else {
      json.append(line, r);
      if (changes)
        kit::insert_first_member(line, 0,
                                 "\"" + std::string(kVersionColumn) + "\":" + std::to_string(r.offset) + ",\"" +
                                     std::string(kDeletedColumn) + "\":0");
    }
    const bool new_block = loads.empty() || r.offset / label_span != loads.back().first / label_span ||
                           bytes + line.size() + 1 > max_load_bytes;
    if (new_block) {
      loads.emplace_back();
      loads.back().first = r.offset;
      bytes = 0;
    }
    bytes += line.size() + 1;
    loads.back().positions.push_back(i);
    loads.back().lines.push_back(std::move(line));
    loads.back().last = r.offset;
  }
  // A batch's last load ends at its end unless that is the last offset of a block.
  if (!loads.empty()) loads.back().ends_at_batch_end = (loads.back().last + 1) % label_span != 0;
  return out;
}

void trim_below(const pmq_batch& raw, Load& load, int64_t from) {
  Load rest;
  for (size_t k = 0; k < load.positions.size(); ++k) {
    if (pmq_batch_record(&raw, load.positions[k])->offset < from) continue;
    rest.positions.push_back(load.positions[k]);
    rest.lines.push_back(std::move(load.lines[k]));
  }
  rest.first = rest.positions.empty() ? 0 : pmq_batch_record(&raw, rest.positions.front())->offset;
  rest.last = load.last;
  rest.ends_at_batch_end = load.ends_at_batch_end;
  load = std::move(rest);
}

std::string load_label(std::string_view prefix, const pmq_batch& raw, int64_t first, int64_t last) {
  std::string l = std::string(prefix) + "-" + kit::url_safe(raw.topic) + "-" + std::to_string(raw.partition) + "-" +
                  std::to_string(first) + "-" + std::to_string(last);
  return kit::fit_name(std::move(l), kMaxLabelBytes);
}

}  // namespace picomq::doris
