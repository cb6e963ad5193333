#pragma once
// What a sink's start would refuse, found without starting it (`picomq-connect --check`): its
// plugin must load from the plugin search path (found, ABI, descriptor, option table), and its
// [plugin_config] must pass the plugin's option table and then the plugin's own validate()
// (ABI 2.2). Nothing is opened and nothing connects anywhere. Every problem is a ConfigError
// positioned in the definition file, in the format of the other configuration errors.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/error.h"
#include "config/sink_definition.h"
#include "picomq/kit/plugin_options.hpp"
#include "picomq/sink_abi.h"

namespace picomq::runtime {

struct PluginConfigCheck {
  // The option table's problems, or (when there are none) those of the plugin's validate(), in
  // line order.
  std::vector<config::ConfigError> errors;
  // The validated options (what start opens the plugin with): set when there is no error.
  std::optional<kit::PluginOptions> options;
};

// The definition's [[topics]] blocks as the plugin sees them (sink ABI 2.7
// pmq_host_api.subscriptions): [{"topics": [...], "pattern": "^..." or null, "changes": "none" |
// "keyed" | "debezium" (2.8)}, ...].
std::string subscriptions_json(const config::SinkDefinition& definition);

// The definition against a loaded plugin: a block with `changes` needs a sink that applies them
// (ABI 2.8 change_ops); [plugin_config] against its option table and validate().
PluginConfigCheck check_plugin_config(const config::SinkDefinition& definition, const pmq_sink_plugin& descriptor);

// Loads the definition's plugin from `search_path` (a missing or refused plugin is an error at
// `path`, listing the files tried), then check_plugin_config(). The library is unloaded again.
std::vector<config::ConfigError> check_sink_plugin(const config::SinkDefinition& definition,
                                                   const std::vector<std::filesystem::path>& search_path);

// A definition read from TOML (the API's PUT /sinks/{key} and POST /validate): its own errors,
// then, when it is enabled, check_sink_plugin() of it, also for a file with errors (as far as it
// was read: SinkDefinitionResult::partial), so that one answer shows every problem.
std::vector<config::ConfigError> check_definition(const config::SinkDefinitionResult& parsed,
                                                  const std::vector<std::filesystem::path>& search_path);

}  // namespace picomq::runtime
