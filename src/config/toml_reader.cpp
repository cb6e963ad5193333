#include "config/toml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "config/names.h"

namespace picomq::config::detail {

void Diagnostics::error(const toml::source_region& where, std::string key, std::string message) {
  out_.push_back(ConfigError{file_, static_cast<int>(where.begin.line), static_cast<int>(where.begin.column),
                             std::move(key), std::move(message)});
}

namespace {

bool is_bare_key(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string format_double(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  return std::string(buf, end);
}

template <typename T>
std::string iso_string(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

std::optional<toml::table> parse_document(std::string_view text, const std::string& file_name, Diagnostics& diag) {
  try {
    return toml::parse(text, std::string_view(file_name));
  } catch (const toml::parse_error& e) {
    diag.error(e.source(), "", "TOML syntax error: " + std::string(e.description()));
    return std::nullopt;
  }
}

void sort_by_position(std::vector<ConfigError>& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const ConfigError& a, const ConfigError& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
}

std::string child_key(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (!out.empty()) out += '.';
  if (is_bare_key(key)) {
    out += key;
  } else {
    out += '"';
    out += key;
    out += '"';
  }
  return out;
}

std::string index_key(std::string_view parent, std::size_t index) {
  return std::string(parent) + '[' + std::to_string(index) + ']';
}

std::string_view type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
  }
  return "unknown";
}

std::optional<std::string> interpolate(const toml::node& string_node, const std::string& key, Diagnostics& diag,
                                       const EnvLookup& env) {
  const auto* value = string_node.as_string();
  if (!value) return std::nullopt;
  std::string problem;
  auto out = interpolate_env(value->get(), env, &problem);
  if (!out) diag.error(string_node.source(), key, problem);
  return out;
}

nlohmann::json to_json(const toml::node& node, const std::string& key, Diagnostics& diag, const EnvLookup& env) {
  switch (node.type()) {
    case toml::node_type::table: {
      auto object = nlohmann::json::object();
      for (auto&& [k, v] : *node.as_table())
        object[std::string(k.str())] = to_json(v, child_key(key, k.str()), diag, env);
      return object;
    }
    case toml::node_type::array: {
      auto array = nlohmann::json::array();
      std::size_t i = 0;
      for (const auto& element : *node.as_array()) array.push_back(to_json(element, index_key(key, i++), diag, env));
      return array;
    }
    case toml::node_type::string: {
      auto text = interpolate(node, key, diag, env);
      return text ? nlohmann::json(*text) : nlohmann::json();
    }
    case toml::node_type::integer: return node.as_integer()->get();
    case toml::node_type::floating_point: {
      double value = node.as_floating_point()->get();
      if (!std::isfinite(value)) {
        diag.error(node.source(), key, "nan and inf cannot be represented in JSON");
        return nullptr;
      }
      return value;
    }
    case toml::node_type::boolean: return node.as_boolean()->get();
    case toml::node_type::date: return iso_string(node.as_date()->get());
    case toml::node_type::time: return iso_string(node.as_time()->get());
    case toml::node_type::date_time: return iso_string(node.as_date_time()->get());
    case toml::node_type::none: break;
  }
  return nullptr;
}

void TableReader::error(const toml::node& at, std::string_view key, std::string message) {
  diag_.error(at.source(), key_path(key), std::move(message));
}

void TableReader::error_here(std::string message) { diag_.error(table_.source(), path_, std::move(message)); }

void TableReader::missing(std::string_view key, const std::string& what) {
  std::string message = "missing required key '" + std::string(key) + "'";
  if (!what.empty()) message += " (" + what + ")";
  diag_.error(table_.source(), key_path(key), std::move(message));
}

void TableReader::wrong_type(const toml::node& at, std::string_view key, std::string_view expected) {
  error(at, key,
        "'" + std::string(key) + "' must be " + std::string(expected) + ", got " + std::string(type_name(at.type())));
}

const toml::node* TableReader::node(std::string_view key, bool required) {
  declare(key);
  const toml::node* n = table_.get(key);
  if (!n && required) missing(key);
  return n;
}

std::optional<std::string> TableReader::string(std::string_view key, bool required) {
  const toml::node* n = node(key, required);
  if (!n) return std::nullopt;
  if (!n->is_string()) {
    wrong_type(*n, key, "a string");
    return std::nullopt;
  }
  return interpolate(*n, key_path(key), diag_, env_);
}

std::optional<std::int64_t> TableReader::integer(std::string_view key, bool required) {
  const toml::node* n = node(key, required);
  if (!n) return std::nullopt;
  if (!n->is_integer()) {
    wrong_type(*n, key, "an integer");
    return std::nullopt;
  }
  return n->as_integer()->get();
}

std::optional<bool> TableReader::boolean(std::string_view key) {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_boolean()) {
    wrong_type(*n, key, "a boolean (true or false)");
    return std::nullopt;
  }
  return n->as_boolean()->get();
}

const toml::table* TableReader::table(std::string_view key, bool required) {
  const toml::node* n = node(key, required);
  if (!n) return nullptr;
  if (!n->is_table()) {
    wrong_type(*n, key, "a table");
    return nullptr;
  }
  return n->as_table();
}

std::optional<std::vector<Located<std::string>>> TableReader::string_array(std::string_view key) {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_array()) {
    wrong_type(*n, key, "an array of strings");
    return std::nullopt;
  }
  std::vector<Located<std::string>> out;
  bool ok = true;
  std::size_t i = 0;
  for (const auto& element : *n->as_array()) {
    std::string element_key = index_key(key, i);
    std::string element_path = index_key(key_path(key), i);
    ++i;
    if (!element.is_string()) {
      diag_.error(element.source(), element_path,
                  "'" + element_key + "' must be a string, got " + std::string(type_name(element.type())));
      ok = false;
      continue;
    }
    auto text = interpolate(element, element_path, diag_, env_);
    if (!text) {
      ok = false;
      continue;
    }
    out.push_back({std::move(*text), element.source(), std::move(element_path)});
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<Located<std::string>>> TableReader::string_list(std::string_view key) {
  const toml::node* n = table_.get(key);
  if (n && n->is_string()) {
    auto text = string(key);
    if (!text) return std::nullopt;
    return std::vector<Located<std::string>>{{std::move(*text), n->source(), key_path(key)}};
  }
  if (n && !n->is_array()) {
    declare(key);
    wrong_type(*n, key, "a string or an array of strings");
    return std::nullopt;
  }
  return string_array(key);
}

std::optional<kit::Millis> TableReader::duration(std::string_view key) {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_string()) {
    wrong_type(*n, key, "a duration string such as \"100ms\", \"2s\", \"5m\"");
    return std::nullopt;
  }
  auto text = interpolate(*n, key_path(key), diag_, env_);
  if (!text) return std::nullopt;
  std::string problem;
  auto value = kit::parse_duration(*text, &problem);
  if (!value) error(*n, key, problem);
  return value;
}

std::optional<std::vector<std::pair<std::string, std::string>>> TableReader::properties(std::string_view key) {
  const toml::table* t = table(key);
  if (!t) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> out;
  bool ok = true;
  for (auto&& [k, v] : *t) {
    std::string name(k.str());
    std::string path = child_key(key_path(key), name);
    if (auto reason = managed_property_reason(name)) {
      diag_.error(k.source(), path, *reason);
      ok = false;
      continue;
    }
    std::optional<std::string> text;
    switch (v.type()) {
      case toml::node_type::string: text = interpolate(v, path, diag_, env_); break;
      case toml::node_type::integer: text = std::to_string(v.as_integer()->get()); break;
      case toml::node_type::boolean: text = v.as_boolean()->get() ? "true" : "false"; break;
      case toml::node_type::floating_point: {
        double value = v.as_floating_point()->get();
        if (std::isfinite(value)) {
          text = format_double(value);
        } else {
          diag_.error(v.source(), path, "property '" + name + "' must be a finite number");
        }
        break;
      }
      default:
        diag_.error(v.source(), path,
                    "property '" + name + "' must be a string, integer, float or boolean, got " +
                        std::string(type_name(v.type())));
        break;
    }
    if (!text) {
      ok = false;
      continue;
    }
    out.emplace_back(std::move(name), std::move(*text));
  }
  if (!ok) return std::nullopt;
  return out;
}

void TableReader::finish() {
  for (auto&& [k, v] : table_) {
    (void)v;
    std::string_view name = k.str();
    if (std::find(known_.begin(), known_.end(), name) != known_.end()) continue;
    std::string message = "unknown key '" + std::string(name) + "'";
    const std::string* best = nullptr;
    std::size_t best_distance = 3;
    for (const auto& candidate : known_) {
      std::size_t distance = kit::edit_distance(name, candidate);
      if (distance < best_distance) {
        best_distance = distance;
        best = &candidate;
      }
    }
    if (best) message += " (did you mean '" + *best + "'?)";
    diag_.error(k.source(), key_path(name), std::move(message));
  }
}

}  // namespace picomq::config::detail
