#include "delta_table.h"

#include <cstdlib>
#include <stdexcept>

#include "picomq/kit/testing/shell.hpp"

namespace picomq::test::delta {

nlohmann::json table_tool(const std::string& arguments, const std::string& environment) {
  const char* python = std::getenv("PICOMQ_DELTA_PYTHON");
  const std::string out = kit::testing::run_shell((environment.empty() ? "" : environment + " ") +
                                                  std::string(python ? python : PICOMQ_DELTA_DEFAULT_PYTHON) + " " +
                                                  kit::testing::shell_quote(PICOMQ_DELTA_TABLE_PY) + " " + arguments);
  const size_t json = out.rfind("\n{") == std::string::npos ? out.find('{') : out.rfind("\n{") + 1;
  if (json == std::string::npos) throw std::runtime_error("delta_table.py " + arguments + " printed no JSON: " + out);
  return nlohmann::json::parse(out.substr(json));
}

}  // namespace picomq::test::delta
