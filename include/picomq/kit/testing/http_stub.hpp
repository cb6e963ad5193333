#pragma once
// The HTTP stub for sink tests: real servers on loopback ports, driven from a GoogleTest test.
//
//   kit::testing::HttpReceiver receiver;                  // http_receiver.py as a child process
//   receiver.script({{"path", "/bulk"}, {"status", 503}, {"headers", {{"Retry-After", "1"}}}});
//   ... point the sink's encoder / client at receiver.url("/bulk") ...
//   auto seen = receiver.requests("/bulk");              // method, headers, decompressed body
//
//   kit::testing::Nginx nginx(kit::testing::Nginx::Tls::On);  // nginx.sh: 204 to POST/PUT
//
// The receiver's scripting language is documented at the top of http_receiver.py. Both servers
// stop with their owner: the receiver when its stdin (a pipe from this process) closes, nginx
// through nginx.sh's watchdog.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::kit {

// GoogleTest prints these by name in failure messages (found by argument-dependent lookup).
inline void PrintTo(Outcome v, std::ostream* os) { *os << to_string(v); }
inline void PrintTo(TransportError v, std::ostream* os) { *os << to_string(v); }
inline void PrintTo(SendProgress v, std::ostream* os) { *os << to_string(v); }
inline void PrintTo(HttpProtocol v, std::ostream* os) { *os << to_string(v); }

}  // namespace picomq::kit

namespace picomq::kit::testing {

// `timeout` times PICOMQ_TEST_TIMEOUT_MULTIPLIER (at least 1): waits that survive a loaded machine.
std::chrono::milliseconds scaled(std::chrono::milliseconds timeout);

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string query;
  HttpHeaders headers;
  std::string body;      // decompressed
  size_t wire_size = 0;  // bytes as received
  std::string content_encoding;
  bool chunked = false;
  int connection = 0;      // which TCP connection (1, 2, ... in accept order)
  bool duplicate = false;  // answered from the idempotency store
  nlohmann::json answer;   // the status sent, or the action ("reset", "close"...)
};

struct ReceiverStats {
  size_t requests = 0;
  size_t connections = 0;
  size_t in_flight = 0;
  size_t max_in_flight = 0;  // most requests being answered at once
  size_t duplicates = 0;
  size_t held = 0;                             // requests a "hold" rule took
  size_t held_now = 0;                         // of those, not forwarded yet
  size_t applied_late = 0;                     // forwarded after their client had gone (killed, or gave up)
  std::map<std::string, size_t> late_answers;  // the forward target's statuses to those ("412": 3)
};

// A request a "hold" rule keeps (GET /_control/held).
struct HeldRequest {
  int64_t id = 0;
  std::string method, path, query;
  bool client_gone = false;
};

class HttpReceiver {
 public:
  // Starts sinkkit/testing/http_receiver.py and waits for its port. Throws std::runtime_error
  // when it does not come up.
  HttpReceiver();
  // Another server script with the same start-up protocol (--exit-on-stdin-eof, its port alone
  // on the first line of stdout), e.g. a sink's contract server for a destination that cannot
  // run here; `args` follow the script. The control methods below need http_receiver.py's API.
  explicit HttpReceiver(std::string script, std::vector<std::string> args = {});
  ~HttpReceiver();
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  uint16_t port() const { return port_; }
  std::string base_url() const;                  // http://127.0.0.1:<port>
  std::string url(std::string_view path) const;  // base_url() + path

  // One rule object or an array of them (POST /_control/script).
  void script(const nlohmann::json& rules);
  void set_default_answer(long status, const nlohmann::json& headers = nlohmann::json::object(), std::string body = "");
  // A recording proxy: requests no rule answers go to `target` (e.g. http://127.0.0.1:8181) and
  // its answers come back; a rule with "forward": true sends the request there first and then
  // answers itself (a write whose answer was lost). nullopt: off.
  void forward_to(std::optional<std::string> target);
  // Idempotency mode on for this header name (nullopt: off).
  void idempotency(std::optional<std::string> header);
  void reset();
  // A request to the server outside the control API (JSON Content-Type): status and body.
  std::pair<long, std::string> call(const char* method, std::string_view path, const std::string& body = {}) const;
  std::vector<RecordedRequest> requests(std::string_view path = {}) const;
  ReceiverStats stats() const;
  // The requests held now (rule action "hold"), oldest first.
  std::vector<HeldRequest> held() const;
  // Forwards held requests now, one after the other (every held one when `ids` is empty); the
  // forward target's status to each, by id.
  std::map<int64_t, long> release(const std::vector<int64_t>& ids = {});
  // Stops the server now: its port refuses connections afterwards.
  void stop();

 private:
  nlohmann::json control(const char* method, std::string_view endpoint, const std::string& body = {}) const;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  uint16_t port_ = 0;
};

// From nginx's stub_status, since the Nginx object was made, without its own status requests.
struct NginxStats {
  uint64_t accepted_connections = 0;
  uint64_t requests = 0;
};

// Debian's nginx (package nginx-light) on a free loopback port, answering 204 to POST and PUT on
// any path (405 to other methods); /mtls/... answers 204 only to a client certificate the test
// CA signed (403 otherwise); /_status is nginx's stub_status. With TLS: a throwaway CA, a server
// certificate for 127.0.0.1 / localhost, HTTP/2 offered through ALPN, and a client certificate
// whose key is encrypted with client_key_password(). With Options::proxy_to, the other paths go to
// that upstream instead (a TLS front for a plain-HTTP test server); with Options::authorizations,
// they need an Authorization header equal to one of those values (else 401, WWW-Authenticate and
// a security_exception body).
class Nginx {
 public:
  enum class Tls { Off, On };
  struct Options {
    Tls tls = Tls::Off;
    std::string proxy_to;                     // e.g. http://127.0.0.1:9200; empty: 204 to POST/PUT
    std::vector<std::string> authorizations;  // e.g. "Basic dXNlcjpwYXNz", "ApiKey ..."; empty: none needed
  };
  explicit Nginx(Tls tls = Tls::Off) : Nginx(Options{.tls = tls, .proxy_to = {}, .authorizations = {}}) {}
  explicit Nginx(const Options& options);
  ~Nginx();
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  uint16_t port() const { return port_; }
  std::string base_url() const;  // http(s)://127.0.0.1:<port>
  std::filesystem::path ca_file() const { return dir_ / "ca.pem"; }
  std::filesystem::path client_cert_file() const { return dir_ / "client.pem"; }
  std::filesystem::path client_key_file() const { return dir_ / "client.key"; }
  static std::string client_key_password() { return "picomq-test-client-key"; }
  NginxStats stats() const;

 private:
  NginxStats raw_stats() const;  // stub_status as it is, counting the request that asks

  std::filesystem::path dir_;
  bool tls_;
  uint16_t port_ = 0;
  NginxStats baseline_;                   // startup's readiness checks and the first raw_stats()
  mutable uint64_t status_requests_ = 0;  // raw_stats() calls since the baseline
};

}  // namespace picomq::kit::testing
