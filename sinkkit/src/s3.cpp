#include "picomq/kit/s3.hpp"

#include <algorithm>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit::s3 {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string between(std::string_view body, std::string_view open, std::string_view close) {
  const size_t a = body.find(open);
  if (a == std::string_view::npos) return {};
  const size_t b = body.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return std::string(body.substr(a + open.size(), b - a - open.size()));
}

}  // namespace

std::string Bucket::object_url(std::string_view key) const {
  std::string path;
  size_t start = 0;
  while (start <= key.size() && !key.empty()) {
    const size_t slash = key.find('/', start);
    const size_t end = slash == std::string_view::npos ? key.size() : slash;
    path += percent_encode(key.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    path += '/';
    start = slash + 1;
  }
  if (path_style)
    return scheme + "://" + host + base_path + "/" + percent_encode(name) + (key.empty() ? "" : "/" + path);
  return scheme + "://" + name + "." + host + base_path + "/" + path;
}

std::string Bucket::where() const {
  return "bucket '" + name + "' at " + redact_url(scheme + "://" + host + base_path);
}

std::optional<std::string> set_endpoint(Bucket& bucket, std::string_view endpoint) {
  const size_t scheme_end = endpoint.find("://");
  const std::string_view scheme = scheme_end == std::string_view::npos ? "" : endpoint.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return "'" + redact_url(endpoint) + "' must start with http:// or https://";
  const std::string_view rest = endpoint.substr(scheme_end + 3);
  if (rest.find_first_of("?#@") != std::string_view::npos)
    return "must be scheme://host[:port][/path], without query or user";
  const size_t slash = rest.find('/');
  std::string host(rest.substr(0, slash));
  if (host.empty()) return "has no host";
  std::string base_path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!base_path.empty() && base_path.back() == '/') base_path.pop_back();
  bucket.scheme = std::string(scheme);
  bucket.host = std::move(host);
  bucket.base_path = std::move(base_path);
  return std::nullopt;
}

Error parse_error(std::string_view body) { return {xml_element(body, "Code"), xml_element(body, "Message")}; }

std::string xml_element(std::string_view body, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">", close = "</" + std::string(name) + ">";
  return xml_text(between(body, open, close));
}

