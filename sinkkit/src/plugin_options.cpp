#include "picomq/kit/plugin_options.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "picomq/kit/spelling.hpp"
#include "picomq/kit/units.hpp"

namespace picomq::kit {
namespace {

using Json = nlohmann::json;

std::string_view type_name(int32_t type) {
  switch (type) {
    case PMQ_OPTION_STRING: return "string";
    case PMQ_OPTION_INT: return "integer";
    case PMQ_OPTION_FLOAT: return "number";
    case PMQ_OPTION_BOOL: return "boolean";
    case PMQ_OPTION_DURATION: return "duration";
    case PMQ_OPTION_BYTE_SIZE: return "byte size";
    case PMQ_OPTION_STRING_LIST: return "list of strings";
    case PMQ_OPTION_TABLE: return "table";
  }
  return "unknown type";
}

std::string_view json_kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a float";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "a table";
    default: return "null";
  }
}

std::vector<std::string> split_allowed(const char* allowed) {
  std::vector<std::string> out;
  if (!allowed) return out;
  std::string_view rest(allowed);
  while (!rest.empty()) {
    auto bar = rest.find('|');
    out.emplace_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return out;
}

std::vector<const pmq_option*> options_of(const pmq_sink_plugin& plugin) {
  std::vector<const pmq_option*> out;
  for (size_t i = 0; i < plugin.option_count; ++i) out.push_back(pmq_plugin_option(&plugin, i));
  return out;
}

}  // namespace

// Converts one JSON value to the option's type; returns the problem, or empty.
static std::string convert(const pmq_option& opt, const Json& v, int32_t& type, std::string& text, int64_t& integer,
                           double& number, bool& boolean, std::vector<std::string>& items, std::string& as_json) {
  const bool secret = opt.flags & PMQ_OPTION_SECRET;
  auto wrong = [&] {
    const std::string type(type_name(opt.type));
    return std::string("must be ") + (type[0] == 'i' ? "an " : "a ") + type + ", not " + std::string(json_kind(v));
  };
  type = opt.type;
  switch (opt.type) {
    case PMQ_OPTION_STRING: {
      if (!v.is_string()) return wrong();
      text = v.get<std::string>();
      auto allowed = split_allowed(opt.allowed);
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), text) == allowed.end())
        return "must be one of " + std::string(opt.allowed) + (secret ? "" : ", not \"" + text + "\"");
      break;
    }
    case PMQ_OPTION_INT:
      if (!v.is_number_integer()) return wrong();
      integer = v.get<int64_t>();
      number = static_cast<double>(integer);
      break;
    case PMQ_OPTION_FLOAT:
      if (!v.is_number()) return wrong();
      number = v.get<double>();
      break;
    case PMQ_OPTION_BOOL:
      if (!v.is_boolean()) return wrong();
      boolean = v.get<bool>();
      break;
    case PMQ_OPTION_DURATION:
    case PMQ_OPTION_BYTE_SIZE: {
      const bool duration = opt.type == PMQ_OPTION_DURATION;
      if (v.is_number_integer()) {
        if (v.get<int64_t>() < 0) return "must not be negative";
        integer = v.get<int64_t>();
      } else if (v.is_string()) {
        std::string error;
        if (duration) {
          auto d = parse_duration(v.get<std::string>(), &error);
          if (!d) return error;
          integer = d->count();
        } else {
          auto b = parse_byte_size(v.get<std::string>(), &error);
          if (!b) return error;
          integer = static_cast<int64_t>(*b);
        }
      } else {
        return duration ? "must be a duration such as \"250ms\" or \"5s\" (or integer milliseconds), not " +
                              std::string(json_kind(v))
                        : "must be a size such as \"64KiB\" (or integer bytes), not " + std::string(json_kind(v));
      }
      as_json = std::to_string(integer);
      return {};
    }
    case PMQ_OPTION_STRING_LIST:
      if (!v.is_array()) return wrong();
      for (const auto& item : v) {
        if (!item.is_string()) return "must be a list of strings (found " + std::string(json_kind(item)) + " in it)";
        items.push_back(item.get<std::string>());
      }
      break;
    case PMQ_OPTION_TABLE:
      if (!v.is_object() && !v.is_array()) return wrong();
      break;
    default: return "has an unknown option type " + std::to_string(opt.type);
  }
  as_json = v.dump();
  return {};
}

