#include "runtime/config_check.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "picomq/kit/plugin_options.hpp"
#include "runtime/plugin_host/sink_instance.h"

namespace picomq::runtime {
namespace {

config::ConfigError to_error(const config::SinkDefinition& definition, const kit::OptionProblem& problem) {
  return definition.plugin_config_error(problem.option, problem.message,
                                        problem.kind == kit::OptionProblem::Kind::Unknown);
}

}  // namespace

std::string subscriptions_json(const config::SinkDefinition& definition) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& b : definition.topics)
    blocks.push_back({{"topics", b.topics},
                      {"pattern", b.anchored_pattern ? nlohmann::json(*b.anchored_pattern) : nlohmann::json(nullptr)},
                      {"changes", config::to_string(b.changes)}});
  return blocks.dump();
}

PluginConfigCheck check_plugin_config(const config::SinkDefinition& definition, const pmq_sink_plugin& descriptor) {
  PluginConfigCheck check;
  // A block of changes goes only to a sink that applies upserts and deletes (docs/changes.md).
  for (const auto& b : definition.topics) {
    if (b.changes == config::ChangeEvents::None ||
        (change_ops(descriptor) & PMQ_CHANGE_OPS_KEYED) == PMQ_CHANGE_OPS_KEYED)
      continue;
    check.errors.push_back(config::ConfigError{
        definition.file, b.changes_line, b.changes_column, "topics[" + std::to_string(b.index) + "].changes",
        "the sink '" + std::string(descriptor.name) + "' does not apply change events (upserts and deletes by key)" +
            (change_ops(descriptor) ? "" : ", it writes plain records") +
            ": leave 'changes' out, or write them to a sink that applies them (docs/changes.md)"});
  }
  std::vector<kit::OptionProblem> problems;
  check.options = kit::PluginOptions::validate(descriptor, definition.plugin_config_json, problems);
  if (check.options) {
    // validate() sees the options the table accepted, so it runs only when there is no problem.
    if (auto text = validate_with_plugin(descriptor, definition.key, *check.options, subscriptions_json(definition));
        !text.empty()) {
      problems = kit::PluginOptions::plugin_problems(descriptor, text);
      check.options.reset();
    }
  }
  for (const auto& p : problems) check.errors.push_back(to_error(definition, p));
  std::stable_sort(check.errors.begin(), check.errors.end(),
                   [](const config::ConfigError& a, const config::ConfigError& b) {
                     return a.line != b.line ? a.line < b.line : a.column < b.column;
                   });
  if (!check.errors.empty()) check.options.reset();
  return check;
}

std::vector<config::ConfigError> check_sink_plugin(const config::SinkDefinition& definition,
                                                   const std::vector<std::filesystem::path>& search_path) {
  std::string error;
  auto library = PluginLibrary::load(definition.path, search_path, error);
  if (!library) return {definition.path_error(error)};
  return check_plugin_config(definition, library->descriptor()).errors;
}

std::vector<config::ConfigError> check_definition(const config::SinkDefinitionResult& parsed,
                                                  const std::vector<std::filesystem::path>& search_path) {
  std::vector<config::ConfigError> errors = parsed.errors;
  const auto& definition = parsed.definition ? parsed.definition : parsed.partial;
  if (definition && definition->enabled) {
    auto problems = check_sink_plugin(*definition, search_path);
    errors.insert(errors.end(), problems.begin(), problems.end());
  }
  return errors;
}

}  // namespace picomq::runtime
