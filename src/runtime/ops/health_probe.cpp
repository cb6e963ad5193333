#include "runtime/ops/health_probe.h"

#include <httplib.h>

#include <iostream>
#include <regex>

namespace picomq::runtime {

int probe_health(const std::string& url, const std::string& token) {
  static const std::regex shape(R"(^(https?://[^/]+)(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, shape)) {
    std::cerr << "health: '" << url << "' is not an http:// or https:// URL\n";
    return 1;
  }
  httplib::Client client(m[1].str());
  client.enable_server_certificate_verification(false);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  const std::string path = m[2].matched ? m[2].str() : "/health/ready";
  auto res = client.Get(path, headers);
  if (!res) {
    std::cerr << "health: " << url << ": " << httplib::to_string(res.error()) << '\n';
    return 1;
  }
  std::cerr << "health: " << url << ": " << res->status << ' ' << res->body << '\n';
  return res->status == 200 ? 0 : 1;
}

}  // namespace picomq::runtime
