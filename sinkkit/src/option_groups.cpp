#include "picomq/kit/option_groups.hpp"

#include "picomq/kit/encoding.hpp"

namespace picomq::kit {

using namespace std::chrono_literals;

const OptionGroup<HttpSettings>& http_options() {
  static const OptionGroup<HttpSettings> group{
      "",
      option("timeout", &HttpSettings::timeout)
          .fallback(30s)
          .check(positive_duration())
          .help("Longest a request may take, connection included; a request that takes longer is a transport error "
                "(retried)."),
      option("connect_timeout", &HttpSettings::connect_timeout)
          .fallback(10s)
          .check(positive_duration())
          .help("Longest the TCP and TLS connection may take."),
      option("compression", &HttpSettings::compression)
          .choices({{"none", Compression::None}, {"gzip", Compression::Gzip}, {"zstd", Compression::Zstd}})
          .fallback(Compression::None)
          .help("Request bodies compressed, with Content-Encoding set (the endpoint must accept it)."),
      option("compression_level", &HttpSettings::compression_level)
          .fallback(0)
          .help("The codec's level (gzip 1-12, zstd 1-19); 0: the codec's default (gzip 6, zstd 3)."),
      option("http_version", &HttpSettings::version)
          .choices({{"auto", HttpVersion::Http2OverTls}, {"http1.1", HttpVersion::Http1_1}})
          .fallback(HttpVersion::Http2OverTls)
          .help("auto: HTTP/2 when a TLS server offers it, else HTTP/1.1; http1.1: always HTTP/1.1."),
      option("io_threads", &HttpSettings::io_threads)
          .fallback(1)
          .check(at_least(1))
          .help("I/O threads of the HTTP client, each with its own connections; requests go to them in turn and the "
                "requests in flight are shared among them. More than 1 helps when one thread's request handling, "
                "not the endpoint, is the limit (many small requests)."),
  };
  return group;
}

const OptionGroup<TlsSettings>& tls_options() {
  static const OptionGroup<TlsSettings> group{
      "tls_",
      option("ca_file", &TlsSettings::ca_file).help("PEM file of the CAs to trust (default: the system's)."),
      option("ca_dir", &TlsSettings::ca_dir).help("Directory of hashed CA certificates (default: the system's)."),
      option("client_cert", &TlsSettings::client_cert)
          .help("PEM client certificate, for mutual TLS (with tls_client_key)."),
      option("client_key", &TlsSettings::client_key).help("PEM private key of tls_client_cert."),
      option("client_key_password", &TlsSettings::client_key_password).secret().help("Password of tls_client_key."),
      option("verify", &TlsSettings::verify)
          .fallback(true)
          .help("Check the server's certificate and host name. Off only for tests (logged as a warning)."),
  };
  return group;
}

const OptionGroup<AuthSettings>& auth_options() {
  static const OptionGroup<AuthSettings> group{
      "",
      option("auth", &AuthSettings::type)
          .choices({{"none", AuthType::None},
                    {"basic", AuthType::Basic},
                    {"bearer", AuthType::Bearer},
                    {"api_key", AuthType::ApiKey},
                    {"aws_sigv4", AuthType::AwsSigV4},
                    {"oauth2", AuthType::OAuth2ClientCredentials}})
          .fallback(AuthType::None)
          .help("How requests authenticate: basic (auth_user, auth_password), bearer (auth_token), api_key "
                "(auth_header, auth_api_key), aws_sigv4 (aws_*), oauth2 client credentials (oauth2_*)."),
      option("auth_user", &AuthSettings::user).help("basic: the user."),
      option("auth_password", &AuthSettings::password).secret().help("basic: the password."),
      option("auth_token", &AuthSettings::token).secret().help("bearer: the token (Authorization: Bearer ...)."),
      option("auth_header", &AuthSettings::header).help("api_key: the header that carries the key, e.g. X-API-Key."),
      option("auth_api_key", &AuthSettings::api_key).secret().help("api_key: the key."),
      option("aws_region", &AuthSettings::aws_region).help("aws_sigv4: the region, e.g. eu-west-1."),
      option("aws_service", &AuthSettings::aws_service).help("aws_sigv4: the service, e.g. s3, es, aoss."),
      option("aws_access_key_id", &AuthSettings::aws_access_key_id).help("aws_sigv4: the access key id."),
      option("aws_secret_access_key", &AuthSettings::aws_secret_access_key).secret().help("aws_sigv4: the secret key."),
      option("aws_session_token", &AuthSettings::aws_session_token)
          .secret()
          .help("aws_sigv4: a session token (temporary credentials)."),
      option("oauth2_token_url", &AuthSettings::oauth2_token_url)
          .help("oauth2: the token endpoint (RFC 6749 section 4.4)."),
      option("oauth2_client_id", &AuthSettings::oauth2_client_id).help("oauth2: the client id."),
      option("oauth2_client_secret", &AuthSettings::oauth2_client_secret).secret().help("oauth2: the client secret."),
      option("oauth2_scope", &AuthSettings::oauth2_scope)
          .help("oauth2: the scope asked for (space-separated); unset: none."),
      option("oauth2_client_auth", &AuthSettings::oauth2_client_auth)
          .choices({{"basic", OAuth2ClientAuth::Basic}, {"body", OAuth2ClientAuth::Body}})
          .fallback(OAuth2ClientAuth::Basic)
          .help(
              "oauth2: client credentials in an Authorization: Basic header (RFC 6749 section 2.3.1) or in the body."),
  };
  return group;
}

OptionGroup<BatchingSettings> batching_options(std::chrono::milliseconds commit_interval, ByteSize max_bytes,
                                               int64_t max_records, std::chrono::milliseconds idle) {
  return OptionGroup<BatchingSettings>{
      "",
      option("commit_interval", &BatchingSettings::commit_interval)
          .fallback(commit_interval)
          .help("Consecutive batches for one destination are written as one unit for up to this long (or until a "
                "size limit, " +
                std::to_string(idle.count()) +
                " ms without a batch, or a flush); each batch is acknowledged when that unit is. 0: each batch on "
                "its own."),
      option("max_batch_bytes", &BatchingSettings::max_bytes).fallback(max_bytes).help("Largest unit, in bytes."),
      option("max_batch_records", &BatchingSettings::max_records)
          .fallback(max_records)
          .check(at_least(1))
          .help("Most records in one unit."),
  };
}

OptionGroup<RequestSettings> request_options(const RequestOptionDefaults& d) {
  const std::string items(d.items), item(d.item), request(d.request);
  const uint64_t limit = d.max_request_bytes_limit;
  const std::string limit_text(d.limit_text);
  return OptionGroup<RequestSettings>{
      "",
      option("max_request_bytes", &RequestSettings::max_request_bytes)
          .fallback(d.max_request_bytes)
          .check([limit, limit_text](const ByteSize& b) -> std::optional<std::string> {
            if (limit != 0 && (b.bytes == 0 || b.bytes > limit)) return "must be between 1 B and " + limit_text;
            return std::nullopt;
          })
          .help("Largest " + request +
                " body before compression; a batch is cut into as many requests as it takes (a " + item +
                " larger than this goes alone)." + (d.bytes_note.empty() ? "" : " " + std::string(d.bytes_note))),
      option(std::string(d.records_key), &RequestSettings::max_request_records)
          .fallback(d.max_request_records)
          .check(at_least(1))
          .help("Most " + items + " in one " + request +
                (d.records_note.empty() ? "" : " (" + std::string(d.records_note) + ")") + "."),
      option("max_in_flight", &RequestSettings::max_in_flight)
          .fallback(d.max_in_flight)
          .check(at_least(1))
          .help(d.in_flight_help.empty()
                    ? "Requests on the wire at once (and batches of a block pending); offsets still "
                      "commit in order."
                    : std::string(d.in_flight_help)),
      option("retry_timeout", &RequestSettings::retry_timeout)
          .fallback(d.retry_timeout)
          .help("How long a " + request + " refused as transient (" + std::string(d.transient) +
                ") is resent here, back-off 200 ms to 5 s with jitter (at least the server's Retry-After), before the "
                "write fails and the runtime's retry takes over. 0: not resent here."),
  };
}

void validate_auth(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const std::string type = config.string("auth");
  struct Need {
    const char* type;
    std::vector<const char*> keys;
  };
  static const std::vector<Need> needs{
      {"basic", {"auth_user", "auth_password"}},
      {"bearer", {"auth_token"}},
      {"api_key", {"auth_header", "auth_api_key"}},
      {"aws_sigv4", {"aws_region", "aws_service", "aws_access_key_id", "aws_secret_access_key"}},
      {"oauth2", {"oauth2_token_url", "oauth2_client_id", "oauth2_client_secret"}},
  };
  for (const Need& n : needs) {
    for (const char* key : n.keys) {
      const bool set = config.has(key);
      if (type == n.type && !set) problems.add(key, std::string("is required with auth = \"") + n.type + "\"");
    }
  }
  // Keys of another type than the chosen one (each key belongs to one type).
  for (const Need& n : needs) {
    if (type == n.type) continue;
    for (const char* key : n.keys)
      if (config.has(key))
        problems.add(key, std::string("is for auth = \"") + n.type + "\", but auth is \"" + type + "\"");
  }
}

HttpClientOptions client_options(const HttpSettings& http, const TlsSettings& tls, const AuthSettings& auth) {
  HttpClientOptions o;
  o.request_timeout = http.timeout;
  o.connect_timeout = http.connect_timeout;
  o.compression = http.compression;
  o.compression_level = static_cast<int>(http.compression_level);
  o.http_version = http.version;
  o.io_threads = static_cast<size_t>(http.io_threads);
  o.tls.ca_file = tls.ca_file.value_or("");
  o.tls.ca_dir = tls.ca_dir.value_or("");
  o.tls.client_cert_file = tls.client_cert.value_or("");
  o.tls.client_key_file = tls.client_key.value_or("");
  o.tls.client_key_password = tls.client_key_password.value_or("");
  o.tls.verify_peer = o.tls.verify_host = tls.verify;
  switch (auth.type) {
    case AuthType::None:
    case AuthType::OAuth2ClientCredentials: break;  // the token goes per request (picomq/kit/oauth2.hpp)
    case AuthType::Basic: o.auth = BasicAuth{auth.user.value_or(""), auth.password.value_or("")}; break;
    case AuthType::Bearer: o.auth = BearerAuth{auth.token.value_or("")}; break;
    case AuthType::ApiKey: o.auth = ApiKeyAuth{auth.header.value_or(""), auth.api_key.value_or("")}; break;
    case AuthType::AwsSigV4: {
      AwsSigV4Auth a;
      a.region = auth.aws_region.value_or("");
      a.service = auth.aws_service.value_or("");
      a.access_key_id = auth.aws_access_key_id.value_or("");
      a.secret_access_key = auth.aws_secret_access_key.value_or("");
      a.session_token = auth.aws_session_token.value_or("");
      o.auth = a;
      break;
    }
  }
  if (auth.oauth2_client_secret) o.secrets.push_back(*auth.oauth2_client_secret);
  return o;
}

AccumulatorLimits accumulator_limits(const BatchingSettings& batching, size_t max_batches, size_t max_open) {
  AccumulatorLimits l;
  l.commit_interval = batching.commit_interval;
  l.max_bytes = batching.max_bytes.bytes;
  l.max_records = static_cast<uint64_t>(batching.max_records);
  l.max_batches = max_batches;
  l.max_open = max_open;
  return l;
}

std::string document_help(const DocumentHelp& help) {
  std::string out = "Document layout: flat = " + std::string(help.first) +
                    "pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key (base64), pico_headers, then "
                    "the payload object's fields (a payload that is not an object goes under `payload`); envelope = "
                    "the same pico_* fields and the payload under `payload`";
  if (help.payload) out += "; payload = the payload object alone" + std::string(help.payload_adds);
  out += ".";
  if (!help.more.empty()) out += " " + std::string(help.more);
  return out;
}

std::optional<std::string> payload_document_refusal(const pmq_batch& batch, const pmq_record& record) {
  const std::string_view payload(reinterpret_cast<const char*>(record.payload.data), record.payload.size);
  if (batch.payload_format == PMQ_PAYLOAD_JSON && record.payload.data && json_object_body(payload)) return std::nullopt;
  return "document = \"payload\": the payload is not a JSON object";
}

}  // namespace picomq::kit
