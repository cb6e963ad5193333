#pragma once
// The Elasticsearch / OpenSearch sink's options, each declared once (kit::OptionTable: the
// runtime's option table, the generated table in docs/sinks/elasticsearch.md, value checks), with
// the kit's shared HTTP, TLS and auth groups; and the checks across options (plan()), shared by
// validate() (`picomq-connect --check`) and open(). No I/O.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::elasticsearch {

enum class Action { Index, Create };
enum class IdMode { Record, Key, None };
enum class VersionType { Internal, External };
enum class Tombstones { Skip, Delete };
enum class Refresh { False, True, WaitFor };

struct Settings {
  std::string url;
  std::string index;
  Action action = Action::Index;
  IdMode id = IdMode::Record;
  VersionType version_type = VersionType::Internal;
  Tombstones tombstones = Tombstones::Skip;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  bool data_stream = false;
  bool auto_create_index = true;
  kit::JsonValue index_settings;
  kit::JsonValue index_mappings;
  kit::JsonValue index_template;
  std::string index_template_name;
  std::string pipeline;
  std::string routing_field;
  Refresh refresh = Refresh::False;
  int64_t compatible_with = 0;
  kit::RequestSettings requests;  // max_request_bytes, max_request_records, max_in_flight, retry_timeout
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  std::string base_url;  // url without a trailing '/'
  kit::NameTemplate index;
  std::string bulk_query;                 // "?filter_path=...&pipeline=...&refresh=..."
  std::string create_body;                // PUT <index> body: {"settings":...,"mappings":...}, "" for none
  std::vector<std::string> routing_path;  // routing_field split at '.'
  bool changes = false;                   // a [[topics]] block hands the sink change events
};

// The plan, or nullopt with every problem added to `problems` under its option's key. Under change
// events (a block's `changes`, docs/changes.md) the options that would name, version, route or
// create documents otherwise than by the row's key are refused.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

std::string_view to_string(Action a);

}  // namespace picomq::elasticsearch
