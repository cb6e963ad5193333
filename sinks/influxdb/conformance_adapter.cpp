// The InfluxDB sink in the conformance suite: a fresh database per test on the test run's InfluxDB
// 1.6.7 server (sinks/influxdb/server.sh, the v1 API with authentication on), read back with
// InfluxQL. The suite checks records, so each record is its own series (tags pico_partition and
// pico_offset: a replay overwrites the same point) and the rest of its metadata is written as
// fields (metadata_fields); the payload read back is the point's other fields.
#include <unistd.h>

#include <set>

#include "conformance.h"
#include "influx_server.h"

namespace picomq::conformance {
namespace {

using test::InfluxServer;

class InfluxDbAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "influxdb"; }
  std::string plugin() const override { return "libpicomq_connector_influxdb_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;    // the same series and time: a replay overwrites the point
    c.destinations_per_topic = true;  // measurement = {topic}; InfluxDB creates it with its first point
    c.binary_keys = false;            // pico_key is a base64 string field
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& s = InfluxServer::shared(1);
    database_ = s.fresh_database("conf");
    return "url = \"" + s.url() + "\"\napi = \"v1\"\ndatabase = \"" + database_ +
           "\"\nauth = \"basic\"\nauth_user = \"picomq\"\nauth_password = \"picomq-secret\"\n"
           "measurement = \"" +
           target +
           "\"\ntag_metadata = [\"pico_partition\", \"pico_offset\"]\n"
           "metadata_fields = [\"pico_topic\", \"pico_timestamp\", \"pico_key\", \"pico_headers\"]\n"
           "precision = \"ms\"\nretry_timeout = \"1s\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    auto& s = InfluxServer::shared(1);
    std::vector<WrittenRecord> out;
    for (const auto& m : s.influxql(database_, "SHOW MEASUREMENTS")) {
      for (const auto& row : m.at("values")) {
        const std::string measurement = row.at(0);
        std::string quoted = "\"";
        for (char c : measurement) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
        quoted += "\"";
        for (const auto& series : s.influxql(database_, "SELECT * FROM " + quoted)) {
          const auto& columns = series.at("columns");
          for (const auto& values : series.at("values")) {
            WrittenRecord w;
            w.destination = measurement;
            nlohmann::json payload = nlohmann::json::object();
            for (size_t i = 0; i < columns.size(); ++i) {
              const std::string c = columns[i];
              const auto& v = values[i];
              if (v.is_null() || c == "time") continue;
              if (c.rfind("pico_", 0) == 0) w.metadata_fields.push_back(c);
              if (c == "pico_topic") w.topic = v;
              else if (c == "pico_partition") w.partition = std::stoi(v.get<std::string>());
              else if (c == "pico_offset") w.offset = std::stoll(v.get<std::string>());
              else if (c == "pico_timestamp") w.timestamp_ms = v.get<int64_t>();
              else if (c == "pico_key") w.key = v.get<std::string>();
              else if (c == "pico_headers") {
                const nlohmann::json headers = nlohmann::json::parse(v.get<std::string>());
                for (const auto& [k, h] : headers.items())
                  w.headers[k] = h.is_string() ? h.get<std::string>() : h.dump();
              } else payload[c] = v;
            }
            // A record without a key has no pico_key field; the suite wants the field named.
            if (std::find(w.metadata_fields.begin(), w.metadata_fields.end(), "pico_key") == w.metadata_fields.end())
              w.metadata_fields.emplace_back("pico_key");
            w.payload_json = payload.dump();
            out.push_back(std::move(w));
          }
        }
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    return !name.empty() && name[0] != '#' && name.find_first_of("\n\r") == std::string::npos && name.back() != '\\';
  }

  // InfluxDB crashes (SIGKILL) and comes back on the same port with the same data.
  void inject_transient_failure(bool on) override {
    if (on) InfluxServer::shared(1).kill();
    else InfluxServer::shared(1).start();
  }
  // A retention policy the database does not have: every write is refused, the sink stops.
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"retention_policy = \"no_such_policy\"", "retention policy not found"};
  }
  // n is an integer field of the measurement (the records before it): a string n is a field type
  // conflict, which InfluxDB refuses in a partial write; that record goes to the policy.
  std::string rejecting_config() const override { return ""; }
  std::string rejected_payload() const override { return R"({"n": "three"})"; }

 private:
  std::string database_;
};

PICOMQ_CONFORMANCE_ADAPTER(InfluxDbAdapter);

}  // namespace
}  // namespace picomq::conformance
