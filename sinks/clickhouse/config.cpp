#include "clickhouse/config.h"

#include "picomq/kit/declared_columns.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::clickhouse {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(url, {.what = "ClickHouse's HTTP interface, port 8123 or 8443",
                                   .credentials = "use user and password",
                                   .query = "the sink sets the query; use the options for settings"});
}

}  // namespace

kit::Result<std::vector<Column>> parse_declared_columns(const std::string& json) {
  using R = kit::Result<std::vector<Column>>;
  auto declared = kit::parse_declared_columns(json);
  if (!declared) return R::failure(declared.error());
  std::vector<Column> out;
  for (const kit::DeclaredColumn& d : declared.value()) {
    auto parsed = parse_type(d.type);
    if (!parsed) return R::failure("column '" + d.name + "': " + parsed.error());
    Column c{d.name, parsed.value(), metadata_source(d.name), d.name};
    if (c.source != Source::Field)
      return R::failure("column '" + d.name + "' is a metadata column (include_metadata adds it)");
    out.push_back(std::move(c));
  }
  return R::success(std::move(out));
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("ClickHouse's HTTP interface: http://host:8123 or https://host:8443 (no path, query or "
                "credentials)."),
      kit::option("user", &Settings::user)
          .fallback(std::string("default"))
          .help("User the sink inserts as (HTTP basic auth)."),
      kit::option("password", &Settings::password).secret().help("That user's password (never logged). Unset: none."),
      kit::option("database", &Settings::database)
          .fallback(std::string("default"))
          .check(kit::not_empty())
          .help("Database of the target tables (it must exist)."),
      kit::option("target_table", &Settings::target_table)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Table name template, resolved once per topic: {topic}, {topic_segment[N]}. Kept as it is (valid "
                "UTF-8; control characters become '_'), at most 63 bytes (a hash suffix when cut), always quoted "
                "with backticks: topic shop.orders-eu is table `shop.orders-eu`."),
      kit::option("auto_create_table", &Settings::auto_create_table)
          .fallback(true)
          .help("Create a topic's table on its first batch (CREATE TABLE IF NOT EXISTS ... ENGINE = "
                "ReplacingMergeTree ORDER BY (pico_topic, pico_partition, pico_offset): the record id a replay is "
                "checked against, so that a replayed record adds no row; another writer's copies fold with FINAL). "
                "Off: a missing table stops the sink in Error naming it."),
      kit::option("format", &Settings::format)
          .choices({{"RowBinary", InsertFormat::RowBinary}, {"Native", InsertFormat::Native}})
          .fallback(InsertFormat::Native)
          .help("The inserts' body: Native (columnar blocks; with payload_mode columns the sink takes the Arrow plane "
                "and makes them from the runtime's Arrow columns, with no second parse of the payloads) or RowBinary "
                "(row after row, encoded from the batches plane's payloads). A table with a LowCardinality column "
                "is written as RowBinary whatever this says (Native serialises it as a dictionary)."),
      kit::option("payload_mode", &Settings::payload_mode)
          .choices({{"columns", PayloadMode::Columns}, {"string", PayloadMode::String}})
          .fallback(PayloadMode::Columns)
          .help("columns (schema json): each JSON object's top-level fields into the columns of the same "
                "names, converted strictly to their types (a record that does not convert is rejected); "
                "string: the payload as it is into one `payload` column (String)."),
      kit::option("columns", &Settings::columns)
          .check([](const kit::JsonValue& v) { return parse_declared_columns(v.text).problem(); })
          .help("payload_mode columns: the columns, in table order, as [{ name = \"id\", type = \"String\" }, "
                "...] or { id = \"String\", ... } (name order). Unset: an existing table's columns (DESCRIBE "
                "TABLE), or, for a table the sink creates, inferred from the topic's first batch."),
      kit::option("auto_add_columns", &Settings::auto_add_columns)
          .fallback(false)
          .help("payload_mode columns without declared columns: a top-level field that is not a column of the "
                "table yet adds one (ALTER TABLE ... ADD COLUMN, Nullable, typed by the inference rules from the "
                "batch that brought it) before that batch is encoded. Off: such fields are not written."),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("Tables the sink creates get pico_timestamp (Int64, epoch ms), pico_key (Nullable(String), "
                "the key's bytes) and pico_headers (String, JSON) besides pico_topic, pico_partition and "
                "pico_offset (always there: the ORDER BY). Columns of these names in an existing table are "
                "always filled."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long an insert refused with a transient error (connection, timeout, 5xx without a code, "
                "the retriable ClickHouse codes) is resent here (back-off 200 ms to 5 s) before the write "
                "fails and the runtime's retry takes over. 0: not resent here."),
      kit::option("max_open_tables", &Settings::max_open_tables)
          .fallback(4)
          .check(kit::at_least(1))
          .help("Tables with an insert being gathered at once; a batch for another table commits the oldest."),
      kit::option("max_concurrent_inserts", &Settings::max_concurrent_inserts)
          .fallback(2)
          .check(kit::at_least(1))
          .help("Inserts on the wire at once: another table's, or the same table's next while the server is still "
                "writing the previous one (their order does not matter: rows are told apart by record id)."),
      kit::option("stream_inserts", &Settings::stream_inserts)
          .fallback(true)
          .help("format Native: an insert goes to the server with its first batch's block and each later batch's "
                "block follows as it joins (a chunked request body), so the server parses while the insert "
                "gathers and a large insert is not sent all at once when it commits; the insert still commits "
                "(and its writes complete) only when its body ends and the server answers. Off, or with "
                "compression: one body per insert, sent when it commits. A streamed insert that fails in "
                "transit is sent again whole (retry_timeout)."),
      kit::group(&Settings::batching, kit::batching_options(1s, kit::ByteSize{64u << 20}, 200000, kInsertIdle)),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  auto target = kit::NameTemplate::parse(s.target_table);
  if (s.payload_mode != PayloadMode::Columns && s.columns)
    problems.add("columns", "is only for payload_mode 'columns'");
  if (s.payload_mode != PayloadMode::Columns && s.auto_add_columns)
    problems.add("auto_add_columns", "is only for payload_mode 'columns'");
  if (s.columns && s.auto_add_columns)
    problems.add("auto_add_columns",
                 "is for columns read from the table or inferred; it cannot be combined with declared columns");
  const bool changes = kit::has_changes(config);
  if (changes && s.payload_mode != PayloadMode::Columns)
    problems.add("payload_mode",
                 "change events (a block's `changes`) are rows of their fields: payload_mode 'columns'");
  if (!problems.empty() || !target) return std::nullopt;
  Plan p{std::move(s), {}, std::move(target).value(), {}, changes};
  p.base_url = p.settings.url;
  p.base_url = kit::base_url(std::move(p.base_url));
  if (p.settings.columns) p.declared = parse_declared_columns(p.settings.columns->text).value();
  return p;
}

}  // namespace picomq::clickhouse
