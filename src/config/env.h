// ${ENV_VAR} interpolation of string values in config files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace picomq::config {

// Looks up one environment variable; nullopt when it is not set (set-but-empty is "").
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// The process environment (std::getenv).
EnvLookup process_env();

// Replaces every ${NAME} in text with the variable's value. "$${" is a literal "${";
// a '$' not followed by '{' is kept as is. NAME is [A-Za-z_][A-Za-z0-9_]*.
// Errors (unset variable, "${" without "}", bad name) return nullopt and set *error.
// Values are inserted verbatim and not scanned again.
std::optional<std::string> interpolate_env(std::string_view text, const EnvLookup& env, std::string* error);

}  // namespace picomq::config
