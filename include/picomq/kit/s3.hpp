#pragma once
// An S3 bucket's objects over the kit's HTTP client, signed with AWS SigV4 (libcurl's
// CURLOPT_AWS_SIGV4; the client adds x-amz-content-sha256): path-style or virtual-hosted URLs,
// S3's error document, S3's statuses as outcomes, and the requests every sink that stages or
// writes objects makes (PUT, GET, HEAD, DELETE, ListObjectsV2, HEAD Bucket), each resent on what
// S3 allows to resend for up to retry_timeout and cut short by close(). The S3 sink builds its
// conditional and multipart writes on it; the Redshift sink stages its loads with it.
//
// Outcomes (docs/sinks/s3.md, "Errors"):
//   500, 502, 503 (SlowDown), 504, 429, 409 (OperationAborted), 400 RequestTimeout, transport
//   errors: resent with back-off (at least Retry-After) for up to retry_timeout, then
//   sdk::RetryableError;
//   403 (SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied...), 404 NoSuchBucket, other 4xx:
//   sdk::FatalError naming S3's code and what to check; credentials are never in a message.
//
//   kit::s3::Bucket bucket{.name = "b", .region = "eu-west-1", .access_key_id = ..., .secret_access_key = ...};
//   if (auto problem = kit::s3::set_endpoint(bucket, "http://127.0.0.1:8333")) ...;
//   kit::s3::Client objects({.bucket = bucket, .retry_timeout = 30s});
//   objects.put_object("stage/1-9.csv.gz", body, "application/gzip");
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::kit::s3 {

// Where the objects are and who signs for them.
struct Bucket {
  std::string name;
  std::string region = "us-east-1";
  std::string scheme = "https";
  std::string host;        // host[:port] of the endpoint
  std::string base_path;   // the endpoint's path, without a trailing '/'
  bool path_style = true;  // <endpoint>/<bucket>/<key>; false: <scheme>://<bucket>.<host>/<key>
  std::string access_key_id, secret_access_key, session_token;

  // The URL of an object key (percent-encoded per path segment, '/' kept); an empty key is the
  // bucket itself.
  std::string object_url(std::string_view key) const;
  // "bucket 'b' at https://host/base", for messages (credentials in the URL redacted).
  std::string where() const;
};

// Sets scheme, host and base_path from "http[s]://host[:port][/path]"; the problem as a sentence
// (naming the endpoint, redacted) when it is not such a URL.
std::optional<std::string> set_endpoint(Bucket& bucket, std::string_view endpoint);

// S3's error document (<Error><Code>..</Code><Message>..</Message></Error>), or empty fields.
struct Error {
  std::string code, message;
};
Error parse_error(std::string_view body);

// The text of the first <name>...</name> element of an XML body, its entities decoded (the five
// predefined ones and numeric references: what S3 escapes in keys and tokens); empty without one.
std::string xml_element(std::string_view body, std::string_view name);
// Entities of an XML text decoded.
std::string xml_text(std::string_view raw);

struct ClientOptions {
  Bucket bucket;
  TlsSettings tls;
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds retry_timeout{std::chrono::seconds(30)};  // how long a retryable answer is resent
  size_t max_in_flight = 1;
  size_t max_response_body = 64 << 10;
  // What to check when S3 refuses the credentials, in the sink's option names.
  std::string credentials_hint = "check aws_access_key_id, aws_secret_access_key and region";
  std::function<void(const std::string&)> log_warn;  // the HTTP client's transport warnings
  std::function<void(const char*, uint64_t)> count;  // "requests", "resends"
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Bucket& bucket() const { return options_.bucket; }
  Classification classify(const HttpResponse& response) const { return rules_.classify(response); }
  // A refused answer as a sentence: S3's code and message, the bucket, what to check.
  std::string describe(const HttpResponse& response, const std::string& what) const;
  // describe(), or the transport failure's reason for an answer that did not complete.
  std::string reason(const HttpResponse& response, const std::string& what) const;

  // Sends make()'s request until its answer is not a retry (every request the kit makes of S3
  // is idempotent: a PUT replaces the whole object); returns that answer. Throws
  // sdk::RetryableError when retry_timeout is over or the client is closed.
  HttpResponse send(const std::function<HttpRequest()>& make, const std::string& what);

  // PUT Object; throws sdk::FatalError for an answer other than 2xx (and like send()).
  void put_object(const std::string& key, std::string_view body, const std::string& content_type,
                  const HttpHeaders& headers = {});
  // GET Object: its bytes; throws sdk::FatalError when it is not there (and like send()).
  std::string get_object(const std::string& key);
  // GET or HEAD of an object: the answer, 200 or 404; throws sdk::FatalError on any other.
  HttpResponse get_if_exists(const std::string& key);
  HttpResponse head_object(const std::string& key);
  // DELETE Object (an object already gone is no error); throws like put_object.
  void delete_object(const std::string& key);
  // Keys under `prefix` (ListObjectsV2, every page).
  std::vector<std::string> list_keys(const std::string& prefix);
  // A start-up check (HEAD Bucket): throws sdk::FatalError when the bucket does not exist or the
  // credentials are refused; returns a warning when S3 cannot be reached now (writes retry).
  std::string check_bucket();

  // Cuts every wait and request short.
  void close();
  bool closed() const { return stop_.stopped(); }
  HttpClient& http() { return *http_; }
  const Redactor& redactor() const { return http_->redactor(); }

 private:
  HttpResponse expect(const HttpResponse& response, std::initializer_list<int> statuses, const std::string& what) const;

  ClientOptions options_;
  OutcomeRules rules_;
  std::unique_ptr<HttpClient> http_;
  StopSignal stop_;
};

}  // namespace picomq::kit::s3
