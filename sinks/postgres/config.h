#pragma once
// The PostgreSQL sink's options, each declared once (kit::OptionTable: the runtime's option
// table, the generated table in docs/sinks/postgres.md, value checks), and the checks across
// options (plan()), which validate() (`picomq-connect --check`, and the runtime before open())
// and open() share, so a mistake is reported with its file position before anything connects.
// No I/O: libpq's connection string parser (PQconninfoParse, through the kit) is the only libpq call.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/postgres/conninfo.hpp"
#include "picomq/sdk.hpp"
#include "postgres/sql.h"

namespace picomq::postgres {

// The connection string and the connection are the kit's (picomq/kit/postgres/), shared with the
// Redshift sink.
using kit::pg::ConnOptions;
using kit::pg::parse_connection_string;

struct Settings {
  std::string connection_string;  // secret: never logged
  std::chrono::milliseconds reconnect_timeout{};
  std::chrono::milliseconds commit_interval{};
  int64_t max_open_tables = 0;
  std::string target_table;
  std::string schema;
  bool auto_create_table = true;
  PayloadMode payload_mode = PayloadMode::Jsonb;
  std::optional<kit::JsonValue> columns;  // unset: inferred (columns mode)
  bool auto_add_columns = false;
  bool include_metadata = true;
  WriteMode write_mode = WriteMode::Insert;
  std::vector<std::string> upsert_key;
};

// The sink's option table (BaseSink's `options`).
const kit::OptionTable<Settings>& option_table();

// The sink as the options describe it, checked across options.
struct Plan {
  Settings settings;
  ConnOptions conn_options;  // connection_string parsed (holds the password too: never logged)
  std::optional<kit::NameTemplate> target_table;
  // The layout's options; in columns mode with declared columns, those columns.
  LayoutOptions layout;
  bool infer_columns = false;  // columns mode without declared columns: a layout per topic
  // Consecutive batches share a COPY and a transaction (insert and append modes with a
  // commit_interval); otherwise each batch is a transaction of its own, one write at a time.
  bool streaming = true;
};

// The plan, or nullopt with every problem added to `problems` under its option's key.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// The declared `columns` option: [{name, type}, ...] in order, or {name = type, ...} (the
// runtime hands tables over with their keys in name order).
kit::Result<std::vector<Column>> parse_declared_columns(const std::string& json);

}  // namespace picomq::postgres
