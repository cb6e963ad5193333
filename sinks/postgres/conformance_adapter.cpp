// The PostgreSQL sink in the conformance suite: a fresh database per test on the test run's
// PostgreSQL 15 server (sinks/postgres/server.sh), read back with plain SQL.
#include <stdexcept>

#include "conformance.h"
#include "postgres.h"

namespace picomq::conformance {
namespace {

using test::Postgres;

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

class PostgresAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "postgres"; }
  std::string plugin() const override { return "libpicomq_connector_postgres_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // write_mode insert: pico_id is the primary key
    c.destinations_per_topic = true;
    c.binary_keys = true;  // bytea
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    database_ = Postgres::shared().create_database("conf");
    return "connection_string = \"" + Postgres::shared().conninfo(database_) + "\"\ntarget_table = \"" + target + "\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    auto& pg = Postgres::shared();
    std::vector<WrittenRecord> out;
    for (const auto& table : pg.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                                      "AND table_type = 'BASE TABLE' ORDER BY table_name",
                                      database_)) {
      const std::string name = *table[0];
      std::vector<std::string> metadata;
      bool has_payload = false;
      for (const auto& col : pg.query("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                      "'public' AND table_name = '" +
                                          name + "' ORDER BY ordinal_position",
                                      database_)) {
        if (col[0]->rfind("pico_", 0) == 0) metadata.push_back(*col[0]);
        if (*col[0] == "payload") has_payload = true;
      }
      // Columns mode has no payload column: the payload is the row without its pico_* columns.
      std::string payload = has_payload ? "payload::text" : "(to_jsonb(t)";
      if (!has_payload) {
        for (const auto& m : metadata) payload += " - '" + m + "'";
        payload += ")::text";
      }
      const std::string quoted = "\"" + name + "\"";  // sink-made names hold no double quote
      for (const auto& row : pg.query("SELECT pico_topic, pico_partition, pico_offset, "
                                      "(extract(epoch FROM pico_timestamp) * 1000)::bigint, encode(pico_key, 'hex'), "
                                      "pico_headers::text, " +
                                          payload + " FROM " + quoted + " t ORDER BY pico_offset",
                                      database_)) {
        WrittenRecord w;
        w.destination = name;
        w.topic = *row[0];
        w.partition = std::stoi(*row[1]);
        w.offset = std::stoll(*row[2]);
        if (row[3]) w.timestamp_ms = std::stoll(*row[3]);
        if (row[4]) w.key = unhex(*row[4]);
        const auto headers = nlohmann::json::parse(row[5].value_or("{}"));
        for (const auto& [k, v] : headers.items())
          w.headers[k] = v.is_string() ? v.get<std::string>() : v.dump();  // a non-string shows up in the diff
        w.payload_json = row[6];
        w.metadata_fields = metadata;
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override {
    return !name.empty() && name.size() <= 63;  // NAMEDATALEN - 1; the table exists, so the server took it
  }

  // The database refuses connections and the sink's connection is cut: what a restart or a
  // network partition of the server looks like to the sink.
  void inject_transient_failure(bool on) override {
    auto& pg = Postgres::shared();
    pg.exec("ALTER DATABASE " + database_ + " ALLOW_CONNECTIONS " + (on ? "false" : "true"));
    if (on)
      pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + database_ +
               "' AND pid <> pg_backend_pid()");
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"auto_create_table = false", "does not exist and auto_create_table is off"};
  }
  std::string rejecting_config() const override {
    return "payload_mode = \"columns\"\ncolumns = [{ name = \"n\", type = \"int8\" }]";
  }
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 private:
  std::string database_;
};

PICOMQ_CONFORMANCE_ADAPTER(PostgresAdapter);

}  // namespace

}  // namespace picomq::conformance
