#include "doris/config.h"

#include <simdjson.h>

#include <cctype>

#include "picomq/kit/subscriptions.hpp"

namespace picomq::doris {

using namespace std::chrono_literals;

namespace {

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "the FE's HTTP address, e.g. http://fe:8030", .credentials = "use user and password"});
}

std::optional<std::string> check_name(const std::string& v) {
  if (v.empty()) return "must not be empty";
  for (unsigned char c : v)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '$') || c >= 0x80)
      return "must be a Doris name: letters, digits, '_', '-', '$' (the sink writes into one existing table)";
  return std::nullopt;
}

}  // namespace

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("The FE's HTTP address: http(s)://fe-host:8030. Stream Loads go there and follow its 307 to a BE."),
      kit::option("database", &Settings::database).required().check(check_name).help("The database of the table."),
      kit::option("table", &Settings::table)
          .required()
          .check(check_name)
          .help("The table the records are loaded into. Doris cannot create it: it must exist (the sink stops naming "
                "it when it does not)."),
      kit::option("user", &Settings::user)
          .fallback(std::string("root"))
          .check(kit::not_empty())
          .help("User of the Basic auth (needs LOAD on the table)."),
      kit::option("password", &Settings::password).secret().help("Password of the Basic auth (empty when unset)."),
      kit::option("label_prefix", &Settings::label_prefix)
          .check([](const std::string& v) -> std::optional<std::string> {
            if (v.empty() || v.size() > 40) return std::string("must be 1 to 40 bytes");
            for (unsigned char c : v)
              if (!(std::isalnum(c) || c == '_' || c == '-' || c == ':') || c >= 0x80)
                return std::string("must hold only [-_A-Za-z0-9:]");
            return std::nullopt;
          })
          .help("Start of every label: {label_prefix}-{topic}-{partition}-{first offset}-{last offset} (topic in the "
                "kit's reversible "
                "[A-Za-z0-9_-] encoding; a label over 128 bytes is cut with a hash). Default: picomq-{sink key}. Two "
                "sinks loading "
                "the same topic into one database need different prefixes; keep it across restarts (replays are "
                "recognised by it)."),
      kit::option("label_span", &Settings::label_span)
          .fallback(10000)
          .check(kit::at_least(1))
          .help("Loads never cross a multiple of this many offsets, so a replay's loads start where the earlier run's "
                "did. "
                "After a restart a partition's first load looks up at most label_span labels (get_load_state, "
                "probe_parallelism at once) to find what the earlier run loaded. Keep it across restarts."),
      kit::document_option(
          &Settings::document,
          {.more = "One JSON line per record; Doris takes the fields named like the table's columns (or "
                   "as columns / jsonpaths say) and ignores the others."}),
      kit::option("columns", &Settings::columns)
          .help("Stream Load `columns` header: the table columns the JSON fields go to, e.g. \"id,name,pico_offset\"."),
      kit::option("jsonpaths", &Settings::jsonpaths)
          .help("Stream Load `jsonpaths` header: [\"$.a\", \"$.b.c\"], one per column (in the order of `columns`)."),
      kit::option("max_filter_ratio", &Settings::max_filter_ratio)
          .fallback(0.0)
          .check([](double v) -> std::optional<std::string> {
            if (v < 0 || v > 1) return std::string("must be between 0 and 1");
            return std::nullopt;
          })
          .help(
              "Stream Load `max_filter_ratio`. Rows Doris filters are rejected either way (read from the ErrorURL, "
              "through "
              "the bad-record policy): at 0 a load with a bad row fails and is re-sent without it; above 0 it succeeds "
              "without them."),
      kit::option("strict_mode", &Settings::strict_mode)
          .fallback(false)
          .help("Stream Load `strict_mode`: a value that does not convert to its column's type refuses the row "
                "(otherwise it becomes NULL)."),
      kit::option("two_phase_commit", &Settings::two_phase_commit)
          .fallback(false)
          .help("Pre-commit every load of a batch (two_phase_commit: true) and commit them all (_stream_load_2pc) only "
                "when the "
                "whole batch loaded, so a batch becomes visible at once and together with its completion; aborted "
                "otherwise."),
      kit::option("max_load_bytes", &Settings::max_load_bytes)
          .fallback(kit::ByteSize{100u << 20})
          .help("Largest Stream Load body; a batch is cut into as many loads as it takes (the cut is a function of the "
                "records, so "
                "it is the same on a replay). Keep it below the BE's streaming_load_max_mb."),
      kit::option("load_timeout", &Settings::load_timeout)
          .fallback(600s)
          .help("Stream Load `timeout` header and the request's own timeout."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long a load refused as transient (transport errors, 5xx, Fail for an internal reason, RUNNING) is "
                "re-sent "
                "with the same label here, back-off 200 ms to 5 s, before the write fails and the runtime's retry "
                "takes over."),
      kit::option("probe_parallelism", &Settings::probe_parallelism)
          .fallback(16)
          .check(kit::at_least(1))
          .help("get_load_state lookups at once when a restart checks what the earlier run loaded."),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
  };
  return table;
}

std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  if (s.http.compression != kit::Compression::None)
    problems.add("compression",
                 "Stream Load takes the body as it is (compress_type applies to CSV files only): use \"none\"");
  if (s.jsonpaths) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(*s.jsonpaths).get(root) || root.type() != simdjson::dom::element_type::ARRAY)
      problems.add("jsonpaths", "must be a JSON array of paths, e.g. [\"$.id\", \"$.name\"]");
  }
  s.changes = kit::has_changes(config);
  if (s.changes) {
    // A change's line is the row's columns at the top level, with pico_version and pico_deleted
    // beside them (the sequence and delete headers name those columns).
    if (s.document == kit::JsonLayout::Envelope)
      problems.add("document",
                   "change events (a block's `changes`) are loaded as the row's own fields: use \"flat\" or "
                   "\"payload\", not \"envelope\" (docs/sinks/doris.md, \"Change events\")");
    if (s.columns)
      problems.add("columns",
                   "under `changes` the row's fields go to the columns of their names, with pico_version and "
                   "pico_deleted (the sequence and delete headers need them): leave `columns` out");
    if (s.jsonpaths)
      problems.add("jsonpaths",
                   "under `changes` the row's fields go to the columns of their names (a delete carries only its "
                   "key's fields): leave `jsonpaths` out");
  }
  if (!problems.empty()) return std::nullopt;
  s.url = kit::base_url(std::move(s.url));
  return s;
}

}  // namespace picomq::doris
