#pragma once
// The Quickwit sink's options, each declared once (kit::OptionTable: the runtime's option table,
// the generated table in docs/sinks/quickwit.md, value checks), with the kit's shared HTTP, TLS
// and auth groups; the checks across options (plan()), shared by validate()
// (`picomq-connect --check`) and open(); the index id rule; and the request paths and index
// config bodies that follow from the options. No I/O but reading index_config_file.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::quickwit {

inline constexpr uint64_t kMaxBody = 10u << 20;  // Quickwit's ingest payload limit (10 MiB by default)

enum class Commit { Auto, WaitFor, Force };
enum class Endpoint { Ingest, ElasticBulk };

struct Settings {
  std::string url;
  std::string index;
  Commit commit = Commit::Auto;
  Endpoint endpoint = Endpoint::Ingest;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  std::string id_field;
  kit::JsonValue index_config;
  std::string index_config_yaml;
  std::string index_config_file;
  kit::RequestSettings requests;  // max_request_bytes, max_request_records, max_in_flight, retry_timeout
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

const kit::OptionTable<Settings>& option_table();

// The options read and checked against each other; nullopt with `problems` filled when they do
// not hold. The url loses its trailing slashes.
std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// Quickwit's index id rules, ^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$: other bytes become '_', an 'i'
// first when it does not start with a letter, '_' padding to 3, a hash suffix when cut.
std::string index_id(const std::string& resolved);

// Where a write goes after s.url: "/api/v1/" or "/api/v1/_elastic/", then the index id, then the
// query: "/ingest?detailed_response=true&commit=..." or "/_bulk?refresh=...".
std::string write_path(const Settings& s);
std::string write_query(const Settings& s);

// The index config to create indexes from, when the options give one: YAML text (index_config_yaml,
// or index_config_file read and checked now), or an index_config table as the JSON members that
// follow "index_id" in the POST body (",\"version\":\"0.8\"" added when absent). Throws
// sdk::FatalError naming the option when the file cannot be read or holds a bad config.
struct IndexConfig {
  std::optional<std::string> yaml;
  std::string json_members;
  bool creates_indexes() const { return yaml.has_value() || !json_members.empty(); }
};
IndexConfig index_config(const Settings& s);

}  // namespace picomq::quickwit
