#pragma once
// OAuth 2.0 client credentials (RFC 6749 section 4.4): an access token fetched from the token
// endpoint with the client's id and secret, cached, and fetched again before it expires (at 80%
// of its lifetime, and at the latest 30 s before), or at once after the endpoint refused it
// (invalidate()). Tokens are bearer tokens (RFC 6750).
//
//   kit::OAuth2ClientCredentials oauth(client_options, kit::oauth2_settings(settings.auth));
//   request.headers.set("Authorization", "Bearer " + oauth.token());   // may fetch: not on an I/O thread
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"

namespace picomq::kit {

struct OAuth2Settings {
  std::string token_url, client_id, client_secret, scope;
  OAuth2ClientAuth client_auth = OAuth2ClientAuth::Basic;
  std::chrono::seconds default_lifetime{3600};  // when the response has no expires_in
};
OAuth2Settings oauth2_settings(const AuthSettings& auth);

class OAuth2ClientCredentials {
 public:
  // `base`: the sink's client options, for their TLS settings and timeouts; the token requests
  // go on a client of their own, without the sink's auth or compression.
  OAuth2ClientCredentials(HttpClientOptions base, OAuth2Settings settings);

  // A token valid now, fetched when there is none or it is due for renewal. Blocks while it
  // fetches (a synchronous request: never call it from an HTTP client callback). Throws
  // sdk::FatalError when the endpoint refuses the client (400 invalid_client, 401: the
  // credentials are wrong), sdk::RetryableError when it cannot be reached or fails (5xx).
  std::string token();
  // The token the endpoint refused (a 401 from the destination): the next token() fetches anew.
  void invalidate(const std::string& refused);
  size_t fetches() const;

 private:
  using Clock = std::chrono::steady_clock;
  OAuth2Settings settings_;
  HttpClient client_;
  mutable std::mutex mutex_;
  std::string token_;
  Clock::time_point renew_at_{}, expires_at_{};
  size_t fetches_ = 0;
};

}  // namespace picomq::kit
