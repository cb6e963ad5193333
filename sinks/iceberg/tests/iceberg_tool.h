#pragma once
// The Iceberg sink's independent side for C++ tests: iceberg_table.py (pyiceberg and DuckDB from
// PyPI, in tools/venv; PICOMQ_ICEBERG_PYTHON overrides the interpreter), never the sink's code.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace picomq::test::iceberg {

// Runs `iceberg_table.py <catalog_json> <arguments>` (arguments already shell-quoted); its output.
// Throws std::runtime_error with the tool's output when it fails.
std::string table_tool(const std::string& catalog_json, const std::string& arguments);

// The JSON objects of the lines of `out` that hold one (rows, snapshots, files).
std::vector<nlohmann::json> json_lines(const std::string& out);

}  // namespace picomq::test::iceberg
