#include "picomq/kit/declared_columns.hpp"

#include <simdjson.h>

#include <string_view>

namespace picomq::kit {

Result<std::vector<DeclaredColumn>> parse_declared_columns(const std::string& json) {
  using R = Result<std::vector<DeclaredColumn>>;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root)) return R::failure("not readable as JSON");
  std::vector<DeclaredColumn> out;
  std::string problem;
  auto add = [&](std::string_view name, simdjson::dom::element type) {
    std::string_view t;
    if (type.get_string().get(t)) {
      problem = "the type of '" + std::string(name) + "' must be a string";
      return;
    }
    for (const DeclaredColumn& other : out)
      if (other.name == name) {
        problem = "column '" + std::string(name) + "' is declared twice";
        return;
      }
    out.push_back({std::string(name), std::string(t)});
  };
  simdjson::dom::array array;
  simdjson::dom::object object;
  if (!root.get_array().get(array)) {
    for (simdjson::dom::element item : array) {
      simdjson::dom::object obj;
      std::string_view name;
      simdjson::dom::element type;
      if (item.get_object().get(obj) || obj["name"].get_string().get(name) || obj["type"].get(type))
        return R::failure("each item must be a table { name = \"...\", type = \"...\" }");
      add(name, type);
      if (!problem.empty()) return R::failure(problem);
    }
  } else if (!root.get_object().get(object)) {
    for (auto member : object) {
      add(member.key, member.value);
      if (!problem.empty()) return R::failure(problem);
    }
  } else {
    return R::failure("must be an array [{ name = \"...\", type = \"...\" }, ...] or a table { name = \"type\" }");
  }
  if (out.empty()) return R::failure("no columns declared");
  return R::success(std::move(out));
}

}  // namespace picomq::kit
