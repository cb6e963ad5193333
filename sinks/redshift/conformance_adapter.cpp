// The Redshift sink in the conformance suite, against PostgreSQL 15 as the SQL stand-in
// (dialect = "postgres_shim") and SeaweedFS as the stage: a fresh database and bucket per test,
// rows read back with SQL. The record id is the MERGE key, so a replay merges to itself. The
// outage: the database refuses connections; the permanent error: an offsets table in a schema
// that does not exist; the refused record: a payload longer than max_field_bytes.
#include <nlohmann/json.hpp>

#include "conformance.h"
#include "postgres.h"
#include "seaweedfs_server.h"

namespace picomq::conformance {
namespace {

using test::Postgres;
using test::SeaweedfsServer;

class RedshiftAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "redshift"; }
  std::string plugin() const override { return "libpicomq_connector_redshift_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // MERGE on the record id
    c.binary_keys = false;          // pico_key is base64 text
    return c;
  }

  std::string prepare(const std::string&, const std::string&) override {
    database_ = Postgres::shared().create_database("rsconf");
    auto& s3 = SeaweedfsServer::shared();
    const std::string bucket = s3.create_bucket("rsconf");
    return "connection_string = \"" + Postgres::shared().conninfo(database_) +
           "\"\ntarget_table = \"records\"\n"
           "dialect = \"postgres_shim\"\ns3_bucket = \"" +
           bucket + "\"\ns3_endpoint = \"" + s3.endpoint() + "\"\naws_access_key_id = \"" +
           SeaweedfsServer::kAccessKey + "\"\naws_secret_access_key = \"" + SeaweedfsServer::kSecretKey +
           "\"\nretry_timeout = \"1s\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    auto& pg = Postgres::shared();
    if (pg.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'records'", database_).empty()) return out;
    for (const auto& row : pg.query("SELECT pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key, "
                                    "payload, pico_headers FROM records "
                                    "ORDER BY pico_topic, pico_partition, pico_offset",
                                    database_)) {
      nlohmann::json e = {
          {"pico_topic", *row[0]}, {"pico_partition", std::stoi(*row[1])}, {"pico_offset", std::stoll(*row[2])}};
      if (row[3]) e["pico_timestamp"] = std::stoll(*row[3]);
      if (row[4]) e["pico_key"] = *row[4];
      e["payload"] = row[5] ? nlohmann::json::parse(*row[5]) : nlohmann::json();
      if (row[6]) e["pico_headers"] = nlohmann::json::parse(*row[6]);
      out.push_back(from_envelope(e, "records"));
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 127) return false;
    for (unsigned char c : name)
      if (!std::isalnum(c) && c != '_') return false;
    return true;
  }

  void inject_transient_failure(bool on) override {
    auto& pg = Postgres::shared();
    pg.exec("ALTER DATABASE " + database_ + " ALLOW_CONNECTIONS " + (on ? "false" : "true"));
    if (on)
      pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + database_ +
               "' AND pid <> pg_backend_pid()");
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"offsets_table = \"no_such_schema.offsets\"", "no_such_schema"};
  }
  std::string rejecting_config() const override { return "max_field_bytes = 24"; }
  std::string rejected_payload() const override { return R"({"n": 3, "note": "longer than twenty-four bytes"})"; }

 private:
  std::string database_;
};

PICOMQ_CONFORMANCE_ADAPTER(RedshiftAdapter);

}  // namespace
}  // namespace picomq::conformance
