#include "http/bodies.h"

#include <charconv>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/record_id.hpp"

namespace picomq::http_sink {

std::string_view default_content_type(BodyFormat format, int32_t payload_format) {
  switch (format) {
    case BodyFormat::Ndjson: return "application/x-ndjson";
    case BodyFormat::JsonArray:
    case BodyFormat::Single: return "application/json";
    case BodyFormat::Raw:
      return payload_format == PMQ_PAYLOAD_JSON   ? "application/json"
             : payload_format == PMQ_PAYLOAD_TEXT ? "text/plain; charset=utf-8"
                                                  : "application/octet-stream";
  }
  return "application/octet-stream";
}

BatchPlan plan_batch(const pmq_batch& batch, Tombstones tombstones) {
  BatchPlan plan;
  plan.in_bodies.reserve(batch.record_count);
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (r.payload.data) {
      plan.in_bodies.push_back(i);
      continue;
    }
    switch (tombstones) {
      case Tombstones::Skip: break;  // written by skipping it, as configured
      case Tombstones::Send: plan.in_bodies.push_back(i); break;
      case Tombstones::Delete:
        if (r.key.data && r.key.size) plan.deletes.push_back(i);
        else plan.refused.emplace_back(i, "a tombstone without a key cannot become a DELETE (tombstones = \"delete\")");
        break;
    }
  }
  return plan;
}

kit::Framing framing(BodyFormat format) {
  switch (format) {
    case BodyFormat::Ndjson: return kit::Framing::ndjson();
    case BodyFormat::JsonArray: return kit::Framing::json_array();
    case BodyFormat::Single:
    case BodyFormat::Raw: break;
  }
  return kit::Framing::none();
}

kit::SplitLimits limits(BodyFormat format, kit::SplitLimits configured) {
  if (format == BodyFormat::Single || format == BodyFormat::Raw) return {.max_bytes = 0, .max_records = 1};
  return configured;
}

void render_record(const pmq_record& r, BodyFormat format, const kit::BatchJsonWriter& json, std::string& out) {
  if (format != BodyFormat::Raw) return json.append(out, r);
  if (r.payload.data) out.append(reinterpret_cast<const char*>(r.payload.data), r.payload.size);  // a tombstone: empty
}

std::vector<Body> render_bodies(const pmq_batch& batch, const std::vector<size_t>& records, size_t first, size_t count,
                                BodyFormat format, const kit::BatchJsonWriter& json, kit::SplitLimits configured) {
  std::vector<Body> out;
  for (kit::Chunk& c :
       kit::split_records(first, count, limits(format, configured), framing(format), [&](size_t k, std::string&text) {
         render_record(*pmq_batch_record(&batch, records[k]), format, json, text);
       }))
    out.push_back(Body{c.first, c.count, std::move(c.body)});
  return out;
}

std::string idempotency_key(std::string_view topic, int32_t partition, int64_t first_offset, int64_t last_offset) {
  std::string key = kit::url_safe(topic);
  char numbers[80];
  char* end = numbers;
  for (int64_t n : {static_cast<int64_t>(partition), first_offset, last_offset}) {
    *end++ = '-';
    end = std::to_chars(end, numbers + sizeof numbers, n).ptr;
  }
  key.append(numbers, end);
  return key;
}

std::optional<std::vector<long>> parse_statuses(const std::vector<std::string>& specs, std::string* error) {
  std::vector<long> out;
  auto number = [](std::string_view t, long* v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
    return ec == std::errc() && p == t.data() + t.size() && *v >= 100 && *v <= 599;
  };
  for (const std::string& raw : specs) {
    std::string_view rest = raw;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view spec = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      while (!spec.empty() && spec.front() == ' ') spec.remove_prefix(1);
      while (!spec.empty() && spec.back() == ' ') spec.remove_suffix(1);
      long lo = 0, hi = 0;
      if (spec.size() == 3 && spec[1] == 'x' && spec[2] == 'x' && spec[0] >= '1' && spec[0] <= '5') {
        lo = (spec[0] - '0') * 100;
        hi = lo + 99;
      } else if (const size_t dash = spec.find('-'); dash != std::string_view::npos) {
        if (!number(spec.substr(0, dash), &lo) || !number(spec.substr(dash + 1), &hi) || hi < lo) {
          *error = "'" + std::string(spec) + "' is not a status range (e.g. 200-204)";
          return std::nullopt;
        }
      } else if (number(spec, &lo)) {
        hi = lo;
      } else {
        *error = "'" + std::string(spec) + "' is not a status (e.g. 200), a class (2xx) or a range (200-204)";
        return std::nullopt;
      }
      for (long s = lo; s <= hi; ++s) out.push_back(s);
    }
  }
  if (out.empty()) {
    *error = "no status given";
    return std::nullopt;
  }
  return out;
}

std::string key_path_segment(std::string_view key) {
  std::string out = kit::percent_encode(key);
  // "." and ".." are path steps, not names (RFC 3986 section 5.2.4): spell them escaped.
  if (out == ".") return "%2E";
  if (out == "..") return "%2E%2E";
  return out;
}

}  // namespace picomq::http_sink
