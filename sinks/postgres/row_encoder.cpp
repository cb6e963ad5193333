#include "postgres/row_encoder.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"
#include "picomq/kit/metadata.hpp"
#include "picomq/kit/sanitize.hpp"

namespace picomq::postgres {
namespace dest = picomq::kit;
namespace {

using simdjson::dom::element_type;

std::string_view as_view(pmq_bytes bytes) {
  return {reinterpret_cast<const char*>(bytes.data), bytes.data ? bytes.size : 0};
}

std::string_view found(simdjson::dom::element value) {
  switch (value.type()) {
    case element_type::ARRAY: return "array";
    case element_type::OBJECT: return "object";
    case element_type::INT64: return "integer";
    case element_type::UINT64: return "integer out of int64 range";
    case element_type::DOUBLE: return "floating-point number";
    case element_type::STRING: return "string";
    case element_type::BOOL: return "bool";
    case element_type::NULL_VALUE: return "null";
  }
  return "value";
}

std::string field_problem(const Column& c, std::string_view what) {
  return "field '" + c.field + "': " + std::string(what);
}

std::string expected(const Column& c, simdjson::dom::element value, std::string_view detail = {}) {
  std::string out = "expected " + std::string(sql_type(c.type)) + ", found ";
  out += detail.empty() ? found(value) : detail;
  return field_problem(c, out);
}

std::string too_large(std::string_view what) {
  return std::string(what) + " is larger than PostgreSQL's 1 GiB field limit";
}

std::string describe_payload_format(int32_t format) {
  switch (format) {
    case PMQ_PAYLOAD_JSON: return "JSON";
    case PMQ_PAYLOAD_TEXT: return "TEXT";
    case PMQ_PAYLOAD_RAW: return "RAW";
  }
  return "unknown (" + std::to_string(format) + ")";
}

// The pmq_batch fields this code reads are all there, and records[] can be walked.
std::string check_batch(const pmq_batch& batch) {
  if (batch.struct_size < offsetof(pmq_batch, record_size) + sizeof(batch.record_size)) return "pmq_batch is too small";
  if (batch.topic == nullptr) return "pmq_batch has no topic";
  if (batch.record_count > 0 && batch.records == nullptr) return "pmq_batch has records but no record array";
  if (batch.record_count > 0 && batch.record_size < sizeof(pmq_record)) return "pmq_batch record_size is too small";
  return {};
}

}  // namespace

RowEncoder::RowEncoder(TableLayout layout) : layout_(std::move(layout)), columns_(copy_columns(layout_)) {
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].source == Source::Field) by_field_.emplace(columns_[i].field, i);
  }
  values_.resize(columns_.size());
  present_.resize(columns_.size());
}

EncodeResult RowEncoder::encode(const pmq_batch& batch) {
  EncodeResult result;
  if (auto e = check_batch(batch); !e.empty()) {
    result.error = e;
    return result;
  }
  const int32_t format = batch.payload_format;
  if (format != PMQ_PAYLOAD_JSON && format != PMQ_PAYLOAD_TEXT && format != PMQ_PAYLOAD_RAW) {
    result.error = "unknown payload format " + describe_payload_format(format);
    return result;
  }
  const PayloadMode mode = layout_.payload_mode;
  const bool fits = mode == PayloadMode::Bytea || format == PMQ_PAYLOAD_JSON ||
                    (mode == PayloadMode::Text && format == PMQ_PAYLOAD_TEXT);
  if (!fits) {
    result.error = "payload mode '" + std::string(to_string(mode)) + "' cannot take " +
                   describe_payload_format(format) + " payloads (schema '" +
                   std::string(batch.schema ? batch.schema : "") + "')";
    return result;
  }
  if (!dest::is_valid_utf8(std::string_view(batch.topic))) {
    result.error = "topic name is not valid UTF-8";
    return result;
  }

  writer_.abandon_row();
  // Every record's pico_id is the batch's "topic:partition:" and its offset (kit::record_id),
  // built in place: no string per record.
  record_id_.assign(batch.topic);
  record_id_ += ':';
  record_id_ += std::to_string(batch.partition);
  record_id_ += ':';
  record_id_prefix_ = record_id_.size();
  // Change events: a truncate wipes what the batch holds before it.
  std::size_t first = 0;
  if (layout_.changes && pmq_batch_has_changes(&batch)) {
    for (std::size_t i = batch.record_count; i-- > 0;) {
      if (pmq_record_op(&batch, pmq_batch_record(&batch, i)) != PMQ_OP_TRUNCATE) continue;
      result.truncate = true;
      first = i + 1;
      break;
    }
  }
  for (std::size_t i = first; i < batch.record_count; ++i) {
    const pmq_record& record = *pmq_batch_record(&batch, i);
    writer_.begin_row();
    std::string reason;
    try {
      reason = encode_record(batch, record);
    } catch (const std::length_error& e) {
      reason = e.what();
    } catch (const std::out_of_range& e) {
      reason = e.what();
    }
    if (reason.empty()) {
      writer_.commit_row();
    } else {
      writer_.abandon_row();
      result.rejected.push_back({i, std::move(reason)});
    }
  }
  result.rows = writer_.row_count();
  result.copy_data = writer_.finish();
  return result;
}

