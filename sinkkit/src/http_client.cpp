#include "picomq/kit/http_client.hpp"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "picomq/kit/encoding.hpp"

namespace picomq::kit {

void BodyStream::append(std::string bytes) {
  if (bytes.empty()) return;
  std::lock_guard lock(mutex_);
  if (finished_ || failed_) return;
  appended_ += bytes.size();
  chunks_.push_back(std::move(bytes));
  if (std::exchange(waiting_, false) && wake_) wake_();
}

void BodyStream::finish() {
  std::lock_guard lock(mutex_);
  if (finished_ || failed_) return;
  finished_ = true;
  if (std::exchange(waiting_, false) && wake_) wake_();
}

void BodyStream::fail(std::string why) {
  std::lock_guard lock(mutex_);
  if (failed_ || finished_) return;
  failed_ = true;
  why_ = std::move(why);
  chunks_.clear();  // nobody will send them
  if (std::exchange(waiting_, false) && wake_) wake_();
}

uint64_t BodyStream::appended() const {
  std::lock_guard lock(mutex_);
  return appended_;
}

bool BodyStream::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

std::string BodyStream::why() const {
  std::lock_guard lock(mutex_);
  return why_;
}

std::optional<size_t> BodyStream::read(char* out, size_t max, bool& more) {
  std::lock_guard lock(mutex_);
  if (failed_) return std::nullopt;
  size_t n = 0;
  while (n < max && !chunks_.empty()) {
    const std::string& front = chunks_.front();
    const size_t take = std::min(max - n, front.size() - front_read_);
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes of a body, not a C string
    std::memcpy(out + n, front.data() + front_read_, take);
    n += take;
    front_read_ += take;
    if (front_read_ == front.size()) {
      chunks_.pop_front();
      front_read_ = 0;
    }
  }
  more = n > 0 || !finished_;
  waiting_ = n == 0 && more;
  return n;
}

// The wake-up runs under the stream's lock, so once on_data(nullptr) returned it never runs again.
void BodyStream::on_data(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
}

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Once per process and never undone: curl_global_cleanup would pull libcurl's global state from
// under any other plugin (or the runtime) that still uses it, and a dlclose()d plugin must leave
// no destructor behind that would. libcurl 7.84+ makes the call itself thread-safe.
void curl_global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
  });
}

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// RFC 9110 section 5.6.2: token = 1*tchar.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos))
      return false;
  return true;
}

// A field value must not smuggle a line break (header injection) or a NUL.
bool is_safe_field_value(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Query parameter names that carry credentials: AWS presigned URLs (X-Amz-Signature,
// X-Amz-Credential, X-Amz-Security-Token), Azure SAS (sig), and the usual token / api_key /
// password / access_token / auth / session spellings.
bool looks_secret(std::string_view raw_name) {
  std::string name = percent_decode(raw_name);
  std::transform(name.begin(), name.end(), name.begin(), ascii_lower);
  if (name == "sig") return true;
  for (std::string_view part : {"token", "key", "secret", "passw", "pwd", "signature", "credential", "auth", "session"})
    if (name.find(part) != std::string::npos) return true;
  return false;
}

// The byte ranges of `url` that redact_url hides: the userinfo, and the values of secret-looking
// query (and fragment) parameters.
std::vector<std::pair<size_t, size_t>> secret_spans(std::string_view url) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t rest = 0;
  const size_t scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos) {
    const size_t authority = scheme_end + 3;
    const size_t authority_end = std::min(url.find_first_of("/?#", authority), url.size());
    const size_t at = url.substr(0, authority_end).rfind('@');
    if (at != std::string_view::npos && at >= authority) spans.emplace_back(authority, at - authority);
    rest = authority_end;
  }
  const size_t query = url.find_first_of("?#", rest);
  if (query == std::string_view::npos) return spans;
  size_t pos = query + 1;
  while (pos <= url.size()) {
    const size_t end = std::min(url.find_first_of("&;#", pos), url.size());
    const std::string_view param = url.substr(pos, end - pos);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && eq + 1 < param.size() && looks_secret(param.substr(0, eq)))
      spans.emplace_back(pos + eq + 1, param.size() - eq - 1);
    pos = end + 1;
  }
  return spans;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

TransportError transport_error_of(CURLcode code) {
  switch (code) {
    case CURLE_OK: return TransportError::None;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_LOGIN_DENIED:
    case CURLE_AUTH_ERROR:
    case CURLE_FUNCTION_NOT_FOUND: return TransportError::InvalidRequest;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return TransportError::NameResolution;
    case CURLE_COULDNT_CONNECT: return TransportError::Connect;
    case CURLE_OPERATION_TIMEDOUT: return TransportError::Timeout;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED: return TransportError::TlsCertificate;
    case CURLE_SSL_CONNECT_ERROR: return TransportError::Tls;
    case CURLE_SEND_ERROR:
    case CURLE_SEND_FAIL_REWIND: return TransportError::Send;
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE: return TransportError::Receive;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_BAD_CONTENT_ENCODING: return TransportError::Protocol;
    default: return TransportError::Other;
  }
}

