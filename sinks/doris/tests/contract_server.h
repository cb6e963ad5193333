#pragma once
// The Doris contract server (doris_contract.py: an FE and a BE written from Doris's Stream Load
// manual), one per test process, started on first use on loopback ports and stopped with the
// process: for the Kafka-level test and the conformance adapter.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "picomq/kit/testing/http_stub.hpp"

namespace picomq::test {

kit::testing::HttpReceiver& doris_contract();
// POST /_control/<what> with a JSON body.
void doris_control(const std::string& what, const nlohmann::json& body);
// CREATE TABLE stand-in: columns [{name, type, nullable}].
void doris_create_table(const std::string& db, const std::string& table, const nlohmann::json& columns);
// The visible rows of a table, in load order; empty when the table does not exist.
std::vector<nlohmann::json> doris_rows(const std::string& db, const std::string& table);
// label -> {state, rows, txn_id} of a database.
nlohmann::json doris_labels(const std::string& db);

}  // namespace picomq::test
