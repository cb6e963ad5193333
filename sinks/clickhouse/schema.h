#pragma once
// Tables as the ClickHouse sink sees them: the columns DESCRIBE TABLE reports turned into the
// columns an insert writes (and where each value comes from), the CREATE TABLE of a table the
// sink creates, the INSERT statement, and the columns inferred from a topic's first batch. Pure.
#include <string>
#include <string_view>
#include <vector>

#include "clickhouse/client.h"
#include "clickhouse/row_binary.h"
#include "picomq/kit/inferred_type.hpp"
#include "picomq/kit/result.hpp"
#include "picomq/sink_abi.h"

namespace picomq::clickhouse {

// "18.16.1" -> {18, 16}; {0, 0} when unreadable.
ServerVersion parse_version(std::string_view text);

struct DescribedColumn {
  std::string name, type;
  std::string default_kind;  // "", DEFAULT, MATERIALIZED, ALIAS, EPHEMERAL
};
// DESCRIBE TABLE ... FORMAT JSONEachRow (18.16 names the kind default_type, current servers too).
kit::Result<std::vector<DescribedColumn>> parse_describe(std::string_view json_lines);

struct Layout {
  std::vector<Column> columns;     // what each insert writes, in table order
  std::vector<std::string> notes;  // columns left to the server's defaults, and why
  std::string error;               // the table cannot be written
};
// The insert's columns for an existing table: pico_* names from the record's metadata; in
// string mode `payload` from the payload (other columns left to their defaults); in columns mode
// `declared` if given (each must be in the table), else every other column from the JSON field
// of its name. MATERIALIZED / ALIAS / EPHEMERAL columns, and columns of types the sink does not
// write, are left to the server (notes).
Layout layout_from_table(const std::vector<DescribedColumn>& table, bool string_mode,
                         const std::vector<Column>& declared);

// CREATE TABLE IF NOT EXISTS <qualified> (pico_topic String, pico_partition Int32, pico_offset
// Int64[, pico_timestamp Int64, pico_key Nullable(String), pico_headers String], <payload>)
// ENGINE = ReplacingMergeTree ORDER BY (pico_topic, pico_partition, pico_offset).
// `dedup_window` > 0: the table remembers that many inserts' insert_deduplication_token (22.2 on).
std::string create_table_sql(const std::string& qualified, const std::vector<Column>& payload, bool include_metadata,
                             int dedup_window = 0);
// INSERT INTO <qualified> (`a`, `b`) FORMAT <format> (RowBinary or Native)
std::string insert_sql(const std::string& qualified, const std::vector<Column>& columns,
                       std::string_view format = "RowBinary");

struct Inferred {
  std::vector<Column> columns;  // Nullable, in first-appearance order
  std::vector<Column> key;      // change events: the key columns (clickhouse/changes.h)
  std::vector<std::string> notes;
};
// The column of a type the kit's inference lattice gives (kit/inferred_type.hpp), Nullable:
// int64 -> Int64, float64 -> Float64, bool -> Bool (UInt8 before 21.12); string, JSON (objects,
// arrays, integers beyond Int64, conflicting kinds) and none (only nulls) -> String, where a
// string is its text and any other value its JSON text.
Type column_type(kit::InferredType type, ServerVersion version);

// Columns for a topic's first batch of JSON objects: each top-level field's non-null values
// joined on the kit's lattice, through column_type(). pico_* names are left out (notes).
Inferred infer_columns(const pmq_batch& batch, ServerVersion version);

// ALTER TABLE <qualified> ADD COLUMN `name` <type> (one column: a column already there, error 44
// or 15, leaves the others to be added).
std::string add_column_sql(const std::string& qualified, const Column& column);

}  // namespace picomq::clickhouse
