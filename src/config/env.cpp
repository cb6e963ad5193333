#include "config/env.h"

#include <cstdlib>

namespace picomq::config {

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

namespace {
bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
}  // namespace

std::optional<std::string> interpolate_env(std::string_view text, const EnvLookup& env, std::string* error) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '$') {
      out += c;
      ++i;
      continue;
    }
    if (text.substr(i, 3) == "$${") {  // escaped: literal "${"
      out += "${";
      i += 3;
      continue;
    }
    if (text.substr(i, 2) != "${") {  // a lone '$' is just a character
      out += c;
      ++i;
      continue;
    }
    std::size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      if (error) *error = "unterminated '${' (write '$${' for a literal '${')";
      return std::nullopt;
    }
    std::string_view name = text.substr(i + 2, close - i - 2);
    bool valid = !name.empty() && is_name_start(name[0]);
    for (char n : name) valid = valid && is_name_char(n);
    if (!valid) {
      if (error)
        *error = "invalid environment variable name '" + std::string(name) +
                 "' in '${...}' (use letters, digits and '_'; write '$${' for a literal '${')";
      return std::nullopt;
    }
    auto value = env ? env(name) : std::nullopt;
    if (!value) {
      if (error) *error = "environment variable '" + std::string(name) + "' is not set";
      return std::nullopt;
    }
    out += *value;
    i = close + 1;
  }
  return out;
}

}  // namespace picomq::config