HttpProtocol protocol_of(long curl_version) {
  switch (curl_version) {
    case CURL_HTTP_VERSION_1_0: return HttpProtocol::Http1_0;
    case CURL_HTTP_VERSION_1_1: return HttpProtocol::Http1_1;
    case CURL_HTTP_VERSION_2_0: return HttpProtocol::Http2;
    case CURL_HTTP_VERSION_3: return HttpProtocol::Http3;
    default: return HttpProtocol::Unknown;
  }
}

void check_readable(const std::string& path, std::string_view what, bool directory) {
  if (path.empty()) return;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw std::invalid_argument(std::string(what) + " '" + path + "' does not exist");
  if (directory != std::filesystem::is_directory(status))
    throw std::invalid_argument(std::string(what) + " '" + path + "' is not a " + (directory ? "directory" : "file"));
}

void validate(const HttpClientOptions& o) {
  if (o.max_in_flight == 0) throw std::invalid_argument("max_in_flight must be at least 1");
  if (o.io_threads == 0) throw std::invalid_argument("io_threads must be at least 1");
  if (!is_safe_field_value(o.user_agent)) throw std::invalid_argument("user_agent must be one line");
  if (o.connect_timeout.count() < 0 || o.request_timeout.count() < 0 || o.low_speed_time.count() < 0)
    throw std::invalid_argument("timeouts must not be negative");
  std::visit(
      [](const auto& auth) {
        using A = std::decay_t<decltype(auth)>;
        if constexpr (std::is_same_v<A, BasicAuth>) {
          if (auth.user.empty()) throw std::invalid_argument("basic auth needs a user");
          if (auth.user.find(':') != std::string::npos)
            throw std::invalid_argument("a basic auth user cannot contain ':' (RFC 7617)");
        } else if constexpr (std::is_same_v<A, BearerAuth>) {
          if (auth.token.empty()) throw std::invalid_argument("bearer auth needs a token");
          if (!is_safe_field_value(auth.token)) throw std::invalid_argument("the bearer token must be one line");
        } else if constexpr (std::is_same_v<A, ApiKeyAuth>) {
          if (!is_token(auth.header)) throw std::invalid_argument("the API key header must be a header name");
          if (auth.value.empty() || !is_safe_field_value(auth.value))
            throw std::invalid_argument("the API key value must be one non-empty line");
        } else if constexpr (std::is_same_v<A, AwsSigV4Auth>) {
          if (auth.region.empty() || auth.service.empty())
            throw std::invalid_argument("AWS SigV4 needs a region and a service");
          if (auth.access_key_id.empty() || auth.secret_access_key.empty())
            throw std::invalid_argument("AWS SigV4 needs an access key id and a secret access key");
          if (auth.provider.empty() || !is_safe_field_value(auth.session_token))
            throw std::invalid_argument("AWS SigV4 needs a provider, and a one-line session token");
        }
      },
      o.auth);
  check_readable(o.tls.ca_file, "tls ca_file", false);
  check_readable(o.tls.ca_dir, "tls ca_dir", true);
  check_readable(o.tls.client_cert_file, "tls client_cert_file", false);
  check_readable(o.tls.client_key_file, "tls client_key_file", false);
  if (!o.tls.client_key_file.empty() && o.tls.client_cert_file.empty())
    throw std::invalid_argument("tls client_key_file needs a client_cert_file");
}

// The client's secrets, for its Redactor: every credential the options carry, in the forms a
// server (or libcurl) could echo them in.
std::shared_ptr<Redactor> redactor_for(const HttpClientOptions& o) {
  auto r = std::make_shared<Redactor>();
  std::visit(
      [&](const auto& auth) {
        using A = std::decay_t<decltype(auth)>;
        if constexpr (std::is_same_v<A, BasicAuth>) {
          r->add(auth.password);
          r->add(base64_encode(auth.user + ":" + auth.password));  // the Authorization value
        } else if constexpr (std::is_same_v<A, BearerAuth>) {
          r->add(auth.token);
        } else if constexpr (std::is_same_v<A, ApiKeyAuth>) {
          r->add(auth.value);
        } else if constexpr (std::is_same_v<A, AwsSigV4Auth>) {
          r->add(auth.secret_access_key);
          r->add(auth.session_token);
        }
      },
      o.auth);
  r->add(o.tls.client_key_password);
  for (const std::string& secret : o.secrets) r->add(secret);
  return r;
}

}  // namespace

// ---------------------------------------------------------------- redaction

std::string redact_url(std::string_view url) {
  std::string out;
  size_t copied = 0;
  for (const auto& [start, length] : secret_spans(url)) {
    out.append(url.substr(copied, start - copied)).append("***");
    copied = start + length;
  }
  out.append(url.substr(copied));
  return out;
}

