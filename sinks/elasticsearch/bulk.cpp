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
    case Op::Update: return "update";
    case Op::Truncate: return "truncate";
  }
  return "index";
}

BulkEncoder::BulkEncoder(const Settings& settings, std::vector<std::string> routing_path)
    : settings_(settings), routing_path_(std::move(routing_path)), writer_(json_options(settings.document)) {}

kit::Result<std::string> change_document_id(std::string_view key_json) {
  using R = kit::Result<std::string>;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object key;
  if (key_json.empty()) return R::failure("the change event has no key");
  if (parser.parse(key_json.data(), key_json.size()).get(root) || root.get_object().get(key) || key.size() == 0)
    return R::failure("the change event's key is not a JSON object with fields: " +
                      std::string(key_json.substr(0, 100)));
  std::string id;
  if (key.size() == 1) {
    const simdjson::dom::element value = (*key.begin()).value;
    std::string_view text;
    if (!value.get_string().get(text)) id = std::string(text);
    else id = simdjson::minify(value);
  } else {
    id = simdjson::minify(root);
  }
  if (id.empty()) return R::failure("the change event's key gives an empty document _id");
  if (id.size() > kMaxIdBytes)
    return R::failure("the change event's key gives a document _id of " + std::to_string(id.size()) +
                      " bytes, longer than a document _id may be (512)");
  if (!kit::is_valid_utf8(id)) return R::failure("the change event's key is not valid UTF-8");
  return R::success(std::move(id));
}

BatchPlan BulkEncoder::plan(const pmq_batch& batch) const {
  if (pmq_batch_has_changes(&batch)) return plan_changes(batch);
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
      p.items.push_back({i, Op::Delete, {}});
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
    p.items.push_back({i, write_op, {}});
  }
  return p;
}

BatchPlan BulkEncoder::plan_changes(const pmq_batch& batch) const {
  BatchPlan p;
  p.changes = true;
  p.items.reserve(batch.record_count);
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const auto op = static_cast<pmq_change_op>(pmq_record_op(&batch, &r));
    if (op == PMQ_OP_TRUNCATE) {
      p.items.push_back({i, Op::Truncate, {}});
      continue;
    }
    Op bulk_op = Op::Index;
    switch (op) {
      case PMQ_OP_UPSERT: bulk_op = Op::Index; break;
      case PMQ_OP_DELETE: bulk_op = Op::Delete; break;
      case PMQ_OP_PATCH: bulk_op = Op::Update; break;
      default:
        p.refused.emplace_back(
            i, "change event: operation " + std::to_string(static_cast<int>(op)) + " is not one this sink applies");
        continue;
    }
    auto id = change_document_id(view(pmq_record_key_json(&batch, &r)));
    if (!id) {
      p.refused.emplace_back(i, id.error());
      continue;
    }
    if (bulk_op != Op::Delete && settings_.document == kit::JsonLayout::PayloadOnly) {
      if (auto why = kit::payload_document_refusal(batch, r)) {
        p.refused.emplace_back(i, std::move(*why));
        continue;
      }
    }
    p.items.push_back({i, bulk_op, std::move(id).value()});
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
  if (item.op == Op::Truncate) return;  // no bulk item: the sink's _delete_by_query
  out += "{\"";
  out += to_string(item.op);
  out += "\":{";
  out += index_;
  if (!item.id.empty()) {
    // A change event: the row's key names the document (plan() refuses the options that would
    // name or route it otherwise).
    out += ",\"_id\":";
    kit::append_json_escaped(out, item.id);
    out += "}}\n";
    if (item.op == Op::Delete) return;
    if (item.op == Op::Update) out += "{\"doc\":";
    json_.append(out, r);
    if (item.op == Op::Update) out += ",\"doc_as_upsert\":true}";
    out += '\n';
    return;
  }
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
