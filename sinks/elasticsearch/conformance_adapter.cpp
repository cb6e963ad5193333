// The Elasticsearch sink in the conformance suite, on the test run's OpenSearch 2.19.6 node
// (sinks/elasticsearch/server.sh; the sink's own tests run every case on Elasticsearch 7.10.2
// too). Each test starts on an empty node (every index deleted) and writes in the envelope layout (the suite's
// reader, from_envelope, takes the documents as they are), read back with _search. Record ids make
// a replay overwrite itself: one document per record. The outage is the node stopped (SIGSTOP:
// it accepts connections and answers nothing) and resumed.
#include "conformance.h"
#include "tests/search_server.h"

namespace picomq::conformance {
namespace {

using test::SearchServer;

class ElasticsearchAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "elasticsearch"; }
  std::string plugin() const override { return "libpicomq_connector_elasticsearch_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // _id = topic:partition:offset
    c.destinations_per_topic = true;
    c.binary_keys = false;  // pico_key is base64 text: JSON has no bytes
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& os = server();
    // A fresh cluster per test (what a fresh database is for the SQL sinks): the node of the
    // suite serves this adapter alone, so every index goes.
    os.ok("DELETE", "/*?expand_wildcards=open,closed");
    // timeout 2s, retry_timeout 1s: an outage fails write attempts soon (the suite watches the
    // runtime retry them).
    return "url = \"" + os.url() + "\"\nindex = \"" + target +
           "\"\ndocument = \"envelope\"\ntimeout = \"2s\"\nretry_timeout = \"1s\"\n"
           "index_settings = { number_of_replicas = 0 }";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    auto& os = server();
    std::vector<WrittenRecord> out;
    os.ok("POST", "/_refresh");
    const auto found = os.ok("POST", "/_search", R"({"size":10000,"query":{"match_all":{}},"sort":["_doc"]})");
    for (const auto& hit : found["hits"]["hits"])
      out.push_back(from_envelope(hit["_source"], hit["_index"].get<std::string>()));
    return out;
  }

  // The index-name rules: lower case, no \ / * ? " < > | space , #, no leading - _ +, not . or
  // .., at most 255 bytes.
  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    if (name[0] == '-' || name[0] == '_' || name[0] == '+') return false;
    for (unsigned char c : name)
      if ((c >= 'A' && c <= 'Z') ||
          std::string_view("\\/*?\"<>| ,#:").find(static_cast<char>(c)) != std::string_view::npos)
        return false;
    return true;
  }

  void inject_transient_failure(bool on) override { server().pause(on); }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"index_mappings = { properties = { n = { type = \"no_such_type\" } } }",
            "with index_settings / index_mappings"};
  }
  std::string rejecting_config() const override {
    return "index_mappings = { properties = { payload = { properties = { n = { type = \"long\" } } } } }";
  }
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 private:
  static SearchServer& server() { return SearchServer::shared(SearchServer::Flavor::OpenSearch); }
};

PICOMQ_CONFORMANCE_ADAPTER(ElasticsearchAdapter);

}  // namespace
}  // namespace picomq::conformance
