#pragma once
// The kit's HTTP client, on libcurl: what every HTTP sink (HTTP, Elasticsearch, ClickHouse,
// InfluxDB, S3, Meilisearch, Quickwit, SurrealDB, Doris) sends its writes with.
//
//   kit::HttpClient client({.auth = kit::BearerAuth{token}, .compression = kit::Compression::Zstd});
//   kit::HttpRequest request{.method = "POST", .url = base + "/_bulk", .body = std::move(ndjson)};
//   request.headers.set("Content-Type", "application/x-ndjson");
//   client.send_async(std::move(request), [pending](kit::HttpResponse response) mutable {
//     kit::complete(pending, rules.classify(response), records);   // picomq/kit/outcome.hpp
//   });
//
// - One curl multi handle per I/O thread (`io_threads`, default 1). Callbacks run on the I/O
//   thread of their request, exactly once per request, also when close() cuts a request
//   (TransportError::Cancelled). At most `max_in_flight` requests are on the wire; later ones
//   wait in a FIFO queue per thread, so send_async never blocks (and a callback may resend).
// - Connections are kept and reused across requests (HTTP/1.1 keep-alive; HTTP/2 multiplexing
//   when a TLS server offers it through ALPN). Like every keep-alive client, curl resends a
//   request once on a fresh connection when a reused one turns out closed before any byte of a
//   response came: the destination may see it twice, which the runtime's own retries already
//   demand sinks to tolerate (idempotent writes).
// - Bodies are compressed on the calling thread (Content-Encoding set), not on the I/O thread.
// - Redirects are not followed (a moved write endpoint is a URL to fix); proxies come from
//   libcurl's environment variables (https_proxy, no_proxy...).
// - Credentials never appear in a message: URLs are shown through redact_url(), and every text
//   the client produces (transport errors, body excerpts) goes through a Redactor that knows the
//   client's secrets (passwords, tokens, API-key values, AWS keys, secrets in the URL).
// - Safe in a plugin that is dlopen()ed and dlclose()d: curl_global_init runs once per process
//   and curl_global_cleanup never (another plugin may still use curl; libcurl stays loaded with
//   the runtime); close() and the destructor join the I/O thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "picomq/kit/compression.hpp"

namespace picomq::kit {

// ---------------------------------------------------------------- redaction

// `url` with its userinfo replaced by "***" and the values of query parameters whose names
// look secret (token, key, secret, password, signature, credential, auth, session, sig, ...:
// X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, api_key, access_token...) replaced
// by "***". Works on any text, URL or not; what it cannot parse it returns as it is.
//   https://user:pw@host/p?token=abc&page=2   ->   https://***@host/p?token=***&page=2
std::string redact_url(std::string_view url);

// The check of a sink's base URL option (`url = "http://host:port[/prefix]"`): http(s), no query
// or fragment (the sink builds those), no userinfo (credentials belong in the auth options, where
// they are secret). The hints complete the messages: `what` the address expected ("the cluster's
// HTTP endpoint, e.g. http://127.0.0.1:9200"), `credentials` where they go instead, `query` why
// there is no query (optional).
struct BaseUrlHints {
  std::string_view what;
  std::string_view credentials;
  std::string_view query = {};
};
std::optional<std::string> check_base_url(const std::string& url, const BaseUrlHints& hints);

// How much of a destination's error text a reason (a sink's error, a rejection) carries.
inline constexpr size_t kMaxReasonBytes = 1000;

// `text` cut to at most `max_bytes` (at a UTF-8 character boundary) with "..." appended when cut.
std::string bounded(std::string_view text, size_t max_bytes = kMaxReasonBytes);

// Replaces every occurrence of known secrets in a text by "***".
class Redactor {
 public:
  Redactor() = default;
  // A child knows its parent's secrets too (a request's URL secrets on top of the client's).
  explicit Redactor(std::shared_ptr<const Redactor> parent) : parent_(std::move(parent)) {}
  // Empty secrets are ignored. Also adds the secret's percent-encoded form (how it appears in URLs).
  void add(std::string_view secret);
  bool empty() const { return secrets_.empty() && (!parent_ || parent_->empty()); }
  std::string redact(std::string_view text) const;
  // A reason for the user: redacted first, then bounded (a secret is never cut into a prefix
  // that escapes redaction).
  std::string bounded(std::string_view text, size_t max_bytes = kMaxReasonBytes) const {
    return kit::bounded(redact(text), max_bytes);
  }
  // The length of the longest secret (its raw or encoded form).
  size_t longest() const;

