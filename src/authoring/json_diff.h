#pragma once
// The differences between an expected and an actual JSON value, one readable line each, by path
// (`.items[1].sku: expected "A-1", got "A-2"`): what `picomq-connect test` prints when a payload
// is not what a fixture expects. Numbers compare by value (1 and 1.0 are equal).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace picomq::authoring {

// Empty when equal. `path` prefixes every line ("" for the value itself).
std::vector<std::string> json_diff(const nlohmann::json& expected, const nlohmann::json& got,
                                   const std::string& path = "");

// A value as one line of compact JSON, cut at `limit` characters with "…".
std::string json_brief(const nlohmann::json& value, size_t limit = 160);

}  // namespace picomq::authoring