std::string PluginOptions::check_table(const pmq_sink_plugin& plugin) {
  if (plugin.option_count && (!plugin.options || plugin.option_size < sizeof(pmq_option)))
    return "its option table is malformed (option_size " + std::to_string(plugin.option_size) + ")";
  std::set<std::string, std::less<>> seen;
  for (const pmq_option* opt : options_of(plugin)) {
    if (!opt->name || !*opt->name) return "its option table has an option without a name";
    if (!seen.insert(opt->name).second) return "its option table declares '" + std::string(opt->name) + "' twice";
    if (opt->type < PMQ_OPTION_STRING || opt->type > PMQ_OPTION_TABLE)
      return "option '" + std::string(opt->name) + "' has an unknown type " + std::to_string(opt->type);
    if (opt->default_json) {
      Json v = Json::parse(opt->default_json, nullptr, /*allow_exceptions=*/false);
      if (v.is_discarded())
        return "option '" + std::string(opt->name) + "' has a default that is not JSON: " + opt->default_json;
      int32_t type;
      std::string text, as_json;
      int64_t integer;
      double number;
      bool boolean;
      std::vector<std::string> items;
      if (auto problem = convert(*opt, v, type, text, integer, number, boolean, items, as_json); !problem.empty())
        return "option '" + std::string(opt->name) + "' has a default that " + problem;
    }
  }
  return {};
}

std::optional<PluginOptions> PluginOptions::validate(const pmq_sink_plugin& plugin, std::string_view config_json,
                                                     std::vector<std::string>& errors) {
  std::vector<OptionProblem> problems;
  auto out = validate(plugin, config_json, problems);
  for (const auto& p : problems) errors.push_back(p.to_string());
  return out;
}

std::vector<OptionProblem> PluginOptions::plugin_problems(const pmq_sink_plugin& plugin, std::string_view text) {
  const auto options = options_of(plugin);
  auto declared = [&](std::string_view name) {
    return std::any_of(options.begin(), options.end(), [&](const pmq_option* o) { return name == o->name; });
  };
  std::vector<OptionProblem> out;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    OptionProblem problem{OptionProblem::Kind::Plugin, "", std::string(line)};
    if (const auto colon = line.find(": "); colon != std::string_view::npos && colon > 0) {
      const std::string_view key = line.substr(0, colon);
      const auto end = key.find_first_of(".[");
      if (declared(key) || (end != std::string_view::npos && end > 0 && declared(key.substr(0, end)))) {
        problem.option = std::string(key);
        problem.message = std::string(line.substr(colon + 2));
      }
    }
    out.push_back(std::move(problem));
  }
  return out;
}