 private:
  void redact_in_place(std::string& text) const;
  std::vector<std::string> secrets_;  // longest first, so no secret is cut around a shorter one
  std::shared_ptr<const Redactor> parent_;
};

// ---------------------------------------------------------------- messages

// Header fields in order; names compare case-insensitively (RFC 9110 section 5.1).
class HttpHeaders {
 public:
  using Field = std::pair<std::string, std::string>;
  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<Field> fields) : fields_(fields) {}

  // Another field, even when the name is already there.
  void add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }
  // Replaces every field of that name.
  void set(std::string name, std::string value);
  void remove(std::string_view name);
  // The first field of that name.
  std::optional<std::string_view> get(std::string_view name) const;
  std::vector<std::string_view> get_all(std::string_view name) const;
  bool contains(std::string_view name) const { return get(name).has_value(); }

  bool empty() const { return fields_.empty(); }
  size_t size() const { return fields_.size(); }
  std::vector<Field>::const_iterator begin() const { return fields_.begin(); }
  std::vector<Field>::const_iterator end() const { return fields_.end(); }

 private:
  std::vector<Field> fields_;
};

// A request body made while the request is on the wire: the caller appends bytes as it makes
// them and finishes it; the client sends them as the connection takes them (HTTP/1.1 chunked, or
// HTTP/2 DATA frames), so a large body goes up beside its making instead of after it. What was
// appended and not yet sent is held here. Sent as it is: not compressed by the client, and
// refused with SigV4 (whose signature needs the whole body first).
class BodyStream {
 public:
  // Any thread. Ignored after finish() or fail().
  void append(std::string bytes);
  // The body ends after what was appended.
  void finish();
  // The request is cut (the server sees an incomplete body, never a complete one); its response
  // is a transport failure. Ignored after finish().
  void fail(std::string why);
  uint64_t appended() const;
  bool finished() const;

  // The client's side (its I/O thread). read(): up to `max` bytes into `out`; 0 with `more` true
  // when nothing is there yet (the client pauses the transfer until `wake` runs), 0 with `more`
  // false at the end; nullopt when failed (why()).
  std::optional<size_t> read(char* out, size_t max, bool& more);
  void on_data(std::function<void()> wake);
  std::string why() const;

 private:
  mutable std::mutex mutex_;
  std::deque<std::string> chunks_;
  size_t front_read_ = 0;  // of chunks_.front()
  uint64_t appended_ = 0;
  bool finished_ = false, failed_ = false, waiting_ = false;
  std::string why_;
  std::function<void()> wake_;
};

// A request body: bytes the request owns, a view of bytes the caller keeps alive and unchanged
// until the request's callback has run (send() returned), or a stream (BodyStream above).
class HttpBody {
 public:
  HttpBody() = default;
  HttpBody(std::string owned) : owned_(std::move(owned)) {}  // NOLINT: a string is a body
  HttpBody(const char* owned) : owned_(owned) {}             // NOLINT
  static HttpBody borrowed(std::string_view bytes) {
    HttpBody body;
    body.view_ = bytes;
    body.borrowed_ = true;
    return body;
  }
  static HttpBody streamed(std::shared_ptr<BodyStream> stream) {
    HttpBody body;
    body.stream_ = std::move(stream);
    return body;
  }
  // A streamed body's bytes are its stream's: bytes() is empty, size() what was appended so far.
  std::string_view bytes() const { return borrowed_ ? view_ : std::string_view(owned_); }
  size_t size() const { return stream_ ? static_cast<size_t>(stream_->appended()) : bytes().size(); }
  bool empty() const { return !stream_ && bytes().empty(); }
  bool is_borrowed() const { return borrowed_; }
  const std::shared_ptr<BodyStream>& stream() const { return stream_; }

 private:
  std::string owned_;
  std::string_view view_;
  bool borrowed_ = false;
  std::shared_ptr<BodyStream> stream_;
};

