#include "surrealdb/rpc.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "picomq/kit/encoding.hpp"

namespace picomq::surrealdb {
namespace {

using json = nlohmann::json;

constexpr std::string_view kInsert = "INSERT IGNORE INTO $tb $v RETURN NONE";

std::string ops_statement(Mode mode, std::string_view over) {
  std::string s = "FOR $o IN ";
  s += over;
  s += " { IF $o[1] == NULL { DELETE type::record($tb, $o[0]) RETURN NONE } ELSE { ";
  s += mode == Mode::Upsert ? "UPSERT type::record($tb, $o[0]) CONTENT $o[1] RETURN NONE"
                            : "INSERT IGNORE INTO $tb [$o[1] + { id: $o[0] }] RETURN NONE";
  s += " } }";
  return s;
}

// A batch of change events: each item [op, id, content | null], applied in order.
std::string changes_statement(std::string_view over) {
  std::string s = "FOR $o IN ";
  s += over;
  s += " { IF $o[0] == 'd' { DELETE type::record($tb, $o[1]) RETURN NONE }"
       " ELSE IF $o[0] == 't' { DELETE type::table($tb) RETURN NONE }"
       " ELSE IF $o[0] == 'p' { LET $r = type::record($tb, $o[1]);"
       " UPSERT $r CONTENT object::extend($r.* ?? {}, $o[2]) RETURN NONE }"
       " ELSE { UPSERT type::record($tb, $o[1]) CONTENT $o[2] RETURN NONE } }";
  return s;
}

bool contains_ci(std::string_view text, std::string_view what) {
  auto it = std::search(text.begin(), text.end(), what.begin(), what.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

// A CBOR array header (major type 4) for `n` items.
void append_array_header(std::string& out, uint64_t n) {
  constexpr uint8_t kArray = 4u << 5;
  if (n < 24) {
    out += static_cast<char>(kArray | n);
    return;
  }
  int bytes = n <= 0xFF ? 1 : n <= 0xFFFF ? 2 : n <= 0xFFFFFFFFu ? 4 : 8;
  out += static_cast<char>(kArray | (bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27));
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
}

// A JSON integer above the int64 range, anywhere in `v`: SurrealDB's int is 64-bit signed, and
// 3.3.5 stores a larger CBOR integer wrapped to a negative one (2^64 - 1 became -1).
bool has_unsigned_beyond_int64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  if (v.is_structured())
    for (const auto& e : v)
      if (has_unsigned_beyond_int64(e)) return true;
  return false;
}

}  // namespace

std::string statement_text(Shape shape, Mode mode, size_t count, bool per_item) {
  if (!per_item) {
    if (shape == Shape::Changes) return changes_statement("$v");
    return shape == Shape::Insert ? std::string(kInsert) : ops_statement(mode, "$v");
  }
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    const std::string one = "[$v[" + std::to_string(i) + "]]";
    if (shape == Shape::Insert) out += "INSERT IGNORE INTO $tb " + one + " RETURN NONE;";
    else if (shape == Shape::Changes) out += changes_statement(one) + ";";
    else out += ops_statement(mode, one) + ";";
  }
  return out;
}

std::string rpc_body(uint64_t id, std::string_view text, std::string_view table, size_t count, std::string_view items) {
  // Keys in order ("id" < "method" < "params"; "tb" < "v"): the serialised form ends with the
  // empty array of "v" (0x80), replaced by the items.
  const json envelope = {
      {"id", id},
      {"method", "query"},
      {"params", json::array({std::string(text), json{{"tb", std::string(table)}, {"v", json::array()}}})}};
  std::string out;
  json::to_cbor(envelope, out);
  out.pop_back();
  append_array_header(out, count);
  out += items;
  return out;
}

std::string rpc_body(uint64_t id, std::string_view text, std::string_view table, const std::vector<std::string>& items,
                     size_t first, size_t count) {
  std::string joined;
  for (size_t i = first; i < first + count; ++i) joined += items[i];
  return rpc_body(id, text, table, count, joined);
}

kit::Result<RpcResponse> parse_rpc_response(std::string_view cbor) {
  using R = kit::Result<RpcResponse>;
  const json j = json::from_cbor(cbor.begin(), cbor.end(), true, false, json::cbor_tag_handler_t::ignore);
  if (j.is_discarded() || !j.is_object()) return R::failure("the response is not a CBOR RPC answer");
  RpcResponse r;
  if (auto e = j.find("error"); e != j.end()) {
    std::string text;
    if (e->is_object()) {
      if (e->contains("kind") && (*e)["kind"].is_string()) text = (*e)["kind"].get<std::string>() + ": ";
      if (e->contains("message") && (*e)["message"].is_string()) text += (*e)["message"].get<std::string>();
    }
    r.error = text.empty() ? e->dump() : text;
    return R::success(std::move(r));
  }
  auto res = j.find("result");
  if (res == j.end() || !res->is_array()) return R::failure("the response has no result array");
  for (const json& s : *res) {
    StatementResult st;
    if (!s.is_object() || !s.contains("status")) return R::failure("a statement's answer has no status");
    st.ok = s["status"] == "OK";
    if (!st.ok) {
      if (s.contains("kind") && s["kind"].is_string()) st.kind = s["kind"].get<std::string>();
      if (s.contains("result"))
        st.message = s["result"].is_string() ? s["result"].get<std::string>() : s["result"].dump();
    }
    r.statements.push_back(std::move(st));
  }
  return R::success(std::move(r));
}

std::string_view to_string(ErrorClass c) {
  switch (c) {
    case ErrorClass::AlreadyThere: return "already there";
    case ErrorClass::Retry: return "retry";
    case ErrorClass::TableGone: return "table gone";
    case ErrorClass::Fatal: return "fatal";
    case ErrorClass::Record: return "record";
  }
  return "?";
}

ErrorClass classify_error(const StatementResult& r) {
  if (r.kind == "AlreadyExists") return ErrorClass::AlreadyThere;
  if (contains_ci(r.message, "conflict") || contains_ci(r.message, "can be retried") ||
      contains_ci(r.message, "timed out") || contains_ci(r.message, "timeout") || r.kind == "Timeout")
    return ErrorClass::Retry;
  if (r.kind == "NotFound") return contains_ci(r.message, "table") ? ErrorClass::TableGone : ErrorClass::Fatal;
  if (r.kind == "NotAllowed" || r.kind == "Unauthorized" || r.kind == "Forbidden" || r.kind == "Validation" ||
      contains_ci(r.message, "permission") || contains_ci(r.message, "IAM error") ||
      contains_ci(r.message, "Specify a namespace") || contains_ci(r.message, "Specify a database"))
    return ErrorClass::Fatal;
  return ErrorClass::Record;
}

Encoder::Encoder(const Settings& settings) : settings_(settings), writer_({.layout = settings.document}) {}

kit::Result<nlohmann::ordered_json> change_record_id(std::string_view key_json) {
  using R = kit::Result<nlohmann::ordered_json>;
  if (key_json.empty()) return R::failure("the change event has no key");
  // ordered: a composite key's values in the key's own order (equal keys are equal texts).
  const auto key = nlohmann::ordered_json::parse(key_json, nullptr, false);
  if (key.is_discarded() || !key.is_object() || key.empty())
    return R::failure("the change event's key is not a JSON object with fields: " +
                      std::string(key_json.substr(0, 100)));
  for (const auto& [field, value] : key.items()) {
    if (value.is_null()) return R::failure("the change event's key field '" + field + "' is null");
    if (has_unsigned_beyond_int64(json(value)))
      return R::failure("the change event's key field '" + field +
                        "' is an integer above 9223372036854775807 (SurrealDB's int is 64-bit signed)");
  }
  if (key.size() == 1) {
    const auto& value = key.begin().value();
    if (value.is_string() || value.is_number_integer()) return R::success(value);
    return R::success(nlohmann::ordered_json::array({value}));
  }
  auto values = nlohmann::ordered_json::array();
  for (const auto& [field, value] : key.items()) values.push_back(value);
  return R::success(std::move(values));
}

std::optional<json> Encoder::content(const pmq_batch& batch, const pmq_record& r, std::string& text,
                                     std::string& why) const {
  text.clear();
  writer_.append(text, batch, r);
  json content = json::parse(text, nullptr, false);
  if (content.is_discarded() || !content.is_object()) {
    why = "the payload is not valid JSON";
    return std::nullopt;
  }
  if (has_unsigned_beyond_int64(content)) {
    why =
        "an integer above 9223372036854775807: SurrealDB's int is 64-bit signed (a larger one would be stored "
        "wrapped to a negative number)";
    return std::nullopt;
  }
  return content;
}

ItemPlan Encoder::plan_changes(const pmq_batch& batch) const {
  ItemPlan p;
  p.changes = true;
  std::string text, why;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const auto change = static_cast<pmq_change_op>(pmq_record_op(&batch, &r));
    const char* op = nullptr;
    switch (change) {
      case PMQ_OP_UPSERT: op = "u"; break;
      case PMQ_OP_PATCH: op = "p"; break;
      case PMQ_OP_DELETE: op = "d"; break;
      case PMQ_OP_TRUNCATE: op = "t"; break;
      default:
        p.refused.emplace_back(
            i, "change event: operation " + std::to_string(static_cast<int>(change)) + " is not one this sink applies");
        continue;
    }
    Item it{i, change == PMQ_OP_DELETE || change == PMQ_OP_TRUNCATE, {}};
    if (change == PMQ_OP_TRUNCATE) {
      json::to_cbor(json::array({op, nullptr, nullptr}), it.cbor);
      p.items.push_back(std::move(it));
      continue;
    }
    const pmq_bytes key = pmq_record_key_json(&batch, &r);
    auto id = change_record_id(std::string_view(reinterpret_cast<const char*>(key.data), key.size));
    if (!id) {
      p.refused.emplace_back(i, id.error());
      continue;
    }
    json item = json::array({op, json(std::move(id).value())});
    if (change == PMQ_OP_DELETE) {
      item.push_back(nullptr);
    } else {
      auto row = content(batch, r, text, why);
      if (!row) {
        p.refused.emplace_back(i, why);
        continue;
      }
      // The record's own id is the row's key: a row field `id` is kept as pico_payload_id.
      if (auto own = row->find("id"); own != row->end()) {
        (*row)["pico_payload_id"] = *own;
        row->erase("id");
      }
      item.push_back(std::move(*row));
    }
    json::to_cbor(item, it.cbor);
    p.items.push_back(std::move(it));
  }
  return p;
}

