#include "s3/client.h"

#include <openssl/evp.h>

#include <thread>

#include "picomq/kit/encoding.hpp"
#include "picomq/sdk.hpp"

namespace picomq::s3 {
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

// The text of an XML element: the five predefined entities and numeric character references
// (what S3 escapes in keys and tokens).
std::string xml_text(std::string_view raw) {
  std::string out;
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
    else if (!e.empty() && e[0] == '#') {
      const unsigned long cp = e.size() > 1 && (e[1] == 'x' || e[1] == 'X') ? std::stoul(std::string(e.substr(2)), nullptr, 16)
                                                                           : std::stoul(std::string(e.substr(1)));
      if (cp < 0x80) out += static_cast<char>(cp);
      else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out += raw.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

std::string unquote(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

}  // namespace

S3Error parse_error(std::string_view body) {
  return {between(body, "<Code>", "</Code>"), between(body, "<Message>", "</Message>")};
}

std::string md5_binary(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string md5_hex(std::string_view bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md5_binary(bytes)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string multipart_etag_of(std::string_view part_digests, size_t parts) {
  return md5_hex(part_digests) + "-" + std::to_string(parts);
}

std::string multipart_etag(std::string_view bytes, uint64_t part_size) {
  std::string digests;
  size_t parts = 0, at = 0;
  do {
    digests += md5_binary(bytes.substr(at, part_size));
    ++parts;
    at += part_size;
  } while (at < bytes.size());
  return multipart_etag_of(digests, parts);
}

std::string marker_key(const std::string& key, const std::string& token) {
  const size_t slash = key.rfind('/');
  const std::string folder = slash == std::string::npos ? "" : key.substr(0, slash + 1);
  return folder + "_picomq/" + key.substr(slash == std::string::npos ? 0 : slash + 1) + "." + token + ".last-offset";
}


Client::Client(const Plan& plan, size_t max_in_flight, Hooks hooks) : plan_(plan), hooks_(std::move(hooks)) {
  kit::HttpClientOptions o = kit::client_options(kit::HttpSettings{}, plan.settings.tls, kit::AuthSettings{});
  o.auth = kit::AwsSigV4Auth{.region = plan.settings.region, .service = "s3", .access_key_id = plan.access_key_id,
                             .secret_access_key = plan.secret_access_key, .session_token = plan.session_token};
  o.compression = kit::Compression::None;  // objects are compressed as files, not as a Content-Encoding
  o.request_timeout = plan.settings.timeout;
  o.connect_timeout = plan.settings.connect_timeout;
  o.max_in_flight = std::max<size_t>(1, max_in_flight);
  o.max_response_body = 64 << 10;
  o.log_error = hooks_.log_warn;
  http_ = std::make_unique<kit::HttpClient>(std::move(o));
  // S3's statuses where they differ from the kit's table (docs: AWS S3 API reference, "Error responses").
  rules_.on(400, "<Code>RequestTimeout</Code>", kit::Outcome::Retry, "S3: RequestTimeout = the connection was idle too long; resend")
      .on(409, kit::Outcome::Retry, "S3: 409 OperationAborted = a conflicting operation on the key is in progress; resend")
      .on(400, kit::Outcome::Fatal, "S3: 400 = a request S3 cannot take (configuration or sink bug)")
      .on(412, kit::Outcome::Fatal, "S3: 412 = precondition failed")
      .on(501, kit::Outcome::Fatal, "S3: 501 NotImplemented = a header or request the store does not support");
}

Client::~Client() { close(); }

void Client::close() {
  stop_.stop();
  if (http_) http_->close(2s);
}

kit::Classification Client::classify(const kit::HttpResponse& response) const { return rules_.classify(response); }

std::string Client::describe(const kit::HttpResponse& response, const std::string& what) const {
  const S3Error e = parse_error(response.body);
  std::string where = "bucket '" + plan_.settings.bucket + "' at " + kit::redact_url(plan_.scheme + "://" + plan_.host + plan_.base_path);
  std::string s3 = std::to_string(response.status) + (e.code.empty() ? "" : " " + e.code) +
                   (e.message.empty() ? "" : ": " + e.message);
  s3 = redactor().redact(s3);
  if (response.status == 403)
    return "S3 refused the credentials for " + where + " (" + s3 + ") on " + what +
           "; check aws_access_key_id, aws_secret_access_key (or AWS_* environment variables), aws_session_token and region";
  if (response.status == 404 && (e.code == "NoSuchBucket" || e.code.empty()))
    return "the bucket does not exist: " + where + " (" + s3 + ") on " + what + "; create it, or fix bucket / endpoint";
  return what + " on " + where + ": " + s3;
}

kit::HttpResponse Client::send(const std::function<kit::HttpRequest()>& make, const std::string& what) {
  const auto deadline = Clock::now() + plan_.settings.retry_timeout;
  kit::Backoff backoff({.initial = 200ms, .max = 5s});
  for (;;) {
    if (hooks_.count) hooks_.count("requests", 1);
    kit::HttpResponse response = http_->send(make());
    const kit::Classification c = classify(response);
    if (c.outcome != kit::Outcome::Retry && c.outcome != kit::Outcome::MaybeWritten) return response;
    // Retry or MaybeWritten: every request of the sink is idempotent (a PUT replaces the whole object).
    auto delay = backoff.next();
    if (c.retry_after) delay = std::max<std::chrono::milliseconds>(delay, *c.retry_after);
    const std::string reason = response.completed() ? describe(response, what) : c.reason;
    if (Clock::now() + delay > deadline || stop_.stopped())
      throw sdk::RetryableError(reason + " (resent for up to retry_timeout)");
    if (hooks_.count) hooks_.count("resends", 1);
    if (!stop_.wait_for(delay)) throw sdk::RetryableError(reason + " (closing)");
  }
}

void Client::put_object(const std::string& key, std::string_view body, const std::string& content_type,
                        int64_t last_offset) {
  const std::string url = object_url(plan_, key);
  const std::string what = "PUT " + key;
  for (;;) {
    const kit::HttpResponse response = send(
        [&] {
          kit::HttpRequest r{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
          r.headers.set("Content-Type", content_type);
          r.headers.set("x-amz-meta-picomq-last-offset", std::to_string(last_offset));
          if (plan_.settings.conditional_create) r.headers.set("If-None-Match", "*");
          return r;
        },
        what);
    const kit::Classification c = classify(response);
    if (c.outcome == kit::Outcome::Written) {
      if (hooks_.count) {
        hooks_.count("objects", 1);
        hooks_.count("bytes_uploaded", body.size());
      }
      return;
    }
    if (response.status == 412 && plan_.settings.conditional_create) {
      if (!taken_by_ours(key, md5_hex(body))) continue;  // gone again in between: create it
      return;
    }
    throw sdk::FatalError(response.completed() ? describe(response, what) : c.reason);
  }
}

bool Client::taken_by_ours(const std::string& key, const std::string& ours) {
  const kit::HttpResponse h = head(key);
  if (h.status == 404) return false;
  const std::string there = unquote(h.headers.get("ETag").value_or(""));
  if (there == ours) {
    // Written before: a resend of ours whose answer was lost, or a run that cut the same object.
    if (hooks_.count) hooks_.count("already_written", 1);
    return true;
  }
  const auto last = last_offset_of(h);
  if (!last)
    throw sdk::FatalError("conditional_create: " + key + " already exists in bucket '" + plan_.settings.bucket +
                          "' with other content (ETag \"" + there + "\", ours \"" + ours +
                          "\") and without picomq's last-offset metadata, so what it holds is unknown: another writer's "
                          "object, or a changed key template; move it away or change prefix / key_template");
  throw KeyTaken(key, *last,
                 "conditional_create: " + key + " was taken by an object with other content (ETag \"" + there + "\", ours \"" +
                     ours + "\": a killed run's late upload, or records cut at other offsets), holding the records up to offset " +
                     std::to_string(*last) + "; the records after it go into the next object");
}

std::string Client::create_multipart(const std::string& key, const std::string& content_type, const std::string& marker) {
  const std::string url = object_url(plan_, key);
  const kit::HttpResponse created = send(
      [&] {
        kit::HttpRequest r{.method = "POST", .url = url + "?uploads="};
        r.headers.set("Content-Type", content_type);
        r.headers.set("x-amz-meta-picomq-last-offset-in", marker);
        return r;
      },
      "CreateMultipartUpload " + key);
  const std::string upload_id = xml_text(between(created.body, "<UploadId>", "</UploadId>"));
  if (created.status != 200 || upload_id.empty())
    throw sdk::FatalError((created.completed() ? describe(created, "CreateMultipartUpload " + key) : classify(created).reason) +
                          (created.status == 200 ? " (no UploadId)" : ""));
  if (hooks_.count) hooks_.count("multipart_uploads", 1);
  return upload_id;
}

std::string Client::upload_part(const std::string& key, const std::string& upload_id, size_t number, std::string_view part) {
  // Parameters in canonical (sorted) order: libcurl 7.88 signs the query as sent.
  const std::string url =
      object_url(plan_, key) + "?partNumber=" + std::to_string(number) + "&uploadId=" + kit::percent_encode(upload_id);
  const std::string what = "UploadPart " + std::to_string(number) + " of " + key;
  const kit::HttpResponse r =
      send([&] { return kit::HttpRequest{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(part)}; }, what);
  const auto etag = r.headers.get("ETag");
  if (r.status != 200 || !etag) throw sdk::FatalError(r.completed() ? describe(r, what) : classify(r).reason);
  if (hooks_.count) {
    hooks_.count("parts", 1);
    hooks_.count("bytes_uploaded", part.size());
  }
  return std::string(*etag);
}

void Client::put_marker(const std::string& marker, int64_t last_offset) {
  const std::string url = object_url(plan_, marker);
  const std::string body = std::to_string(last_offset);
  const kit::HttpResponse r = send(
      [&] {
        kit::HttpRequest q{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
        q.headers.set("Content-Type", "text/plain");
        q.headers.set("x-amz-meta-picomq-last-offset", body);
        return q;
      },
      "PUT " + marker);
  if (classify(r).outcome != kit::Outcome::Written) throw sdk::FatalError(r.completed() ? describe(r, "PUT " + marker) : classify(r).reason);
}

bool Client::complete_multipart(const std::string& key, const std::string& upload_id, const std::string& parts_xml,
                                const std::string& ours) {
  const std::string url = object_url(plan_, key) + "?uploadId=" + kit::percent_encode(upload_id);
  const std::string complete = "<CompleteMultipartUpload>" + parts_xml + "</CompleteMultipartUpload>";
  const kit::HttpResponse done = send(
      [&] {
        kit::HttpRequest r{.method = "POST", .url = url, .body = kit::HttpBody::borrowed(complete)};
        r.headers.set("Content-Type", "application/xml");
        if (plan_.settings.conditional_create) r.headers.set("If-None-Match", "*");
        return r;
      },
      "CompleteMultipartUpload " + key);
  if (done.status == 412 && plan_.settings.conditional_create) {
    if (taken_by_ours(key, ours)) return false;
    throw sdk::RetryableError("CompleteMultipartUpload " + key + ": 412, and the key is free again; the object goes up again");
  }
  // S3 can answer 200 and put the error in the body.
  if (done.status != 200 || done.body.find("<Error>") != std::string::npos)
    throw sdk::RetryableError((done.completed() ? describe(done, "CompleteMultipartUpload " + key) : classify(done).reason) +
                              " " + done.body_excerpt(200));
  if (hooks_.count) hooks_.count("objects", 1);
  return true;
}

void Client::abort_multipart(const std::string& key, const std::string& upload_id) {
  // Best effort: an upload left behind costs storage until the bucket's lifecycle rule drops it.
  const kit::HttpResponse aborted =
      http_->send({.method = "DELETE", .url = object_url(plan_, key) + "?uploadId=" + kit::percent_encode(upload_id)});
  if (hooks_.count) hooks_.count(aborted.status == 204 || aborted.status == 200 ? "multipart_aborted" : "multipart_abort_failed", 1);
}

void Client::delete_object(const std::string& key) {
  (void)http_->send({.method = "DELETE", .url = object_url(plan_, key)});
}

void Client::check_conditional_writes() {
  const std::string probe = plan_.prefix + "_picomq/conditional-write-probe";
  const std::string url = object_url(plan_, probe);
  const std::string body = "picomq-connect: a probe that the store honours If-None-Match (docs/sinks/s3.md)";
  auto put = [&] {
    return send(
        [&] {
          kit::HttpRequest r{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
          r.headers.set("Content-Type", "text/plain");
          r.headers.set("If-None-Match", "*");
          return r;
        },
        "PUT " + probe);
  };
  const std::string where = "bucket '" + plan_.settings.bucket + "' at " + kit::redact_url(plan_.scheme + "://" + plan_.host + plan_.base_path);
  auto unsupported = [&](const std::string& what) {
    return sdk::FatalError(
        "conditional_create: the store (" + where + ") " + what +
        ": it cannot refuse a killed run's upload that lands late, which could replace a committed object with "
        "another cut of its records. Use a store that honours If-None-Match (AWS S3, MinIO, SeaweedFS), or set "
        "conditional_create = false to write without that protection (docs/sinks/s3.md, \"Replay and crashes\")");
  };
  auto fails = [&](const kit::HttpResponse& r, const std::string& what) -> sdk::FatalError {
    if (r.status == 501 || r.status == 400) return unsupported("refused If-None-Match on " + what + " (" + describe(r, what) + ")");
    return sdk::FatalError(r.completed() ? describe(r, what) : classify(r).reason);
  };
  const kit::HttpResponse first = put();
  if (first.status != 412 && classify(first).outcome != kit::Outcome::Written) throw fails(first, "PUT " + probe);
  if (first.status != 412) {
    const kit::HttpResponse second = put();
    if (classify(second).outcome == kit::Outcome::Written)
      throw unsupported("ignores If-None-Match: * on PUT (a second conditional PUT of " + probe + " was answered " +
                        std::to_string(second.status) + ")");
    if (second.status != 412) throw fails(second, "PUT " + probe);
  }
  // The same on CompleteMultipartUpload: one small part, completed onto the probe that exists
  // (plain requests: the probe counts in no counter of the sink's objects).
  const kit::HttpResponse created = send([&] { return kit::HttpRequest{.method = "POST", .url = url + "?uploads="}; },
                                         "CreateMultipartUpload " + probe);
  const std::string id = xml_text(between(created.body, "<UploadId>", "</UploadId>"));
  if (created.status != 200 || id.empty()) throw fails(created, "CreateMultipartUpload " + probe);
  const std::string upload = url + "?uploadId=" + kit::percent_encode(id);
  auto abort = [&] { (void)http_->send({.method = "DELETE", .url = upload}); };
  try {
    const kit::HttpResponse part = send(
        [&] {
          return kit::HttpRequest{.method = "PUT", .url = url + "?partNumber=1&uploadId=" + kit::percent_encode(id),
                                  .body = kit::HttpBody::borrowed(body)};
        },
        "UploadPart 1 of " + probe);
    const auto etag = part.headers.get("ETag");
    if (part.status != 200 || !etag) throw fails(part, "UploadPart 1 of " + probe);
    const std::string complete = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" + std::string(*etag) +
                                 "</ETag></Part></CompleteMultipartUpload>";
    const kit::HttpResponse done = send(
        [&] {
          kit::HttpRequest r{.method = "POST", .url = upload, .body = kit::HttpBody::borrowed(complete)};
          r.headers.set("Content-Type", "application/xml");
          r.headers.set("If-None-Match", "*");
          return r;
        },
        "CompleteMultipartUpload " + probe);
    if (done.status == 200 && done.body.find("<Error>") == std::string::npos)
      throw unsupported("ignores If-None-Match: * on CompleteMultipartUpload (completing an upload onto the existing " + probe +
                        " was answered 200)");
    if (done.status != 412) throw fails(done, "CompleteMultipartUpload " + probe);
  } catch (...) {
    abort();
    throw;
  }
  abort();
}

std::vector<std::string> Client::list_keys(const std::string& prefix) {
  std::vector<std::string> keys;
  std::string token;
  for (;;) {
    // Parameters in canonical (sorted) order and encoding: libcurl 7.88 signs the query as sent.
    std::string query = "?";
    if (!token.empty()) query += "continuation-token=" + kit::percent_encode(token) + "&";
    query += "list-type=2&prefix=" + kit::percent_encode(prefix);
    std::string url = object_url(plan_, "");  // the bucket: ".../bucket" path-style, "<bucket>.host/" virtual-hosted
    if (url.back() != '/') url += '/';
    url += query;
    const kit::HttpResponse r = send([&] { return kit::HttpRequest{.method = "GET", .url = url}; }, "LIST " + prefix);
    if (r.status != 200) throw sdk::FatalError(r.completed() ? describe(r, "LIST " + prefix) : classify(r).reason);
    std::string_view body = r.body;
    size_t at = 0;
    while ((at = body.find("<Key>", at)) != std::string_view::npos) {
      const size_t end = body.find("</Key>", at);
      if (end == std::string_view::npos) break;
      keys.push_back(xml_text(body.substr(at + 5, end - at - 5)));
      at = end;
    }
    if (between(body, "<IsTruncated>", "</IsTruncated>") != "true") return keys;
    token = xml_text(between(body, "<NextContinuationToken>", "</NextContinuationToken>"));
    if (token.empty()) return keys;
  }
}

std::optional<int64_t> Client::last_offset(const std::string& key) {
  const kit::HttpResponse r = head(key);
  if (r.status == 404) return std::nullopt;
  return last_offset_of(r);
}

kit::HttpResponse Client::head(const std::string& key) {
  const std::string url = object_url(plan_, key);
  kit::HttpResponse r = send([&] { return kit::HttpRequest{.method = "HEAD", .url = url}; }, "HEAD " + key);
  if (r.status != 200 && r.status != 404) throw sdk::FatalError(r.completed() ? describe(r, "HEAD " + key) : classify(r).reason);
  return r;
}

std::optional<int64_t> Client::last_offset_of(const kit::HttpResponse& head) {
  auto v = head.headers.get("x-amz-meta-picomq-last-offset");
  std::string value = v ? std::string(*v) : "";
  if (!v) {
    // A streamed object: its last offset is in the marker written before it was completed.
    const auto in = head.headers.get("x-amz-meta-picomq-last-offset-in");
    if (!in) return std::nullopt;
    const std::string marker = std::string(*in);
    const std::string url = object_url(plan_, marker);
    const kit::HttpResponse m = send([&] { return kit::HttpRequest{.method = "GET", .url = url}; }, "GET " + marker);
    if (m.status == 404) return std::nullopt;
    if (m.status != 200) throw sdk::FatalError(m.completed() ? describe(m, "GET " + marker) : classify(m).reason);
    value = m.body;
  }
  try {
    return std::stoll(value);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Client::check_bucket() {
  kit::HttpRequest r{.method = "HEAD", .url = object_url(plan_, "")};
  r.timeout = std::min<std::chrono::milliseconds>(plan_.settings.timeout, 10s);
  const kit::HttpResponse response = http_->send(std::move(r));
  if (!response.completed())
    return "S3 endpoint " + kit::redact_url(plan_.scheme + "://" + plan_.host + plan_.base_path) +
           " not reachable now (" + response.failure->message + "); uploads will retry";
  if (response.status == 403 || response.status == 404) throw sdk::FatalError(describe(response, "HEAD bucket"));
  if (response.status >= 500) return describe(response, "HEAD bucket") + "; uploads will retry";
  return {};
}

}  // namespace picomq::s3