void Redactor::add(std::string_view secret) {
  if (secret.empty()) return;
  for (std::string form : {std::string(secret), percent_encode(secret)})
    if (std::find(secrets_.begin(), secrets_.end(), form) == secrets_.end()) secrets_.push_back(std::move(form));
  std::stable_sort(secrets_.begin(), secrets_.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
}

void Redactor::redact_in_place(std::string& text) const {
  for (const std::string& secret : secrets_)
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3))
      text.replace(at, secret.size(), "***");
  if (parent_) parent_->redact_in_place(text);
}

std::string Redactor::redact(std::string_view text) const {
  std::string out(text);
  redact_in_place(out);
  return out;
}

std::optional<std::string> check_base_url(const std::string& url, const BaseUrlHints& hints) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return "must start with http:// or https:// (" + std::string(hints.what) + ")";
  if (url.find('?') != std::string::npos || url.find('#') != std::string::npos)
    return "must not hold a query or fragment" +
           (hints.query.empty() ? std::string() : " (" + std::string(hints.query) + ")");
  const size_t authority = url.find("://") + 3, at = url.find('@', authority);
  if (at != std::string::npos && at < url.find('/', authority))
    return "must not hold credentials (" + std::string(hints.credentials) + ")";
  return std::nullopt;
}

std::string bounded(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Not inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

size_t Redactor::longest() const {
  const size_t own = secrets_.empty() ? 0 : secrets_.front().size();
  return std::max(own, parent_ ? parent_->longest() : 0);
}

// ---------------------------------------------------------------- messages

void HttpHeaders::set(std::string name, std::string value) {
  remove(name);
  add(std::move(name), std::move(value));
}

void HttpHeaders::remove(std::string_view name) {
  std::erase_if(fields_, [&](const Field& f) { return iequals(f.first, name); });
}

std::optional<std::string_view> HttpHeaders::get(std::string_view name) const {
  for (const auto& [n, v] : fields_)
    if (iequals(n, name)) return std::string_view(v);
  return std::nullopt;
}

std::vector<std::string_view> HttpHeaders::get_all(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : fields_)
    if (iequals(n, name)) out.emplace_back(v);
  return out;
}

std::string_view to_string(TransportError error) {
  switch (error) {
    case TransportError::None: return "none";
    case TransportError::Cancelled: return "cancelled";
    case TransportError::InvalidRequest: return "invalid request";
    case TransportError::NameResolution: return "name resolution failed";
    case TransportError::Connect: return "connect failed";
    case TransportError::Timeout: return "timeout";
    case TransportError::TlsCertificate: return "TLS certificate problem";
    case TransportError::Tls: return "TLS handshake failed";
    case TransportError::Send: return "send failed";
    case TransportError::Receive: return "receive failed";
    case TransportError::Protocol: return "HTTP protocol error";
    case TransportError::Other: return "transport error";
  }
  return "?";
}

std::string_view to_string(SendProgress progress) {
  switch (progress) {
    case SendProgress::Nothing: return "before the request was sent";
    case SendProgress::Partial: return "after part of the request was sent";
    case SendProgress::Complete: return "after the request was sent, before a complete response";
  }
  return "?";
}

std::string_view to_string(HttpProtocol protocol) {
  switch (protocol) {
    case HttpProtocol::Unknown: return "unknown";
    case HttpProtocol::Http1_0: return "HTTP/1.0";
    case HttpProtocol::Http1_1: return "HTTP/1.1";
    case HttpProtocol::Http2: return "HTTP/2";
    case HttpProtocol::Http3: return "HTTP/3";
  }
  return "?";
}

std::string HttpResponse::body_excerpt(size_t max_bytes) const {
  // Redact a window a secret longer than the cut still fits in, then cut: no secret is left
  // half-visible at the end.
  size_t window = std::min(body.size(), max_bytes + (redactor ? redactor->longest() : 0) + 4);
  while (window > 0 && window < body.size() && (static_cast<unsigned char>(body[window]) & 0xC0) == 0x80) --window;
  std::string text = redactor ? redactor->redact(std::string_view(body).substr(0, window)) : body.substr(0, window);
  bool cut = body_truncated || window < body.size();
  if (text.size() > max_bytes) {
    size_t end = max_bytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a UTF-8 sequence
    text.resize(end);
    cut = true;
  }
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (cut) text += "... (" + std::to_string(body_bytes) + " bytes)";
  return text;
}

// ---------------------------------------------------------------- the client

namespace {

// One request from send_async to its callback.
struct Transfer {
  HttpRequest request;
  HttpClient::Callback callback;
  std::shared_ptr<const Redactor> redactor;
  std::optional<TransportFailure> refused;  // failed before reaching curl (bad header, compression)
  Clock::time_point queued_at;
  HttpResponse response;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  size_t max_body = 0;
  char error[CURL_ERROR_SIZE] = {0};

