// The Doris sink in the conformance suite, on the test process's Doris contract server
// (sinks/doris/tests/doris_contract.py, written from Doris's Stream Load manual: no Doris cluster
// runs here). Each test starts on a reset server with one table in the envelope layout's shape;
// rows are read back as envelopes. Labels (one label_prefix for the test's two sink keys: the
// replay case re-creates the sink under another key) make a replay load nothing twice. The outage: every FE
// request answered 503; the permanent error: a `columns` header naming a column the table lacks
// (Fail, ANALYSIS_ERROR); the refused record: strict_mode with payload.n mapped (jsonpaths) to an
// INT column, and a payload whose n is not a number.
#include "conformance.h"
#include "contract_server.h"

namespace picomq::conformance {
namespace {

class DorisAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "doris"; }
  std::string plugin() const override { return "libpicomq_connector_doris_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // deterministic labels
    c.binary_keys = false;          // pico_key is base64 text
    return c;
  }

  std::string prepare(const std::string&, const std::string&) override {
    test::doris_control("reset", nlohmann::json::object());
    test::doris_create_table(
        "conf", "records",
        nlohmann::json::array({{{"name", "pico_topic"}, {"type", "STRING"}, {"nullable", false}},
                               {{"name", "pico_partition"}, {"type", "INT"}, {"nullable", false}},
                               {{"name", "pico_offset"}, {"type", "BIGINT"}, {"nullable", false}},
                               {{"name", "pico_timestamp"}, {"type", "BIGINT"}, {"nullable", true}},
                               {{"name", "pico_key"}, {"type", "STRING"}, {"nullable", true}},
                               {{"name", "pico_headers"}, {"type", "JSON"}, {"nullable", true}},
                               {{"name", "payload"}, {"type", "JSON"}, {"nullable", true}},
                               {{"name", "n"}, {"type", "INT"}, {"nullable", true}}}));
    return "url = \"" + test::doris_contract().base_url() +
           "\"\ndatabase = \"conf\"\ntable = \"records\"\npassword = \"pw\"\ndocument = \"envelope\"\ntimeout = "
           "\"2s\"\n"
           "retry_timeout = \"1s\"\nlabel_span = 200\nlabel_prefix = \"conf\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    for (auto row : test::doris_rows("conf", "records")) {
      row.erase("n");
      for (const char* k : {"pico_timestamp", "pico_key", "pico_headers"})
        if (row.contains(k) && row[k].is_null()) row.erase(k);
      out.push_back(from_envelope(row, "records"));
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 64) return false;
    for (unsigned char c : name)
      if (!std::isalnum(c) && c != '_') return false;
    return true;
  }

  void inject_transient_failure(bool on) override {
    if (on)
      test::doris_control("config", {{"fail_requests", {{{"path_prefix", "/"}, {"status", 503}, {"count", 1000000}}}}});
    else test::doris_control("config", {{"clear_failures", true}});
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"columns = \"pico_topic,no_such_column\"", "no_such_column"};
  }
  std::string rejecting_config() const override {
    return "strict_mode = true\ncolumns = "
           "\"pico_topic,pico_partition,pico_offset,pico_timestamp,pico_key,pico_headers,payload,n\"\n"
           "jsonpaths = '[\"$.pico_topic\",\"$.pico_partition\",\"$.pico_offset\",\"$.pico_timestamp\",\"$.pico_key\","
           "\"$.pico_headers\",\"$.payload\",\"$.payload.n\"]'";
  }
  std::string rejected_payload() const override { return R"({"n": "three"})"; }
};

PICOMQ_CONFORMANCE_ADAPTER(DorisAdapter);

}  // namespace
}  // namespace picomq::conformance
