#include "meilisearch/documents.h"

#include <simdjson.h>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/record_id.hpp"

namespace picomq::meilisearch {

namespace {
std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

DocumentPlan plan_changes(const Settings& s, const pmq_batch& batch) {
  DocumentPlan plan;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const auto change = static_cast<pmq_change_op>(pmq_record_op(&batch, &r));
    Op op = Op::Write;
    switch (change) {
      case PMQ_OP_UPSERT: op = Op::Write; break;
      case PMQ_OP_PATCH: op = Op::Patch; break;
      case PMQ_OP_DELETE: op = Op::Delete; break;
      case PMQ_OP_TRUNCATE: plan.items.push_back({i, Op::Truncate, {}}); continue;
      default:
        plan.refused.emplace_back(
            i, "change event: operation " + std::to_string(static_cast<int>(change)) + " is not one this sink applies");
        continue;
    }
    auto id = change_document_id(view(pmq_record_key_json(&batch, &r)));
    if (!id) {
      plan.refused.emplace_back(i, id.error());
      continue;
    }
    if (op != Op::Delete && s.document == kit::JsonLayout::PayloadOnly) {
      if (auto why = kit::payload_document_refusal(batch, r)) {
        plan.refused.emplace_back(i, std::move(*why));
        continue;
      }
    }
    plan.items.push_back({i, op, std::move(id).value()});
  }
  return plan;
}

}  // namespace

kit::Result<std::string> change_document_id(std::string_view key_json) {
  using R = kit::Result<std::string>;
  if (key_json.empty()) return R::failure("the change event has no key");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object key;
  if (parser.parse(key_json.data(), key_json.size()).get(root) || root.get_object().get(key) || key.size() == 0)
    return R::failure("the change event's key is not a JSON object with fields: " +
                      std::string(key_json.substr(0, 100)));
  std::string text;
  if (key.size() == 1) {
    const simdjson::dom::element value = (*key.begin()).value;
    std::string_view s;
    if (!value.get_string().get(s)) text = std::string(s);
    else text = simdjson::minify(value);
  } else {
    text = simdjson::minify(root);
  }
  if (text.empty()) return R::failure("the change event's key gives an empty document id");
  std::string id = kit::url_safe(text);
  if (id.size() > kMaxIdBytes)
    return R::failure("the change event's key gives a document id of " + std::to_string(id.size()) +
                      " bytes (encoded to [A-Za-z0-9_-]), more than Meilisearch's 511");
  return R::success(std::move(id));
}

DocumentPlan plan_documents(const Settings& s, const pmq_batch& batch) {
  if (pmq_batch_has_changes(&batch)) return plan_changes(s, batch);
  DocumentPlan plan;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const bool tombstone = r.payload.data == nullptr;
    if (tombstone && s.tombstones == Tombstones::Skip) {
      ++plan.skipped_tombstones;
      continue;
    }
    Item item{i, tombstone ? Op::Delete : Op::Write, {}};
    if (s.id == IdMode::Record) {
      auto id = kit::url_safe_record_id(batch.topic, batch.partition, r.offset, kMaxIdBytes);
      if (!id) {
        plan.refused.emplace_back(i, "the record id of topic " + std::string(batch.topic) +
                                         " encodes to more than 511 bytes, Meilisearch's id limit (use id = \"key\" "
                                         "or \"field\")");
        continue;
      }
      item.id = std::move(*id);
    } else if (s.id == IdMode::Key) {
      if (!r.key.data || r.key.size == 0) {
        plan.refused.emplace_back(i, "id = \"key\": the record has no key");
        continue;
      }
      item.id = kit::url_safe(view(r.key));
      if (item.id.size() > kMaxIdBytes) {
        plan.refused.emplace_back(i, "id = \"key\": the key encodes to " + std::to_string(item.id.size()) +
                                         " bytes, more than Meilisearch's 511");
        continue;
      }
    }
    if (!tombstone && s.document == kit::JsonLayout::PayloadOnly) {
      if (auto why = kit::payload_document_refusal(batch, r)) {
        plan.refused.emplace_back(i, std::move(*why));
        continue;
      }
    }
    plan.items.push_back(std::move(item));
  }
  return plan;
}

void render_item(std::string& out, const Item& item, const kit::BatchJsonWriter& json, const pmq_batch& batch,
                 std::string_view primary_key) {
  if (item.op == Op::Truncate) return;  // no body
  if (item.op == Op::Delete) return kit::append_json_escaped(out, item.id);
  const size_t start = out.size();
  json.append(out, *pmq_batch_record(&batch, item.record));
  if (!item.id.empty()) {  // the primary key first: {"pico_id":"t-0-42", ...
    std::string member;
    kit::append_json_escaped(member, primary_key);
    member += ":\"" + item.id + "\"";  // [A-Za-z0-9_-]: nothing to escape
    kit::insert_first_member(out, start, member);
  }
  out += '\n';
}

}  // namespace picomq::meilisearch
