#include "clickhouse/changes.h"

#include <simdjson.h>

#include <algorithm>
#include <set>

#include "clickhouse/client.h"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/inferred_type.hpp"

namespace picomq::clickhouse {

namespace {

// A JSON value as a ClickHouse literal of the key column it is compared with.
std::string literal(simdjson::dom::element v) {
  switch (v.type()) {
    case simdjson::dom::element_type::STRING: return quote_string(std::string_view(v.get_string().value_unsafe()));
    case simdjson::dom::element_type::BOOL: return v.get_bool().value_unsafe() ? "1" : "0";
    case simdjson::dom::element_type::NULL_VALUE: return "NULL";
    case simdjson::dom::element_type::ARRAY:
    case simdjson::dom::element_type::OBJECT: return quote_string(simdjson::minify(v));
    default: return simdjson::minify(v);  // numbers
  }
}

// One key field's value as key_text() compares it: booleans as the 0 / 1 a UInt8 column reads
// back, a number the way ClickHouse prints it without quotes, a string as its JSON text.
void append_key_value(std::string& out, simdjson::dom::element v) {
  if (v.type() == simdjson::dom::element_type::BOOL) out += v.get_bool().value_unsafe() ? "1" : "0";
  else out += simdjson::minify(v);
}

void append_member(std::string& out, std::string_view key, simdjson::dom::element value) {
  if (out.size() > 1) out += ',';
  kit::append_json_escaped(out, key);
  out += ':';
  out += simdjson::minify(value);
}

}  // namespace

std::vector<Column> infer_key_columns(const pmq_batch& batch) {
  std::vector<std::pair<std::string, kit::InferredType>> fields;  // the first key's, in its order
  simdjson::dom::parser parser;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record* r = pmq_batch_record(&batch, i);
    const pmq_bytes key = pmq_record_key_json(&batch, r);
    if (!key.data) continue;
    simdjson::dom::object o;
    if (parser.parse(reinterpret_cast<const char*>(key.data), key.size).get_object().get(o)) continue;
    const bool first = fields.empty();
    for (auto m : o) {
      auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == m.key; });
      if (it == fields.end()) {
        if (!first) continue;
        fields.emplace_back(std::string(m.key), kit::InferredType::None);
        it = fields.end() - 1;
      }
      it->second = kit::join(it->second, kit::json_value_kind(m.value.type()));
    }
  }
  std::vector<Column> out;
  for (const auto& [name, type] : fields) {
    Kind kind = Kind::String;
    switch (type) {
      case kit::InferredType::Int64: kind = Kind::Int64; break;
      case kit::InferredType::Float64: kind = Kind::Float64; break;
      case kit::InferredType::Bool: kind = Kind::UInt8; break;
      default: break;
    }
    out.push_back({name, make(kind), Source::Field, name});
  }
  return out;
}

std::string create_change_table_sql(const std::string& qualified, const std::vector<Column>& key,
                                    const std::vector<Column>& payload, bool include_metadata, ServerVersion version) {
  std::set<std::string_view> key_names;
  std::string sql = "CREATE TABLE IF NOT EXISTS " + qualified + " (";
  std::string order;
  for (const Column& c : key) {
    key_names.insert(c.name);
    sql += quote_identifier(c.name) + " " + c.type.name() + ", ";
    order += (order.empty() ? "" : ", ") + quote_identifier(c.name);
  }
  for (const Column& c : payload)
    if (!key_names.count(c.name)) sql += quote_identifier(c.name) + " " + c.type.name() + ", ";
  sql +=
      "`pico_version` UInt64, `pico_deleted` UInt8, `pico_topic` String, `pico_partition` Int32, `pico_offset` Int64";
  if (include_metadata) sql += ", `pico_timestamp` Int64, `pico_key` Nullable(String), `pico_headers` String";
  sql += ") ENGINE = ReplacingMergeTree(`pico_version`";
  if (version.at_least(23, 2)) sql += ", `pico_deleted`";
  return sql + ") ORDER BY (" + order + ")";
}

