#include "postgres/config.h"

#include <algorithm>

#include "picomq/kit/declared_columns.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/subscriptions.hpp"
#include "postgres/row_encoder.h"

namespace picomq::postgres {
namespace {

using namespace std::chrono_literals;

}  // namespace

kit::Result<std::vector<Column>> parse_declared_columns(const std::string& json) {
  using R = kit::Result<std::vector<Column>>;
  auto declared = kit::parse_declared_columns(json);
  if (!declared) return R::failure(declared.error());
  std::vector<Column> out;
  for (const kit::DeclaredColumn& d : declared.value()) {
    auto ct = parse_column_type(d.type);
    if (!ct)
      return R::failure("'" + d.name + "' has unknown type '" + d.type +
                        "' (text, int4, int8, float8, boolean, jsonb, bytea, timestamptz)");
    out.push_back(Column{d.name, *ct, Source::Field, d.name, false});
  }
  return R::success(std::move(out));
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("connection_string", &Settings::connection_string)
          .required()
          .secret()
          .check([](const std::string& v) { return parse_connection_string(v).problem(); })
          .help("libpq connection string (key=value or postgresql:// URI). Never logged. The sink sets "
                "client_encoding to UTF8."),
      kit::option("reconnect_timeout", &Settings::reconnect_timeout)
          .fallback(15s)
          .help("How long one write attempt keeps reconnecting to an unreachable server (back-off from 250 "
                "ms to 2 s, each connection attempt bounded by what is left) before it fails. The runtime "
                "makes 5 attempts about 3 s apart in all, so a server that stays away stops the sink in Error "
                "about 5 x reconnect_timeout + 3 s after the sink found it gone; a shorter outage loses "
                "nothing. 0: one connection attempt (of up to 1 s) per write attempt."),
      kit::option("commit_interval", &Settings::commit_interval)
          .fallback(1s)
          .help("insert and append modes: consecutive batches into one table are written as one COPY in "
                "one transaction, committed after this long, after 64 batches, when no batch has come for "
                "10 ms, or on a flush. A batch's records (and offsets) are acknowledged at that commit. 0: "
                "one transaction per batch. upsert mode always commits each batch on its own (its writes "
                "must land in order)."),
      kit::option("max_open_tables", &Settings::max_open_tables)
          .fallback(4)
          .check([](int64_t v) -> std::optional<std::string> {
            if (v < 1 || v > 64) return "must be from 1 to 64";
            return std::nullopt;
          })
          .help("insert and append modes: COPY streams open at once, one per table, each on a connection "
                "of its own (1 to 64), and one connection more for a stream committing beside them. A batch "
                "for another table when all are open commits the oldest stream first. 1: tables take turns."),
      kit::option("target_table", &Settings::target_table)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Table name template, resolved once per topic: {topic}, {topic_segment[N]} (N from 0, or "
                "negative from the end). Sanitised to a PostgreSQL identifier (at most 63 bytes, with a hash "
                "suffix when cut) and always quoted."),
      kit::option("schema", &Settings::schema)
          .fallback(std::string("public"))
          .check(kit::not_empty())
          .check([](const std::string& v) { return quote_identifier(v).problem(); })
          .help("Schema of the target tables (quoted; it must exist)."),
      kit::option("auto_create_table", &Settings::auto_create_table)
          .fallback(true)
          .help("Create a topic's table (CREATE TABLE IF NOT EXISTS) on its first batch. Off: a missing "
                "table stops the sink in Error naming it."),
      kit::option("payload_mode", &Settings::payload_mode)
          .choices({{"jsonb", PayloadMode::Jsonb},
                    {"text", PayloadMode::Text},
                    {"bytea", PayloadMode::Bytea},
                    {"columns", PayloadMode::Columns}})
          .fallback(PayloadMode::Jsonb)
          .help("The payload column: jsonb (schema json), text (schema text or json) or bytea (any schema); "
                "columns (schema json): top-level fields of JSON objects as typed columns, declared in "
                "`columns` or inferred from a topic's first batch."),
      kit::option("columns", &Settings::columns)
          .check([](const kit::JsonValue& v) { return parse_declared_columns(v.text).problem(); })
          .help("payload_mode columns: the declared columns, in table order as an array "
                "[{ name = \"id\", type = \"text\" }, ...], or as a table { id = \"text\", ... } (created in "
                "name order). Types: text, int4, int8, float8, boolean, jsonb, bytea, timestamptz (from epoch "
                "ms). Unset: inferred from each topic's first batch (or read from its existing table)."),
      kit::option("auto_add_columns", &Settings::auto_add_columns)
          .fallback(false)
          .help("payload_mode columns with inferred columns: a field first seen in a later batch adds a "
                "nullable column (ALTER TABLE ... ADD COLUMN IF NOT EXISTS). Off: such fields are not written."),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("Add the columns pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key (bytea) "
                "and pico_headers (jsonb)."),
      kit::option("write_mode", &Settings::write_mode)
          .choices({{"insert", WriteMode::Insert}, {"upsert", WriteMode::Upsert}, {"append", WriteMode::Append}})
          .fallback(WriteMode::Insert)
          .help("insert: pico_id (topic:partition:offset) is the primary key and a replayed record is "
                "skipped; upsert: upsert_key is the primary key and the last record per key wins; append: "
                "plain COPY into the table, a replay writes rows again."),
      kit::option("upsert_key", &Settings::upsert_key)
          .fallback({})
          .help("write_mode upsert (required there, refused elsewhere): the key columns, e.g. [\"pico_key\"] "
                "or payload columns [\"id\"] in columns mode. A record with a missing or null key is rejected."),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);  // each option's value on its own
  if (!problems.empty()) return std::nullopt;
  Plan p;
  p.settings = table.parse(config);
  const Settings& s = p.settings;
  p.conn_options = parse_connection_string(s.connection_string).value();
  p.target_table.emplace(kit::NameTemplate::parse(s.target_table).value());

