#include "iceberg_tool.h"

#include <cstdlib>
#include <sstream>

#include "picomq/kit/testing/shell.hpp"

namespace picomq::test::iceberg {

std::string table_tool(const std::string& catalog_json, const std::string& arguments) {
  const char* python = std::getenv("PICOMQ_ICEBERG_PYTHON");
  return kit::testing::run_shell(std::string(python ? python : PICOMQ_ICEBERG_DEFAULT_PYTHON) + " " +
                                 kit::testing::shell_quote(PICOMQ_ICEBERG_TABLE_PY) + " " +
                                 kit::testing::shell_quote(catalog_json) + " " + arguments);
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace picomq::test::iceberg
