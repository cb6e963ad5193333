// The SurrealDB sink in the conformance suite: a fresh namespace per test on the test run's
// SurrealDB 3.3.5 server (sinks/surrealdb/server.sh), read back with SELECT through POST /sql.
// Record ids are [topic, partition, offset] with INSERT IGNORE, so a replay is one record per
// record. The payload read back is the record without id and its pico_* fields (a payload's own
// id comes back from pico_payload_id). Where the machine has no server binary, prepare() fails
// with the reason (the suite has no per-adapter skip).
#include <stdexcept>

#include "conformance.h"
#include "surreal_server.h"

namespace picomq::conformance {
namespace {

using test::SurrealServer;

SurrealServer& server() {
  SurrealServer* s = SurrealServer::shared();
  if (!s) throw std::runtime_error(SurrealServer::unavailable());
  return *s;
}

class SurrealDbAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "surrealdb"; }
  std::string plugin() const override { return "libpicomq_connector_surrealdb_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;
    c.destinations_per_topic = true;
    c.binary_keys = false;  // pico_key is base64 text
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    ns_ = server().fresh_namespace("conf");
    // retry_timeout 1s: an outage fails write attempts soon (the suite watches the runtime retry them).
    return "url = \"" + server().url() + "\"\nnamespace = \"" + ns_ + "\"\ndatabase = \"db\"\npassword = \"root\"\n" +
           "retry_timeout = \"1s\"" + (target == "{topic}" ? std::string() : "\ntable = \"" + target + "\"");
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    const nlohmann::json info = server().result(ns_, "db", "INFO FOR DB;");
    if (!info.contains("tables")) return out;
    for (const auto& [table, definition] : info["tables"].items()) {
      (void)definition;
      for (const auto& row :
           server().result(ns_, "db", "SELECT * FROM `" + table + "` ORDER BY pico_partition, pico_offset")) {
        WrittenRecord w;
        w.destination = table;
        w.topic = row.value("pico_topic", "");
        w.partition = row.value("pico_partition", -1);
        w.offset = row.value("pico_offset", int64_t{-1});
        if (row.contains("pico_timestamp")) w.timestamp_ms = row["pico_timestamp"].get<int64_t>();
        if (row.contains("pico_key") && row["pico_key"].is_string()) w.key = row["pico_key"].get<std::string>();
        if (row.contains("pico_headers"))
          for (const auto& [k, v] : row["pico_headers"].items())
            w.headers[k] = v.is_string() ? v.get<std::string>() : v.dump();
        nlohmann::json payload = nlohmann::json::object();
        for (const auto& [k, v] : row.items()) {
          if (k == "pico_payload_id") payload["id"] = v;
          else if (k.rfind("pico_", 0) == 0) w.metadata_fields.push_back(k);
          else if (k != "id") payload[k] = v;
        }
        if (payload.size() == 1 && payload.contains("payload")) w.payload_json = payload["payload"].dump();
        else w.payload_json = payload.dump();
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 63) return false;
    for (unsigned char c : name)
      if (!(std::isalnum(c) || c == '_')) return false;
    return true;
  }

  // The server crashes (SIGKILL) and comes back on the same port with the same data (surrealkv).
  void inject_transient_failure(bool on) override {
    if (on) server().kill();
    else server().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    // A user the server does not know: 401 at open, the sink stops in Error.
    return {"user = \"nobody\"", "authentication failed"};
  }
  // id = field n: a payload without a string or integer n is refused.
  std::string rejecting_config() const override { return "id = \"field\"\nid_field = \"n\""; }
  std::string rejected_payload() const override { return R"({"m": 1})"; }

 private:
  std::string ns_;
};

PICOMQ_CONFORMANCE_ADAPTER(SurrealDbAdapter);

}  // namespace
}  // namespace picomq::conformance
