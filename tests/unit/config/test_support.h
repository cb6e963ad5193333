// Helpers shared by the config unit tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/env.h"
#include "config/error.h"

namespace picomq::config::testing {

// An environment made of a fixed map, so tests never depend on the real one.
inline EnvLookup fake_env(std::map<std::string, std::string> vars = {}) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline std::string dump(const std::vector<ConfigError>& errors) { return format_errors(errors); }

// The single error about `key`; fails the test when there is none or more than one.
inline ConfigError error_for(const std::vector<ConfigError>& errors, std::string_view key) {
  const ConfigError* found = nullptr;
  int count = 0;
  for (const auto& e : errors) {
    if (e.key == key) {
      found = &e;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "errors about key '" << key << "' in:\n" << dump(errors);
  return found ? *found : ConfigError{};
}

}  // namespace picomq::config::testing