std::string current_rows_sql(const std::string& qualified, const std::vector<std::string>& key_fields,
                             const std::vector<std::string>& columns, const std::vector<std::string_view>& keys) {
  if (key_fields.empty() || keys.empty()) return {};
  std::string select;
  for (const std::string& c : columns) select += quote_identifier(c) + ", ";
  select += "`pico_version`, `pico_deleted`";
  std::string tuple;  // (k1, k2)
  for (const std::string& k : key_fields) tuple += (tuple.empty() ? "" : ", ") + quote_identifier(k);
  std::string in;
  simdjson::dom::parser parser;
  for (std::string_view key : keys) {
    simdjson::dom::object o;
    if (parser.parse(key.data(), key.size()).get_object().get(o)) return {};
    std::string values;
    for (const std::string& k : key_fields) {
      simdjson::dom::element v;
      if (o.at_key(k).get(v)) return {};
      values += (values.empty() ? "" : ", ") + literal(v);
    }
    in += (in.empty() ? "(" : ", (") + values + ")";
  }
  return "SELECT " + select + " FROM " + qualified + " WHERE (" + tuple + ") IN (" + in + ") FORMAT JSONEachRow";
}

std::vector<std::string> key_field_names(std::string_view key_json) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  if (parser.parse(key_json.data(), key_json.size()).get_object().get(o)) return out;
  for (auto m : o) out.emplace_back(m.key);
  return out;
}

std::optional<std::string> key_text(std::string_view json_object, const std::vector<std::string>& key_fields) {
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  if (parser.parse(json_object.data(), json_object.size()).get_object().get(o)) return std::nullopt;
  std::string out;
  for (const std::string& k : key_fields) {
    simdjson::dom::element v;
    if (o.at_key(k).get(v)) return std::nullopt;
    if (!out.empty()) out += '\x1f';
    append_key_value(out, v);
  }
  return out;
}

kit::Result<std::map<std::string, std::string>> latest_rows(std::string_view json_lines,
                                                            const std::vector<std::string>& key_fields) {
  using Rows = kit::Result<std::map<std::string, std::string>>;
  struct Latest {
    uint64_t version = 0;
    bool deleted = false;
    std::string row;
  };
  std::map<std::string, Latest> latest;
  simdjson::dom::parser parser;
  size_t at = 0;
  while (at < json_lines.size()) {
    size_t end = json_lines.find('\n', at);
    if (end == std::string_view::npos) end = json_lines.size();
    const std::string_view line = json_lines.substr(at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    simdjson::dom::object o;
    if (parser.parse(line.data(), line.size()).get_object().get(o))
      return Rows::failure("a row read back is not a JSON object: " + std::string(line.substr(0, 200)));
    auto key = key_text(line, key_fields);
    if (!key) return Rows::failure("a row read back lacks its key fields");
    uint64_t version = 0;
    simdjson::dom::element v;
    if (!o.at_key(kVersionColumn).get(v)) {
      if (v.is_string()) version = std::strtoull(std::string(v.get_string().value_unsafe()).c_str(), nullptr, 10);
      else if (v.is_uint64()) version = v.get_uint64().value_unsafe();
      else if (v.is_int64()) version = static_cast<uint64_t>(v.get_int64().value_unsafe());
    }
    auto [it, fresh] = latest.try_emplace(*key);
    if (!fresh && it->second.version > version) continue;
    bool deleted = false;
    if (!o.at_key(kDeletedColumn).get(v))
      deleted = (v.is_int64() && v.get_int64().value_unsafe() != 0) || (v.is_bool() && v.get_bool().value_unsafe());
    std::string row = "{";
    for (auto m : o)
      if (m.key != kVersionColumn && m.key != kDeletedColumn) append_member(row, m.key, m.value);
    it->second = {version, deleted, row + "}"};
  }
  std::map<std::string, std::string> out;
  for (auto& [key, l] : latest)
    if (!l.deleted) out.emplace(key, std::move(l.row));
  return Rows::success(std::move(out));
}

std::optional<std::string> merge_rows(std::string_view base, std::string_view patch) {
  simdjson::dom::parser base_parser, patch_parser;
  simdjson::dom::object b, p;
  if (base_parser.parse(base.data(), base.size()).get_object().get(b) ||
      patch_parser.parse(patch.data(), patch.size()).get_object().get(p))
    return std::nullopt;
  std::string out = "{";
  for (auto m : b) {
    simdjson::dom::element ignored;
    if (p.at_key(m.key).get(ignored)) append_member(out, m.key, m.value);  // not in the patch: kept
  }
  for (auto m : p) append_member(out, m.key, m.value);
  return out + "}";
}

}  // namespace picomq::clickhouse
