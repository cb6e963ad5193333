#include "contract_servers.h"

namespace picomq::test {

kit::testing::HttpReceiver& meilisearch_contract() {
  static kit::testing::HttpReceiver server(MEILISEARCH_CONTRACT);
  return server;
}

kit::testing::HttpReceiver& quickwit_contract() {
  static kit::testing::HttpReceiver server(QUICKWIT_CONTRACT);
  return server;
}

void contract_control(kit::testing::HttpReceiver& server, const nlohmann::json& config) {
  server.call("POST", "/_control/config", config.dump());
}

std::vector<nlohmann::json> meilisearch_documents(const std::string& index) {
  auto [status, body] = meilisearch_contract().call("GET", "/indexes/" + index + "/documents?limit=1000000");
  if (status == 404) return {};
  return nlohmann::json::parse(body)["results"].get<std::vector<nlohmann::json>>();
}

std::vector<nlohmann::json> quickwit_documents(const std::string& index) {
  auto [status, body] = quickwit_contract().call("GET", "/api/v1/" + index + "/search?query=*&max_hits=1000000");
  if (status == 404) return {};
  return nlohmann::json::parse(body)["hits"].get<std::vector<nlohmann::json>>();
}

}  // namespace picomq::test
