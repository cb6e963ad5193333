#include "http/config.h"

#include <nlohmann/json.hpp>

namespace picomq::http_sink {

using namespace std::chrono_literals;

std::string_view method_name(Method m) { return m == Method::Put ? "PUT" : m == Method::Patch ? "PATCH" : "POST"; }

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(kit::not_empty())
          .help("Endpoint URL template, resolved once per topic: {topic}, {topic_segment[N]} (the topic "
                "percent-encoded). "
                "http:// or https://."),
      kit::option("method", &Settings::method)
          .choices({{"POST", Method::Post}, {"PUT", Method::Put}, {"PATCH", Method::Patch}})
          .fallback(Method::Post)
          .help("HTTP method of the requests that carry records."),
      kit::option("headers", &Settings::headers).help("Static request headers: a table of name = value."),
      kit::option("secret_headers", &Settings::secret_headers)
          .secret()
          .help("Headers whose values are secrets (never logged or shown): a table of name = value."),
      kit::option("body", &Settings::body)
          .choices({{"ndjson", BodyFormat::Ndjson},
                    {"json_array", BodyFormat::JsonArray},
                    {"single", BodyFormat::Single},
                    {"raw", BodyFormat::Raw}})
          .fallback(BodyFormat::Ndjson)
          .help("ndjson: records one per line; json_array: one JSON array; single: one JSON document per request; "
                "raw: one request per record with the payload's bytes as they are."),
      kit::option("content_type", &Settings::content_type)
          .help("Content-Type of the requests; default by body: application/x-ndjson, application/json, or by the "
                "topic's schema for raw."),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("JSON bodies: each record as {pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key, "
                "pico_headers, payload}. Off: the payload alone."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{1u << 20}, .max_request_records = 500})),
      kit::option("success_statuses", &Settings::success_statuses)
          .fallback(std::vector<std::string>{"2xx"})
          .help("Statuses that mean written: codes (200), classes (2xx), ranges (200-204). A 2xx outside them is "
                "an error."),
      kit::option("idempotency_header", &Settings::idempotency_header)
          .fallback("Idempotency-Key")
          .help("Header carrying <topic>-<partition>-<first offset>-<last offset> of the request's records, the same "
                "on every resend: how a receiver drops replays. Empty: not sent."),
      kit::option("tombstones", &Settings::tombstones)
          .choices({{"skip", Tombstones::Skip}, {"send", Tombstones::Send}, {"delete", Tombstones::Delete}})
          .fallback(Tombstones::Skip)
          .help("Records with a null payload: skip them; send them (null payload); or send DELETE <url>/<key> (a "
                "tombstone without a key is refused)."),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
      kit::group(&Settings::auth, kit::auth_options()),
  };
  return table;
}

std::vector<std::pair<std::string, std::string>> header_table(const kit::JsonValue& value, std::string_view option,
                                                              sdk::ConfigProblems* problems) {
  std::vector<std::pair<std::string, std::string>> out;
  if (value.text == "null") return out;
  const auto json = nlohmann::json::parse(value.text, nullptr, false);
  if (!json.is_object()) {
    if (problems) problems->add(option, "must be a table of header names to string values");
    return out;
  }
  for (const auto& [name, v] : json.items()) {
    const bool bad_name = name.empty() || name.find_first_of(" \t\r\n:") != std::string::npos;
    if (bad_name || !v.is_string() || v.get<std::string>().find_first_of("\r\n") != std::string::npos) {
      // The value is not quoted: it may be a secret.
      if (problems) problems->add(option, "header '" + name + "' needs a token name and a one-line string value");
      continue;
    }
    out.emplace_back(name, v.get<std::string>());
  }
  return out;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  option_table().validate(config, problems);
  auto url = kit::NameTemplate::parse(config.string("url"));
  if (!url) problems.add("url", url.error());
  std::string error;
  auto statuses = parse_statuses(config.strings("success_statuses"), &error);
  if (!statuses) problems.add("success_statuses", error);
  header_table(kit::JsonValue{config.json("headers")}, "headers", &problems);
  header_table(kit::JsonValue{config.json("secret_headers")}, "secret_headers", &problems);
  kit::validate_auth(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = option_table().parse(config);
  auto headers = header_table(s.headers, "headers", nullptr);
  const auto secret_headers = header_table(s.secret_headers, "secret_headers", nullptr);
  std::vector<std::string> secrets;
  secrets.reserve(secret_headers.size());
  for (const auto& [name, value] : secret_headers) secrets.push_back(value);
  headers.insert(headers.end(), secret_headers.begin(), secret_headers.end());
  return Plan{.settings = std::move(s),
              .url = std::move(url).value(),
              .success_statuses = std::move(*statuses),
              .headers = std::move(headers),
              .secrets = std::move(secrets)};
}

}  // namespace picomq::http_sink
