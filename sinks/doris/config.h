#pragma once
// The Doris sink's options, each declared once (kit::OptionTable: the runtime's option table, the
// generated table in docs/sinks/doris.md, value checks), with the kit's HTTP and TLS groups; and
// the checks across options (plan()), shared by validate() (`picomq-connect --check`) and open().
// No I/O.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/sdk.hpp"

namespace picomq::doris {

struct Settings {
  std::string url;
  std::string database;
  std::string table;
  std::string user;
  std::optional<std::string> password;
  std::optional<std::string> label_prefix;
  int64_t label_span = 0;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  std::optional<std::string> columns;
  std::optional<std::string> jsonpaths;
  double max_filter_ratio = 0;
  bool strict_mode = false;
  bool two_phase_commit = false;
  kit::ByteSize max_load_bytes{};
  std::chrono::milliseconds load_timeout{};
  std::chrono::milliseconds retry_timeout{};
  int64_t probe_parallelism = 0;
  kit::HttpSettings http;
  kit::TlsSettings tls;
  // Not an option: a [[topics]] block hands the sink change events (docs/changes.md); its loads
  // then go to a Unique Key table (docs/sinks/doris.md, "Change events").
  bool changes = false;
};

const kit::OptionTable<Settings>& option_table();

// The options parsed and checked together, with the host's subscriptions (a block's `changes`
// refuses the options a change load cannot honour); nullopt with `problems` filled when they do
// not fit.
std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

}  // namespace picomq::doris