std::string RowEncoder::encode_record(const pmq_batch& batch, const pmq_record& record) {
  // A delete (change events) names its row by its key object, whose fields fill the columns.
  const bool deleted = layout_.changes && pmq_record_op(&batch, &record) == PMQ_OP_DELETE;
  const bool tombstone = record.payload.data == nullptr && !deleted;
  const std::string_view payload = deleted ? as_view(pmq_record_key_json(&batch, &record)) : as_view(record.payload);

  if (layout_.payload_mode == PayloadMode::Columns && !tombstone) {
    auto parsed = parser_.parse(payload.data(), payload.size(), /*realloc_if_needed=*/true);
    if (parsed.error() == simdjson::NUMBER_ERROR) {
      return "payload has a number beyond 64-bit integer or double range, which columns mode cannot read";
    }
    if (parsed.error()) return std::string("payload is not valid JSON: ") + simdjson::error_message(parsed.error());
    const simdjson::dom::element root = parsed.value_unsafe();
    if (root.type() != element_type::OBJECT)
      return "payload is not a JSON object (found " + std::string(found(root)) + ")";
    std::fill(present_.begin(), present_.end(), false);
    const simdjson::dom::object object = root.get_object().value_unsafe();
    for (const simdjson::dom::key_value_pair member : object) {
      auto it = by_field_.find(std::string(member.key));
      if (it == by_field_.end()) continue;  // undeclared field: not written
      values_[it->second] = member.value;   // a duplicated member: the last one wins
      present_[it->second] = true;
    }
  }

  std::string problems;
  auto problem = [&](const std::string& text) {
    if (!problems.empty()) problems += "; ";
    problems += text;
  };
  // NULL, or a problem for a key column; the message is built only then (a record without a key
  // or a timestamp is common, and a string per such field would be a per-record cost).
  auto null_or = [&](const Column& c, auto&& why) {
    if (c.not_null) problem(why());
    else writer_.null();
  };

  for (std::size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    switch (c.source) {
      case Source::RecordId: {
        char digits[24];
        char* end = std::to_chars(digits, digits + sizeof digits, record.offset).ptr;
        record_id_.resize(record_id_prefix_);
        record_id_.append(digits, end);
        writer_.text(record_id_);
      } break;
      case Source::Topic: writer_.text(batch.topic); break;
      case Source::Partition: writer_.int4(batch.partition); break;
      case Source::Offset: writer_.int8(record.offset); break;
      case Source::Timestamp:
        if (record.timestamp_ms == -1) {
          null_or(c, [&] { return "the record has no timestamp, and " + c.name + " is a key column"; });
        } else if (!timestamptz_in_range(record.timestamp_ms)) {
          problem("record timestamp " + std::to_string(record.timestamp_ms) +
                  " ms is outside PostgreSQL's timestamptz range");
        } else {
          writer_.timestamptz_from_epoch_ms(record.timestamp_ms);
        }
        break;
      case Source::Key:
        if (record.key.data == nullptr)
          null_or(c, [&] { return "the record has no key, and " + c.name + " is a key column"; });
        else writer_.bytea(as_view(record.key));
        break;
      case Source::Headers: {
        if (record.header_count == 0) {  // most records: no JSON to build or scan
          writer_.jsonb("{}");
          break;
        }
        scratch_.clear();
        dest::append_headers_json(scratch_, {record.headers, record.header_count});
        if (json_has_nul_escape(scratch_))
          problem("a header name or value contains U+0000, which PostgreSQL jsonb cannot store");
        else if (scratch_.size() >= kMaxFieldBytes) problem(too_large("the headers"));
        else writer_.jsonb(scratch_);
        break;
      }
      case Source::Deleted: writer_.boolean(deleted); break;
      case Source::Absent: {
        // A patch keeps the columns its row does not name.
        if (!layout_.changes || pmq_record_op(&batch, &record) != PMQ_OP_PATCH) {
          writer_.null();
          break;
        }
        scratch_ = "[";
        for (std::size_t f = 0; f < columns_.size(); ++f) {
          if (columns_[f].source != Source::Field || present_[f]) continue;
          if (scratch_.size() > 1) scratch_ += ',';
          dest::append_json_escaped(scratch_, columns_[f].name);
        }
        scratch_ += ']';
        writer_.jsonb(scratch_);
      } break;
      case Source::Payload:
        if (deleted) {
          null_or(c, [&] { return "a delete has no payload, and " + c.name + " is a key column"; });
        } else if (tombstone) {
          null_or(c, [&] { return "tombstone: " + c.name + " is a key column"; });
        } else if (payload.size() >= kMaxFieldBytes) {
          problem(too_large("the payload"));
        } else if (c.type == ColumnType::Jsonb) {
          if (json_has_nul_escape(payload)) problem("payload contains \\u0000, which PostgreSQL jsonb cannot store");
          else writer_.jsonb(payload);
        } else if (c.type == ColumnType::Text) {
          if (payload.find('\0') != std::string_view::npos)
            problem("payload contains a NUL byte, which PostgreSQL text cannot store");
          else writer_.text(payload);
        } else {
          writer_.bytea(payload);
        }
        break;
      case Source::Field:
        if (tombstone) {
          null_or(c, [&] { return "tombstone: field '" + c.field + "' is a key column (NOT NULL)"; });
        } else if (!present_[i]) {
          null_or(c, [&] { return field_problem(c, "missing, and the column is a key (NOT NULL)"); });
        } else if (values_[i].type() == element_type::NULL_VALUE) {
          null_or(c, [&] { return field_problem(c, "null, and the column is a key (NOT NULL)"); });
        } else if (auto e = encode_field(c, values_[i]); !e.empty()) {
          problem(e);
        }
        break;
    }
  }
  return problems;
}

