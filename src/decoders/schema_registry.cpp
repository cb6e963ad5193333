#include "decoders/schema_registry.h"

#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include "decoders/avro_decoder.h"

namespace picomq::decoders {

namespace {

constexpr long kConnectTimeoutMs = 5000;
constexpr long kRequestTimeoutMs = 10000;
constexpr size_t kMaxBody = 16u << 20;

void global_init() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

struct UrlHandle {
  CURLU* h = curl_url();
  ~UrlHandle() { curl_url_cleanup(h); }
  std::string get(CURLUPart part, unsigned flags = 0) const {
    char* v = nullptr;
    if (curl_url_get(h, part, &v, flags) != CURLUE_OK || !v) return {};
    std::string s(v);
    curl_free(v);
    return s;
  }
};

size_t write_body(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > kMaxBody) return 0;  // aborts the transfer
  body->append(data, size * n);
  return size * n;
}

}  // namespace

std::string redact_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const auto host_start = scheme_end + 3;
  const auto path_start = url.find_first_of("/?#", host_start);
  const auto at = url.substr(0, path_start).rfind('@');
  if (at == std::string_view::npos || at < host_start) return std::string(url);
  return std::string(url.substr(0, host_start)) + "***" + std::string(url.substr(at));
}

std::shared_ptr<SchemaRegistry> SchemaRegistry::create(const std::string& url, std::string& error, size_t max_entries) {
  global_init();
  std::shared_ptr<SchemaRegistry> r(new SchemaRegistry());
  r->max_entries_ = max_entries ? max_entries : 1;
  r->redacted_ = redact_url(url);
  UrlHandle u;
  if (curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    error = "'" + r->redacted_ + "' is not a URL (expected http://host:port or https://host/path)";
    return nullptr;
  }
  const std::string scheme = u.get(CURLUPART_SCHEME);
  if (scheme != "http" && scheme != "https") {
    error = "'" + r->redacted_ + "' must be an http:// or https:// URL";
    return nullptr;
  }
  if (u.get(CURLUPART_HOST).empty()) {
    error = "'" + r->redacted_ + "' has no host";
    return nullptr;
  }
  if (!u.get(CURLUPART_QUERY).empty() || !u.get(CURLUPART_FRAGMENT).empty()) {
    error = "'" + r->redacted_ + "' must not have a query or fragment";
    return nullptr;
  }
  const std::string user = u.get(CURLUPART_USER, CURLU_URLDECODE);
  const std::string password = u.get(CURLUPART_PASSWORD, CURLU_URLDECODE);
  if (!user.empty() || !password.empty()) {
    r->has_auth_ = true;
    r->user_ = user;
    r->password_ = password;
    curl_url_set(u.h, CURLUPART_USER, nullptr, 0);
    curl_url_set(u.h, CURLUPART_PASSWORD, nullptr, 0);
  }
  r->base_ = u.get(CURLUPART_URL);
  while (!r->base_.empty() && r->base_.back() == '/') r->base_.pop_back();
  return r;
}

size_t SchemaRegistry::cached() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

uint64_t SchemaRegistry::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

Status SchemaRegistry::fetch(uint32_t id, std::string& body, std::string& error) {
  {
    std::lock_guard lock(mutex_);
    ++requests_;
  }
  const std::string where = "schema registry " + redacted_ + " (schema id " + std::to_string(id) + ")";
  CURL* curl = curl_easy_init();
  if (!curl) {
    error = "avro: cannot create an HTTP client for the " + where;
    return Status::retry;
  }
  const std::string url = base_ + "/schemas/ids/" + std::to_string(id);
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/vnd.schemaregistry.v1+json, application/json");
  char curl_error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, kRequestTimeoutMs);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  if (has_auth_) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, user_.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, password_.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    error = "avro: " + where + " unreachable: " + (curl_error[0] ? curl_error : curl_easy_strerror(rc));
    return Status::retry;
  }
  if (status == 404) {
    error = "avro: " + where + ": no such schema (HTTP 404)";
    return Status::bad_record;
  }
  if (status != 200) {
    std::string detail;
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("message") && j["message"].is_string())
      detail = ": " + j["message"].get<std::string>();
    error = "avro: " + where + " answered HTTP " + std::to_string(status) + detail;
    return Status::retry;
  }
  return Status::ok;
}

Status SchemaRegistry::lookup(uint32_t id, std::shared_ptr<const AvroSchema>& schema, std::string& error) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(id); it != cache_.end()) {
      schema = it->second;
      return Status::ok;
    }
  }
  std::string body;
  if (const Status s = fetch(id, body, error); s != Status::ok) return s;
  const std::string where = "schema registry " + redacted_ + " (schema id " + std::to_string(id) + ")";
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) {
    error = "avro: " + where + " answered without a \"schema\" string";
    return Status::retry;
  }
  if (j.contains("schemaType") && j["schemaType"].is_string() && j["schemaType"].get<std::string>() != "AVRO") {
    error = "avro: " + where + " is a " + j["schemaType"].get<std::string>() + " schema, not AVRO";
    return Status::bad_record;
  }
  std::string problem;
  auto compiled = compile_avro(j["schema"].get<std::string>(), problem);
  if (!compiled) {
    error = "avro: " + where + " is not a valid Avro schema: " + problem;
    return Status::bad_record;
  }
  std::lock_guard lock(mutex_);
  if (cache_.size() >= max_entries_) cache_.erase(cache_.begin());
  cache_.emplace(id, compiled);
  schema = std::move(compiled);
  return Status::ok;
}

}  // namespace picomq::decoders
