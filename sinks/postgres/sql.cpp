#include "postgres/sql.h"

#include <algorithm>
#include <stdexcept>

#include "picomq/kit/metadata.hpp"

namespace picomq::postgres {
namespace dest = picomq::kit;
namespace {

constexpr std::size_t kMaxIdentifierBytes = 63;  // NAMEDATALEN - 1

// Layout columns were checked by make_layout / add_columns_sql; a NUL here is a caller bug.
std::string quote(std::string_view name) {
  auto quoted = quote_identifier(name);
  if (!quoted) throw std::invalid_argument(quoted.error());
  return std::move(quoted).value();
}

std::string column_list(const std::vector<Column>& columns) {
  std::string out;
  for (const Column& c : columns) {
    if (!out.empty()) out += ", ";
    out += quote(c.name);
  }
  return out;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += quote(n);
  }
  return out;
}

std::string check_name(std::string_view what, std::string_view name) {
  if (name.empty()) return std::string(what) + " name is empty";
  if (name.find('\0') != std::string_view::npos) return std::string(what) + " name contains a NUL byte";
  if (name.size() > kMaxIdentifierBytes) {
    return std::string(what) + " name '" + std::string(name) + "' is longer than 63 bytes (sanitise it first)";
  }
  return {};
}

Column meta(std::string_view name, ColumnType type, Source source, bool not_null) {
  return Column{std::string(name), type, source, {}, not_null};
}

}  // namespace

std::string_view sql_type(ColumnType type) {
  switch (type) {
    case ColumnType::Text: return "text";
    case ColumnType::Int4: return "int4";
    case ColumnType::Int8: return "int8";
    case ColumnType::Float8: return "float8";
    case ColumnType::Bool: return "boolean";
    case ColumnType::Jsonb: return "jsonb";
    case ColumnType::Bytea: return "bytea";
    case ColumnType::Timestamptz: return "timestamptz";
  }
  return "text";
}

std::optional<ColumnType> parse_column_type(std::string_view name) {
  if (name == "text") return ColumnType::Text;
  if (name == "int4" || name == "integer") return ColumnType::Int4;
  if (name == "int8" || name == "bigint") return ColumnType::Int8;
  if (name == "float8" || name == "double precision") return ColumnType::Float8;
  if (name == "bool" || name == "boolean") return ColumnType::Bool;
  if (name == "jsonb") return ColumnType::Jsonb;
  if (name == "bytea") return ColumnType::Bytea;
  if (name == "timestamptz") return ColumnType::Timestamptz;
  return std::nullopt;
}

std::string_view to_string(PayloadMode mode) {
  switch (mode) {
    case PayloadMode::Jsonb: return "jsonb";
    case PayloadMode::Columns: return "columns";
    case PayloadMode::Text: return "text";
    case PayloadMode::Bytea: return "bytea";
  }
  return "jsonb";
}

std::string_view to_string(WriteMode mode) {
  switch (mode) {
    case WriteMode::Insert: return "insert";
    case WriteMode::Upsert: return "upsert";
    case WriteMode::Append: return "append";
  }
  return "insert";
}

std::optional<PayloadMode> parse_payload_mode(std::string_view text) {
  for (auto m : {PayloadMode::Jsonb, PayloadMode::Columns, PayloadMode::Text, PayloadMode::Bytea}) {
    if (to_string(m) == text) return m;
  }
  return std::nullopt;
}

std::optional<WriteMode> parse_write_mode(std::string_view text) {
  for (auto m : {WriteMode::Insert, WriteMode::Upsert, WriteMode::Append}) {
    if (to_string(m) == text) return m;
  }
  return std::nullopt;
}

