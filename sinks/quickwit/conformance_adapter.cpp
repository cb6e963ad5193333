// The Quickwit sink in the conformance suite, on the test process's Quickwit contract server
// (sinks/quickwit/tests/quickwit_contract.py, written from Quickwit's REST API reference: no real
// Quickwit exists here). Each test starts on a reset server; indexes are created from
// index_config, written with commit = force (searchable at once) and read back with search, the
// flat documents turned into the envelope the suite reads. Quickwit keeps no document ids: a
// replay writes records again (at-least-once, declared). The outage: every request answered 503;
// the permanent error: a token an authenticating front refuses (403); the refused record: a
// document the doc mapping refuses (n is an i64).
#include <regex>

#include "conformance.h"
#include "contract_servers.h"

namespace picomq::conformance {
namespace {

constexpr const char* kRefusedToken = "refused-token";

class QuickwitAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "quickwit"; }
  std::string plugin() const override { return "libpicomq_connector_quickwit_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = false;  // no document ids in Quickwit: replays duplicate (pico_id tells them apart)
    c.destinations_per_topic = true;
    c.binary_keys = false;
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& server = test::quickwit_contract();
    server.call("POST", "/_control/reset", "{}");
    test::contract_control(server, {{"refused_authorization", std::string("Bearer ") + kRefusedToken}});
    return "url = \"" + server.base_url() + "\"\nindex = \"" + target +
           "\"\ntimeout = \"2s\"\nretry_timeout = \"1s\"\n"
           "commit = \"force\"\nindex_config = { version = \"0.8\", doc_mapping = { mode = \"dynamic\", field_mappings "
           "= "
           "[{ name = \"n\", type = \"i64\" }] } }";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    const auto indexes = nlohmann::json::parse(test::quickwit_contract().call("GET", "/api/v1/indexes").second);
    for (const auto& meta : indexes) {
      const std::string id = meta["index_config"]["index_id"].get<std::string>();
      for (const auto& doc : test::quickwit_documents(id)) {
        nlohmann::json envelope = nlohmann::json::object(), payload = nlohmann::json::object();
        for (const auto& [k, v] : doc.items()) (k.rfind("pico_", 0) == 0 ? envelope[k] : payload[k]) = v;
        envelope.erase("pico_id");
        envelope["payload"] = payload.size() == 1 && payload.contains("payload") ? payload["payload"] : payload;
        out.push_back(from_envelope(envelope, id));
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    static const std::regex rule("^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$");
    return std::regex_match(name, rule);
  }

  void inject_transient_failure(bool on) override {
    auto& server = test::quickwit_contract();
    if (on)
      test::contract_control(server,
                             {{"fail_requests", {{{"path_prefix", "/"}, {"status", 503}, {"count", 1000000}}}}});
    else test::contract_control(server, {{"clear_failures", true}});
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {std::string("auth = \"bearer\"\nauth_token = \"") + kRefusedToken + "\"", "check the auth options"};
  }
  std::string rejecting_config() const override { return ""; }
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }
};

PICOMQ_CONFORMANCE_ADAPTER(QuickwitAdapter);

}  // namespace
}  // namespace picomq::conformance