std::string RowEncoder::encode_field(const Column& c, simdjson::dom::element value) {
  const element_type type = value.type();
  switch (c.type) {
    case ColumnType::Int8:
      if (type != element_type::INT64) return expected(c, value);
      writer_.int8(value.get_int64().value_unsafe());
      return {};
    case ColumnType::Int4: {
      if (type != element_type::INT64) return expected(c, value);
      const int64_t v = value.get_int64().value_unsafe();
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return expected(c, value, "integer out of int4 range");
      }
      writer_.int4(static_cast<int32_t>(v));
      return {};
    }
    case ColumnType::Float8:
      if (type == element_type::INT64) writer_.float8(static_cast<double>(value.get_int64().value_unsafe()));
      else if (type == element_type::UINT64) writer_.float8(static_cast<double>(value.get_uint64().value_unsafe()));
      else if (type == element_type::DOUBLE) writer_.float8(value.get_double().value_unsafe());
      else return expected(c, value);
      return {};
    case ColumnType::Bool:
      if (type != element_type::BOOL) return expected(c, value);
      writer_.boolean(value.get_bool().value_unsafe());
      return {};
    case ColumnType::Text:
    case ColumnType::Bytea: {
      if (type != element_type::STRING) return expected(c, value);
      const std::string_view s = value.get_string().value_unsafe();
      if (s.size() > kMaxFieldBytes) return field_problem(c, too_large("the value"));
      if (c.type == ColumnType::Bytea) {
        writer_.bytea(s);
      } else {
        if (s.find('\0') != std::string_view::npos)
          return field_problem(c, "string contains U+0000, which PostgreSQL text cannot store");
        writer_.text(s);
      }
      return {};
    }
    case ColumnType::Jsonb: {
      scratch_ = simdjson::minify(value);
      if (json_has_nul_escape(scratch_))
        return field_problem(c, "value contains \\u0000, which PostgreSQL jsonb cannot store");
      if (scratch_.size() >= kMaxFieldBytes) return field_problem(c, too_large("the value"));
      writer_.jsonb(scratch_);
      return {};
    }
    case ColumnType::Timestamptz: {
      if (type == element_type::UINT64) return expected(c, value, "integer out of timestamptz range");
      if (type != element_type::INT64) return expected(c, value);
      const int64_t ms = value.get_int64().value_unsafe();
      if (!timestamptz_in_range(ms)) return expected(c, value, "integer out of timestamptz range");
      writer_.timestamptz_from_epoch_ms(ms);
      return {};
    }
  }
  return field_problem(c, "unsupported column type");
}