  ~Transfer() { curl_slist_free_all(header_list); }
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  HttpResponse& r = t->response;
  r.body_bytes += n;
  // Keep the start, read and drop the rest: aborting here would turn a written request into a
  // transport error.
  const size_t room = t->max_body > r.body.size() ? t->max_body - r.body.size() : 0;
  r.body.append(data, std::min(n, room));
  if (n > room) r.body_truncated = true;
  return n;
}

// A streamed body (BodyStream): what is there, a pause until more comes, or an abort.
size_t on_read(char* out, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  bool more = false;
  const std::optional<size_t> n = t->request.body.stream()->read(out, size * count, more);
  if (!n) return CURL_READFUNC_ABORT;
  if (*n == 0 && more) return CURL_READFUNC_PAUSE;
  return *n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  // The status line of each response (a 100 Continue comes first); curl parses the headers.
  if (line.starts_with("HTTP/")) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    t->response.status_line.assign(line);
  }
  return n;
}

}  // namespace

struct HttpClient::Impl {
  HttpClientOptions options;
  std::shared_ptr<Redactor> redactor;
  std::string sigv4;  // CURLOPT_AWS_SIGV4's "provider:region:service"
  CURLM* multi = nullptr;
  std::thread io;
  std::thread::id io_id;

  mutable std::mutex mutex;
  mutable std::condition_variable idle;
  std::deque<std::unique_ptr<Transfer>> queue;  // guarded
  size_t outstanding = 0;                       // guarded: queued + on the wire + in a callback
  bool accepting = true;                        // guarded
  std::optional<Clock::time_point> cut_at;      // guarded: when close() cuts what is left
  std::mutex closing;                           // one close() joins, a concurrent one waits for it
  bool joined = false;                          // guarded by closing

  std::mutex compressors_mutex;
  std::vector<std::unique_ptr<Compressor>> compressors;  // idle ones, reused by calling threads

  std::vector<Transfer*> unpause;  // guarded: streamed transfers whose stream has more now

  // I/O thread only.
  std::vector<std::unique_ptr<Transfer>> active;
  std::vector<CURL*> spare_easy;

