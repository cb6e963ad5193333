#pragma once
// Quickwit index configs given as YAML text (Quickwit's own format for `quickwit index create` and
// POST /api/v1/indexes with Content-Type application/yaml). The text is passed through libyaml's
// parser and emitter event by event, so every scalar keeps its style and Quickwit resolves the
// types itself; only the top level changes: index_id becomes the sink's, version defaults to 0.8.
#include <stdexcept>
#include <string>
#include <string_view>

namespace picomq::quickwit {

class YamlConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The config for index `index_id`: one YAML document holding a mapping with doc_mapping. Throws
// YamlConfigError saying what is wrong and where (line and column) otherwise.
std::string yaml_index_config_for(std::string_view yaml, std::string_view index_id);

}  // namespace picomq::quickwit