Result<TableLayout> make_layout(const LayoutOptions& options) {
  using R = Result<TableLayout>;
  TableLayout layout;
  layout.payload_mode = options.payload_mode;
  layout.write_mode = options.write_mode;
  layout.include_metadata = options.include_metadata;
  auto& cols = layout.columns;

  if (options.write_mode == WriteMode::Insert)
    cols.push_back(meta(kIdColumn, ColumnType::Text, Source::RecordId, true));
  if (options.include_metadata) {
    cols.push_back(meta(dest::kTopicField, ColumnType::Text, Source::Topic, true));
    cols.push_back(meta(dest::kPartitionField, ColumnType::Int4, Source::Partition, true));
    cols.push_back(meta(dest::kOffsetField, ColumnType::Int8, Source::Offset, true));
    cols.push_back(meta(dest::kTimestampField, ColumnType::Timestamptz, Source::Timestamp, false));
    cols.push_back(meta(dest::kKeyField, ColumnType::Bytea, Source::Key, false));
    cols.push_back(meta(dest::kHeadersField, ColumnType::Jsonb, Source::Headers, true));
  }
  const std::size_t reserved = cols.size();

  if (options.payload_mode == PayloadMode::Columns) {
    if (options.payload_columns.empty()) return R::failure("payload mode 'columns' needs at least one column");
    for (const Column& c : options.payload_columns) {
      if (c.source != Source::Field)
        return R::failure("payload column '" + c.name + "' must come from a payload field");
      if (auto e = check_name("column", c.name); !e.empty()) return R::failure(e);
      if (c.field.empty()) return R::failure("payload column '" + c.name + "' names no payload field");
      cols.push_back(c);
    }
  } else {
    if (!options.payload_columns.empty()) {
      return R::failure("payload columns are only for payload mode 'columns', not '" +
                        std::string(to_string(options.payload_mode)) + "'");
    }
    const ColumnType type = options.payload_mode == PayloadMode::Jsonb  ? ColumnType::Jsonb
                            : options.payload_mode == PayloadMode::Text ? ColumnType::Text
                                                                        : ColumnType::Bytea;
    cols.push_back(Column{std::string(kPayloadColumn), type, Source::Payload, {}, false});
  }

  if (options.changes && options.write_mode != WriteMode::Upsert)
    return R::failure("change events need write mode 'upsert' (a key to delete by), not '" +
                      std::string(to_string(options.write_mode)) + "'");
  layout.changes = options.changes;
  // The staging-only pico_offset of upsert-without-metadata is reserved too, as is pico_deleted.
  const bool staging_offset = options.write_mode == WriteMode::Upsert && !options.include_metadata;
  for (std::size_t i = reserved; i < cols.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (cols[j].name != cols[i].name) continue;
      if (j < reserved) return R::failure("column '" + cols[i].name + "' collides with a metadata column");
      return R::failure("column '" + cols[i].name + "' is declared twice");
    }
    if (staging_offset && cols[i].name == dest::kOffsetField) {
      return R::failure("column '" + cols[i].name + "' collides with the staging column upsert orders by");
    }
    if (options.changes && (cols[i].name == kDeletedColumn || cols[i].name == kAbsentColumn))
      return R::failure("column '" + cols[i].name + "' collides with a staging column of change events");
  }

  switch (options.write_mode) {
    case WriteMode::Insert:
      if (!options.upsert_key.empty()) return R::failure("a key is only for write mode 'upsert'");
      layout.key = {std::string(kIdColumn)};
      break;
    case WriteMode::Append:
      if (!options.upsert_key.empty()) return R::failure("a key is only for write mode 'upsert'");
      break;
    case WriteMode::Upsert:
      if (options.upsert_key.empty()) return R::failure("write mode 'upsert' needs a key");
      for (std::size_t k = 0; k < options.upsert_key.size(); ++k) {
        const std::string& name = options.upsert_key[k];
        if (std::find(options.upsert_key.begin(), options.upsert_key.begin() + k, name) !=
            options.upsert_key.begin() + k) {
          return R::failure("key column '" + name + "' is listed twice");
        }
        auto it = std::find_if(cols.begin(), cols.end(), [&](const Column& c) { return c.name == name; });
        if (it == cols.end()) return R::failure("key column '" + name + "' is not a column of the table");
        if (it->type == ColumnType::Jsonb)
          return R::failure("key column '" + name + "' is jsonb, which cannot be a key here");
        it->not_null = true;
      }
      layout.key = options.upsert_key;
      break;
  }
  return R::success(std::move(layout));
}

