#include "config/error.h"

namespace picomq::config {

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) {
    out += ':' + std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  out += ": ";
  if (!key.empty()) out += "key '" + key + "': ";
  out += message;
  return out;
}

std::string format_errors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) {
    out += e.to_string();
    out += '\n';
  }
  return out;
}

}  // namespace picomq::config
