#include "influxdb/points.h"

#include <charconv>
#include <cmath>

#include "picomq/kit/datetime.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"

namespace picomq::influxdb {
namespace {

std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

// The element at `parts` below `root`; false when a step is missing or not an object.
bool find(simdjson::dom::element root, const std::vector<std::string>& parts, simdjson::dom::element& out) {
  simdjson::dom::element e = root;
  for (const std::string& part : parts) {
    simdjson::dom::object o;
    if (e.get_object().get(o) || o.at_key(part).get(e)) return false;
  }
  out = e;
  return true;
}

std::string number_text(simdjson::dom::element e) {
  int64_t i;
  uint64_t u;
  double d;
  if (!e.get_int64().get(i)) return std::to_string(i);
  if (!e.get_uint64().get(u)) return std::to_string(u);
  std::string out;
  if (!e.get_double().get(d)) append_float(out, d);
  return out;
}

}  // namespace

PointMapper::PointMapper(const Plan& plan) : settings_(plan.settings), unsigned_ok_(plan.settings.api != Api::V1) {
  for (const auto& t : settings_.tags) {
    tags_.push_back(path(t));
    used_.push_back(t);
  }
  for (const auto& f : settings_.fields) fields_.push_back(path(f));
  if (!settings_.measurement_field.empty()) {
    measurement_field_ = path(settings_.measurement_field);
    used_.push_back(settings_.measurement_field);
  }
  if (!settings_.timestamp_field.empty()) {
    timestamp_field_ = path(settings_.timestamp_field);
    used_.push_back(settings_.timestamp_field);
  }
}

PointMapper::Path PointMapper::path(const std::string& dotted) const {
  Path p;
  p.dotted = dotted;
  for (size_t from = 0;;) {
    const size_t dot = dotted.find('.', from);
    p.parts.push_back(dotted.substr(from, dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  for (size_t i = 0; i < p.parts.size(); ++i) p.name += (i ? settings_.field_separator : "") + p.parts[i];
  return p;
}

bool PointMapper::used(std::string_view dotted) const {
  for (const auto& u : used_)
    if (u == dotted) return true;
  return false;
}

std::string_view PointMapper::Scratch::keep(std::string_view text) {
  if (used_ == texts_.size()) texts_.push_back(std::make_unique<std::string>());
  std::string& s = *texts_[used_++];
  s.assign(text);
  return s;
}

void PointMapper::Scratch::next_record() {
  point.tags.clear();
  point.fields.clear();
  point.time.reset();
  name.clear();
  dotted.clear();
  used_ = 0;
}

void PointMapper::flatten(simdjson::dom::element e, Scratch& s, std::string_view stable_name) const {
  if (!used_.empty() && used(s.dotted)) return;
  auto& fields = s.point.fields;
  const auto field_name = [&] { return stable_name.data() ? stable_name : s.keep(s.name); };
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
      for (auto [k, v] : simdjson::dom::object(e)) {
        const size_t name_at = s.name.size(), dotted_at = s.dotted.size();
        if (name_at) s.name += settings_.field_separator;
        s.name += k;
        if (dotted_at) s.dotted += '.';
        s.dotted += k;
        flatten(v, s, name_at ? std::string_view{} : k);  // a top-level key is its own name
        s.name.resize(name_at);
        s.dotted.resize(dotted_at);
      }
      return;
    case simdjson::dom::element_type::ARRAY: {
      size_t i = 0;
      char index[24];
      for (simdjson::dom::element v : simdjson::dom::array(e)) {
        const std::string_view digits(index,
                                      static_cast<size_t>(std::to_chars(index, index + sizeof index, i++).ptr - index));
        const size_t name_at = s.name.size(), dotted_at = s.dotted.size();
        s.name += settings_.field_separator;
        s.name += digits;
        s.dotted += '.';
        s.dotted += digits;
        flatten(v, s, {});
        s.name.resize(name_at);
        s.dotted.resize(dotted_at);
      }
      return;
    }
    case simdjson::dom::element_type::NULL_VALUE: return;
    case simdjson::dom::element_type::BOOL: fields.emplace_back(field_name(), bool(e.get_bool().value())); return;
    case simdjson::dom::element_type::STRING: fields.emplace_back(field_name(), e.get_string().value()); return;
    case simdjson::dom::element_type::INT64:
      if (settings_.numbers == Numbers::Float) fields.emplace_back(field_name(), double(e.get_int64().value()));
      else fields.emplace_back(field_name(), e.get_int64().value());
      return;
    case simdjson::dom::element_type::UINT64:
      if (settings_.numbers == Numbers::Float || !unsigned_ok_)
        fields.emplace_back(field_name(), double(e.get_uint64().value()));
      else fields.emplace_back(field_name(), Unsigned{e.get_uint64().value()});
      return;
    case simdjson::dom::element_type::DOUBLE: fields.emplace_back(field_name(), e.get_double().value()); return;
  }
}

std::optional<std::string> PointMapper::append(std::string& out, const pmq_batch& batch, const pmq_record& r,
                                               std::string_view measurement, simdjson::dom::parser& parser,
                                               Scratch& s) const {
  if (batch.payload_format != PMQ_PAYLOAD_JSON)
    return std::string("the payload is not JSON (a point needs a JSON object)");
  simdjson::dom::element root;
  if (parser.parse(reinterpret_cast<const char*>(r.payload.data), r.payload.size).get(root) ||
      root.type() != simdjson::dom::element_type::OBJECT)
    return std::string("the payload is not a JSON object");
  s.next_record();
  PointView& p = s.point;
  // Measurement.
  if (measurement_field_) {
    simdjson::dom::element e;
    std::string_view m;
    if (!find(root, measurement_field_->parts, e) || e.get_string().get(m))
      return "measurement_field: no string field " + measurement_field_->dotted;
    p.measurement = m;
  } else {
    p.measurement = measurement;
  }
  // Tags.
  for (const Path& t : tags_) {
    simdjson::dom::element e;
    if (!find(root, t.parts, e)) continue;
    switch (e.type()) {
      case simdjson::dom::element_type::NULL_VALUE: break;
      case simdjson::dom::element_type::STRING: p.tags.emplace_back(t.name, e.get_string().value()); break;
      case simdjson::dom::element_type::BOOL:
        p.tags.emplace_back(t.name, e.get_bool().value() ? "true" : "false");
        break;
      case simdjson::dom::element_type::OBJECT:
      case simdjson::dom::element_type::ARRAY:
        return "tag " + t.dotted + " is " + (e.is_object() ? "an object" : "an array") + ", not a value";
      default: p.tags.emplace_back(t.name, s.keep(number_text(e))); break;
    }
  }
  if (!settings_.tag_key.empty() && r.key.data) {
    if (!kit::is_valid_utf8(view(r.key))) return std::string("tag_key: the record key is not valid UTF-8");
    p.tags.emplace_back(settings_.tag_key, view(r.key));
  }
  for (const std::string& h : settings_.tag_headers) {
    for (size_t i = 0; i < r.header_count; ++i) {
      const pmq_header& header = r.headers[i];
      if (view(header.name) != h) continue;
      if (header.value.data) {
        if (!kit::is_valid_utf8(view(header.value)))
          return "tag_headers: the value of header " + h + " is not valid UTF-8";
        p.tags.emplace_back(h, view(header.value));
      }
      break;
    }
  }
  for (const std::string& m : settings_.tag_metadata) {
    if (m == "pico_topic") p.tags.emplace_back(m, batch.topic);
    else if (m == "pico_partition") p.tags.emplace_back(m, s.keep(std::to_string(batch.partition)));
    else if (m == "pico_offset") p.tags.emplace_back(m, s.keep(std::to_string(r.offset)));
  }
  // Fields.
  if (fields_.empty()) {
    flatten(root, s, {});
  } else {
    for (const Path& f : fields_) {
      simdjson::dom::element e;
      if (!find(root, f.parts, e)) continue;
      s.name = f.name;
      s.dotted.clear();
      flatten(e, s, f.name);
    }
  }
  const bool payload_fields = !p.fields.empty();
  for (const std::string& m : settings_.metadata_fields) {
    if (m == "pico_topic") p.fields.emplace_back(m, std::string_view(batch.topic));
    else if (m == "pico_partition") p.fields.emplace_back(m, int64_t{batch.partition});
    else if (m == "pico_offset") p.fields.emplace_back(m, int64_t{r.offset});
    else if (m == "pico_timestamp" && r.timestamp_ms >= 0) p.fields.emplace_back(m, int64_t{r.timestamp_ms});
    else if (m == "pico_key" && r.key.data) p.fields.emplace_back(m, s.keep(kit::base64_encode(view(r.key))));
    else if (m == "pico_headers") {
      std::string json;
      kit::append_headers_json(json, {r.headers, r.header_count});
      p.fields.emplace_back(m, s.keep(json));
    }
  }
  if (!payload_fields) return std::string("no field to write (a point needs at least one non-null scalar field)");
  // Time.
  if (timestamp_field_) {
    simdjson::dom::element e;
    if (!find(root, timestamp_field_->parts, e) || e.is_null())
      return "timestamp_field: the record has no field " + timestamp_field_->dotted;
    std::optional<int64_t> t;
    int64_t i;
    double d;
    std::string_view s;
    if (!e.get_int64().get(i)) {
      t = convert_time(i, settings_.timestamp_unit, settings_.precision);
    } else if (e.is_double() && !e.get_double().get(d)) {
      const double v = std::floor(d * static_cast<double>(units_per_second(settings_.precision)) /
                                  static_cast<double>(units_per_second(settings_.timestamp_unit)));
      if (std::isfinite(v) && std::fabs(v) < 9.2e18) t = static_cast<int64_t>(v);
    } else if (!e.get_string().get(s)) {
      int64_t seconds;
      uint32_t nanos;
      int digits;
      if (!kit::parse_datetime(s, seconds, nanos, digits))
        return "timestamp_field " + timestamp_field_->dotted + ": \"" + std::string(s.substr(0, 64)) +
               "\" is not an RFC 3339 date-time";
      t = time_from_parts(seconds, nanos, settings_.precision);
    } else {
      return "timestamp_field " + timestamp_field_->dotted + " is neither a number nor a date-time string";
    }
    if (!t)
      return "timestamp_field " + timestamp_field_->dotted + " is out of range for precision " +
             std::string(precision_name(settings_.precision));
    p.time = t;
  } else {
    if (r.timestamp_ms < 0) return std::string("the record has no timestamp (set timestamp_field)");
    p.time = convert_time(r.timestamp_ms, Precision::Ms, settings_.precision);
  }
  return append_line(out, p);
}

BatchLines PointMapper::map(const pmq_batch& batch, std::string_view measurement) const {
  simdjson::dom::parser parser;
  Scratch scratch;
  BatchLines b;
  b.lines.reserve(batch.record_count);
  size_t payload_bytes = 0;  // lines are about as long as the JSON they come from
  for (size_t i = 0; i < batch.record_count; ++i) payload_bytes += pmq_batch_record(&batch, i)->payload.size;
  b.text.reserve(payload_bytes + payload_bytes / 4);
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (!r.payload.data) {
      ++b.skipped;
      continue;
    }
    const size_t at = b.text.size();
    if (auto why = append(b.text, batch, r, measurement, parser, scratch)) {
      b.text.resize(at);
      b.refused.emplace_back(i, std::move(*why));
      continue;
    }
    b.lines.push_back({i, at, b.text.size() - at});
  }
  return b;
}

}  // namespace picomq::influxdb
