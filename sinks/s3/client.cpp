#include "s3/client.h"

#include <openssl/evp.h>

#include <thread>

#include "picomq/kit/encoding.hpp"
#include "picomq/sdk.hpp"

namespace picomq::s3 {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Who wrote an object, in its metadata (what a HEAD reads back).
void set_source(kit::HttpRequest& r, const Source& source) {
  r.headers.set("x-amz-meta-picomq-topic", kit::percent_encode(source.topic));
  r.headers.set("x-amz-meta-picomq-partition", std::to_string(source.partition));
}

std::string unquote(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

}  // namespace

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

namespace {

kit::s3::ClientOptions objects_options(const Plan& plan, size_t max_in_flight, const Client::Hooks& hooks) {
  return {.bucket = plan.bucket,
          .tls = plan.settings.tls,
          .request_timeout = plan.settings.timeout,
          .connect_timeout = plan.settings.connect_timeout,
          .retry_timeout = plan.settings.retry_timeout,
          .max_in_flight = max_in_flight,
          .credentials_hint =
              "check aws_access_key_id, aws_secret_access_key (or AWS_* environment variables), "
              "aws_session_token and region",
          .log_warn = hooks.log_warn,
          .count = hooks.count};
}

}  // namespace

Client::Client(const Plan& plan, size_t max_in_flight, Hooks hooks)
    : plan_(plan), hooks_(std::move(hooks)), objects_(objects_options(plan, max_in_flight, hooks_)) {}

Client::~Client() { close(); }

void Client::put_object(const std::string& key, std::string_view body, const std::string& content_type,
                        int64_t last_offset, const Source& source) {
  const std::string url = plan_.bucket.object_url(key);
  const std::string what = "PUT " + key;
  for (;;) {
    const kit::HttpResponse response = objects_.send(
        [&] {
          kit::HttpRequest r{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
          r.headers.set("Content-Type", content_type);
          r.headers.set("x-amz-meta-picomq-last-offset", std::to_string(last_offset));
          set_source(r, source);
          if (plan_.settings.conditional_create) r.headers.set("If-None-Match", "*");
          return r;
        },
        what);
    const kit::Classification c = objects_.classify(response);
    if (c.outcome == kit::Outcome::Written) {
      if (hooks_.count) {
        hooks_.count("objects", 1);
        hooks_.count("uploaded_bytes", body.size());
      }
      return;
    }
    if (response.status == 412 && plan_.settings.conditional_create) {
      if (taken(key, md5_hex(body), {}, source) == Taken::Free) continue;  // gone again in between: create it
      return;
    }
    throw sdk::FatalError(objects_.reason(response, what));
  }
}

bool Client::is_this_upload(const kit::HttpResponse& head, const std::string& marker) const {
  if (marker.empty() || head.headers.get("x-amz-meta-picomq-last-offset-in").value_or("") != marker) return false;
  // Completed by an earlier send whose answer was lost: its marker is the object's, and stays.
  if (hooks_.count) hooks_.count("already_written_objects", 1);
  return true;
}

Client::Taken Client::taken(const std::string& key, const std::string& ours, const std::string& marker,
                            const Source& source) {
  const kit::HttpResponse h = objects_.head_object(key);
  if (h.status == 404) return Taken::Free;
  if (is_this_upload(h, marker)) return Taken::ThisUpload;
  const std::string there = unquote(h.headers.get("ETag").value_or(""));
  const int64_t last = end_of(key, h, source);  // throws for an object that is not this partition's
  if (there == ours) {
    // Written before: a resend of ours whose answer was lost, or a run that cut the same object.
    if (hooks_.count) hooks_.count("already_written_objects", 1);
    return Taken::SameBytes;
  }
  throw KeyTaken(
      key, last,
      "conditional_create: " + key + " was taken by an object with other content (ETag \"" + there + "\", ours \"" +
          ours + "\": a killed run's late upload, or records cut at other offsets), holding the records up to offset " +
          std::to_string(last) + "; the records after it go into the next object");
}

std::string Client::create_multipart(const std::string& key, const std::string& content_type, const std::string& marker,
                                     const Source& source) {
  const std::string url = plan_.bucket.object_url(key);
  const kit::HttpResponse created = objects_.send(
      [&] {
        kit::HttpRequest r{.method = "POST", .url = url + "?uploads="};
        r.headers.set("Content-Type", content_type);
        r.headers.set("x-amz-meta-picomq-last-offset-in", marker);
        set_source(r, source);
        return r;
      },
      "CreateMultipartUpload " + key);
  std::string upload_id = kit::s3::xml_element(created.body, "UploadId");
  if (created.status != 200 || upload_id.empty())
    throw sdk::FatalError((objects_.reason(created, "CreateMultipartUpload " + key)) +
                          (created.status == 200 ? " (no UploadId)" : ""));
  if (hooks_.count) hooks_.count("multipart_uploads", 1);
  return upload_id;
}

std::string Client::upload_part(const std::string& key, const std::string& upload_id, size_t number,
                                std::string_view part) {
  // Parameters in canonical (sorted) order: libcurl 7.88 signs the query as sent.
  const std::string url = plan_.bucket.object_url(key) + "?partNumber=" + std::to_string(number) +
                          "&uploadId=" + kit::percent_encode(upload_id);
  const std::string what = "UploadPart " + std::to_string(number) + " of " + key;
  const kit::HttpResponse r = objects_.send(
      [&] { return kit::HttpRequest{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(part)}; }, what);
  const auto etag = r.headers.get("ETag");
  if (r.status != 200 || !etag) throw sdk::FatalError(objects_.reason(r, what));
  if (hooks_.count) {
    hooks_.count("parts", 1);
    hooks_.count("uploaded_bytes", part.size());
  }
  return std::string(*etag);
}

void Client::put_marker(const std::string& marker, int64_t last_offset) {
  const std::string url = plan_.bucket.object_url(marker);
  const std::string body = std::to_string(last_offset);
  const kit::HttpResponse r = objects_.send(
      [&] {
        kit::HttpRequest q{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
        q.headers.set("Content-Type", "text/plain");
        q.headers.set("x-amz-meta-picomq-last-offset", body);
        return q;
      },
      "PUT " + marker);
  if (objects_.classify(r).outcome != kit::Outcome::Written) throw sdk::FatalError(objects_.reason(r, "PUT " + marker));
}

Client::Completion Client::complete_multipart(const std::string& key, const std::string& upload_id,
                                              const std::string& parts_xml, const std::string& ours,
                                              const std::string& marker, const Source& source) {
  const std::string url = plan_.bucket.object_url(key) + "?uploadId=" + kit::percent_encode(upload_id);
  const std::string complete = "<CompleteMultipartUpload>" + parts_xml + "</CompleteMultipartUpload>";
  const kit::HttpResponse done = objects_.send(
      [&] {
        kit::HttpRequest r{.method = "POST", .url = url, .body = kit::HttpBody::borrowed(complete)};
        r.headers.set("Content-Type", "application/xml");
        if (plan_.settings.conditional_create) r.headers.set("If-None-Match", "*");
        return r;
      },
      "CompleteMultipartUpload " + key);
  if (done.status == 412 && plan_.settings.conditional_create) {
    switch (taken(key, ours, marker, source)) {
      case Taken::ThisUpload: return Completion::Completed;
      case Taken::SameBytes: return Completion::TakenBySameBytes;
      case Taken::Free: break;
    }
    throw sdk::RetryableError("CompleteMultipartUpload " + key +
                              ": 412, and the key is free again; the object goes up again");
  }
  if (done.status == 404 && done.body.find("NoSuchUpload") != std::string::npos) {
    // A store that checks the upload before the condition: the resend of a Complete whose first
    // send completed it (the answer lost) finds the upload gone, and the object naming its marker.
    const kit::HttpResponse h = objects_.head_object(key);
    if (h.status == 200 && is_this_upload(h, marker)) return Completion::Completed;
  }
  // S3 can answer 200 and put the error in the body.
  if (done.status != 200 || done.body.find("<Error>") != std::string::npos)
    throw sdk::RetryableError((objects_.reason(done, "CompleteMultipartUpload " + key)) + " " + done.body_excerpt(200));
  if (hooks_.count) hooks_.count("objects", 1);
  return Completion::Completed;
}

void Client::abort_multipart(const std::string& key, const std::string& upload_id) {
  // Best effort: an upload left behind costs storage until the bucket's lifecycle rule drops it.
  const kit::HttpResponse aborted = objects_.http().send(
      {.method = "DELETE", .url = plan_.bucket.object_url(key) + "?uploadId=" + kit::percent_encode(upload_id)});
  if (hooks_.count)
    hooks_.count(aborted.status == 204 || aborted.status == 200 ? "multipart_aborted" : "multipart_abort_failed", 1);
}

void Client::delete_object(const std::string& key) {
  (void)objects_.http().send({.method = "DELETE", .url = plan_.bucket.object_url(key)});
}

void Client::check_conditional_writes() {
  const std::string probe = plan_.prefix + "_picomq/conditional-write-probe";
  const std::string url = plan_.bucket.object_url(probe);
  const std::string body = "picomq-connect: a probe that the store honours If-None-Match (docs/sinks/s3.md)";
  auto put = [&] {
    return objects_.send(
        [&] {
          kit::HttpRequest r{.method = "PUT", .url = url, .body = kit::HttpBody::borrowed(body)};
          r.headers.set("Content-Type", "text/plain");
          r.headers.set("If-None-Match", "*");
          return r;
        },
        "PUT " + probe);
  };
  const std::string where = plan_.bucket.where();
  auto unsupported = [&](const std::string& what) {
    return sdk::FatalError(
        "conditional_create: the store (" + where + ") " + what +
        ": it cannot refuse a killed run's upload that lands late, which could replace a committed object with "
        "another cut of its records. Use a store that honours If-None-Match (AWS S3, MinIO, SeaweedFS), or set "
        "conditional_create = false to write without that protection (docs/sinks/s3.md, \"Behaviour under replay and "
        "crashes\")");
  };
  auto fails = [&](const kit::HttpResponse& r, const std::string& what) -> sdk::FatalError {
    if (r.status == 501 || r.status == 400)
      return unsupported("refused If-None-Match on " + what + " (" + objects_.describe(r, what) + ")");
    return sdk::FatalError(objects_.reason(r, what));
  };
  const kit::HttpResponse first = put();
  if (first.status != 412 && objects_.classify(first).outcome != kit::Outcome::Written)
    throw fails(first, "PUT " + probe);
  if (first.status != 412) {
    const kit::HttpResponse second = put();
    if (objects_.classify(second).outcome == kit::Outcome::Written)
      throw unsupported("ignores If-None-Match: * on PUT (a second conditional PUT of " + probe + " was answered " +
                        std::to_string(second.status) + ")");
    if (second.status != 412) throw fails(second, "PUT " + probe);
  }
  // The same on CompleteMultipartUpload: one small part, completed onto the probe that exists
  // (plain requests: the probe counts in no counter of the sink's objects).
  const kit::HttpResponse created = objects_.send(
      [&] { return kit::HttpRequest{.method = "POST", .url = url + "?uploads="}; }, "CreateMultipartUpload " + probe);
  const std::string id = kit::s3::xml_element(created.body, "UploadId");
  if (created.status != 200 || id.empty()) throw fails(created, "CreateMultipartUpload " + probe);
  const std::string upload = url + "?uploadId=" + kit::percent_encode(id);
  auto abort = [&] { (void)objects_.http().send({.method = "DELETE", .url = upload}); };
  try {
    const kit::HttpResponse part = objects_.send(
        [&] {
          return kit::HttpRequest{.method = "PUT",
                                  .url = url + "?partNumber=1&uploadId=" + kit::percent_encode(id),
                                  .body = kit::HttpBody::borrowed(body)};
        },
        "UploadPart 1 of " + probe);
    const auto etag = part.headers.get("ETag");
    if (part.status != 200 || !etag) throw fails(part, "UploadPart 1 of " + probe);
    const std::string complete = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" +
                                 std::string(*etag) + "</ETag></Part></CompleteMultipartUpload>";
    const kit::HttpResponse done = objects_.send(
        [&] {
          kit::HttpRequest r{.method = "POST", .url = upload, .body = kit::HttpBody::borrowed(complete)};
          r.headers.set("Content-Type", "application/xml");
          r.headers.set("If-None-Match", "*");
          return r;
        },
        "CompleteMultipartUpload " + probe);
    if (done.status == 200 && done.body.find("<Error>") == std::string::npos)
      throw unsupported("ignores If-None-Match: * on CompleteMultipartUpload (completing an upload onto the existing " +
                        probe + " was answered 200)");
    if (done.status != 412) throw fails(done, "CompleteMultipartUpload " + probe);
  } catch (...) {
    abort();
    throw;
  }
  abort();
}

std::vector<std::string> Client::list_keys(const std::string& prefix) { return objects_.list_keys(prefix); }

std::optional<int64_t> Client::last_offset(const std::string& key, const Source& source) {
  const kit::HttpResponse r = objects_.head_object(key);
  if (r.status == 404) return std::nullopt;
  return end_of(key, r, source);
}

int64_t Client::end_of(const std::string& key, const kit::HttpResponse& head, const Source& source) {
  const std::string where = key + " in bucket '" + plan_.settings.bucket + "'";
  const auto topic = head.headers.get("x-amz-meta-picomq-topic");
  const auto partition = head.headers.get("x-amz-meta-picomq-partition");
  // Objects of versions before 2026-12 carry neither: taken as the key's (their key was resolved for it).
  if ((topic && *topic != kit::percent_encode(source.topic)) ||
      (partition && *partition != std::to_string(source.partition)))
    throw sdk::FatalError(
        where + " holds records of topic '" + std::string(topic.value_or("?")) + "' partition " +
        std::string(partition.value_or("?")) + " (its picomq metadata), not of '" + source.topic + "' partition " +
        std::to_string(source.partition) +
        ": the key template gives both the same keys (two definitions sharing bucket, prefix and key_template, or a "
        "template that cannot tell them apart), so the sink neither skips records for that object nor replaces it. "
        "Give each definition its own prefix, or put {topic} and {partition} into key_template");
  auto parse = [](std::string_view text) -> std::optional<int64_t> {
    try {
      size_t used = 0;
      const int64_t v = std::stoll(std::string(text), &used);
      if (used == text.size()) return v;
    } catch (const std::exception&) {}
    return std::nullopt;
  };
  if (const auto v = head.headers.get("x-amz-meta-picomq-last-offset")) {
    if (const auto last = parse(*v)) return *last;
  } else if (const auto in = head.headers.get("x-amz-meta-picomq-last-offset-in")) {
    // A streamed object: its last offset is in the marker written before it was completed.
    const std::string marker(*in);
    const kit::HttpResponse m = objects_.get_if_exists(marker);
    if (m.status == 200)
      if (const auto last = parse(m.body)) return *last;
    throw sdk::FatalError(
        where + " is an object of picomq's whose end cannot be read: the marker " + marker +
        " that its metadata names (x-amz-meta-picomq-last-offset-in) is " +
        (m.status == 404 ? std::string("gone") : "unreadable (" + objects_.describe(m, "GET " + marker) + ")") +
        ", so which records it holds is unknown, and the sink will neither skip them nor write them again. Put the "
        "marker back (its body: the offset of the object's last record, pico_offset of its last line in json_lines), "
        "or move the object away");
  }
  throw sdk::FatalError(
      "conditional_create: " + where +
      " exists without picomq's last-offset metadata, so what it holds is "
      "unknown: another writer's object, or a changed key template; move it away or change prefix / key_template");
}

std::string Client::check_bucket() { return objects_.check_bucket(); }

}  // namespace picomq::s3