std::vector<std::string> reserved_column_names(WriteMode write_mode, bool include_metadata) {
  std::vector<std::string> out;
  if (write_mode == WriteMode::Insert) out.emplace_back(kIdColumn);
  if (include_metadata) {
    for (auto name : {dest::kTopicField, dest::kPartitionField, dest::kOffsetField, dest::kTimestampField,
                      dest::kKeyField, dest::kHeadersField}) {
      out.emplace_back(name);
    }
  } else if (write_mode == WriteMode::Upsert) {
    out.emplace_back(dest::kOffsetField);  // the staging-only ordering column
  }
  return out;
}

ColumnType column_type(kit::InferredType type) {
  switch (type) {
    case kit::InferredType::Bool: return ColumnType::Bool;
    case kit::InferredType::Int64: return ColumnType::Int8;
    case kit::InferredType::Float64: return ColumnType::Float8;
    case kit::InferredType::String: return ColumnType::Text;
    case kit::InferredType::None:  // null in every record: jsonb takes whatever comes later
    case kit::InferredType::Json: break;
  }
  return ColumnType::Jsonb;
}

InferResult infer_columns(const pmq_batch& batch, const std::vector<std::string>& reserved) {
  struct Seen {
    std::string field;
    kit::InferredType type = kit::InferredType::None;
  };
  InferResult result;
  if (auto e = check_batch(batch); !e.empty()) {
    result.notes.push_back(e);
    return result;
  }
  if (batch.payload_format != PMQ_PAYLOAD_JSON) {
    result.notes.push_back("payload format is " + describe_payload_format(batch.payload_format) +
                           ", not JSON: no columns");
    return result;
  }
  std::vector<Seen> seen;
  std::unordered_map<std::string, std::size_t> index;
  simdjson::dom::parser parser;
  for (std::size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& record = *pmq_batch_record(&batch, i);
    if (record.payload.data == nullptr) continue;
    auto parsed = parser.parse(reinterpret_cast<const char*>(record.payload.data), record.payload.size, true);
    if (parsed.error()) continue;  // the encoder rejects it
    const simdjson::dom::element root = parsed.value_unsafe();
    if (root.type() != element_type::OBJECT) continue;
    const simdjson::dom::object object = root.get_object().value_unsafe();
    for (const simdjson::dom::key_value_pair member : object) {
      auto [it, inserted] = index.try_emplace(std::string(member.key), seen.size());
      if (inserted) seen.push_back({std::string(member.key), kit::InferredType::None});
      kit::InferredType& type = seen[it->second].type;
      type = kit::join(type, kit::json_value_kind(member.value.type()));
    }
  }

  std::vector<std::string> taken = reserved;
  for (const Seen& s : seen) {
    auto name = dest::sanitize_name(s.field, dest::NamePolicy::SqlIdentifier);
    if (!name) {
      result.notes.push_back("field '" + s.field + "' left out: " + name.error());
      continue;
    }
    if (std::find(taken.begin(), taken.end(), name.value()) != taken.end()) {
      result.notes.push_back("field '" + s.field + "' left out: column name '" + name.value() + "' is already taken");
      continue;
    }
    taken.push_back(name.value());
    const ColumnType type = column_type(s.type);
    result.columns.push_back(Column{std::move(name).value(), type, Source::Field, s.field, false});
  }
  return result;
}

}  // namespace picomq::postgres