std::string xml_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t semi = raw.find(';', i);
    if (semi == std::string_view::npos) {
      out += raw.substr(i);
      break;
    }
    const std::string_view e = raw.substr(i + 1, semi - i - 1);
    if (e == "amp") out += '&';
    else if (e == "lt") out += '<';
    else if (e == "gt") out += '>';
    else if (e == "quot") out += '"';
    else if (e == "apos") out += '\'';
    else if (e.size() > 1 && e[0] == '#') {
      const bool hex = e[1] == 'x' || e[1] == 'X';
      const std::string digits(e.substr(hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (digits.empty() || *end != '\0' || cp > 0x10FFFF)
        out += raw.substr(i, semi - i + 1);  // not a reference: as is
      else append_utf8(out, static_cast<char32_t>(cp));
    } else {
      out += raw.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

Client::Client(ClientOptions options) : options_(std::move(options)) {
  HttpClientOptions o = client_options(HttpSettings{}, options_.tls, AuthSettings{});
  o.auth = AwsSigV4Auth{.region = options_.bucket.region,
                        .service = "s3",
                        .access_key_id = options_.bucket.access_key_id,
                        .secret_access_key = options_.bucket.secret_access_key,
                        .session_token = options_.bucket.session_token};
  o.compression = Compression::None;  // objects are compressed as files, not as a Content-Encoding
  o.request_timeout = options_.request_timeout;
  o.connect_timeout = options_.connect_timeout;
  o.max_in_flight = std::max<size_t>(1, options_.max_in_flight);
  o.max_response_body = options_.max_response_body;
  o.log_error = options_.log_warn;
  http_ = std::make_unique<HttpClient>(std::move(o));
  // S3's statuses where they differ from the kit's table (docs: AWS S3 API reference, "Error responses").
  rules_
      .on(400, "<Code>RequestTimeout</Code>", Outcome::Retry,
          "S3: RequestTimeout = the connection was idle too long; resend")
      .on(409, Outcome::Retry, "S3: 409 OperationAborted = a conflicting operation on the key is in progress; resend")
      .on(400, Outcome::Fatal, "S3: 400 = a request S3 cannot take (configuration or sink bug)")
      .on(412, Outcome::Fatal, "S3: 412 = precondition failed")
      .on(501, Outcome::Fatal, "S3: 501 NotImplemented = a header or request the store does not support");
}

Client::~Client() { close(); }

void Client::close() {
  stop_.stop();
  if (http_) http_->close(2s);
}

std::string Client::describe(const HttpResponse& response, const std::string& what) const {
  const Error e = parse_error(response.body);
  const std::string where = bucket().where();
  std::string s3 = std::to_string(response.status) + (e.code.empty() ? "" : " " + e.code) +
                   (e.message.empty() ? "" : ": " + e.message);
  s3 = redactor().redact(s3);
  if (response.status == 403 || response.status == 401)
    return "S3 refused the credentials for " + where + " (" + s3 + ") on " + what + "; " + options_.credentials_hint;
  if (response.status == 404 && (e.code == "NoSuchBucket" || e.code.empty()))
    return "the bucket does not exist: " + where + " (" + s3 + ") on " + what + "; create it, or fix bucket / endpoint";
  return what + " on " + where + ": " + s3;
}

std::string Client::reason(const HttpResponse& response, const std::string& what) const {
  return response.completed() ? describe(response, what) : what + ": " + classify(response).reason;
}

HttpResponse Client::send(const std::function<HttpRequest()>& make, const std::string& what) {
  RetryWait retry(stop_, options_.retry_timeout, {.initial = 200ms, .max = 5s});
  for (;;) {
    if (options_.count) options_.count("requests", 1);
    HttpResponse response = http_->send(make());
    const Classification c = classify(response);
    if (c.outcome != Outcome::Retry && c.outcome != Outcome::MaybeWritten) return response;
    const std::string why = reason(response, what);
    if (!retry.wait(c, [&](std::chrono::milliseconds) {
          if (options_.count) options_.count("resends", 1);
        }))
      throw sdk::RetryableError(why + (retry.stopped() ? " (closing)" : " (resent for up to retry_timeout)"));
  }
}

HttpResponse Client::expect(const HttpResponse& response, std::initializer_list<int> statuses,
                            const std::string& what) const {
  if (std::find(statuses.begin(), statuses.end(), response.status) == statuses.end())
    throw sdk::FatalError(reason(response, what));
  return response;
}

void Client::put_object(const std::string& key, std::string_view body, const std::string& content_type,
                        const HttpHeaders& headers) {
  const std::string url = bucket().object_url(key), what = "PUT " + key;
  const HttpResponse r = send(
      [&] {
        HttpRequest q{.method = "PUT", .url = url, .headers = headers, .body = HttpBody::borrowed(body)};
        q.headers.set("Content-Type", content_type);
        return q;
      },
      what);
  if (classify(r).outcome != Outcome::Written) throw sdk::FatalError(reason(r, what));
}

std::string Client::get_object(const std::string& key) {
  const std::string url = bucket().object_url(key), what = "GET " + key;
  return expect(send([&] { return HttpRequest{.method = "GET", .url = url}; }, what), {200}, what).body;
}

HttpResponse Client::get_if_exists(const std::string& key) {
  const std::string url = bucket().object_url(key), what = "GET " + key;
  return expect(send([&] { return HttpRequest{.method = "GET", .url = url}; }, what), {200, 404}, what);
}

HttpResponse Client::head_object(const std::string& key) {
  const std::string url = bucket().object_url(key), what = "HEAD " + key;
  return expect(send([&] { return HttpRequest{.method = "HEAD", .url = url}; }, what), {200, 404}, what);
}

void Client::delete_object(const std::string& key) {
  const std::string url = bucket().object_url(key), what = "DELETE " + key;
  const HttpResponse r = send([&] { return HttpRequest{.method = "DELETE", .url = url}; }, what);
  if (r.status != 404 && classify(r).outcome != Outcome::Written) throw sdk::FatalError(reason(r, what));
}

std::vector<std::string> Client::list_keys(const std::string& prefix) {
  std::vector<std::string> keys;
  std::string token;
  for (;;) {
    // Query parameters in canonical (sorted) order, as SigV4 signs them.
    std::string query = "?";
    if (!token.empty()) query += "continuation-token=" + percent_encode(token) + "&";
    query += "list-type=2&prefix=" + percent_encode(prefix);
    std::string url = bucket().object_url("");  // the bucket: ".../bucket" path-style, "<bucket>.host/" virtual-hosted
    if (url.back() != '/') url += '/';
    url += query;
    const std::string what = "LIST " + prefix;
    const HttpResponse r = expect(send([&] { return HttpRequest{.method = "GET", .url = url}; }, what), {200}, what);
    const std::string_view body = r.body;
    size_t at = 0;
    while ((at = body.find("<Key>", at)) != std::string_view::npos) {
      const size_t end = body.find("</Key>", at);
      if (end == std::string_view::npos) break;
      keys.push_back(xml_text(body.substr(at + 5, end - at - 5)));
      at = end;
    }
    if (xml_element(body, "IsTruncated") != "true") return keys;
    token = xml_element(body, "NextContinuationToken");
    if (token.empty()) return keys;
  }
}

std::string Client::check_bucket() {
  HttpRequest r{.method = "HEAD", .url = bucket().object_url("")};
  r.timeout = std::min<std::chrono::milliseconds>(options_.request_timeout, 10s);
  const HttpResponse response = http_->send(std::move(r));
  if (!response.completed())
    return "S3 endpoint " + redact_url(bucket().scheme + "://" + bucket().host + bucket().base_path) +
           " not reachable now (" + response.failure->message + "); writes will retry";
  if (response.status == 403 || response.status == 401 || response.status == 404)
    throw sdk::FatalError(describe(response, "HEAD bucket"));
  if (response.status >= 500) return describe(response, "HEAD bucket") + "; writes will retry";
  return {};
}

}  // namespace picomq::kit::s3
