// The Iceberg sink in the conformance suite: SeaweedFS's REST catalog with data files on its S3
// (the S3 sink's test server, sinks/s3/server.sh), a fresh table per test created by pyiceberg with
// every metadata column and the suite's payload fields, read back by pyiceberg
// (tests/iceberg_table.py rows), never by the sink's code. One app_id for every definition of a
// test: a replay by another consumer group finds the offsets in the snapshot summaries and writes
// nothing twice. The outage: SeaweedFS (catalog and S3) killed and started again on the same ports;
// the permanent error: the REST catalog named as a SQL one (catalog_type = "sql"); the refused record:
// a string in the table's long column.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "conformance.h"
#include "iceberg_tool.h"
#include "picomq/kit/testing/shell.hpp"
#include "seaweedfs_server.h"

namespace picomq::conformance {
namespace {

using test::SeaweedfsServer;

class IcebergAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "iceberg"; }
  std::string plugin() const override { return "libpicomq_connector_iceberg_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // picomq.<app_id>.offsets in the snapshot summaries
    c.binary_keys = true;           // pico_key is a binary column
    return c;
  }

  std::string prepare(const std::string&, const std::string&) override {
    auto& s3 = SeaweedfsServer::shared();
    // One table bucket (the warehouse) per test process, a new table per test.
    static int tables = 0;
    if (tables++ == 0) tool("table-bucket " + kit::testing::shell_quote(bucket_));
    table_ = "conf.records_" + std::to_string(tables);
    const std::string schema =
        R"([["pico_topic","string",1],["pico_partition","int",1],["pico_offset","long",1],)"
        R"(["pico_timestamp","timestamptz",0],["pico_key","binary",0],["pico_headers","map<string,binary>",0],)"
        R"(["n","long",0],["s","string",0],["q","string",0],["u","string",0]])";
    tool("create " + kit::testing::shell_quote(table_) + " " + kit::testing::shell_quote(schema));
    return "catalog_uri = \"" + s3.iceberg_endpoint() + "\"\nwarehouse = \"s3://" + bucket_ +
           "\"\ncatalog_credential = \"" + SeaweedfsServer::kAccessKey + ":" + SeaweedfsServer::kSecretKey +
           "\"\ntable = \"" + table_ + "\"\napp_id = \"conformance\"\ncommit_interval = \"1s\"\ns3_endpoint = \"" +
           s3.endpoint() + "\"\ns3_region = \"us-east-1\"\ns3_access_key_id = \"" + SeaweedfsServer::kAccessKey +
           "\"\ns3_secret_access_key = \"" + SeaweedfsServer::kSecretKey + "\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    for (nlohmann::json row : test::iceberg::json_lines(tool("rows " + kit::testing::shell_quote(table_)))) {
      if (!row["pico_timestamp"].is_null())
        row["pico_timestamp"] = row["pico_timestamp"].get<int64_t>() / 1000;  // the tool gives µs
      out.push_back(from_table_row(row, table_));
    }
    return out;
  }

  bool legal_destination(const std::string& name) const override { return name == table_; }

  void inject_transient_failure(bool on) override {
    if (on) SeaweedfsServer::shared().kill();
    else SeaweedfsServer::shared().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"catalog_type = \"sql\"", "is not a sqlite:, postgres: or postgresql: database URL"};
  }
  std::string rejecting_config() const override { return ""; }  // the table's columns refuse it
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 private:
  // pyiceberg's properties for the catalog.
  std::string catalog_json() const {
    auto& s3 = SeaweedfsServer::shared();
    return nlohmann::json{{"uri", s3.iceberg_endpoint()},
                          {"warehouse", "s3://" + bucket_},
                          {"credential", std::string(SeaweedfsServer::kAccessKey) + ":" + SeaweedfsServer::kSecretKey},
                          {"s3.endpoint", s3.endpoint()},
                          {"s3.access-key-id", SeaweedfsServer::kAccessKey},
                          {"s3.secret-access-key", SeaweedfsServer::kSecretKey},
                          {"s3.region", "us-east-1"}}
        .dump();
  }
  std::string tool(const std::string& arguments) const { return test::iceberg::table_tool(catalog_json(), arguments); }

  const std::string bucket_ = "conf-" + std::to_string(getpid());
  std::string table_;
};

PICOMQ_CONFORMANCE_ADAPTER(IcebergAdapter);

}  // namespace
}  // namespace picomq::conformance