ItemPlan Encoder::plan(const pmq_batch& batch) const {
  if (pmq_batch_has_changes(&batch)) return plan_changes(batch);
  ItemPlan p;
  const bool deletes = settings_.tombstones == Tombstones::Delete;
  for (size_t i = 0; i < batch.record_count && deletes; ++i)
    if (!pmq_batch_record(&batch, i)->payload.data) p.has_removes = true;
  const bool ops = settings_.mode == Mode::Upsert || p.has_removes;
  const auto batch_json = writer_.begin(batch);
  std::string text;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const bool tombstone = !r.payload.data;
    json id;
    if (settings_.id == IdMode::Record) {
      id = json::array({std::string(batch.topic), batch.partition, r.offset});
    } else if (settings_.id == IdMode::Key) {
      const std::string_view key(reinterpret_cast<const char*>(r.key.data), r.key.size);
      if (!r.key.data) {
        p.refused.emplace_back(i, "id = key: the record has no key");
        continue;
      }
      if (!kit::is_valid_utf8(key)) {
        p.refused.emplace_back(i, "id = key: the record key is not UTF-8 text");
        continue;
      }
      id = std::string(key);
    }
    if (tombstone && deletes) {
      json item = json::array({id, nullptr});
      Item it{i, true, {}};
      json::to_cbor(item, it.cbor);
      p.items.push_back(std::move(it));
      continue;
    }
    if (tombstone) {
      ++p.skipped;
      continue;
    }
    text.clear();
    batch_json.append(text, r);
    json content = json::parse(text, nullptr, false);
    if (content.is_discarded() || !content.is_object()) {
      p.refused.emplace_back(i, "the payload is not valid JSON");
      continue;
    }
    if (has_unsigned_beyond_int64(content)) {
      p.refused.emplace_back(i,
                             "an integer above 9223372036854775807: SurrealDB's int is 64-bit signed (a larger one "
                             "would be stored wrapped to a negative number)");
      continue;
    }
    if (settings_.id == IdMode::Field) {
      auto f = content.find(settings_.id_field);
      if (f == content.end() || !(f->is_string() || f->is_number_integer() || f->is_number_unsigned())) {
        p.refused.emplace_back(i, "id = field: the payload has no string or integer field " + settings_.id_field);
        continue;
      }
      id = *f;
    }
    if (auto own = content.find("id");
        own != content.end() && !(settings_.id == IdMode::Field && settings_.id_field == "id")) {
      content["pico_payload_id"] = *own;
    }
    content.erase("id");
    // Every record the same fields: no key is pico_key NULL (a field, unlike NONE).
    if (!content.contains("pico_key")) content["pico_key"] = nullptr;
    Item it{i, false, {}};
    if (ops) {
      json::to_cbor(json::array({std::move(id), std::move(content)}), it.cbor);
    } else {
      content["id"] = std::move(id);
      json::to_cbor(content, it.cbor);
    }
    p.items.push_back(std::move(it));
  }
  return p;
}

}  // namespace picomq::surrealdb
