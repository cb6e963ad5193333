#include "elasticsearch/bulk.h"

#include <simdjson.h>

#include <charconv>

#include "picomq/kit/encoding.hpp"

namespace picomq::elasticsearch {
namespace {

std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }
std::string_view key_of(const pmq_record& r) { return view(r.key); }

void append_number(std::string& out, int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

kit::RecordJsonOptions json_options(kit::JsonLayout layout) {
  kit::RecordJsonOptions o;
  o.layout = layout;
  return o;
}

}  // namespace

std::string_view to_string(Op op) {
  switch (op) {
    case Op::Index: return "index";
    case Op::Create: return "create";
    case Op::Delete: return "delete";
  }
  return "index";
}

BulkEncoder::BulkEncoder(const Settings& settings, std::vector<std::string> routing_path)
    : settings_(settings), routing_path_(std::move(routing_path)), writer_(json_options(settings.document)) {}

BatchPlan BulkEncoder::plan(const pmq_batch& batch) const {
  BatchPlan p;
  p.items.reserve(batch.record_count);
  const Op write_op = settings_.action == Action::Create ? Op::Create : Op::Index;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const bool tombstone = r.payload.data == nullptr;
    if (tombstone && settings_.tombstones == Tombstones::Skip) {
      ++p.skipped;
      continue;
    }
    if (settings_.id == IdMode::Key) {
      if (!r.key.data || r.key.size == 0) {
        p.refused.emplace_back(i, "id = \"key\": the record has no key");
        continue;
      }
      if (!kit::is_valid_utf8(key_of(r))) {
        p.refused.emplace_back(i, "id = \"key\": the record key is not valid UTF-8");
        continue;
      }
      if (r.key.size > kMaxIdBytes) {
        p.refused.emplace_back(i, "id = \"key\": the record key is " + std::to_string(r.key.size) +
                                      " bytes, longer than a document _id may be (512)");
        continue;
      }
    }
    if (tombstone) {
      p.items.push_back({i, Op::Delete});
      continue;
    }
    if (settings_.document == kit::JsonLayout::PayloadOnly) {
      if (auto why = kit::payload_document_refusal(batch, r)) {
        p.refused.emplace_back(i, std::move(*why));
        continue;
      }
    }
    if (settings_.data_stream && r.timestamp_ms < 0) {
      p.refused.emplace_back(i, "data_stream: the record has no timestamp for @timestamp");
      continue;
    }
    p.items.push_back({i, write_op});
  }
  return p;
}

BulkEncoder::ForBatch::ForBatch(const BulkEncoder& encoder, const pmq_batch& batch, std::string_view index)
    : encoder_(&encoder), batch_(&batch), json_(encoder.writer_.begin(batch)) {
  index_ = "\"_index\":";
  kit::append_json_escaped(index_, index);
  if (encoder.settings_.id == IdMode::Record) {
    // The record id topic:partition:offset (picomq/kit/metadata.hpp), its constant part once.
    std::string prefix(batch.topic);
    prefix += ':';
    prefix += std::to_string(batch.partition);
    prefix += ':';
    id_prefix_ = ",\"_id\":";
    kit::append_json_escaped(id_prefix_, prefix);
    id_prefix_.pop_back();  // the closing quote: the offset follows
  }
}

void BulkEncoder::ForBatch::append(std::string& out, const Item& item) const {
  const Settings& s = encoder_->settings_;
  const pmq_record& r = *pmq_batch_record(&*batch_, item.record);
  out += "{\"";
  out += to_string(item.op);
  out += "\":{";
  out += index_;
  switch (s.id) {
    case IdMode::Record:
      out += id_prefix_;
      append_number(out, r.offset);
      out += '"';
      break;
    case IdMode::Key:
      out += ",\"_id\":";
      kit::append_json_escaped(out, key_of(r));
      break;
    case IdMode::None: break;
  }
  if (s.version_type == VersionType::External) {
    out += ",\"version\":";
    append_number(out, r.offset);
    out += ",\"version_type\":\"external\"";
  }
  if (!encoder_->routing_path_.empty() && item.op != Op::Delete) encoder_->append_routing(out, *batch_, r);
  out += "}}\n";
  if (item.op == Op::Delete) return;
  const size_t start = out.size();
  json_.append(out, r);
  if (s.data_stream) {
    std::string ts = "\"@timestamp\":";
    append_number(ts, r.timestamp_ms);
    ts += ',';
    out.insert(start + 1, ts);  // after the document's '{' (flat and envelope always have members)
  }
  out += '\n';
}

void BulkEncoder::append_routing(std::string& out, const pmq_batch& batch, const pmq_record& r) const {
  if (batch.payload_format != PMQ_PAYLOAD_JSON) return;
  simdjson::dom::parser parser;  // only with routing_field: parsing each payload is its price
  simdjson::dom::element e;
  if (parser.parse(reinterpret_cast<const char*>(r.payload.data), r.payload.size).get(e)) return;
  for (const std::string& field : routing_path_)
    if (e.at_key(field).get(e)) return;
  std::string_view text;
  int64_t i = 0;
  uint64_t u = 0;
  std::string value;
  if (!e.get_string().get(text)) value = std::string(text);
  else if (!e.get_int64().get(i)) value = std::to_string(i);
  else if (!e.get_uint64().get(u)) value = std::to_string(u);
  else return;
  if (value.empty()) return;
  out += ",\"routing\":";
  kit::append_json_escaped(out, value);
}

}  // namespace picomq::elasticsearch
