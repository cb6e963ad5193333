#pragma once
// The contract servers of the search sinks (Meilisearch, Quickwit), one of each per test process,
// started on first use on loopback ports and stopped with the process: for the Kafka-level test
// and the conformance adapters (PICOMQ_TEST_SERVER_LIBRARIES). Each is a strict server written
// from its product's API reference (docs/sinks/meilisearch.md, docs/sinks/quickwit.md).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {

kit::testing::HttpReceiver& meilisearch_contract();  // sinks/meilisearch/tests/meilisearch_contract.py
kit::testing::HttpReceiver& quickwit_contract();     // sinks/quickwit/tests/quickwit_contract.py

// POST /_control/config (either server).
void contract_control(kit::testing::HttpReceiver& server, const nlohmann::json& config);
// Every document of a Meilisearch index / the committed documents of a Quickwit index, in
// insertion order; empty when the index does not exist.
std::vector<nlohmann::json> meilisearch_documents(const std::string& index);
std::vector<nlohmann::json> quickwit_documents(const std::string& index);

}  // namespace picomq::test
