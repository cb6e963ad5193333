#include "contract_server.h"

namespace picomq::test {

kit::testing::HttpReceiver& doris_contract() {
  static kit::testing::HttpReceiver server(DORIS_CONTRACT, {"--password", "pw"});
  return server;
}

void doris_control(const std::string& what, const nlohmann::json& body) {
  auto [status, text] = doris_contract().call("POST", "/_control/" + what, body.dump());
  if (status != 200)
    throw std::runtime_error("doris contract /_control/" + what + ": " + std::to_string(status) + " " + text);
}

void doris_create_table(const std::string& db, const std::string& table, const nlohmann::json& columns) {
  doris_control("table", {{"db", db}, {"table", table}, {"columns", columns}});
}

std::vector<nlohmann::json> doris_rows(const std::string& db, const std::string& table) {
  auto [status, body] = doris_contract().call("GET", "/_control/rows?db=" + db + "&table=" + table);
  if (status == 404) return {};
  return nlohmann::json::parse(body)["rows"].get<std::vector<nlohmann::json>>();
}

nlohmann::json doris_labels(const std::string& db) {
  return nlohmann::json::parse(doris_contract().call("GET", "/_control/labels?db=" + db).second)["labels"];
}

}  // namespace picomq::test
