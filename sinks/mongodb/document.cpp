#include "mongodb/document.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>

#include "mongodb/json_to_bson.h"
#include "picomq/kit/datetime.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"
#include "picomq/kit/metadata.hpp"

namespace picomq::mongodb {
namespace {

std::string_view bytes_of(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

bool is_object_text(std::string_view json) {
  for (char c : json) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

bool append_string_or_binary(bson_t* into, const char* name, std::string_view bytes) {
  if (kit::is_valid_utf8(bytes)) return bson_append_utf8(into, name, -1, bytes.data(), static_cast<int>(bytes.size()));
  return bson_append_binary(into, name, -1, BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>(bytes.data()),
                            static_cast<uint32_t>(bytes.size()));
}

// The value of `field` converted to a BSON Date in `into` under the same name; false with a
// problem when it is not an integer (epoch ms), an ISO-8601 string or already a date.
bool append_date(bson_t* into, const char* field, const bson_iter_t& it, std::string& problem) {
  switch (bson_iter_type(&it)) {
    case BSON_TYPE_DATE_TIME: return bson_append_date_time(into, field, -1, bson_iter_date_time(&it));
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: return bson_append_date_time(into, field, -1, bson_iter_as_int64(&it));
    case BSON_TYPE_UTF8: {
      uint32_t len = 0;
      const char* s = bson_iter_utf8(&it, &len);
      int64_t seconds = 0;
      uint32_t nanos = 0;
      int digits = 0;
      if (kit::parse_datetime({s, len}, seconds, nanos, digits))
        return bson_append_date_time(into, field, -1, seconds * 1000 + nanos / 1000000);
      problem = "timestamp field '" + std::string(field) + "': '" + std::string(s, std::min<uint32_t>(len, 64)) +
                "' is not an ISO-8601 date-time";
      return false;
    }
    default:
      problem = "timestamp field '" + std::string(field) +
                "' is neither an integer (epoch milliseconds) nor an ISO-8601 string";
      return false;
  }
}

// kit::record_id's "topic:partition:offset", spelled out: GCC 12 warns of its fixed buffer
// (-Wstringop-overflow, a false positive) when it is inlined in this file.
std::string record_id_of(const char* topic, int32_t partition, int64_t offset) {
  std::string id(topic);
  id += ':';
  id += std::to_string(partition);
  id += ':';
  id += std::to_string(offset);
  return id;
}

}  // namespace

kit::Result<BsonPtr> bson_from_json(std::string_view json) {
  bool has_pico_key = false;
  return bson_from_json(json, has_pico_key);
}

kit::Result<BsonPtr> bson_from_json(std::string_view json, bool& has_pico_key) {
  BsonPtr doc = new_bson();
  if (append_plain_json_object(json, doc.get(), has_pico_key)) return kit::Result<BsonPtr>::success(std::move(doc));
  // Extended JSON, or what libbson refuses (with its message). bson_new_from_json, not
  // bson_init_from_json on a bson_new(): that re-initialises the heap bson_t as a static one,
  // which bson_destroy() then never frees (128 bytes a document).
  bson_error_t error;
  doc.reset(
      bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()), static_cast<ssize_t>(json.size()), &error));
  if (!doc) return kit::Result<BsonPtr>::failure(std::string("not a BSON document: ") + error.message);
  has_pico_key = false;
  bson_iter_t it;
  bson_iter_init(&it, doc.get());
  while (bson_iter_next(&it))
    if (std::string_view(bson_iter_key(&it)).starts_with("pico_")) has_pico_key = true;
  return kit::Result<BsonPtr>::success(std::move(doc));
}

std::string to_json(const bson_t& doc) {
  size_t len = 0;
  char* s = bson_as_relaxed_extended_json(&doc, &len);
  std::string out = s ? std::string(s, len) : std::string();
  bson_free(s);
  return out;
}

bool append_key_id(std::string_view key_json, bson_t* into, std::string& problem) {
  if (key_json.empty()) {
    problem = "change event: the row has no key";
    return false;
  }
  if (!is_object_text(key_json)) {
    problem = "change event: the row's key is not a JSON object";
    return false;
  }
  auto key = bson_from_json(key_json);
  if (!key) {
    problem = "change event: the row's key is " + key.error();
    return false;
  }
  const uint32_t fields = bson_count_keys(key.value().get());
  if (fields == 0) {
    problem = "change event: the row's key {} names no field";
    return false;
  }
  if (fields > 1) return bson_append_document(into, "_id", -1, key.value().get());
  bson_iter_t it;
  bson_iter_init(&it, key.value().get());
  bson_iter_next(&it);
  return bson_append_iter(into, "_id", -1, &it);
}

bool DocumentEncoder::id_value(const pmq_batch& batch, const pmq_record& r, const bson_t* payload, bson_t* into,
                               const char* name, std::string& problem) const {
  switch (s_.id_strategy) {
    case IdStrategy::RecordId: {
      const std::string id = record_id_of(batch.topic, batch.partition, r.offset);
      return bson_append_utf8(into, name, -1, id.data(), static_cast<int>(id.size()));
    }
    case IdStrategy::Key:
      if (!r.key.data) {
        problem = "id_strategy key: the record has no key";
        return false;
      }
      return append_string_or_binary(into, name, bytes_of(r.key));
    case IdStrategy::Field: {
      bson_iter_t it;
      if (!payload || !bson_iter_init_find(&it, payload, s_.id_field->c_str())) {
        problem = "id_strategy field: the payload has no field '" + *s_.id_field + "'";
        return false;
      }
      return bson_append_iter(into, name, -1, &it);
    }
    case IdStrategy::Generated: {
      bson_oid_t oid;
      bson_oid_init(&oid, nullptr);
      return bson_append_oid(into, name, -1, &oid);
    }
  }
  return false;
}

namespace {

// The pico_* metadata fields, each unless the payload has a field of its name (a payload field
// of the same name wins: one key per BSON document). An error names what could not be appended.
template <typename PayloadHas>
std::optional<std::string> append_metadata(const pmq_batch& batch, const pmq_record& r, bson_t* d,
                                           PayloadHas payload_has) {
  if (!payload_has(kit::kTopicField)) bson_append_utf8(d, "pico_topic", -1, batch.topic, -1);
  if (!payload_has(kit::kPartitionField)) bson_append_int32(d, "pico_partition", -1, batch.partition);
  if (!payload_has(kit::kOffsetField)) bson_append_int64(d, "pico_offset", -1, r.offset);
  if (r.timestamp_ms >= 0 && !payload_has(kit::kTimestampField))
    bson_append_date_time(d, "pico_timestamp", -1, r.timestamp_ms);
  // A record without a key has pico_key null: every document has the same fields.
  if (!payload_has(kit::kKeyField)) {
    if (r.key.data)
      bson_append_binary(d, "pico_key", -1, BSON_SUBTYPE_BINARY, r.key.data, static_cast<uint32_t>(r.key.size));
    else bson_append_null(d, "pico_key", -1);
  }
  if (r.header_count && !payload_has(kit::kHeadersField)) {
    std::string headers;
    kit::append_headers_json(headers, std::span<const pmq_header>(r.headers, r.header_count));
    auto h = bson_from_json(headers);
    if (!h) return "pico_headers: " + h.error();
    bson_append_document(d, "pico_headers", -1, h.value().get());
  }
  return std::nullopt;
}

// A change event's row key, `id` ({_id: ...}: change()'s filter), as the document's _id.
bool append_id_of(const bson_t* id, bson_t* d) {
  bson_iter_t it;
  return bson_iter_init_find(&it, id, "_id") && bson_append_iter(d, "_id", -1, &it);
}

kit::Result<BsonPtr> size_checked(BsonPtr doc) {
  if (doc->len > kMaxDocumentBytes)
    return kit::Result<BsonPtr>::failure("the document is " + std::to_string(doc->len) +
                                         " bytes, over MongoDB's 16 MiB document limit (BSONObjectTooLarge)");
  return kit::Result<BsonPtr>::success(std::move(doc));
}

}  // namespace

std::optional<kit::Result<BsonPtr>> DocumentEncoder::plain_document(const pmq_batch& batch, const pmq_record& r,
                                                                    bool with_id, const bson_t* id,
                                                                    std::string_view json) const {
  using R = kit::Result<BsonPtr>;
  // Its own parser: the metadata's headers are read with bson_from_json's meanwhile.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object payload;
  if (parse_object(parser, json).get(payload)) return std::nullopt;  // libbson says what is wrong
  bool has_pico_key = false;
  for (const auto member : payload)
    if (member.key.starts_with("pico_")) has_pico_key = true;

  BsonPtr doc = new_bson();
  bson_t* d = doc.get();
  std::string problem;
  if (id) {
    if (!append_id_of(id, d)) return R::failure("the _id does not fit in a document");
  } else if (with_id && s_.id_strategy == IdStrategy::Field) {
    simdjson::dom::element value;
    if (payload.at_key(*s_.id_field).get(value))
      return R::failure("id_strategy field: the payload has no field '" + *s_.id_field + "'");
    if (!append_plain_value(d, "_id", value)) return std::nullopt;
  } else if (with_id && !id_value(batch, r, nullptr, d, "_id", problem)) {
    return R::failure(problem.empty() ? "the _id does not fit in a document" : problem);
  }
  if (s_.include_metadata) {
    auto payload_has = [&](std::string_view name) {
      simdjson::dom::element ignored;
      return has_pico_key && !payload.at_key(name).get(ignored);
    };
    if (auto error = append_metadata(batch, r, d, payload_has)) return R::failure(*error);
  }
  for (const auto member : payload) {
    if (!is_plain_key(member.key)) return std::nullopt;
    if (with_id && member.key == "_id") continue;  // _id is the strategy's
    if (std::find(s_.timestamp_fields.begin(), s_.timestamp_fields.end(), member.key) != s_.timestamp_fields.end()) {
      // As append_date reads libbson's types: an integer, or an ISO-8601 string.
      const std::string field(member.key);
      int64_t ms = 0;
      std::string_view text;
      if (member.value.is_int64()) {
        ms = member.value.get_int64().value_unsafe();
      } else if (!member.value.get(text)) {
        int64_t seconds = 0;
        uint32_t nanos = 0;
        int digits = 0;
        if (!kit::parse_datetime(text, seconds, nanos, digits))
          return R::failure("timestamp field '" + field + "': '" + std::string(text.substr(0, 64)) +
                            "' is not an ISO-8601 date-time");
        ms = seconds * 1000 + nanos / 1000000;
      } else {
        return std::nullopt;  // {"$date": ...} is a date, the rest an error: libbson's path says which
      }
      bson_append_date_time(d, field.c_str(), -1, ms);
      continue;
    }
    if (!append_plain_value(d, member.key, member.value)) return std::nullopt;
  }
  return size_checked(std::move(doc));
}

kit::Result<BsonPtr> DocumentEncoder::document(const pmq_batch& batch, const pmq_record& r, bool with_id,
                                               const bson_t* id) const {
  using R = kit::Result<BsonPtr>;
  // A JSON object's fields straight from simdjson into the document when libbson would read them
  // the same way (mongodb/json_to_bson.h); any other payload below.
  if (r.payload.data && batch.payload_format == PMQ_PAYLOAD_JSON && !s_.payload_field &&
      is_object_text(bytes_of(r.payload)))
    if (auto plain = plain_document(batch, r, with_id, id, bytes_of(r.payload))) return std::move(*plain);

  // The payload as BSON: an object's own fields, or any other value under "payload".
  BsonPtr payload;
  bool payload_is_object = false;
  bool payload_has_pico_key = false;  // only then can a payload field take a metadata name
  if (r.payload.data && batch.payload_format == PMQ_PAYLOAD_JSON) {
    const std::string_view json = bytes_of(r.payload);
    if (is_object_text(json) && !s_.payload_field) {
      auto parsed = bson_from_json(json, payload_has_pico_key);
      if (!parsed) return R::failure("the payload is " + parsed.error());
      payload = std::move(parsed).value();
      payload_is_object = true;
    } else {
      std::string wrapped = "{\"v\":";
      wrapped.append(json);
      wrapped += '}';
      auto parsed = bson_from_json(wrapped);
      if (!parsed) return R::failure("the payload is " + parsed.error());
      payload = std::move(parsed).value();
    }
  }
  const char* payload_field = s_.payload_field ? s_.payload_field->c_str() : "payload";

  BsonPtr doc = new_bson();
  bson_t* d = doc.get();
  std::string problem;
  if (id) {
    if (!append_id_of(id, d)) return R::failure("the _id does not fit in a document");
  } else if (with_id && !id_value(batch, r, payload_is_object ? payload.get() : nullptr, d, "_id", problem)) {
    return R::failure(problem.empty() ? "the _id does not fit in a document" : problem);
  }
  if (s_.include_metadata) {
    auto payload_has = [&](std::string_view name) {
      return payload_has_pico_key && bson_has_field(payload.get(), std::string(name).c_str());
    };
    if (auto error = append_metadata(batch, r, d, payload_has)) return R::failure(*error);
  }
  if (payload_is_object) {
    bson_iter_t it;
    bson_iter_init(&it, payload.get());
    while (bson_iter_next(&it)) {
      const char* key = bson_iter_key(&it);
      if (with_id && std::string_view(key) == "_id") continue;  // _id is the strategy's
      bool is_ts = false;
      for (const auto& f : s_.timestamp_fields)
        if (f == key) is_ts = true;
      if (is_ts) {
        if (!append_date(d, key, it, problem)) return R::failure(problem);
        continue;
      }
      bson_append_iter(d, key, -1, &it);
    }
  } else if (payload) {
    bson_iter_t it;
    bson_iter_init_find(&it, payload.get(), "v");
    bson_append_iter(d, payload_field, -1, &it);
  } else if (!r.payload.data) {
    bson_append_null(d, payload_field, -1);
  } else if (batch.payload_format == PMQ_PAYLOAD_TEXT) {
    bson_append_utf8(d, payload_field, -1, reinterpret_cast<const char*>(r.payload.data),
                     static_cast<int>(r.payload.size));
  } else {
    bson_append_binary(d, payload_field, -1, BSON_SUBTYPE_BINARY, r.payload.data,
                       static_cast<uint32_t>(r.payload.size));
  }
  return size_checked(std::move(doc));
}

kit::Result<Op> DocumentEncoder::change(const pmq_batch& batch, const pmq_record& r, int32_t kind) const {
  using R = kit::Result<Op>;
  Op op;
  op.filter = new_bson();
  if (kind == PMQ_OP_TRUNCATE) {  // every document of the collection: deleteMany({})
    op.kind = OpKind::DeleteAll;
    return R::success(std::move(op));
  }
  if (kind != PMQ_OP_UPSERT && kind != PMQ_OP_DELETE && kind != PMQ_OP_PATCH)
    return R::failure("change event: unknown operation " + std::to_string(kind));
  const pmq_bytes key_json = pmq_record_key_json(&batch, &r);
  std::string problem;
  if (!append_key_id(bytes_of(key_json), op.filter.get(), problem)) return R::failure(problem);
  if (kind == PMQ_OP_DELETE) {
    op.kind = OpKind::Delete;
    return R::success(std::move(op));
  }
  if (!r.payload.data) return R::failure("change event: an upsert or patch without a row");
  if (kind == PMQ_OP_UPSERT) {
    // The row (and the metadata) replaces the document of its key.
    auto doc = document(batch, r, true, op.filter.get());
    if (!doc) return R::failure(doc.error());
    op.kind = OpKind::Replace;
    op.doc = std::move(doc).value();
    return R::success(std::move(op));
  }
  // A patch: {$set: the fields it names (and the metadata), $setOnInsert: the key's fields it
  // does not name}, so a patch of a missing document inserts _id, the key's fields and its own.
  auto fields = document(batch, r, false);
  if (!fields) return R::failure(fields.error());
  const bson_t* named = fields.value().get();
  BsonPtr set = new_bson(), on_insert = new_bson();
  bson_iter_t it;
  bson_iter_init(&it, named);
  while (bson_iter_next(&it))
    if (std::string_view(bson_iter_key(&it)) != "_id") bson_append_iter(set.get(), bson_iter_key(&it), -1, &it);
  const auto key = bson_from_json(bytes_of(key_json));  // append_key_id read it
  bson_iter_init(&it, key.value().get());
  while (bson_iter_next(&it)) {
    const char* name = bson_iter_key(&it);
    if (std::string_view(name) != "_id" && !bson_has_field(named, name))
      bson_append_iter(on_insert.get(), name, -1, &it);
  }
  // An empty $set or $setOnInsert is an error before MongoDB 5.0 (and on FerretDB): only the
  // non-empty ones; a patch that names nothing of a key "_id" inserts {_id} alone.
  if (bson_empty(set.get()) && bson_empty(on_insert.get()) && bson_iter_init_find(&it, op.filter.get(), "_id"))
    bson_append_iter(on_insert.get(), "_id", -1, &it);
  BsonPtr update = new_bson();
  if (!bson_empty(set.get())) bson_append_document(update.get(), "$set", -1, set.get());
  if (!bson_empty(on_insert.get())) bson_append_document(update.get(), "$setOnInsert", -1, on_insert.get());
  op.kind = OpKind::Update;
  op.doc = std::move(update);
  if (op.doc->len > kMaxDocumentBytes)
    return R::failure("the patch is " + std::to_string(op.doc->len) +
                      " bytes, over MongoDB's 16 MiB document limit (BSONObjectTooLarge)");
  return R::success(std::move(op));
}

Encoded DocumentEncoder::encode(const pmq_batch& batch, int64_t now_ms) const {
  Encoded out;
  out.ops.reserve(batch.record_count);
  const bool by_business_key = !s_.business_key.empty();
  const bool changes = pmq_batch_has_changes(&batch) != 0;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    const auto index = static_cast<uint32_t>(i);
    if (const int32_t kind = changes ? pmq_record_op(&batch, &r) : PMQ_OP_APPEND; kind != PMQ_OP_APPEND) {
      auto op = change(batch, r, kind);
      if (!op) {
        out.rejected.push_back({index, op.error()});
        continue;
      }
      op.value().record = index;
      op.value().bytes = op.value().doc ? op.value().doc->len : op.value().filter->len;
      out.bytes += op.value().bytes;
      out.ops.push_back(std::move(op).value());
      continue;
    }
    Op op;
    op.record = index;
    std::string problem;
    if (!r.payload.data && s_.delete_on_tombstone) {
      op.kind = OpKind::Delete;
      op.filter = new_bson();
      if (by_business_key) {
        // The key's JSON object names the document: {"k1": v1, ...}.
        auto key =
            r.key.data ? bson_from_json(bytes_of(r.key)) : kit::Result<BsonPtr>::failure("the record has no key");
        if (!key) {
          out.rejected.push_back(
              {index, "tombstone: the business key is read from the record key's JSON: " + key.error()});
          continue;
        }
        for (const auto& f : s_.business_key) {
          bson_iter_t it;
          if (!bson_iter_init_find(&it, key.value().get(), f.c_str())) {
            problem = "tombstone: the record key has no business key field '" + f + "'";
            break;
          }
          bson_append_iter(op.filter.get(), f.c_str(), -1, &it);
        }
      } else if (!id_value(batch, r, nullptr, op.filter.get(), "_id", problem) && problem.empty()) {
        problem = "tombstone: no _id";
      }
      if (!problem.empty()) {
        out.rejected.push_back({index, problem});
        continue;
      }
      out.ops.push_back(std::move(op));
      continue;
    }
    const bool with_id = !(by_business_key && s_.write_strategy == WriteStrategy::Replace);
    auto doc = document(batch, r, with_id);
    if (!doc) {
      out.rejected.push_back({index, doc.error()});
      continue;
    }
    BsonPtr d = std::move(doc).value();
    switch (s_.write_strategy) {
      case WriteStrategy::Insert: op.kind = OpKind::Insert; break;
      case WriteStrategy::Replace:
      case WriteStrategy::Update: {
        op.kind = s_.write_strategy == WriteStrategy::Replace ? OpKind::Replace : OpKind::Update;
        op.filter = new_bson();
        bson_iter_t it;
        if (by_business_key) {
          for (const auto& f : s_.business_key) {
            if (!bson_iter_init_find(&it, d.get(), f.c_str())) {
              problem = "business_key: the payload has no field '" + f + "'";
              break;
            }
            bson_append_iter(op.filter.get(), f.c_str(), -1, &it);
          }
        } else {
          bson_iter_init_find(&it, d.get(), "_id");
          bson_append_iter(op.filter.get(), "_id", -1, &it);
        }
        if (!problem.empty()) {
          out.rejected.push_back({index, problem});
          continue;
        }
        if (op.kind == OpKind::Update) {
          // {$set: fields but _id (and the business key, which the filter sets on insert),
          //  $setOnInsert: {_id, inserted_at}}
          BsonPtr update = new_bson();
          bson_t set, on_insert;
          bson_append_document_begin(update.get(), "$set", -1, &set);
          bson_iter_init(&it, d.get());
          while (bson_iter_next(&it)) {
            const std::string_view key = bson_iter_key(&it);
            if (key == "_id") continue;
            bson_append_iter(&set, bson_iter_key(&it), -1, &it);
          }
          if (s_.updated_at_field) bson_append_date_time(&set, s_.updated_at_field->c_str(), -1, now_ms);
          bson_append_document_end(update.get(), &set);
          // An empty $setOnInsert is an error before MongoDB 5.0 (and on FerretDB): only when needed.
          const bool id_on_insert = by_business_key && bson_iter_init_find(&it, d.get(), "_id");
          if (id_on_insert || s_.inserted_at_field) {
            bson_append_document_begin(update.get(), "$setOnInsert", -1, &on_insert);
            if (id_on_insert) bson_append_iter(&on_insert, "_id", -1, &it);
            if (s_.inserted_at_field) bson_append_date_time(&on_insert, s_.inserted_at_field->c_str(), -1, now_ms);
            bson_append_document_end(update.get(), &on_insert);
          }
          d = std::move(update);
        }
        break;
      }
    }
    op.bytes = d->len;
    out.bytes += d->len;
    op.doc = std::move(d);
    out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace picomq::mongodb