std::optional<PluginOptions> PluginOptions::validate(const pmq_sink_plugin& plugin, std::string_view config_json,
                                                     std::vector<OptionProblem>& errors) {
  using Kind = OptionProblem::Kind;
  Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    errors.push_back({Kind::Invalid, "", "[plugin_config] is not a table"});
    return std::nullopt;
  }
  const auto options = options_of(plugin);
  PluginOptions out;
  Json normalised = Json::object();
  for (const auto& item : config.items()) {
    const std::string& key = item.key();  // not a structured binding: the lambda below captures it
    auto it = std::find_if(options.begin(), options.end(), [&](const pmq_option* o) { return key == o->name; });
    if (it == options.end()) {
      std::string message = "unknown option for the " + std::string(plugin.name) + " sink";
      const pmq_option* closest = nullptr;
      size_t best = SIZE_MAX;
      for (const pmq_option* o : options)
        if (size_t d = edit_distance(key, o->name); d < best) best = d, closest = o;
      if (closest && best <= std::max<size_t>(2, key.size() / 3))
        message += "; did you mean '" + std::string(closest->name) + "'?";
      if (options.empty()) message += " (it takes no options)";
      else {
        message += " (known:";
        for (const pmq_option* o : options) message += " " + std::string(o->name);
        message += ")";
      }
      errors.push_back({Kind::Unknown, key, std::move(message)});
    }
  }
  for (const pmq_option* opt : options) {
    Value v;
    Json source;
    if (config.contains(opt->name)) {
      source = config[opt->name];
    } else if (opt->default_json) {
      source = Json::parse(opt->default_json);
    } else {
      if (opt->flags & PMQ_OPTION_REQUIRED) errors.push_back({Kind::Missing, opt->name, "missing required option"});
      continue;
    }
    if (auto problem = convert(*opt, source, v.type, v.text, v.integer, v.number, v.boolean, v.items, v.json);
        !problem.empty()) {
      errors.push_back({Kind::Invalid, opt->name, std::move(problem)});
      continue;
    }
    normalised[opt->name] = Json::parse(v.json);
    out.values_.emplace(opt->name, std::move(v));
  }
  if (!errors.empty()) return std::nullopt;
  out.json_ = normalised.dump();
  return out;
}

const PluginOptions::Value* PluginOptions::find(std::string_view name, std::initializer_list<int32_t> types) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  for (int32_t t : types)
    if (it->second.type == t) return &it->second;
  return nullptr;
}

bool PluginOptions::has(std::string_view name) const { return values_.find(name) != values_.end(); }
const char* PluginOptions::string(std::string_view name) const {
  const Value* v = find(name, {PMQ_OPTION_STRING});
  return v ? v->text.c_str() : nullptr;
}
int64_t PluginOptions::integer(std::string_view name) const {
  const Value* v = find(name, {PMQ_OPTION_INT, PMQ_OPTION_DURATION, PMQ_OPTION_BYTE_SIZE});
  return v ? v->integer : 0;
}
double PluginOptions::number(std::string_view name) const {
  const Value* v = find(name, {PMQ_OPTION_FLOAT, PMQ_OPTION_INT});
  return v ? v->number : 0;
}
bool PluginOptions::boolean(std::string_view name) const {
  const Value* v = find(name, {PMQ_OPTION_BOOL});
  return v && v->boolean;
}
size_t PluginOptions::list_size(std::string_view name) const {
  const Value* v = find(name, {PMQ_OPTION_STRING_LIST});
  return v ? v->items.size() : 0;
}
const char* PluginOptions::list_item(std::string_view name, size_t index) const {
  const Value* v = find(name, {PMQ_OPTION_STRING_LIST});
  return v && index < v->items.size() ? v->items[index].c_str() : nullptr;
}
const char* PluginOptions::json(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second.json.c_str();
}

std::string PluginOptions::markdown_table(const pmq_sink_plugin& plugin) {
  std::string out = "| Option | Type | Default | Required | Secret | Description |\n|---|---|---|---|---|---|\n";
  auto cell = [](const std::string& s) {
    std::string escaped;
    for (char c : s) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
    return escaped;
  };
  for (const pmq_option* opt : options_of(plugin)) {
    std::string type(type_name(opt->type));
    if (opt->allowed) type += ": " + std::string(opt->allowed);
    out += "| `" + std::string(opt->name) + "` | " + cell(type) + " | " +
           (opt->default_json ? "`" + cell(opt->default_json) + "`" : std::string("—")) + " | " +
           (opt->flags & PMQ_OPTION_REQUIRED ? "yes" : "no") + " | " + (opt->flags & PMQ_OPTION_SECRET ? "yes" : "no") +
           " | " + cell(opt->help ? opt->help : "") + " |\n";
  }
  return out;
}

}  // namespace picomq::kit
