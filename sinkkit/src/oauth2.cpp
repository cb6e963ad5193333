#include "picomq/kit/oauth2.hpp"

#include <nlohmann/json.hpp>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit {
namespace {

// application/x-www-form-urlencoded (WHATWG URL, "application/x-www-form-urlencoded serializing").
std::string form_escape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '*' || c == '-' ||
        c == '.' || c == '_') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

static HttpClientOptions token_client_options(HttpClientOptions o, const OAuth2Settings& settings) {
  o.auth = std::monostate{};
  o.compression = Compression::None;
  o.max_in_flight = 1;
  o.secrets.push_back(settings.client_secret);
  return o;
}

OAuth2ClientCredentials::OAuth2ClientCredentials(HttpClientOptions base, OAuth2Settings settings)
    : settings_(std::move(settings)), client_(token_client_options(std::move(base), settings_)) {}

OAuth2Settings oauth2_settings(const AuthSettings& auth) {
  return {auth.oauth2_token_url.value_or(""), auth.oauth2_client_id.value_or(""),
          auth.oauth2_client_secret.value_or(""), auth.oauth2_scope.value_or(""), auth.oauth2_client_auth};
}

std::string OAuth2ClientCredentials::token() {
  std::lock_guard lock(mutex_);
  if (!token_.empty() && Clock::now() < renew_at_) return token_;
  HttpRequest request{.method = "POST", .url = settings_.token_url};
  request.headers.set("Content-Type", "application/x-www-form-urlencoded");
  request.headers.set("Accept", "application/json");
  std::string body = "grant_type=client_credentials";
  if (!settings_.scope.empty()) body += "&scope=" + form_escape(settings_.scope);
  if (settings_.client_auth == OAuth2ClientAuth::Basic) {
    // RFC 6749 section 2.3.1: id and secret form-encoded, then joined for Basic.
    request.headers.set("Authorization", "Basic " + base64_encode(form_escape(settings_.client_id) + ":" +
                                                                  form_escape(settings_.client_secret)));
  } else {
    body += "&client_id=" + form_escape(settings_.client_id) + "&client_secret=" + form_escape(settings_.client_secret);
  }
  request.body = std::move(body);
  const HttpResponse response = client_.send(std::move(request));
  ++fetches_;
  const std::string where = "the OAuth2 token endpoint " + redact_url(settings_.token_url);
  if (!response.completed() || response.status >= 500 || response.status == 429 || response.status == 408) {
    // Keep using a token that has not expired yet: the endpoint's outage is not the sink's.
    if (!token_.empty() && Clock::now() < expires_at_) return token_;
    throw sdk::RetryableError(where + " did not answer: " + OutcomeRules().classify(response).reason);
  }
  if (response.status != 200)
    throw sdk::FatalError(where + " refused the client credentials: " + OutcomeRules().classify(response).reason);
  const auto json = nlohmann::json::parse(response.body, nullptr, false);
  if (!json.is_object() || !json.contains("access_token") || !json["access_token"].is_string())
    throw sdk::FatalError(where + " answered without an access_token");
  if (json.contains("token_type") && json["token_type"].is_string()) {
    std::string type = json["token_type"];
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (type != "bearer")
      throw sdk::FatalError(where + " issued a '" + type + "' token; only bearer tokens are supported");
  }
  auto lifetime = settings_.default_lifetime;
  if (json.contains("expires_in") && json["expires_in"].is_number())
    lifetime = std::chrono::seconds(std::max<int64_t>(1, json["expires_in"].get<int64_t>()));
  const auto now = Clock::now();
  token_ = json["access_token"].get<std::string>();
  expires_at_ = now + lifetime;
  // Renew at 80% of the lifetime, and at least 30 s before it ends (when it is that long).
  auto renew_in = std::chrono::duration_cast<Clock::duration>(lifetime * 4 / 5);
  if (lifetime > std::chrono::seconds(60))
    renew_in = std::min<Clock::duration>(renew_in, lifetime - std::chrono::seconds(30));
  renew_at_ = now + renew_in;
  return token_;
}

void OAuth2ClientCredentials::invalidate(const std::string& refused) {
  std::lock_guard lock(mutex_);
  if (token_ == refused) {
    token_.clear();
    renew_at_ = expires_at_ = {};
  }
}

size_t OAuth2ClientCredentials::fetches() const {
  std::lock_guard lock(mutex_);
  return fetches_;
}

}  // namespace picomq::kit