std::vector<Column> copy_columns(const TableLayout& layout) {
  std::vector<Column> out = layout.columns;
  if (layout.write_mode == WriteMode::Upsert && !layout.include_metadata) {
    out.push_back(meta(dest::kOffsetField, ColumnType::Int8, Source::Offset, true));
  }
  if (layout.changes) {
    out.push_back(meta(kDeletedColumn, ColumnType::Bool, Source::Deleted, true));
    out.push_back(meta(kAbsentColumn, ColumnType::Jsonb, Source::Absent, false));
  }
  return out;
}

Result<std::string> quote_identifier(std::string_view name) {
  if (name.empty()) return Result<std::string>::failure("an identifier cannot be empty");
  if (name.find('\0') != std::string_view::npos) {
    return Result<std::string>::failure("an identifier cannot contain a NUL byte");
  }
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (const char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return Result<std::string>::success(std::move(out));
}

Result<TableName> TableName::make(std::string_view schema, std::string_view table) {
  auto sql = qualified(schema, table);
  if (!sql) return Result<TableName>::failure(sql.error());
  return Result<TableName>::success(TableName(std::move(sql).value()));
}

Result<TableName> TableName::temp(std::string_view table) {
  auto quoted = quote_identifier(table);
  if (!quoted) return Result<TableName>::failure(quoted.error());
  return Result<TableName>::success(TableName("pg_temp." + std::move(quoted).value()));
}

Result<std::string> qualified(std::string_view schema, std::string_view table) {
  auto t = quote_identifier(table);
  if (!t) return Result<std::string>::failure("table: " + t.error());
  if (schema.empty()) return t;
  auto s = quote_identifier(schema);
  if (!s) return Result<std::string>::failure("schema: " + s.error());
  return Result<std::string>::success(std::move(s).value() + "." + std::move(t).value());
}

std::string create_table_sql(const TableName& target, const TableLayout& layout) {
  std::string out = "CREATE TABLE IF NOT EXISTS " + target.sql() + " (";
  bool first = true;
  for (const Column& c : layout.columns) {
    if (!first) out += ", ";
    first = false;
    out += quote(c.name);
    out += ' ';
    out += sql_type(c.type);
    if (c.not_null) out += " NOT NULL";
  }
  if (!layout.key.empty()) out += ", PRIMARY KEY (" + name_list(layout.key) + ")";
  out += ')';
  return out;
}

std::string create_staging_sql(const TableName& staging, const TableLayout& layout) {
  std::string out = "CREATE TEMP TABLE " + staging.sql() + " (";
  bool first = true;
  for (const Column& c : copy_columns(layout)) {
    if (!first) out += ", ";
    first = false;
    out += quote(c.name);
    out += ' ';
    out += sql_type(c.type);
  }
  out += ") ON COMMIT DROP";
  return out;
}

std::string copy_sql(const TableName& table, const TableLayout& layout) {
  return "COPY " + table.sql() + " (" + column_list(copy_columns(layout)) + ") FROM STDIN (FORMAT binary)";
}

namespace {

// 'text' with inner quotes doubled (standard_conforming_strings: a backslash is a character).
std::string string_literal(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

// An upsert's conflict action: every column but the key's from the new row, or NOTHING when every
// column is key.
std::string on_conflict_action(const TableLayout& layout) {
  std::string set;
  for (const Column& c : layout.columns) {
    if (std::find(layout.key.begin(), layout.key.end(), c.name) != layout.key.end()) continue;
    if (!set.empty()) set += ", ";
    const std::string q = quote(c.name);
    set.append(q).append(" = EXCLUDED.").append(q);
  }
  return set.empty() ? "NOTHING" : "UPDATE SET " + set;
}

}  // namespace

std::string merge_sql(const TableName& target, const TableName& staging, const TableLayout& layout) {
  const std::string cols = column_list(layout.columns);
  std::string out = "INSERT INTO " + target.sql() + " (" + cols + ") SELECT ";
  switch (layout.write_mode) {
    case WriteMode::Append: out += cols + " FROM " + staging.sql(); break;
    case WriteMode::Insert:
      out += cols + " FROM " + staging.sql() + " ON CONFLICT (" + name_list(layout.key) + ") DO NOTHING";
      break;
    case WriteMode::Upsert: {
      const std::string key = name_list(layout.key);
      out += "DISTINCT ON (" + key + ") " + cols + " FROM " + staging.sql() + " ORDER BY " + key + ", " +
             quote(dest::kOffsetField) + " DESC ON CONFLICT (" + key + ") DO ";
      out += on_conflict_action(layout);
      break;
    }
  }
  return out;
}

ChangeStatements change_statements(const TableName& target, const TableName& staging, const TableLayout& layout,
                                   bool truncate) {
  const std::string key = name_list(layout.key), cols = column_list(layout.columns),
                    deleted = "last." + quote(kDeletedColumn);
  // The last change per key of the batch: its records are of one partition, in offset order.
  const std::string last = "(SELECT DISTINCT ON (" + key + ") * FROM " + staging.sql() + " ORDER BY " + key + ", " +
                           quote(dest::kOffsetField) + " DESC) AS last";
  ChangeStatements out;
  if (truncate) out.truncate = "TRUNCATE " + target.sql();
  std::string match;
  for (const std::string& k : layout.key) {
    const std::string q = quote(k);
    match.append(" AND t.").append(q).append(" = last.").append(q);
  }
  out.remove = "DELETE FROM " + target.sql() + " AS t USING " + last + " WHERE " + deleted + match;
  std::string qualified_cols;
  for (const Column& c : layout.columns) {
    if (!qualified_cols.empty()) qualified_cols += ", ";
    qualified_cols.append("last.").append(quote(c.name));
  }
  const std::string absent = "last." + quote(kAbsentColumn);
  out.upsert = "INSERT INTO " + target.sql() + " (" + cols + ") SELECT " + qualified_cols + " FROM " + last +
               " WHERE NOT " + deleted + " AND " + absent + " IS NULL ON CONFLICT (" + key + ") DO " +
               on_conflict_action(layout);
  // A patch sets the columns it names and keeps the others (pico_absent lists those).
  std::string set;
  for (const Column& c : layout.columns) {
    if (std::find(layout.key.begin(), layout.key.end(), c.name) != layout.key.end()) continue;
    if (!set.empty()) set += ", ";
    const std::string q = quote(c.name);
    set.append(q).append(" = CASE WHEN ").append(absent).append(" ? ").append(string_literal(c.name));
    set.append(" THEN t.").append(q).append(" ELSE last.").append(q).append(" END");
  }
  if (!set.empty())
    out.patch =
        "UPDATE " + target.sql() + " AS t SET " + set + " FROM " + last + " WHERE " + absent + " IS NOT NULL" + match;
  // NOT EXISTS, not only ON CONFLICT: a proposed row is checked against NOT NULL before the
  // conflict is, and a patch leaves columns NULL.
  out.patch_missing = "INSERT INTO " + target.sql() + " (" + cols + ") SELECT " + qualified_cols + " FROM " + last +
                      " WHERE " + absent + " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM " + target.sql() +
                      " AS t WHERE " + match.substr(5) + ") ON CONFLICT (" + key + ") DO NOTHING";
  return out;
}

WriteStatements write_statements(const TableName& target, const TableName& staging, const TableLayout& layout) {
  if (layout.write_mode == WriteMode::Append) return {{}, copy_sql(target, layout), {}};
  return {create_staging_sql(staging, layout), copy_sql(staging, layout), merge_sql(target, staging, layout)};
}

Result<std::string> add_columns_sql(const TableName& target, const std::vector<Column>& columns) {
  if (columns.empty()) return Result<std::string>::failure("no column to add");
  std::string out = "ALTER TABLE " + target.sql() + " ";
  bool first = true;
  for (const Column& c : columns) {
    if (auto e = check_name("column", c.name); !e.empty()) return Result<std::string>::failure(e);
    if (!first) out += ", ";
    first = false;
    out += "ADD COLUMN IF NOT EXISTS " + quote(c.name) + ' ' + std::string(sql_type(c.type));
  }
  return Result<std::string>::success(std::move(out));
}

}  // namespace picomq::postgres