  explicit Impl(HttpClientOptions o) : options(std::move(o)) {
    validate(options);
    [[maybe_unused]] const Compressor level_check(options.compression,
                                                  options.compression_level);  // throws for a bad level now
    if (!options.log_error)
      options.log_error = [](const std::string& m) { std::fprintf(stderr, "picomq http client: %s\n", m.c_str()); };
    if (const auto* aws = std::get_if<AwsSigV4Auth>(&options.auth))
      sigv4 = aws->provider + ":" + aws->region + ":" + aws->service;
    redactor = redactor_for(options);
    curl_global_init_once();
    multi = curl_multi_init();
    if (!multi) throw std::runtime_error("curl_multi_init failed");
    // Keep a connection per possible transfer: the point of one client is reusing them.
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(std::max<size_t>(options.max_in_flight, 2)));
    io = std::thread([this] { run(); });
    io_id = io.get_id();
  }

  ~Impl() {
    for (CURL* easy : spare_easy) curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
  }

  // close(), in two steps so that several threads drain at the same time.
  void stop_accepting(Clock::time_point cut) {
    std::lock_guard lock(mutex);
    if (!accepting) return;
    accepting = false;
    cut_at = cut;
    curl_multi_wakeup(multi);
  }
  void join() {
    std::lock_guard lock(closing);
    if (joined) return;
    io.join();
    joined = true;
  }

  // ---- the calling side

  std::unique_ptr<Compressor> take_compressor() {
    {
      std::lock_guard lock(compressors_mutex);
      if (!compressors.empty()) {
        auto c = std::move(compressors.back());
        compressors.pop_back();
        return c;
      }
    }
    return std::make_unique<Compressor>(options.compression, options.compression_level);
  }
  void give_back(std::unique_ptr<Compressor> c) {
    std::lock_guard lock(compressors_mutex);
    if (compressors.size() < options.max_in_flight) compressors.push_back(std::move(c));
  }

  // What can be checked and prepared off the I/O thread: header syntax, compression, the
  // payload hash SigV4 needs. A problem refuses the request (its callback says why).
  void prepare(Transfer& t) {
    HttpRequest& r = t.request;
    auto refuse = [&](std::string message) {
      t.refused = TransportFailure{TransportError::InvalidRequest, SendProgress::Nothing, std::move(message), 0};
    };
    if (!is_token(r.method)) return refuse("'" + t.redactor->redact(r.method) + "' is not an HTTP method");
    for (const auto& [name, value] : r.headers) {
      if (!is_token(name)) return refuse("'" + t.redactor->redact(name) + "' is not a header name");
      if (!is_safe_field_value(value)) return refuse("the value of header '" + name + "' has a line break or NUL");
    }
    if (r.body.stream() && std::holds_alternative<AwsSigV4Auth>(options.auth))
      return refuse("a streamed body cannot be signed with SigV4 (the signature needs the whole body first)");
    if (options.compression != Compression::None && !r.body.stream() && !r.body.empty() &&
        r.body.size() >= options.compress_min_bytes && !r.headers.contains("Content-Encoding")) {
      try {
        auto compressor = take_compressor();
        r.body = HttpBody(compressor->compress(r.body.bytes()));
        give_back(std::move(compressor));
        r.headers.set("Content-Encoding", std::string(content_encoding(options.compression)));
      } catch (const std::exception& e) {
        t.refused = TransportFailure{TransportError::Other, SendProgress::Nothing, e.what(), 0};
        return;
      }
    }
    if (!r.body.empty() && !r.headers.contains("Content-Type"))
      r.headers.set("Content-Type", "application/octet-stream");
    if (const auto* aws = std::get_if<AwsSigV4Auth>(&options.auth)) {
      if (!r.headers.contains("x-amz-content-sha256"))
        r.headers.set("x-amz-content-sha256", sha256_hex(r.body.bytes()));
      if (!aws->session_token.empty()) r.headers.set("x-amz-security-token", aws->session_token);
    } else if (const auto* key = std::get_if<ApiKeyAuth>(&options.auth)) {
      if (!r.headers.contains(key->header)) r.headers.set(key->header, key->value);
    }
  }

  void submit(HttpRequest request, Callback callback) {
    auto t = std::make_unique<Transfer>();
    t->request = std::move(request);
    t->callback = std::move(callback);
    t->max_body = options.max_response_body;
    t->redactor = redactor;
    if (const auto spans = secret_spans(t->request.url); !spans.empty()) {  // the URL's own, on top of the client's
      auto own = std::make_shared<Redactor>(redactor);
      for (const auto& [start, length] : spans) {
        const std::string_view raw = std::string_view(t->request.url).substr(start, length);
        own->add(raw);
        own->add(percent_decode(raw));
        if (const size_t colon = raw.find(':'); colon != std::string_view::npos)
          own->add(percent_decode(raw.substr(colon + 1)));
      }
      t->redactor = std::move(own);
    }
    t->response.method = t->request.method;
    t->response.url = redact_url(t->request.url);
    t->response.redactor = t->redactor;
    try {
      prepare(*t);
    } catch (const std::exception& e) {  // out of memory, say: still exactly one callback
      t->refused = TransportFailure{TransportError::Other, SendProgress::Nothing, e.what(), 0};
    }
    {
      std::unique_lock lock(mutex);
      if (accepting) {
        t->queued_at = Clock::now();
        // Only the first request of a queue needs to wake the I/O thread: while the queue holds
        // requests, the thread either loops over free slots or sleeps until a transfer ends,
        // and takes the queue then. (A wake-up per request is a context switch per request.)
        const bool was_empty = queue.empty();
        queue.push_back(std::move(t));
        ++outstanding;
        lock.unlock();
        if (was_empty) curl_multi_wakeup(multi);
        return;
      }
    }
    t->response.failure = TransportFailure{TransportError::Cancelled, SendProgress::Nothing, "the client is closed", 0};
    invoke(*t);
  }

  // ---- the I/O thread

  void run() {
    for (;;) {
      std::vector<std::unique_ptr<Transfer>> starting;
      {
        std::lock_guard lock(mutex);
        if (cut_at && Clock::now() >= *cut_at) break;
        while (!queue.empty() && active.size() + starting.size() < options.max_in_flight) {
          starting.push_back(std::move(queue.front()));
          queue.pop_front();
        }
      }
      for (auto& t : starting) start(std::move(t));
      resume_streams();
      int running = 0;
      curl_multi_perform(multi, &running);
      collect_finished();

      int wait_ms = 1000;
      {
        std::lock_guard lock(mutex);
        if (!accepting && queue.empty() && active.empty()) break;               // drained
        if (!queue.empty() && active.size() < options.max_in_flight) continue;  // a slot just freed
        if (cut_at) {
          const auto left = duration_cast<milliseconds>(*cut_at - Clock::now()).count();
          wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, wait_ms));
        }
      }
      // Returns early for socket activity, curl's own timers and curl_multi_wakeup().
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
    cancel_everything();
  }

  // Streamed transfers paused for want of bytes whose stream has more (or ended) now.
  void resume_streams() {
    std::vector<Transfer*> ready;
    {
      std::lock_guard lock(mutex);
      ready.swap(unpause);
    }
    for (Transfer* t : ready)  // a transfer may have ended since (then it is not active)
      if (std::any_of(active.begin(), active.end(), [&](const auto& a) { return a.get() == t; }))
        curl_easy_pause(t->easy, CURLPAUSE_CONT);
  }

  void start(std::unique_ptr<Transfer> t) {
    t->response.timings.queued = duration_cast<microseconds>(Clock::now() - t->queued_at);
    if (t->refused) {
      t->response.failure = std::move(t->refused);
      return retire(std::move(t));
    }
    CURL* easy = nullptr;
    if (!spare_easy.empty()) {
      easy = spare_easy.back();
      spare_easy.pop_back();
    } else {
      easy = curl_easy_init();
    }
    if (!easy) {
      t->response.failure =
          TransportFailure{TransportError::Other, SendProgress::Nothing, "curl_easy_init failed (out of memory)", 0};
      return retire(std::move(t));
    }
    t->easy = easy;
    const CURLcode setup = configure(*t);
    const CURLMcode added = setup == CURLE_OK ? curl_multi_add_handle(multi, easy) : CURLM_OK;
    if (setup != CURLE_OK || added != CURLM_OK) {
      const CURLcode code = setup != CURLE_OK ? setup : CURLE_FAILED_INIT;
      const std::string why = setup != CURLE_OK ? curl_easy_strerror(setup) : curl_multi_strerror(added);
      t->response.failure = TransportFailure{setup != CURLE_OK ? TransportError::InvalidRequest : TransportError::Other,
                                             SendProgress::Nothing, t->redactor->redact(why), static_cast<int>(code)};
      recycle(easy);
      t->easy = nullptr;
      return retire(std::move(t));
    }
    active.push_back(std::move(t));
  }

  CURLcode configure(Transfer& t) {
    CURL* e = t.easy;
    const HttpRequest& r = t.request;
    const HttpClientOptions& o = options;
    CURLcode rc = CURLE_OK;
    auto set = [&](CURLoption option, auto value) {
      if (rc == CURLE_OK) rc = curl_easy_setopt(e, option, value);
    };
    set(CURLOPT_URL, r.url.c_str());
    set(CURLOPT_PRIVATE, static_cast<void*>(&t));
    set(CURLOPT_ERRORBUFFER, t.error);
    set(CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_HTTP_VERSION, o.http_version == HttpVersion::Http1_1 ? static_cast<long>(CURL_HTTP_VERSION_1_1)
                                                                     : static_cast<long>(CURL_HTTP_VERSION_2TLS));
    // Over TLS, wait for a connection that may multiplex (ALPN tells soon) rather than open
    // another. Not over plain HTTP/1.1: there curl would learn it only from the first response,
    // and every other request would wait for it.
    if (o.http_version == HttpVersion::Http2OverTls && r.url.size() >= 8 &&
        iequals(std::string_view(r.url).substr(0, 8), "https://"))
      set(CURLOPT_PIPEWAIT, 1L);
    set(CURLOPT_TCP_KEEPALIVE, 1L);
    set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
    set(CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.value_or(o.request_timeout).count()));
    if (o.low_speed_bytes_per_second > 0) {
      set(CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(o.low_speed_bytes_per_second));
      set(CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.low_speed_time.count()));
    }
    set(CURLOPT_ACCEPT_ENCODING, "");  // every encoding this libcurl decodes
    set(CURLOPT_USERAGENT, o.user_agent.c_str());
    set(CURLOPT_WRITEFUNCTION, on_body);
    set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
    set(CURLOPT_HEADERFUNCTION, on_header);
    set(CURLOPT_HEADERDATA, static_cast<void*>(&t));

    // The method, and the body straight from its buffer (POSTFIELDS does not copy). Methods that
    // carry a body always send one, so an empty PUT still says Content-Length: 0.
    const bool carries_body = !r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH";
    if (r.method == "HEAD") {
      set(CURLOPT_NOBODY, 1L);
    } else if (const auto& stream = r.body.stream()) {
      // No size: HTTP/1.1 chunked. No "Expect: 100-continue" (curl's default for a body of unknown
      // size): it would hold the first bytes for up to a second.
      set(CURLOPT_POST, 1L);
      set(CURLOPT_READFUNCTION, on_read);
      set(CURLOPT_READDATA, static_cast<void*>(&t));
      if (r.method != "POST") set(CURLOPT_CUSTOMREQUEST, r.method.c_str());
      t.header_list = curl_slist_append(t.header_list, "Expect:");
      stream->on_data([this, transfer = &t] {
        {
          std::lock_guard lock(mutex);
          unpause.push_back(transfer);
        }
        curl_multi_wakeup(multi);
      });
    } else if (carries_body) {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      set(CURLOPT_POSTFIELDS, r.body.bytes().data() ? r.body.bytes().data() : "");
      if (r.method != "POST") set(CURLOPT_CUSTOMREQUEST, r.method.c_str());
    } else if (r.method != "GET") {
      set(CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }

    for (const auto& [name, value] : r.headers) {  // "Name;" is curl's way to send an empty value
      std::string line = name;
      line += value.empty() ? ";" : ": ";
      line += value;
      t.header_list = curl_slist_append(t.header_list, line.c_str());
    }
    if (t.header_list) set(CURLOPT_HTTPHEADER, t.header_list);

    if (const auto* basic = std::get_if<BasicAuth>(&o.auth)) {
      set(CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      set(CURLOPT_USERNAME, basic->user.c_str());
      set(CURLOPT_PASSWORD, basic->password.c_str());
    } else if (const auto* bearer = std::get_if<BearerAuth>(&o.auth)) {
      set(CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
      set(CURLOPT_XOAUTH2_BEARER, bearer->token.c_str());
    } else if (const auto* aws = std::get_if<AwsSigV4Auth>(&o.auth)) {
      set(CURLOPT_AWS_SIGV4, sigv4.c_str());
      set(CURLOPT_USERNAME, aws->access_key_id.c_str());
      set(CURLOPT_PASSWORD, aws->secret_access_key.c_str());
    }

    const TlsOptions& tls = o.tls;
    if (!tls.ca_file.empty()) set(CURLOPT_CAINFO, tls.ca_file.c_str());
    if (!tls.ca_dir.empty()) set(CURLOPT_CAPATH, tls.ca_dir.c_str());
    if (!tls.client_cert_file.empty()) set(CURLOPT_SSLCERT, tls.client_cert_file.c_str());
    if (!tls.client_key_file.empty()) set(CURLOPT_SSLKEY, tls.client_key_file.c_str());
    if (!tls.client_key_password.empty()) set(CURLOPT_KEYPASSWD, tls.client_key_password.c_str());
    set(CURLOPT_SSL_VERIFYPEER, tls.verify_peer ? 1L : 0L);
    set(CURLOPT_SSL_VERIFYHOST, tls.verify_host ? 2L : 0L);
    return rc;
  }

  // How far the request got, from curl's counters: header bytes handed to the connection
  // (REQUEST_SIZE) and body bytes (SIZE_UPLOAD).
  SendProgress send_progress(const Transfer& t) const {
    long request_bytes = 0;
    curl_off_t body_sent = 0;
    curl_easy_getinfo(t.easy, CURLINFO_REQUEST_SIZE, &request_bytes);
    curl_easy_getinfo(t.easy, CURLINFO_SIZE_UPLOAD_T, &body_sent);
    if (request_bytes <= 0 && body_sent <= 0) return SendProgress::Nothing;
    if (const auto& stream = t.request.body.stream(); stream && !stream->finished()) return SendProgress::Partial;
    return static_cast<uint64_t>(body_sent) >= t.request.body.size() ? SendProgress::Complete : SendProgress::Partial;
  }

  // RFC 9113 section 8.1: a server may answer before it has read the whole request body, then
  // reset the stream with NO_ERROR to stop the upload, and "clients MUST NOT discard responses as
  // a result". curl 7.88 reports that as CURLE_HTTP2_STREAM (later ones as CURLE_SEND_ERROR);
  // nginx does it for every early answer. A final status with all of its body is that answer.
  static bool complete_early_answer(const Transfer& t, CURLcode result) {
    const HttpResponse& r = t.response;
    if ((result != CURLE_HTTP2_STREAM && result != CURLE_SEND_ERROR) || r.protocol != HttpProtocol::Http2 ||
        r.status < 200)
      return false;
    if (r.status == 204 || r.status == 304 || t.request.method == "HEAD") return true;  // no body to wait for
    curl_off_t announced = -1, received = 0;
    curl_easy_getinfo(t.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
    curl_easy_getinfo(t.easy, CURLINFO_SIZE_DOWNLOAD_T, &received);
    return announced >= 0 && received == announced;
  }

  void read_response(Transfer& t, CURLcode result) const {
    HttpResponse& r = t.response;
    CURL* e = t.easy;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
    long version = 0;
    curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version);
    r.protocol = protocol_of(version);
    long new_connections = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &new_connections);
    curl_off_t connected = 0, tls_done = 0, first_byte = 0, total = 0;
    curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connected);
    curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &tls_done);
    curl_easy_getinfo(e, CURLINFO_STARTTRANSFER_TIME_T, &first_byte);
    curl_easy_getinfo(e, CURLINFO_TOTAL_TIME_T, &total);
    r.timings.connected = microseconds(connected);
    r.timings.tls_done = microseconds(tls_done);
    r.timings.first_byte = microseconds(first_byte);
    r.timings.total = microseconds(total);
    r.connection_reused = r.status != 0 && new_connections == 0;
    // The final response's fields (request -1: the last one, after any 1xx).
    for (curl_header* h = curl_easy_nextheader(e, CURLH_HEADER, -1, nullptr); h;
         h = curl_easy_nextheader(e, CURLH_HEADER, -1, h))
      r.headers.add(h->name, h->value);
    if (result != CURLE_OK && !complete_early_answer(t, result)) {
      const std::string detail = t.error[0] ? t.error : curl_easy_strerror(result);
      r.failure = TransportFailure{transport_error_of(result), send_progress(t), t.redactor->redact(detail),
                                   static_cast<int>(result)};
    }
  }

  void collect_finished() {
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* easy = message->easy_handle;
      const CURLcode result = message->data.result;  // the message is invalid after remove_handle
      finish(easy, [&](Transfer& t) { read_response(t, result); });
    }
  }

  template <class Fill>
  void finish(CURL* easy, Fill&& fill) {
    auto it = std::find_if(active.begin(), active.end(), [&](const auto& t) { return t->easy == easy; });
    if (it == active.end()) return;
    std::unique_ptr<Transfer> t = std::move(*it);
    active.erase(it);
    fill(*t);
    curl_multi_remove_handle(multi, easy);
    recycle(easy);
    t->easy = nullptr;
    retire(std::move(t));
  }

  void recycle(CURL* easy) {
    curl_easy_reset(easy);
    if (spare_easy.size() < options.max_in_flight) {
      spare_easy.push_back(easy);
    } else {
      curl_easy_cleanup(easy);
    }
  }

  // Runs the callback (never inside the lock).
  void invoke(Transfer& t) const {
    try {
      t.callback(std::move(t.response));
    } catch (const std::exception& e) {
      options.log_error(std::string("an HTTP response callback threw (ignored): ") + e.what());
    } catch (...) {
      options.log_error("an HTTP response callback threw a non-standard exception (ignored)");
    }
    t.callback = nullptr;  // what it captured goes now, not with the transfer's memory
  }

  // The callback, then the request's memory (its body may be large), then the count.
  void retire(std::unique_ptr<Transfer> t) {
    if (const auto& stream = t->request.body.stream()) {
      stream->on_data(nullptr);  // no wake-up for a transfer that is gone
      const std::string why = t->response.failure ? t->response.failure->message : "the response came first";
      if (!stream->finished())
        stream->fail("the request ended before its body did: " + why);  // later appends go nowhere
    }
    invoke(*t);
    t.reset();
    bool now_idle = false;
    {
      std::lock_guard lock(mutex);
      now_idle = --outstanding == 0;
    }
    if (now_idle) idle.notify_all();  // not per request: a waiter woken for nothing is two context switches
  }

  void cancel_everything() {
    while (!active.empty()) {
      CURL* easy = active.back()->easy;
      finish(easy, [&](Transfer& t) {
        read_response(t, CURLE_OK);
        t.response.failure = TransportFailure{TransportError::Cancelled, send_progress(t), "cut by close()", 0};
      });
    }
    std::deque<std::unique_ptr<Transfer>> queued;
    {
      std::lock_guard lock(mutex);
      queued.swap(queue);
    }
    for (auto& t : queued) {
      t->response.failure =
          TransportFailure{TransportError::Cancelled, SendProgress::Nothing, "cut by close() before it was sent", 0};
      retire(std::move(t));
    }
  }
};

