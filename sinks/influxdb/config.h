#pragma once
// The InfluxDB sink's options, each declared once (kit::OptionTable: the runtime's option table,
// the generated table in docs/sinks/influxdb.md, value checks), with the kit's shared HTTP, TLS
// and auth groups; and the checks across options (plan()), shared by validate()
// (`picomq-connect --check`) and open(). No I/O.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "influxdb/line_protocol.h"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::influxdb {

enum class Api { V1, V2, V3 };
enum class Numbers { Auto, Float };

struct Settings {
  std::string url;
  Api api = Api::V2;
  std::string database, retention_policy, org, bucket, token;
  std::string measurement;
  std::string measurement_field;
  std::vector<std::string> tags;
  std::string tag_key;
  std::vector<std::string> tag_headers;
  std::vector<std::string> tag_metadata;
  std::vector<std::string> metadata_fields;
  std::vector<std::string> fields;
  std::string field_separator;
  std::string timestamp_field;
  Precision timestamp_unit = Precision::Ms;
  Precision precision = Precision::Ms;
  Numbers numbers = Numbers::Auto;
  kit::RequestSettings requests;  // max_request_bytes, max_request_lines, max_in_flight, retry_timeout
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  std::string base_url;   // url without a trailing '/'
  std::string write_url;  // base_url + the API's write path and query
  kit::NameTemplate measurement;
};

// The plan, or nullopt with every problem added to `problems` under its option's key.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

std::string_view to_string(Api api);

}  // namespace picomq::influxdb
