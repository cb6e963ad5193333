// Internal: typed, error-collecting access to toml++ tables. Not part of the public API
// (the public headers do not include toml++).
//
// Every accessor of TableReader declares its key as known; finish() then reports every key
// of the table that no accessor asked for, with the closest known key as a suggestion.
// Problems never stop reading: each one is appended to Diagnostics and the caller goes on,
// so a file's errors are all reported in one pass.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/env.h"
#include "config/error.h"
#include "picomq/kit/spelling.hpp"
#include "picomq/kit/units.hpp"

namespace picomq::config::detail {

class Diagnostics {
 public:
  Diagnostics(std::string file, std::vector<ConfigError>& out) : file_(std::move(file)), out_(out) {}
  void error(const toml::source_region& where, std::string key, std::string message);
  const std::string& file() const { return file_; }
  std::size_t count() const { return out_.size(); }

 private:
  std::string file_;
  std::vector<ConfigError>& out_;
};

// A config file's text parsed, or nullopt with its syntax error reported (no other key is read then).
std::optional<toml::table> parse_document(std::string_view text, const std::string& file_name, Diagnostics& diag);

// Orders errors by line, then column (stable), so a file's errors read top to bottom.
void sort_by_position(std::vector<ConfigError>& errors);

// "topics[0]" + "poll_interval" -> "topics[0].poll_interval"; keys that are not bare TOML keys
// are quoted: "properties" + "fetch.min.bytes" -> "properties.\"fetch.min.bytes\"".
std::string child_key(std::string_view parent, std::string_view key);
std::string index_key(std::string_view parent, std::size_t index);
std::string_view type_name(toml::node_type type);

template <typename T>
struct Located {
  T value;
  toml::source_region where;
  std::string key;  // dotted key of the element
};

// Interpolates ${ENV} in a string node's value; reports at the node on failure.
std::optional<std::string> interpolate(const toml::node& string_node, const std::string& key, Diagnostics& diag,
                                       const EnvLookup& env);

// Converts any TOML node to JSON (tables -> objects, arrays -> arrays, dates/times -> ISO
// strings, strings interpolated). Problems are reported and the offending value becomes null.
nlohmann::json to_json(const toml::node& node, const std::string& key, Diagnostics& diag, const EnvLookup& env);

class TableReader {
 public:
  TableReader(const toml::table& table, std::string path, Diagnostics& diag, const EnvLookup& env)
      : table_(table), path_(std::move(path)), diag_(diag), env_(env) {}

  const toml::node* node(std::string_view key, bool required = false);
  std::optional<std::string> string(std::string_view key, bool required = false);
  std::optional<std::int64_t> integer(std::string_view key, bool required = false);
  std::optional<bool> boolean(std::string_view key);
  const toml::table* table(std::string_view key, bool required = false);
  std::optional<std::vector<Located<std::string>>> string_array(std::string_view key);
  // A string or an array of strings.
  std::optional<std::vector<Located<std::string>>> string_list(std::string_view key);
  std::optional<kit::Millis> duration(std::string_view key);
  // A table whose values are strings, integers, floats or booleans, all turned into strings;
  // librdkafka properties the runtime manages are rejected.
  std::optional<std::vector<std::pair<std::string, std::string>>> properties(std::string_view key);

  // Reports keys of the table that no accessor asked for.
  void finish();

  std::string key_path(std::string_view key) const { return child_key(path_, key); }
  // An error located at `at`, about `key` of this table.
  void error(const toml::node& at, std::string_view key, std::string message);
  // An error located at this table, about the table itself.
  void error_here(std::string message);
  // An error located at this table, about a key it should have had.
  void missing(std::string_view key, const std::string& what = {});
  const toml::table& toml_table() const { return table_; }
  const std::string& path() const { return path_; }
  Diagnostics& diagnostics() { return diag_; }
  const EnvLookup& env() const { return env_; }

 private:
  void declare(std::string_view key) { known_.emplace_back(key); }
  void wrong_type(const toml::node& at, std::string_view key, std::string_view expected);

  const toml::table& table_;
  std::string path_;
  Diagnostics& diag_;
  const EnvLookup& env_;
  std::vector<std::string> known_;
};

}  // namespace picomq::config::detail
