#pragma once
// The option groups every HTTP sink shares, so the same thing has the same key everywhere:
//   http_options()   timeout, connect_timeout, compression, compression_level, http_version, io_threads
//   tls_options()    tls_ca_file, tls_ca_dir, tls_client_cert, tls_client_key, tls_client_key_password, tls_verify
//   auth_options()   auth = none | basic | bearer | api_key | aws_sigv4 | oauth2, and per type:
//                      basic      auth_user, auth_password
//                      bearer     auth_token
//                      api_key    auth_header, auth_api_key
//                      aws_sigv4  aws_region, aws_service, aws_access_key_id, aws_secret_access_key, aws_session_token
//                      oauth2     oauth2_token_url, oauth2_client_id, oauth2_client_secret, oauth2_scope,
//                                 oauth2_client_auth (basic | body)
//   batching_options()  commit_interval, max_batch_bytes, max_batch_records (the accumulator's limits)
//   document_option()   document = flat | envelope | payload (a record as one JSON document)
//   request_options()   max_request_bytes, max_request_records, max_in_flight, retry_timeout (the
//                       request engine's limits and resend time; defaults and wording per sink)
// client_options() turns the first three into the HTTP client's options; validate_auth() checks
// that the chosen auth type has what it needs (for a sink's validate()).
#include <chrono>
#include <optional>
#include <string>

#include "picomq/kit/accumulator.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/splitter.hpp"

namespace picomq::kit {

struct HttpSettings {
  std::chrono::milliseconds timeout{};
  std::chrono::milliseconds connect_timeout{};
  Compression compression = Compression::None;
  int64_t compression_level = 0;
  HttpVersion version = HttpVersion::Http2OverTls;
  int64_t io_threads = 1;
};

struct TlsSettings {
  std::optional<std::string> ca_file, ca_dir, client_cert, client_key, client_key_password;
  bool verify = true;
};

enum class AuthType { None, Basic, Bearer, ApiKey, AwsSigV4, OAuth2ClientCredentials };
enum class OAuth2ClientAuth { Basic, Body };

struct AuthSettings {
  AuthType type = AuthType::None;
  std::optional<std::string> user, password, token, header, api_key;
  std::optional<std::string> aws_region, aws_service, aws_access_key_id, aws_secret_access_key, aws_session_token;
  std::optional<std::string> oauth2_token_url, oauth2_client_id, oauth2_client_secret, oauth2_scope;
  OAuth2ClientAuth oauth2_client_auth = OAuth2ClientAuth::Basic;
};

struct BatchingSettings {
  std::chrono::milliseconds commit_interval{};
  ByteSize max_bytes{};
  int64_t max_records = 0;
};

// The request engine's settings (request_engine.hpp), read by request_options().
struct RequestSettings {
  ByteSize max_request_bytes{};
  int64_t max_request_records = 0;
  int64_t max_in_flight = 0;
  std::chrono::milliseconds retry_timeout{};

  // What the splitter cuts a batch's requests by.
  SplitLimits limits() const { return {max_request_bytes.bytes, static_cast<size_t>(max_request_records)}; }
};

// What differs between the sinks on the engine: their defaults, what they send, what their
// destination refuses as transient, and its limits.
struct RequestOptionDefaults {
  ByteSize max_request_bytes;
  int64_t max_request_records = 0;
  int64_t max_in_flight = 4;
  std::chrono::milliseconds retry_timeout = std::chrono::seconds(30);
  std::string_view records_key = "max_request_records";  // the key of the record limit (InfluxDB: max_request_lines)
  std::string_view items = "records";                    // what a request carries: "documents", "lines (points)"
  std::string_view item = "record";                      // one of them
  std::string_view request = "request";                  // a request's name: "_bulk request", "write request"
  std::string_view transient = "408, 429, 5xx, transport errors";  // the refusals resent here
  std::string_view bytes_note = {};                                // a sentence after max_request_bytes' help
  std::string_view records_note = {};                              // a parenthesis after max_request_records' help
  std::string_view in_flight_help = {};                            // replaces max_in_flight's help
  uint64_t max_request_bytes_limit = 0;                            // the destination's own limit (0: none)
  std::string_view limit_text = {};                                // it in words: "10 MiB (Quickwit's ingest limit)"
};
OptionGroup<RequestSettings> request_options(const RequestOptionDefaults& defaults);

const OptionGroup<HttpSettings>& http_options();
const OptionGroup<TlsSettings>& tls_options();
const OptionGroup<AuthSettings>& auth_options();
// Defaults differ per destination (a ClickHouse insert wants more than an HTTP POST). `idle`: the
// quiet spell that commits a unit (the accumulator's AccumulatorLimits::idle), named in the help.
OptionGroup<BatchingSettings> batching_options(std::chrono::milliseconds commit_interval, ByteSize max_bytes,
                                               int64_t max_records,
                                               std::chrono::milliseconds idle = AccumulatorLimits{}.idle);

// Problems of the auth options as a whole: the fields the chosen type needs, and fields set for
// another type (a likely mistake).
void validate_auth(const sdk::Config& config, sdk::ConfigProblems& problems);

// What a sink says in the `document` option's help beside the shared text.
struct DocumentHelp {
  std::string_view first = {};  // put first in flat / envelope documents, e.g. "the primary key, "
  std::string_view payload_adds =
      {};                      // after "payload = the payload object alone", e.g. " (plus id_field unless empty)"
  std::string_view more = {};  // a sentence of the sink's own
  bool payload = true;         // offer `payload` (a sink that must add fields may not)
};
std::string document_help(const DocumentHelp& help);

// The `document` option of the sinks that store a record as one JSON document (Elasticsearch,
// Quickwit, Meilisearch, Doris, SurrealDB): the record JSON writer's layouts by one name
// everywhere, flat by default.
template <class Settings>
OptionBuilder<Settings, JsonLayout> document_option(JsonLayout Settings::*member, const DocumentHelp& help = {}) {
  auto o = option("document", member).fallback(JsonLayout::Flat).help(document_help(help));
  if (help.payload)
    o.choices({{"flat", JsonLayout::Flat}, {"envelope", JsonLayout::Envelope}, {"payload", JsonLayout::PayloadOnly}});
  else o.choices({{"flat", JsonLayout::Flat}, {"envelope", JsonLayout::Envelope}});
  return o;
}

// Why a record cannot be a `document = "payload"` document (its payload is not a JSON object), or
// nullopt when it can.
std::optional<std::string> payload_document_refusal(const pmq_batch& batch, const pmq_record& record);

HttpClientOptions client_options(const HttpSettings& http, const TlsSettings& tls, const AuthSettings& auth);
AccumulatorLimits accumulator_limits(const BatchingSettings& batching, size_t max_batches, size_t max_open);

}  // namespace picomq::kit
