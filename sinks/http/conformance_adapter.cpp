// The HTTP sink in the conformance suite. Its destination is the kit's fault-injecting receiver
// (a real HTTP server on a loopback port, one for the run): each test writes under a path prefix
// of its own, /conf/<test>/<destination>, and what was written is what the receiver accepted
// (2xx answers), record by record from the NDJSON bodies.
#include <mutex>
#include <regex>

#include "conformance.h"
#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::conformance {
namespace {

namespace kt = kit::testing;

std::string url_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

class HttpAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "http"; }
  std::string plugin() const override { return "libpicomq_connector_http_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    // Every request carries an idempotency key of its records, but a replay may cut batches at
    // other offsets: a receiver deduplicates by key (docs/sinks/http.md), the sink itself is
    // at-least-once.
    c.deduplicates_replays = false;
    c.destinations_per_topic = true;  // the URL template, per topic
    c.binary_keys = false;            // JSON: base64
    return c;
  }

  std::string prepare(const std::string& test_name, const std::string& target) override {
    std::lock_guard lock(mutex_);
    receiver();
    prefix_ = "/conf/" + test_name + "/";
    return "url = \"" + receiver().url(prefix_ + target) + "\"\nmax_request_records = 7\nretry_timeout = \"2s\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    for (const auto& r : receiver().requests()) {
      if (r.path.rfind(prefix_, 0) != 0 || r.method != "POST") continue;
      if (!r.answer.is_number() || r.answer.get<int>() / 100 != 2) continue;  // not accepted
      const std::string destination = r.path.substr(prefix_.size());
      size_t start = 0;
      while (start < r.body.size()) {
        const size_t end = r.body.find('\n', start);
        const auto j = nlohmann::json::parse(r.body.substr(start, end - start));
        start = end == std::string::npos ? r.body.size() : end + 1;
        out.push_back(from_envelope(j, url_decode(destination)));
      }
    }
    return out;
  }

  // What the sink puts in a URL path: the topic percent-encoded outside RFC 3986's unreserved set.
  bool legal_destination(const std::string& name) const override {
    static const std::regex path_segment("[A-Za-z0-9._~%-]+");
    std::string encoded;
    for (unsigned char c : name) {
      if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') encoded += static_cast<char>(c);
      else encoded += "%XX";
    }
    return !name.empty() && std::regex_match(encoded, path_segment);
  }

  void inject_transient_failure(bool on) override {
    if (on) receiver().set_default_answer(503, {{"Retry-After", "1"}});
    else receiver().set_default_answer(200, {{"Content-Type", "application/json"}}, "{}");
  }
  // 405 is configuration (the method): the sink stops in Error naming the status.
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"method = \"PATCH\"", "405"};
  }
  // The receiver refuses any request that carries this payload (400); the sink bisects to it.
  std::string rejecting_config() const override { return ""; }
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 private:
  kt::HttpReceiver& receiver() {
    if (!receiver_) {
      receiver_ = std::make_unique<kt::HttpReceiver>();
      receiver_->script(nlohmann::json::array({{{"method", "PATCH"}, {"status", 405}, {"count", 0}},
                                               {{"when_body_contains", "\"not a number\""},
                                                {"status", 400},
                                                {"body", "n must be a number"},
                                                {"count", 0}}}));
    }
    return *receiver_;
  }
  std::mutex mutex_;
  std::unique_ptr<kt::HttpReceiver> receiver_;
  std::string prefix_;
};

PICOMQ_CONFORMANCE_ADAPTER(HttpAdapter);

}  // namespace
}  // namespace picomq::conformance
