#include "meilisearch/documents.h"

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/record_id.hpp"

namespace picomq::meilisearch {

namespace {
std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }
}  // namespace

DocumentPlan plan_documents(const Settings& s, const pmq_batch& batch) {
  DocumentPlan plan;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const bool tombstone = r.payload.data == nullptr;
    if (tombstone && s.tombstones == Tombstones::Skip) {
      ++plan.skipped_tombstones;
      continue;
    }
    Item item{i, tombstone, {}};
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
  if (item.del) return kit::append_json_escaped(out, item.id);
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
