#pragma once
// The HTTP sink's options, each declared once (kit::OptionTable: the runtime's option table, the
// generated table in docs/sinks/http.md, value checks), with the kit's shared HTTP, TLS and auth
// groups; and the plan checked across options (plan()), shared by validate()
// (`picomq-connect --check`) and open(): the url template, the success statuses, the headers.
// No I/O.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/bodies.h"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::http_sink {

enum class Method { Post, Put, Patch };

struct Settings {
  std::string url;
  Method method = Method::Post;
  kit::JsonValue headers;
  kit::JsonValue secret_headers;
  BodyFormat body = BodyFormat::Ndjson;
  std::optional<std::string> content_type;
  bool include_metadata = true;
  kit::RequestSettings requests;  // max_request_bytes, max_request_records, max_in_flight, retry_timeout
  std::vector<std::string> success_statuses;
  std::string idempotency_header;
  Tombstones tombstones = Tombstones::Skip;
  kit::HttpSettings http;
  kit::TlsSettings tls;
  kit::AuthSettings auth;
};

std::string_view method_name(Method m);

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  kit::NameTemplate url;
  std::vector<long> success_statuses;
  std::vector<std::pair<std::string, std::string>> headers;  // headers, then secret_headers
  std::vector<std::string> secrets;                          // secret_headers' values (redacted from logs)
};

// The options read and checked against each other (every problem found is in `problems`);
// nullopt when they do not hold.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// The headers of a table option ({ "X-Team" = "payments" }): names and one-line string values;
// what is not one goes to `problems` (when given), its value never quoted.
std::vector<std::pair<std::string, std::string>> header_table(const kit::JsonValue& value, std::string_view option,
                                                              sdk::ConfigProblems* problems);

}  // namespace picomq::http_sink
