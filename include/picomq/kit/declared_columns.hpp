#pragma once
// A sink's declared columns (`columns` in [plugin_config], read as JSON) in either TOML shape:
//   columns = [{ name = "id", type = "text" }, { name = "amount", type = "float8" }]   (in order)
//   columns = { id = "text", amount = "float8" }
// The type stays text: what it means is the destination's business.
#include <string>
#include <vector>

#include "picomq/kit/result.hpp"

namespace picomq::kit {

struct DeclaredColumn {
  std::string name;
  std::string type;
};

// The columns in declaration order. Fails, with a message for the option's problem, on text that
// is not JSON, another shape, a type that is not a string, a name declared twice or no column.
Result<std::vector<DeclaredColumn>> parse_declared_columns(const std::string& json);

}  // namespace picomq::kit
