#pragma once
// A plugin's [plugin_config], checked against the option table its descriptor declares
// (pmq_sink_plugin.options) before open(): unknown keys, wrong types, missing required options
// and values outside an allowed set are errors naming the key; defaults are filled in;
// durations and byte sizes are normalised to milliseconds and bytes. The result backs the
// host API's config_* accessors. Values of secret options never appear in an error message.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::kit {

// One problem of a [plugin_config]: the option it is about and what is wrong with it.
struct OptionProblem {
  enum class Kind {
    Unknown,  // a key the option table does not declare
    Missing,  // a required option that is not set
    Invalid,  // a value of the wrong type or outside the allowed set
    Plugin,   // found by the plugin's own validate() (ABI 2.2)
  };
  Kind kind = Kind::Invalid;
  std::string option;   // the key, e.g. "mode"; empty when about [plugin_config] as a whole
  std::string message;  // never holds the value of a secret option

  // "<option>: <message>" (the message alone without an option).
  std::string to_string() const { return option.empty() ? message : option + ": " + message; }
};

class PluginOptions {
 public:
  // Problems with the table itself (a plugin bug): empty or duplicate names, unknown types,
  // defaults that do not parse or do not match their type. Empty when the table is sound.
  static std::string check_table(const pmq_sink_plugin& plugin);

  // Every problem of `config_json` (the definition's [plugin_config] as a JSON object), unknown
  // keys first (in key order), then the option table's problems (in table order). Returns the
  // options only when there is none.
  static std::optional<PluginOptions> validate(const pmq_sink_plugin& plugin, std::string_view config_json,
                                               std::vector<OptionProblem>& problems);
  // The same, each problem as "<key>: <what is wrong>".
  static std::optional<PluginOptions> validate(const pmq_sink_plugin& plugin, std::string_view config_json,
                                               std::vector<std::string>& errors);

  // The problems of a plugin's validate() (validate_with_plugin's text, one per line, each
  // "<key>: <message>") as OptionProblems of kind Plugin. A line's key is taken as the option
  // only when it names a declared option (or a path into one, "auth.user"); other lines are
  // about the table as a whole.
  static std::vector<OptionProblem> plugin_problems(const pmq_sink_plugin& plugin, std::string_view text);

  const std::string& json() const { return json_; }  // normalised, defaults filled in

  bool has(std::string_view name) const;
  const char* string(std::string_view name) const;
  int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  bool boolean(std::string_view name) const;
  size_t list_size(std::string_view name) const;
  const char* list_item(std::string_view name, size_t index) const;
  const char* json(std::string_view name) const;

  // A Markdown table of the options (name, type, default, required, secret, help): the
  // generated part of each sink's docs.
  static std::string markdown_table(const pmq_sink_plugin& plugin);

 private:
  struct Value {
    int32_t type = PMQ_OPTION_STRING;
    std::string text;                // STRING
    int64_t integer = 0;             // INT, DURATION, BYTE_SIZE
    double number = 0;               // FLOAT (and INT)
    bool boolean = false;            // BOOL
    std::vector<std::string> items;  // STRING_LIST
    std::string json;                // every type, as JSON text
  };
  const Value* find(std::string_view name, std::initializer_list<int32_t> types) const;

  std::map<std::string, Value, std::less<>> values_;
  std::string json_ = "{}";
};

}  // namespace picomq::kit
