#include "clickhouse/schema.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>

#include "picomq/kit/metadata.hpp"

namespace picomq::clickhouse {

ServerVersion parse_version(std::string_view text) {
  ServerVersion v;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  auto r = std::from_chars(p, end, v.major);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return {};
  r = std::from_chars(r.ptr + 1, end, v.minor);
  if (r.ec != std::errc()) return {};
  return v;
}

kit::Result<std::vector<DescribedColumn>> parse_describe(std::string_view json_lines) {
  using R = kit::Result<std::vector<DescribedColumn>>;
  simdjson::dom::parser parser;
  std::vector<DescribedColumn> out;
  size_t pos = 0;
  while (pos < json_lines.size()) {
    size_t nl = json_lines.find('\n', pos);
    if (nl == std::string_view::npos) nl = json_lines.size();
    const std::string_view line = json_lines.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    simdjson::dom::object o;
    std::string_view name, type, kind;
    if (parser.parse(line.data(), line.size()).get_object().get(o) || o["name"].get_string().get(name) ||
        o["type"].get_string().get(type))
      return R::failure("DESCRIBE TABLE answered something else than name/type rows: " +
                        std::string(line.substr(0, 200)));
    if (o["default_type"].get_string().get(kind)) kind = {};
    out.push_back({std::string(name), std::string(type), std::string(kind)});
  }
  if (out.empty()) return R::failure("DESCRIBE TABLE found no columns");
  return R::success(std::move(out));
}

Layout layout_from_table(const std::vector<DescribedColumn>& table, bool string_mode,
                         const std::vector<Column>& declared) {
  Layout l;
  for (const auto& d : declared) {
    const bool there =
        std::any_of(table.begin(), table.end(), [&](const DescribedColumn& c) { return c.name == d.name; });
    if (!there) {
      l.error = "declared column '" + d.name + "' is not in the table";
      return l;
    }
  }
  bool payload = false;
  for (const DescribedColumn& c : table) {
    if (c.default_kind == "MATERIALIZED" || c.default_kind == "ALIAS" || c.default_kind == "EPHEMERAL") continue;
    auto type = parse_type(c.type);
    const Source source = metadata_source(c.name);
    auto leave = [&](const std::string& why) { l.notes.push_back("column " + c.name + " is not written: " + why); };
    Column col{c.name, {}, source, c.name};
    if (source == Source::Field) {
      if (string_mode) {
        if (c.name != "payload") continue;  // the server fills its default
        col.source = Source::Payload;
        payload = true;
      } else if (!declared.empty()) {
        auto it = std::find_if(declared.begin(), declared.end(), [&](const Column& d) { return d.name == c.name; });
        if (it == declared.end()) continue;
        if (it->type.name() != (type ? type.value().name() : c.type))
          l.notes.push_back("column " + c.name + " is declared " + it->type.name() + " but the table has " + c.type +
                            "; the table's type is written");
      }
    }
    if (!type) {
      if (!declared.empty() && source == Source::Field) {
        l.error = "declared column '" + c.name + "': " + type.error();
        return l;
      }
      leave(type.error() + "; the server fills its default");
      if (col.source == Source::Payload) payload = false;
      continue;
    }
    col.type = type.value();
    if (auto why = check_column(col); !why.empty()) {
      leave(why + "; the server fills its default");
      if (col.source == Source::Payload) payload = false;
      continue;
    }
    l.columns.push_back(std::move(col));
  }
  if (string_mode && !payload) {
    l.error = "payload_mode 'string' needs a String column named payload";
    return l;
  }
  if (l.columns.empty()) l.error = "none of its columns can be written";
  return l;
}

std::string create_table_sql(const std::string& qualified, const std::vector<Column>& payload, bool include_metadata,
                             int dedup_window) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + qualified + " (`pico_topic` String, `pico_partition` Int32, " +
                    "`pico_offset` Int64";
  if (include_metadata) sql += ", `pico_timestamp` Int64, `pico_key` Nullable(String), `pico_headers` String";
  for (const Column& c : payload) sql += ", " + quote_identifier(c.name) + " " + c.type.name();
  sql += ") ENGINE = ReplacingMergeTree ORDER BY (`pico_topic`, `pico_partition`, `pico_offset`)";
  if (dedup_window > 0) sql += " SETTINGS non_replicated_deduplication_window = " + std::to_string(dedup_window);
  return sql;
}

std::string insert_sql(const std::string& qualified, const std::vector<Column>& columns, std::string_view format) {
  std::string sql = "INSERT INTO " + qualified + " (";
  for (size_t i = 0; i < columns.size(); ++i) sql += (i ? ", " : "") + quote_identifier(columns[i].name);
  return sql + ") FORMAT " + std::string(format);
}

std::string add_column_sql(const std::string& qualified, const Column& column) {
  return "ALTER TABLE " + qualified + " ADD COLUMN " + quote_identifier(column.name) + " " + column.type.name();
}

Type column_type(kit::InferredType type, ServerVersion version) {
  switch (type) {
    case kit::InferredType::Bool: return nullable(make(version.at_least(21, 12) ? Kind::Bool : Kind::UInt8));
    case kit::InferredType::Int64: return nullable(make(Kind::Int64));
    case kit::InferredType::Float64: return nullable(make(Kind::Float64));
    case kit::InferredType::String:
    case kit::InferredType::None:
    case kit::InferredType::Json: break;
  }
  return nullable(make(Kind::String));
}

Inferred infer_columns(const pmq_batch& batch, ServerVersion version) {
  Inferred out;
  if (batch.payload_format != PMQ_PAYLOAD_JSON) {
    out.notes.push_back("payload_mode 'columns' infers columns from JSON objects; the topic's schema is '" +
                        std::string(batch.schema ? batch.schema : "") + "'");
    return out;
  }
  std::vector<std::pair<std::string, kit::InferredType>> fields;
  simdjson::dom::parser parser;
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (!r.payload.data) continue;
    simdjson::dom::object o;
    if (parser.parse(reinterpret_cast<const char*>(r.payload.data), r.payload.size).get_object().get(o)) continue;
    for (auto m : o) {
      auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == m.key; });
      if (it == fields.end()) {
        fields.emplace_back(std::string(m.key), kit::InferredType::None);
        it = fields.end() - 1;
      }
      it->second = kit::join(it->second, kit::json_value_kind(m.value.type()));
    }
  }
  for (const auto& [name, type] : fields) {
    if (metadata_source(name) != Source::Field || name.empty()) {
      out.notes.push_back("field '" + name + "' is left out: its name is a metadata column's (or empty)");
      continue;
    }
    out.columns.push_back({name, column_type(type, version), Source::Field, name});
  }
  return out;
}

}  // namespace picomq::clickhouse
