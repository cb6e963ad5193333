// The Delta sink in the conformance suite: a fresh table per test on SeaweedFS (the S3 sink's test
// server, sinks/s3/server.sh), created by the deltalake package with every metadata column and the
// suite's payload fields, read back by it (tests/delta_table.py dump), never by the sink's code.
// One app_id for every definition of a test: a replay by another consumer group finds the table's
// txn versions and writes nothing twice. The outage: SeaweedFS killed and started again on the same
// ports; the permanent error: partition_by on a table the sink does not create; the refused record:
// a string in the table's long column.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conformance.h"
#include "delta_table.h"
#include "picomq/kit/testing/shell.hpp"
#include "seaweedfs_server.h"

namespace picomq::conformance {
namespace {

using test::SeaweedfsServer;

class DeltaAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "delta"; }
  std::string plugin() const override { return "libpicomq_connector_delta_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = true;  // txn versions per <app_id>-<topic>-<partition>
    c.binary_keys = true;           // pico_key is a binary column
    return c;
  }

  std::string prepare(const std::string&, const std::string&) override {
    auto& s3 = SeaweedfsServer::shared();
    table_ = "s3://" + s3.create_bucket("deltaconf") + "/lake/records";
    test::delta::table_tool("create-conformance " + kit::testing::shell_quote(table_) + storage_options());
    return "table_uri = \"" + table_ + "\"\napp_id = \"conformance\"\ncommit_interval = \"1s\"\ns3_endpoint = \"" +
           s3.endpoint() + "\"\ns3_allow_http = true\ns3_access_key_id = \"" + SeaweedfsServer::kAccessKey +
           "\"\ns3_secret_access_key = \"" + SeaweedfsServer::kSecretKey + "\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    const nlohmann::json table =
        test::delta::table_tool("dump " + kit::testing::shell_quote(table_) + storage_options());
    for (const auto& row : table["rows"]) out.push_back(from_table_row(row, "records"));
    return out;
  }

  bool legal_destination(const std::string& name) const override { return name == "records"; }

  void inject_transient_failure(bool on) override {
    if (on) SeaweedfsServer::shared().kill();
    else SeaweedfsServer::shared().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"partition_by = [\"n\"]", "partition_by"};
  }
  std::string rejecting_config() const override { return ""; }  // the table's columns refuse it
  std::string rejected_payload() const override { return R"({"n": "not a number"})"; }

 private:
  // The deltalake package's storage options for the test server (conditional PUT for its commits).
  static std::string storage_options() {
    auto& s3 = SeaweedfsServer::shared();
    return " AWS_ENDPOINT_URL=" + s3.endpoint() + " AWS_ACCESS_KEY_ID=" + SeaweedfsServer::kAccessKey +
           " AWS_SECRET_ACCESS_KEY=" + SeaweedfsServer::kSecretKey +
           " AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true aws_conditional_put=etag";
  }

  std::string table_;
};

PICOMQ_CONFORMANCE_ADAPTER(DeltaAdapter);

}  // namespace
}  // namespace picomq::conformance