HttpClient::HttpClient(HttpClientOptions options) : options_(std::move(options)) {
  validate(options_);
  const size_t threads = std::min(options_.io_threads, options_.max_in_flight);
  for (size_t i = 0; i < threads; ++i) {
    HttpClientOptions share = options_;
    share.io_threads = 1;
    share.max_in_flight = options_.max_in_flight / threads + (i < options_.max_in_flight % threads ? 1 : 0);
    threads_.push_back(std::make_unique<Impl>(std::move(share)));
  }
}

HttpClient::~HttpClient() { close(); }

bool HttpClient::on_io_thread() const {
  const auto me = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(), [&](const auto& t) { return t->io_id == me; });
}

HttpResponse HttpClient::send(HttpRequest request) {
  if (on_io_thread())
    throw std::logic_error("HttpClient::send() from a response callback would wait for itself: use send_async()");
  std::promise<HttpResponse> done;
  std::future<HttpResponse> response = done.get_future();
  send_async(std::move(request), [&done](HttpResponse r) { done.set_value(std::move(r)); });
  return response.get();
}

std::vector<HttpResponse> HttpClient::send_all(std::vector<HttpRequest> requests) {
  if (on_io_thread())
    throw std::logic_error("HttpClient::send_all() from a response callback would wait for itself: use send_async()");
  std::vector<HttpResponse> responses(requests.size());
  std::mutex mutex;
  std::condition_variable answered;
  size_t left = requests.size();
  for (size_t i = 0; i < requests.size(); ++i)
    send_async(std::move(requests[i]), [&, i](HttpResponse r) {
      std::lock_guard lock(mutex);
      responses[i] = std::move(r);
      if (--left == 0) answered.notify_all();
    });
  std::unique_lock lock(mutex);
  answered.wait(lock, [&] { return left == 0; });
  return responses;
}

