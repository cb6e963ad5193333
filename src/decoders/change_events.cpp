#include "decoders/change_events.h"

#include <simdjson.h>

#include "decoders/json_out.h"

namespace picomq::decoders {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Kafka Connect's JsonConverter with schemas.enable wraps every value as {"schema", "payload"}:
// true when `value` was such a wrapper, and is now its payload.
bool unwrap_schema(element& value) {
  object o;
  if (value.get_object().get(o) || o.size() != 2) return false;
  element schema, payload;
  if (o["schema"].get(schema) || o["payload"].get(payload)) return false;
  value = payload;
  return true;
}

std::string_view keep(std::deque<std::string>& owned, std::string text) {
  owned.push_back(std::move(text));
  return owned.back();
}

// The row's key as a JSON object: the block's key_fields taken from `row`.
bool key_from_fields(const std::vector<std::string>& fields, object row, std::string_view what, Change& out,
                     std::deque<std::string>& owned, std::string& error) {
  JsonOut json;
  json.ch('{');
  for (const auto& field : fields) {
    element value;
    if (row[field].get(value)) {
      error = "key field '" + field + "' is missing from the " + std::string(what);
      return false;
    }
    if (value.is_null()) {
      error = "key field '" + field + "' is null in the " + std::string(what);
      return false;
    }
    json.string(field);
    json.ch(':');
    json.raw(simdjson::to_string(value));
    json.ch(',');
  }
  json.close('}');
  out.key = keep(owned, std::move(json.str()));
  return true;
}

// The row's key from the record key: its own fields when it is an object ({"schema", "payload"}
// unwrapped), a scalar as {"key": value}.
bool key_from_record_key(simdjson::dom::parser& parser, std::optional<std::string_view> record_key, Change& out,
                         std::deque<std::string>& owned, std::string& error) {
  if (!record_key) {
    error = "the record has no key to name its row (give it one, or set 'key_fields')";
    return false;
  }
  element doc;
  if (parser.parse(record_key->data(), record_key->size()).get(doc)) {
    error = "the record key is not JSON";
    return false;
  }
  unwrap_schema(doc);
  if (doc.is_null()) {
    error = "the record key is null";
    return false;
  }
  // Minified, so that equal keys are equal texts.
  if (doc.is_object()) {
    out.key = keep(owned, simdjson::to_string(doc));
    return true;
  }
  out.key = keep(owned, "{\"key\":" + simdjson::to_string(doc) + "}");
  return true;
}

bool is_unavailable(element value) {
  std::string_view s;
  return !value.get_string().get(s) && (s == kUnavailableValue || s == kUnavailableValueBase64);
}

// The row as JSON without the members `drop` names; `dropped`: whether any went.
template <class Drop>
std::string without(object row, Drop&& drop, bool& dropped) {
  JsonOut json;
  json.ch('{');
  dropped = false;
  for (const simdjson::dom::key_value_pair member : row) {
    if (drop(member)) {
      dropped = true;
      continue;
    }
    json.string(member.key);
    json.ch(':');
    json.raw(simdjson::to_string(member.value));
    json.ch(',');
  }
  json.close('}');
  return std::move(json.str());
}

bool has_unavailable(object row) {
  for (const simdjson::dom::key_value_pair member : row)
    if (is_unavailable(member.value)) return true;
  return false;
}

bool is_true(element value) {
  bool b = false;
  std::string_view s;
  return (!value.get_bool().get(b) && b) || (!value.get_string().get(s) && s == "true");
}

}  // namespace

ChangeReader::ChangeReader(config::ChangeEvents mode, std::vector<std::string> key_fields)
    : mode_(mode),
      key_fields_(std::move(key_fields)),
      payload_parser_(std::make_unique<simdjson::dom::parser>()),
      key_parser_(std::make_unique<simdjson::dom::parser>()) {}

ChangeReader::~ChangeReader() = default;

