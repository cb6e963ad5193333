#pragma once
// Change events into ClickHouse (docs/changes.md, docs/sinks/clickhouse.md "Change events"): a
// table of changes is a ReplacingMergeTree ordered by the row's key, whose version is the
// record's offset (pico_version) and whose pico_deleted marks a delete, so that `FINAL` (or the
// server's merges) keeps each key's latest change, and a replayed change, older than what the
// table holds or equal to it, changes nothing. Upserts and deletes are rows; a truncate is a
// TRUNCATE TABLE; a patch (columns Debezium did not send) is merged here with the key's current
// row, read back from the table. Pure: the SQL and the JSON, no server.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clickhouse/client.h"
#include "clickhouse/row_binary.h"
#include "clickhouse/types.h"
#include "picomq/kit/result.hpp"
#include "picomq/sink_abi.h"

namespace picomq::clickhouse {

// The key columns of a table of changes, from the keys (key_json objects) of a batch's changes:
// one column per key field, in the order of the first key, typed by the inference lattice and
// never Nullable (an ORDER BY column): integers Int64, numbers Float64, booleans UInt8, anything
// else String (a string's text, another value's JSON text).
std::vector<Column> infer_key_columns(const pmq_batch& batch);

// CREATE TABLE IF NOT EXISTS of a table of changes: the key columns, the payload columns (those
// of a key's name left out), pico_version UInt64 and pico_deleted UInt8, the record's
// coordinates (and with include_metadata its timestamp, key and headers);
// ENGINE = ReplacingMergeTree(pico_version[, pico_deleted]) ORDER BY (key...). The deleted flag
// is the engine's own from 23.2 on (FINAL then leaves deleted keys out); before, readers filter
// pico_deleted = 0 after FINAL.
std::string create_change_table_sql(const std::string& qualified, const std::vector<Column>& key,
                                    const std::vector<Column>& payload, bool include_metadata, ServerVersion version);

// The rows the keys of `patches` (key_json texts, objects of the same fields) have now, every
// version of them: SELECT <columns>, pico_version, pico_deleted FROM <qualified> WHERE <key> IN
// (...) FORMAT JSONEachRow. FINAL is not used: the latest version is picked by latest_rows().
// `columns`: the payload field columns to read back. Empty when no key can be read.
std::string current_rows_sql(const std::string& qualified, const std::vector<std::string>& key_fields,
                             const std::vector<std::string>& columns, const std::vector<std::string_view>& keys);

// The field names of a key (a key_json object), in its order; empty when it is not an object.
std::vector<std::string> key_field_names(std::string_view key_json);

// The key of a row as one comparable text: each key field's value as compact JSON, in key_fields
// order. nullopt when a field is missing or the text is not a JSON object.
std::optional<std::string> key_text(std::string_view json_object, const std::vector<std::string>& key_fields);

// current_rows_sql()'s answer: per key_text, the row of the highest pico_version as a JSON object
// of its columns (pico_version and pico_deleted left out), or no entry when that row is a delete.
kit::Result<std::map<std::string, std::string>> latest_rows(std::string_view json_lines,
                                                            const std::vector<std::string>& key_fields);

// `base` (a JSON object) with the fields of `patch` (a JSON object) set: the patch's values win,
// the base's other fields stay. Both objects' texts are valid JSON (nullopt otherwise).
std::optional<std::string> merge_rows(std::string_view base, std::string_view patch);

}  // namespace picomq::clickhouse
