#pragma once
// The ClickHouse sink's options, each declared once (kit::OptionTable: the runtime's option
// table, the generated table in docs/sinks/clickhouse.md, value checks), with the shared HTTP,
// TLS and batching groups of the kit; and the checks across options (plan()), shared by
// validate() (`picomq-connect --check`) and open(). No I/O.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "clickhouse/row_binary.h"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::clickhouse {

enum class PayloadMode { Columns, String };
enum class InsertFormat { RowBinary, Native };

// How long without a new batch commits an insert being gathered (the accumulator's idle). Longer
// than the kit's 10 ms: on a busy machine the runtime's next batch is often that late, and each
// early insert is one more part for the server to write and merge (at 10 ms, 1M records took
// 20-29 inserts instead of 16). The runtime's own flush after poll_interval still ends a quiet spell.
inline constexpr std::chrono::milliseconds kInsertIdle{50};

struct Settings {
  std::string url;
  std::string user;
  std::optional<std::string> password;  // secret
  std::string database;
  std::string target_table;
  bool auto_create_table = true;
  PayloadMode payload_mode = PayloadMode::Columns;
  InsertFormat format = InsertFormat::Native;
  std::optional<kit::JsonValue> columns;
  bool auto_add_columns = false;
  bool include_metadata = true;
  std::chrono::milliseconds retry_timeout{};
  int64_t max_open_tables = 0;
  int64_t max_concurrent_inserts = 0;
  bool stream_inserts = true;
  kit::BatchingSettings batching;
  kit::HttpSettings http;
  kit::TlsSettings tls;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  std::string base_url;  // url without a trailing '/'
  kit::NameTemplate target_table;
  std::vector<Column> declared;  // payload_mode columns: the declared columns (empty: from the table / inferred)
  bool changes = false;          // a [[topics]] block hands the sink change events (docs/changes.md)
};

// The plan, or nullopt with every problem added to `problems` under its option's key.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// The declared `columns` option: [{name, type}, ...] in order, or {name = type, ...}.
kit::Result<std::vector<Column>> parse_declared_columns(const std::string& json);

}  // namespace picomq::clickhouse