struct HttpRequest {
  std::string method = "POST";  // any token: GET, HEAD, POST, PUT, PATCH, DELETE...
  std::string url{};            // http:// or https://; userinfo in it is used as basic auth
  HttpHeaders headers{};        // no Content-Type given and a body: application/octet-stream
  HttpBody body{};
  std::optional<std::chrono::milliseconds> timeout{};  // total; the client's request_timeout when unset
};

// Why no (complete) response came. Classified into outcomes by picomq/kit/outcome.hpp.
enum class TransportError {
  None,
  Cancelled,       // close() cut it, or it was sent after close()
  InvalidRequest,  // malformed URL, unsupported scheme, bad header, auth setup failed: a configuration problem
  NameResolution,  // the host name does not resolve (now)
  Connect,         // refused, unreachable
  Timeout,         // connect timeout, total timeout or the low-speed limit
  TlsCertificate,  // peer certificate not trusted / wrong host, CA or client certificate files unusable
  Tls,             // the TLS handshake failed otherwise
  Send,            // the connection broke while sending
  Receive,         // the connection broke (or closed) before a complete response
  Protocol,        // the server's answer is not valid HTTP (or HTTP/2 framing failed)
  Other,           // anything else libcurl reports
};
std::string_view to_string(TransportError error);

// How much of the request had reached the connection when the transport failed: what tells
// "nothing happened" (retry) from "the destination may have acted on it" (maybe written).
enum class SendProgress {
  Nothing,   // not a byte of the request left (no connection, connect timeout, DNS...)
  Partial,   // the request line/headers or part of the body were sent
  Complete,  // the whole request was sent; no complete response followed
};
std::string_view to_string(SendProgress progress);

struct TransportFailure {
  TransportError error = TransportError::None;
  SendProgress sent = SendProgress::Nothing;
  std::string message{};  // libcurl's explanation, redacted
  int curl_code = 0;      // CURLcode; 0 for Cancelled and the client's own checks
};

enum class HttpProtocol { Unknown, Http1_0, Http1_1, Http2, Http3 };
std::string_view to_string(HttpProtocol protocol);

struct HttpTimings {
  std::chrono::microseconds queued{0};      // waiting for a free in-flight slot
  std::chrono::microseconds connected{0};   // from start: TCP connected (0: connection reused)
  std::chrono::microseconds tls_done{0};    // from start: TLS handshake done (0: none or reused)
  std::chrono::microseconds first_byte{0};  // from start: first byte of the response
  std::chrono::microseconds total{0};       // from start: done
};

struct HttpResponse {
  std::string method;
  std::string url;          // redacted (redact_url)
  long status = 0;          // 0: no response; see failure
  std::string status_line;  // as received, e.g. "HTTP/1.1 503 Service Unavailable" ("HTTP/2 503")
  HttpHeaders headers;      // of the final response (after any 100 Continue)
  std::string body;         // the first max_response_body bytes (decoded if Content-Encoding was set)
  uint64_t body_bytes = 0;  // all that came, kept or not
  bool body_truncated = false;
  HttpProtocol protocol = HttpProtocol::Unknown;
  bool connection_reused = false;
  HttpTimings timings;
  std::optional<TransportFailure> failure;  // set when the exchange did not complete
  std::shared_ptr<const Redactor> redactor;

  // A complete response arrived (any status).
  bool completed() const { return !failure.has_value(); }
  // The start of the body as one printable line: redacted, control characters as spaces,
  // at most `max_bytes` (then "..." and the total size).
  std::string body_excerpt(size_t max_bytes = 512) const;
};

// ---------------------------------------------------------------- options

struct BasicAuth {
  std::string user{};
  std::string password{};
};
struct BearerAuth {
  std::string token{};  // sent as "Authorization: Bearer <token>" (RFC 6750)
};
struct ApiKeyAuth {
  std::string header{};  // e.g. "X-API-Key", "Authorization" (a value such as "ApiKey <base64>")
  std::string value{};
};
// AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4). The client also sends
// x-amz-content-sha256 (S3 requires it; curl 7.88 does not add it) and, with a session token,
// x-amz-security-token; both are signed.
struct AwsSigV4Auth {
  std::string region{};   // e.g. "eu-west-1"
  std::string service{};  // e.g. "s3", "es", "aoss"
  std::string access_key_id{};
  std::string secret_access_key{};
  std::string session_token{};       // temporary credentials (STS); empty: none
  std::string provider = "aws:amz";  // curl's provider1:provider2 (other S3-compatible signers)
};
using HttpAuth = std::variant<std::monostate, BasicAuth, BearerAuth, ApiKeyAuth, AwsSigV4Auth>;