  const std::string write_mode(to_string(s.write_mode));
  const bool upsert = s.write_mode == WriteMode::Upsert, columns = s.payload_mode == PayloadMode::Columns;
  // Change events (docs/changes.md) are applied by key: upserts, and deletes in the same merge.
  const bool changes = kit::has_changes(config);
  // Under changes with inferred columns each table takes its key from its changes' keys.
  const bool key_per_table = changes && columns && !s.columns && s.upsert_key.empty();
  if (upsert && s.upsert_key.empty() && !key_per_table)
    problems.add("write_mode", std::string("'upsert' needs upsert_key (the key columns, e.g. [\"pico_key\"])") +
                                   (changes ? ", or inferred columns (payload_mode = \"columns\" without `columns`), "
                                              "whose tables take their key from the change events' keys"
                                            : ""));
  if (!upsert && !s.upsert_key.empty())
    problems.add("upsert_key", "is only for write_mode 'upsert' (write_mode is '" + write_mode + "')");
  if (!columns && s.columns) problems.add("columns", "is only for payload_mode 'columns'");
  if (!columns && s.auto_add_columns) problems.add("auto_add_columns", "is only for payload_mode 'columns'");
  if (s.columns && s.auto_add_columns)
    problems.add("auto_add_columns", "is for inferred columns; it cannot be combined with declared columns");
  if (changes && !upsert)
    problems.add("write_mode",
                 "change events (changes = ... in [[topics]]) are applied by key: set write_mode = \"upsert\" and "
                 "upsert_key to the key's columns (write_mode is '" +
                     write_mode + "')");
  if (!problems.empty()) return std::nullopt;

  LayoutOptions& lo = p.layout;
  lo.payload_mode = s.payload_mode;
  lo.write_mode = s.write_mode;
  lo.include_metadata = s.include_metadata;
  lo.upsert_key = s.upsert_key;
  lo.changes = changes;
  p.infer_columns = columns && !s.columns;
  if (s.columns) lo.payload_columns = parse_declared_columns(s.columns->text).value();
  // Inferred columns come with each topic's first batch; check the rest of the layout now with a
  // stand-in (the key columns as text, or one payload column).
  LayoutOptions probe = lo;
  if (p.infer_columns) {
    const auto reserved = reserved_column_names(lo.write_mode, lo.include_metadata);
    if (key_per_table) probe.upsert_key = {"key"};
    for (const auto& k : probe.upsert_key)
      if (std::find(reserved.begin(), reserved.end(), k) == reserved.end())
        probe.payload_columns.push_back(Column{k, ColumnType::Text, Source::Field, k, false});
    if (probe.payload_columns.empty())
      probe.payload_columns.push_back(Column{"payload", ColumnType::Text, Source::Field, "payload", false});
  }
  if (auto layout = make_layout(probe); !layout)
    problems.add(upsert ? "upsert_key" : s.columns ? "columns" : "payload_mode", "table layout: " + layout.error());
  if (!problems.empty()) return std::nullopt;
  p.streaming = s.commit_interval.count() > 0 && !upsert;
  return p;
}

}  // namespace picomq::postgres
