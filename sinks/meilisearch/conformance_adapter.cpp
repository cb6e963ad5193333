// The Meilisearch sink in the conformance suite, on the test process's Meilisearch contract server
// (sinks/meilisearch/tests/meilisearch_contract.py, written from Meilisearch's API reference: no
// real Meilisearch exists here). Each test starts on a reset server; documents in the flat layout
// are read back through the documents API and turned into the envelope the suite reads. Record
// ids make a replay replace itself. The outage: every request answered 503; the permanent error:
// index settings Meilisearch refuses; the refused record: an invalid `_geo` (the task fails on it).
#include "conformance.h"
#include "contract_servers.h"

namespace picomq::conformance {
namespace {

class MeilisearchAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "meilisearch"; }
  std::string plugin() const override { return "libpicomq_connector_meilisearch_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // the primary key is the record id
    c.destinations_per_topic = true;
    c.binary_keys = false;  // pico_key is base64 text
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& server = test::meilisearch_contract();
    server.call("POST", "/_control/reset", "{}");
    return "url = \"" + server.base_url() + "\"\nindex = \"" + target + "\"\ntimeout = \"2s\"\nretry_timeout = \"1s\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    const auto indexes = nlohmann::json::parse(test::meilisearch_contract().call("GET", "/indexes?limit=1000").second);
    for (const auto& index : indexes["results"]) {
      const std::string uid = index["uid"].get<std::string>();
      for (const auto& doc : test::meilisearch_documents(uid)) {
        // flat -> envelope: the pico_* fields, the rest is the payload object.
        nlohmann::json envelope = nlohmann::json::object(), payload = nlohmann::json::object();
        for (const auto& [k, v] : doc.items()) (k.rfind("pico_", 0) == 0 ? envelope[k] : payload[k]) = v;
        envelope.erase("pico_id");
        envelope["payload"] = payload.size() == 1 && payload.contains("payload") ? payload["payload"] : payload;
        out.push_back(from_envelope(envelope, uid));
      }
    }
    return out;
  }

  // Index uids: [A-Za-z0-9_-], at most 400 bytes.
  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 400) return false;
    for (unsigned char c : name)
      if (!std::isalnum(c) && c != '-' && c != '_') return false;
    return true;
  }

  void inject_transient_failure(bool on) override {
    auto& server = test::meilisearch_contract();
    if (on)
      test::contract_control(server,
                             {{"fail_requests", {{{"path_prefix", "/"}, {"status", 503}, {"count", 1000000}}}}});
    else test::contract_control(server, {{"clear_failures", true}});
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"index_settings = { sortableAttributes = \"n\" }", "index_settings"};
  }
  std::string rejecting_config() const override { return ""; }
  std::string rejected_payload() const override { return R"({"n": 3, "_geo": "nowhere"})"; }
};

PICOMQ_CONFORMANCE_ADAPTER(MeilisearchAdapter);

}  // namespace
}  // namespace picomq::conformance