struct TlsOptions {
  std::string ca_file{};           // PEM bundle; empty: the system's
  std::string ca_dir{};            // hashed directory (c_rehash); empty: the system's
  std::string client_cert_file{};  // PEM; with client_key_file for mutual TLS
  std::string client_key_file{};
  std::string client_key_password{};
  // Off only for tests or a known, isolated network: the sink logs a warning when it turns
  // either off.
  bool verify_peer = true;
  bool verify_host = true;
};

enum class HttpVersion {
  Http1_1,       // always HTTP/1.1
  Http2OverTls,  // HTTP/2 when a TLS server offers it (ALPN), else HTTP/1.1 (CURL_HTTP_VERSION_2TLS)
};

struct HttpClientOptions {
  HttpAuth auth{};
  TlsOptions tls{};
  Compression compression = Compression::None;  // of request bodies
  int compression_level = 0;                    // 0: the codec's default
  size_t compress_min_bytes = 0;                // bodies smaller than this go uncompressed
  // 0: no limit of the client's own (for connecting, libcurl's 300 s still applies).
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{60'000};  // total, per request (HttpRequest::timeout overrides)
  // Abort a transfer slower than low_speed_bytes_per_second for low_speed_time (0: off).
  uint32_t low_speed_bytes_per_second = 0;
  std::chrono::seconds low_speed_time{30};
  size_t max_in_flight = 8;  // requests on the wire at once
  // I/O threads, each with its own curl multi handle and connections; requests go to them in
  // turn and max_in_flight is shared among them (at most max_in_flight threads). More than one
  // helps when one thread's request handling (syscalls, loopback) is the limit, not the endpoint.
  size_t io_threads = 1;
  size_t max_response_body = 4u << 20;  // kept of each response body; the rest is read and dropped
  HttpVersion http_version = HttpVersion::Http2OverTls;
  std::string user_agent = "picomq-connect";
  // Other secrets the client's messages must never show (secret header values, an OAuth2 client
  // secret): redacted like the auth's own.
  std::vector<std::string> secrets{};
  // Where the client reports what it cannot hand to a caller (a callback that threw). Default: stderr.
  std::function<void(const std::string&)> log_error{};
};

// ---------------------------------------------------------------- the client

class HttpClient {
 public:
  using Callback = std::function<void(HttpResponse)>;

  // Throws std::invalid_argument for options that cannot work (an auth without its fields, a
  // compression level the codec does not have, max_in_flight 0, a client key without cert).
  explicit HttpClient(HttpClientOptions options);
  ~HttpClient();  // close() with no drain
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends and waits for the response (or the transport failure). Not from a callback.
  HttpResponse send(HttpRequest request);
  // Sends them all at once (as many on the wire as max_in_flight allows) and waits for every
  // response: the responses in the requests' order. Not from a callback.
  std::vector<HttpResponse> send_all(std::vector<HttpRequest> requests);
  // Queues the request; `callback` runs once on the I/O thread with its response. After
  // close() began, the callback runs at once on the calling thread (Cancelled, nothing sent).
  void send_async(HttpRequest request, Callback callback);

  // Requests queued or on the wire.
  size_t pending() const;
  // Waits until nothing is pending (true) or `timeout` passed (false). Not from a callback.
  bool wait_idle(std::chrono::milliseconds timeout) const;

  // Stops taking requests, lets what is queued or on the wire finish for up to `drain`, then
  // cuts the rest (callbacks get TransportError::Cancelled, with how much had been sent) and
  // joins the I/O thread. Idempotent. Not from a callback.
  void close(std::chrono::milliseconds drain = std::chrono::milliseconds::zero());

  const HttpClientOptions& options() const;
  // The client's redactor, for a sink's own messages about its requests.
  const Redactor& redactor() const;

 private:
  struct Impl;  // one I/O thread: its multi handle, queue and connections
  bool on_io_thread() const;
  HttpClientOptions options_;
  std::vector<std::unique_ptr<Impl>> threads_;
  std::atomic<size_t> next_thread_{0};
};

}  // namespace picomq::kit