bool ChangeReader::read(std::optional<std::string_view> payload, std::optional<std::string_view> key, Change& out,
                        std::deque<std::string>& owned, std::string& error) {
  out = Change{};
  auto key_of = [&](std::optional<object> row, std::string_view what) {
    if (!key_fields_.empty()) {
      if (!row) {
        error = "a " + std::string(what) + " without a row cannot name its key by key_fields";
        return false;
      }
      return key_from_fields(key_fields_, *row, what, out, owned, error);
    }
    return key_from_record_key(*key_parser_, key, out, owned, error);
  };

  element value;
  if (payload && payload_parser_->parse(payload->data(), payload->size()).get(value)) {
    error = "the payload is not JSON";
    return false;
  }
  const bool wrapped = payload && unwrap_schema(value);
  if (!payload || value.is_null()) {
    // A tombstone deletes its key. Debezium sends one after each delete event, for compaction:
    // without a decoded key (key_fields) it repeats that delete and changes nothing.
    if (mode_ == config::ChangeEvents::Debezium && !key_fields_.empty()) {
      out.skip = true;
      return true;
    }
    out.op = PMQ_OP_DELETE;
    return key_of(std::nullopt, "tombstone");
  }
  object row;
  if (value.get_object().get(row)) {
    error = "a change's payload must be a JSON object";
    return false;
  }

  if (mode_ == config::ChangeEvents::Keyed) {
    out.op = PMQ_OP_UPSERT;
    out.row = wrapped ? keep(owned, simdjson::to_string(value)) : *payload;
    return key_of(row, "row");
  }

  // Debezium: the envelope (an `op` beside `before` / `after`, or a message's `message`), or a row
  // ExtractNewRecordState unwrapped, which may have a column named op (`__deleted` when its
  // delete.handling.mode is rewrite).
  std::string_view op;
  element field;
  const bool envelope = !row["op"].get_string().get(op) &&
                        (!row["after"].get(field) || !row["before"].get(field) || !row["message"].get(field));
  if (!envelope) {
    element deleted;
    const bool has_deleted = !row["__deleted"].get(deleted);
    if (has_deleted && is_true(deleted)) {
      out.op = PMQ_OP_DELETE;
      return key_of(row, "row");
    }
    out.op = PMQ_OP_UPSERT;
    if (!has_deleted && !has_unavailable(row)) {
      out.row = wrapped ? keep(owned, simdjson::to_string(value)) : *payload;
      return key_of(row, "row");
    }
    // The row without its flag, and without the columns Debezium could not read (a patch).
    bool unavailable = false, dropped = false;
    out.row = keep(owned, without(
                              row,
                              [&](const simdjson::dom::key_value_pair& m) {
                                if (m.key == "__deleted") return true;
                                if (!is_unavailable(m.value)) return false;
                                unavailable = true;
                                return true;
                              },
                              dropped));
    if (unavailable) out.op = PMQ_OP_PATCH;
    return key_of(row, "row");
  }
  if (op == "c" || op == "r" || op == "u") {
    object after;
    if (row["after"].get_object().get(after)) {
      error = "a Debezium '" + std::string(op) + "' event without an 'after' object";
      return false;
    }
    out.op = PMQ_OP_UPSERT;
    if (has_unavailable(after)) {
      bool dropped = false;
      out.op = PMQ_OP_PATCH;
      out.row = keep(
          owned, without(
                     after, [](const simdjson::dom::key_value_pair& m) { return is_unavailable(m.value); }, dropped));
    } else {
      out.row = keep(owned, simdjson::to_string(after));
    }
    return key_of(after, "row ('after')");
  }
  if (op == "d") {
    out.op = PMQ_OP_DELETE;
    object before;
    if (row["before"].get_object().get(before) && !key_fields_.empty()) {
      error =
          "a delete event without 'before' cannot name its key by key_fields (the table's REPLICA IDENTITY "
          "gives no old row: use the record key)";
      return false;
    }
    return key_of(before, "delete event's 'before'");
  }
  if (op == "t") {
    out.op = PMQ_OP_TRUNCATE;
    return true;
  }
  if (op == "m") {  // a logical decoding message (pg_logical_emit_message): no row changes
    out.skip = true;
    return true;
  }
  error = "unknown Debezium op '" + std::string(op) + "' (expected c, r, u, d, t or m)";
  return false;
}

std::string_view ChangeReader::merge(std::string_view base, std::string_view patch, std::deque<std::string>& owned) {
  object base_row, patch_row;
  if (payload_parser_->parse(base.data(), base.size()).get_object().get(base_row) ||
      key_parser_->parse(patch.data(), patch.size()).get_object().get(patch_row))
    return patch;  // not objects: cannot happen for rows this reader made
  bool replaced = false;
  std::string merged = without(
      base_row,
      [&](const simdjson::dom::key_value_pair& m) {
        element ignored;
        return !patch_row[m.key].get(ignored);
      },
      replaced);
  // The patch's members after the base's others: {"a":1,"b":2} + {"b":3} -> {"a":1,"b":3}.
  merged.pop_back();
  for (const simdjson::dom::key_value_pair member : patch_row) {
    if (merged.size() > 1) merged += ',';
    JsonOut json;
    json.string(member.key);
    merged += json.str();
    merged += ':';
    merged += simdjson::to_string(member.value);
  }
  merged += '}';
  return keep(owned, std::move(merged));
}

}  // namespace picomq::decoders
