#pragma once
// The Delta sink's independent reader for C++ tests: delta_table.py (the deltalake package from
// PyPI, in tools/venv; PICOMQ_DELTA_PYTHON overrides the interpreter), never the sink's code.
#include <nlohmann/json.hpp>
#include <string>

namespace picomq::test::delta {

// Runs `delta_table.py <arguments>` (arguments already shell-quoted; `environment`: assignments
// put before the command, e.g. "APP_IDS=a,b") and parses the JSON object it prints last. Throws
// std::runtime_error with the tool's output when it fails.
nlohmann::json table_tool(const std::string& arguments, const std::string& environment = "");

}  // namespace picomq::test::delta