// In turn: requests of one caller spread evenly, and each thread keeps its connections warm.
void HttpClient::send_async(HttpRequest request, Callback callback) {
  Impl& thread =
      *threads_[threads_.size() == 1 ? 0 : next_thread_.fetch_add(1, std::memory_order_relaxed) % threads_.size()];
  thread.submit(std::move(request), std::move(callback));
}

size_t HttpClient::pending() const {
  size_t n = 0;
  for (const auto& t : threads_) {
    std::lock_guard lock(t->mutex);
    n += t->outstanding;
  }
  return n;
}

bool HttpClient::wait_idle(std::chrono::milliseconds timeout) const {
  if (on_io_thread()) throw std::logic_error("HttpClient::wait_idle() from a response callback would wait for itself");
  const auto until = Clock::now() + timeout;
  for (const auto& t : threads_) {
    std::unique_lock lock(t->mutex);
    if (!t->idle.wait_until(lock, until, [&] { return t->outstanding == 0; })) return false;
  }
  return true;
}

void HttpClient::close(std::chrono::milliseconds drain) {
  if (on_io_thread()) throw std::logic_error("HttpClient::close() from a response callback would wait for itself");
  // Every thread stops taking requests and drains at once: the drain is shared, not per thread.
  const auto cut_at = Clock::now() + drain;
  for (auto& t : threads_) t->stop_accepting(cut_at);
  for (auto& t : threads_) t->join();
}

const HttpClientOptions& HttpClient::options() const { return options_; }
const Redactor& HttpClient::redactor() const { return *threads_.front()->redactor; }

}  // namespace picomq::kit
