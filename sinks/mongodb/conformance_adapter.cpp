// The MongoDB sink in the conformance suite: a fresh database per test on the test run's
// FerretDB v1.24.2 server (sinks/mongodb/server.sh), read back with libmongoc's own queries. The
// sink's documents have _id = record id, so a replay is one document per record. The payload
// read back is the document without _id and its pico_* fields.
#include <unistd.h>

#include <ctime>
#include <stdexcept>

#include "conformance.h"
#include "mongo_server.h"

namespace picomq::conformance {
namespace {

using test::MongoServer;

// The milliseconds of a relaxed Extended JSON date: {"$date": "ISO"} or {"$date": {"$numberLong": "ms"}}.
std::optional<int64_t> date_ms(const nlohmann::json& v) {
  if (!v.is_object() || !v.contains("$date")) return std::nullopt;
  const auto& d = v["$date"];
  if (d.is_object()) return std::stoll(d["$numberLong"].get<std::string>());
  const std::string s = d.get<std::string>();  // 2023-11-14T22:13:20.123Z
  std::tm tm{};
  if (!strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  const auto dot = s.find('.');
  if (dot != std::string::npos) ms += std::stoi(s.substr(dot + 1, 3));
  return ms;
}

class MongoDbAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "mongodb"; }
  std::string plugin() const override { return "libpicomq_connector_mongodb_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // _id = topic:partition:offset; a replay's 11000 is "already written"
    c.destinations_per_topic = true;
    c.binary_keys = true;  // pico_key is BinData
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& m = MongoServer::shared();
    // A short database name (FerretDB keeps databases as PostgreSQL schemas of at most 63 bytes).
    static int counter = 0;
    database_ = "conf_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
    // retry_timeout 1s: an outage fails write attempts soon (the suite watches the runtime retry them).
    return "connection_uri = \"" + m.uri() + "\"\ndatabase = \"" + database_ + "\"\nretry_timeout = \"1s\"" +
           (target == "{topic}" ? std::string() : "\ncollection = \"" + target + "\"");
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    auto& m = MongoServer::shared();
    std::vector<WrittenRecord> out;
    for (const auto& coll : m.collections(database_)) {
      for (const auto& doc : m.find(database_, coll, "{}", R"({"pico_partition": 1, "pico_offset": 1})")) {
        WrittenRecord w;
        w.destination = coll;
        w.topic = doc.value("pico_topic", "");
        w.partition = doc.value("pico_partition", -1);
        w.offset = doc.value("pico_offset", int64_t{-1});
        if (doc.contains("pico_timestamp")) w.timestamp_ms = date_ms(doc["pico_timestamp"]);
        if (doc.contains("pico_key") && !doc["pico_key"].is_null())
          w.key = decode_base64(doc["pico_key"]["$binary"]["base64"].get<std::string>());
        if (doc.contains("pico_headers"))
          for (const auto& [k, v] : doc["pico_headers"].items())
            w.headers[k] = v.is_string() ? v.get<std::string>() : v.dump();
        nlohmann::json payload = nlohmann::json::object();
        for (const auto& [k, v] : doc.items()) {
          if (k.rfind("pico_", 0) == 0) w.metadata_fields.push_back(k);
          else if (k != "_id") payload[k] = v;
        }
        // A payload that is not an object is stored under "payload".
        if (payload.size() == 1 && payload.contains("payload")) w.payload_json = payload["payload"].dump();
        else w.payload_json = payload.dump();
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    return !name.empty() && name.find('$') == std::string::npos && name.find('\0') == std::string::npos &&
           name.rfind("system.", 0) != 0 && name[0] != '.' && name.size() <= 235 &&
           database_.size() + 1 + name.size() <= 255;
  }

  // FerretDB crashes (SIGKILL) and comes back on the same port with the same data.
  void inject_transient_failure(bool on) override {
    if (on) MongoServer::shared().kill();
    else MongoServer::shared().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    // The unique index a business key of _id asks for is one MongoDB (and FerretDB, with
    // MongoDB's message) refuses: 197 "The field 'unique' is not valid for an _id index
    // specification". The sink creates it on the first batch and stops in Error.
    return {"write_strategy = \"update\"\nbusiness_key = [\"_id\"]", "is not valid for an _id index"};
  }

  // The server refuses a '$'-prefixed field name (error 2): rejected, the rest written.
  std::string rejecting_config() const override { return ""; }
  std::string rejected_payload() const override { return R"({"n": 1, "$bad": true})"; }

 private:
  std::string database_;
};

PICOMQ_CONFORMANCE_ADAPTER(MongoDbAdapter);

}  // namespace
}  // namespace picomq::conformance
