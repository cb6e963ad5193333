// The ClickHouse sink in the conformance suite: a fresh database per test on the test run's
// ClickHouse 18.16 server (sinks/clickhouse/server.sh), read back with SELECT ... FINAL (the
// sink's tables are ReplacingMergeTree by record id: a replay is one row per record there).
// Payloads go into inferred columns (payload_mode columns), so the suite exercises inference; the
// payload read back is the row without its pico_* columns.
#include <stdexcept>

#include "conformance.h"
#include "tests/clickhouse_server.h"

namespace picomq::conformance {
namespace {

using test::ClickHouseServer;

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

class ClickHouseAdapter : public SinkAdapter {
 public:
  std::string name() const override { return "clickhouse"; }
  std::string plugin() const override { return "libpicomq_connector_clickhouse_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays =
        true;  // ReplacingMergeTree ORDER BY (pico_topic, pico_partition, pico_offset), read with FINAL
    c.destinations_per_topic = true;
    c.binary_keys = true;  // String holds bytes
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& ch = ClickHouseServer::shared();
    database_ = ch.create_database("conf");
    // retry_timeout 1s: an outage fails write attempts soon (the suite watches the runtime retry them).
    return "url = \"" + ch.url() + "\"\ndatabase = \"" + database_ + "\"\ntarget_table = \"" + target +
           "\"\nretry_timeout = \"1s\"" + format_option();
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    auto& ch = ClickHouseServer::shared();
    std::vector<WrittenRecord> out;
    for (const auto& table :
         ch.rows("SELECT name FROM system.tables WHERE database = '" + database_ + "' ORDER BY name")) {
      const std::string name = table[0];
      std::vector<std::string> columns, metadata;
      std::string select;
      for (const auto& col : ch.rows("SELECT name FROM system.columns WHERE database = '" + database_ +
                                     "' AND table = '" + escape(name) + "'")) {
        const std::string& c = col[0];
        columns.push_back(c);
        if (c.rfind("pico_", 0) == 0) metadata.push_back(c);
        select += (select.empty() ? "" : ", ");
        // Key bytes as hex: raw bytes are not JSON text.
        select += c == "pico_key" ? "hex(pico_key) AS pico_key, isNull(pico_key) AS pico_key_null" : "`" + c + "`";
      }
      const std::string body = ch.query("SELECT " + select + " FROM `" + database_ + "`.`" + backtick(name) +
                                            "` FINAL ORDER BY pico_partition, pico_offset FORMAT JSONEachRow",
                                        "default", "&output_format_json_quote_64bit_integers=0");
      size_t pos = 0;
      while (pos < body.size()) {
        size_t nl = body.find('\n', pos);
        if (nl == std::string::npos) nl = body.size();
        const std::string line = body.substr(pos, nl - pos);
        pos = nl + 1;
        if (line.empty()) continue;
        const auto row = nlohmann::json::parse(line);
        WrittenRecord w;
        w.destination = name;
        w.topic = row.at("pico_topic").get<std::string>();
        w.partition = row.at("pico_partition").get<int32_t>();
        w.offset = row.at("pico_offset").get<int64_t>();
        if (row.contains("pico_timestamp")) w.timestamp_ms = row["pico_timestamp"].get<int64_t>();
        if (row.contains("pico_key") && row.value("pico_key_null", 1) == 0)
          w.key = unhex(row["pico_key"].get<std::string>());
        if (row.contains("pico_headers")) {
          const auto headers = nlohmann::json::parse(row["pico_headers"].get<std::string>());
          for (const auto& [k, v] : headers.items()) w.headers[k] = v.is_string() ? v.get<std::string>() : v.dump();
        }
        if (row.contains("payload")) {
          if (!row["payload"].is_null()) w.payload_json = row["payload"].get<std::string>();
        } else {
          nlohmann::json payload = nlohmann::json::object();
          for (const auto& [k, v] : row.items())
            if (k.rfind("pico_", 0) != 0) payload[k] = v;
          w.payload_json = payload.dump();
        }
        w.metadata_fields = metadata;
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override { return !name.empty() && name.size() <= 63; }

  // The server crashes (SIGKILL) and comes back on the same ports with the same data.
  void inject_transient_failure(bool on) override {
    if (on) ClickHouseServer::shared().kill();
    else ClickHouseServer::shared().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"auto_create_table = false", "does not exist and auto_create_table is off"};
  }
  std::string rejecting_config() const override { return "columns = [{ name = \"n\", type = \"Int64\" }]"; }
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 protected:
  virtual std::string format_option() const { return ""; }

 private:
  static std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }
  static std::string backtick(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '`') out += "``";
      else if (c == '\\') out += "\\\\";
      else out += c;
    }
    return out;
  }
  std::string database_;
};

// The same suite with RowBinary inserts from the batches plane (the default is Native, made
// from the Arrow plane's columns).
class ClickHouseRowBinaryAdapter final : public ClickHouseAdapter {
 public:
  std::string name() const override { return "clickhouse_rowbinary"; }

 protected:
  std::string format_option() const override { return "\nformat = \"RowBinary\""; }
};

PICOMQ_CONFORMANCE_ADAPTER(ClickHouseAdapter);
PICOMQ_CONFORMANCE_ADAPTER(ClickHouseRowBinaryAdapter);

}  // namespace
}  // namespace picomq::conformance
