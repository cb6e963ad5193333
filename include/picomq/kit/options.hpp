#pragma once
// Typed options: each option of a sink declared once — name, type (from the member it fills),
// default, flags, help, allowed values, a value check — bound to a member of the sink's settings
// struct. The table gives the runtime its pmq_option descriptors (so `--check`, the docs and the
// runtime's type checks all see the same declaration) and parses a Config into the struct.
//
//   struct Settings {
//     std::string url;
//     Method method = Method::Post;
//     std::chrono::milliseconds timeout{};
//     kit::BatchingSettings batching;
//   };
//   static inline const kit::OptionTable<Settings> options{
//       kit::option("url", &Settings::url).required().help("Where to send."),
//       kit::option("method", &Settings::method).choices({{"POST", Method::Post}, {"PUT", Method::Put}})
//           .fallback(Method::Post).help("HTTP method."),
//       kit::option("timeout", &Settings::timeout).fallback(std::chrono::seconds(30)).help("..."),
//       kit::group(&Settings::batching, kit::batching_options()),
//   };
//   void open(const sdk::Config& c) { settings_ = options.parse(c); }
//   static void validate(const sdk::Config& c, sdk::ConfigProblems& p) { options.validate(c, p); }
//
// The option type follows the member: std::string -> string, bool -> boolean, integers -> int,
// double -> float, std::chrono::milliseconds -> duration, kit::ByteSize -> byte size,
// std::vector<std::string> -> string list, kit::JsonValue -> table (read as JSON), an enum with
// choices() -> string with those allowed values. std::optional<T> is T's type, left empty when the
// definition does not set it. A default is a typed value (fallback()), rendered into the
// descriptor's JSON by the kit.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "picomq/sdk.hpp"

namespace picomq::kit {

// A byte count option ("8MiB", "64KB" or an integer in the definition).
struct ByteSize {
  uint64_t bytes = 0;
  friend bool operator==(ByteSize, ByteSize) = default;
};
// An option read as JSON text (a TOML table or array).
struct JsonValue {
  std::string text = "null";
};

// The JSON renderings of defaults ("30s", "8MiB", escaped strings); exposed for tests and docs.
std::string json_string(std::string_view text);
std::string format_duration(std::chrono::milliseconds value);
std::string format_byte_size(uint64_t bytes);

namespace detail {
template <class T>
struct unwrap_optional {
  using type = T;
  static constexpr bool optional = false;
};
template <class T>
struct unwrap_optional<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};
template <class T>
constexpr int32_t option_type() {
  if constexpr (std::is_same_v<T, std::string>) return PMQ_OPTION_STRING;
  else if constexpr (std::is_same_v<T, bool>) return PMQ_OPTION_BOOL;
  else if constexpr (std::is_enum_v<T>) return PMQ_OPTION_STRING;
  else if constexpr (std::is_integral_v<T>) return PMQ_OPTION_INT;
  else if constexpr (std::is_floating_point_v<T>) return PMQ_OPTION_FLOAT;
  else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) return PMQ_OPTION_DURATION;
  else if constexpr (std::is_same_v<T, ByteSize>) return PMQ_OPTION_BYTE_SIZE;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return PMQ_OPTION_STRING_LIST;
  else if constexpr (std::is_same_v<T, JsonValue>) return PMQ_OPTION_TABLE;
  else static_assert(sizeof(T) == 0, "no option type for this member type");
}
}  // namespace detail

// One option as the table stores it: its descriptor's strings (owned) and how to read it.
template <class Settings>
struct BoundOption {
  std::string name, default_json, allowed, help;
  bool has_default = false, has_allowed = false;
  int32_t type = PMQ_OPTION_STRING;
  uint32_t flags = 0;
  // Reads the option into `settings`; returns a problem message instead when the value is wrong.
  std::function<std::optional<std::string>(const sdk::Config&, Settings&)> read;
};

// The builder kit::option() returns: chain fallback() / required() / secret() / help() /
// choices() / check(), then hand it to an OptionTable or OptionGroup.
template <class Settings, class Member>
class OptionBuilder {
  using Value = typename detail::unwrap_optional<Member>::type;
  static constexpr bool kOptional = detail::unwrap_optional<Member>::optional;

 public:
  OptionBuilder(std::string name, Member Settings::*member) : name_(std::move(name)), member_(member) {}

  // The value when the definition leaves the option out.
  OptionBuilder& fallback(Value value) {
    fallback_ = std::move(value);
    return *this;
  }
  OptionBuilder& required() {
    flags_ |= PMQ_OPTION_REQUIRED;
    return *this;
  }
  // Never logged or shown (the runtime masks it; the docs mark it).
  OptionBuilder& secret() {
    flags_ |= PMQ_OPTION_SECRET;
    return *this;
  }
  OptionBuilder& help(std::string text) {
    help_ = std::move(text);
    return *this;
  }
  // The allowed spellings and what each means (an enum member; or the allowed strings).
  OptionBuilder& choices(std::initializer_list<std::pair<std::string_view, Value>> choices) {
    for (const auto& [spelling, value] : choices) choices_.emplace_back(std::string(spelling), value);
    return *this;
  }
  // A value check beyond the type: returns a problem ("must be at least 1") or nullopt.
  OptionBuilder& check(std::function<std::optional<std::string>(const Value&)> check) {
    checks_.push_back(std::move(check));
    return *this;
  }

  // Into a table of `Outer`, through `path` (the group member this option's struct is in).
  template <class Outer>
  BoundOption<Outer> bind(std::function<Settings&(Outer&)> path, std::string_view prefix) const {
    BoundOption<Outer> out;
    out.name = std::string(prefix) + name_;
    out.type = detail::option_type<Value>();
    out.flags = flags_;
    out.help = help_;
    if (!choices_.empty()) {
      out.has_allowed = true;
      for (const auto& c : choices_) out.allowed += (out.allowed.empty() ? "" : "|") + c.first;
    }
    if (fallback_) {
      out.has_default = true;
      out.default_json = render(*fallback_);
    }
    out.read = [self = *this, path = std::move(path), full = out.name](const sdk::Config& config,
                                                                       Outer& outer) -> std::optional<std::string> {
      Settings& settings = path(outer);
      std::optional<Value> value;
      std::optional<std::string> problem;
      if (config.has(full.c_str())) value = self.read_value(config, full, problem);
      else if (self.fallback_) value = *self.fallback_;
      if (problem) return problem;
      if (!value) {
        if (self.flags_ & PMQ_OPTION_REQUIRED) return "is required";
        return std::nullopt;  // unset and no default: the member keeps its initial value
      }
      for (const auto& check : self.checks_)
        if (auto problem = check(*value)) return problem;
      settings.*(self.member_) = std::move(*value);
      return std::nullopt;
    };
    return out;
  }

 private:
  // `problem`: set for a spelling outside the choices (the runtime checks them too, but a
  // hand-built host in a test does not).
  Value read_value(const sdk::Config& config, const std::string& name, std::optional<std::string>& problem) const {
    const char* n = name.c_str();
    if constexpr (std::is_same_v<Value, std::string>) return config.string(n);
    else if constexpr (std::is_same_v<Value, bool>) return config.boolean(n);
    else if constexpr (std::is_enum_v<Value>) {
      const std::string text = config.string(n);
      for (const auto& c : choices_)
        if (c.first == text) return c.second;
      problem = "'" + text + "' is not one of " + allowed_list();
      return Value{};
    } else if constexpr (std::is_integral_v<Value>) return static_cast<Value>(config.integer(n));
    else if constexpr (std::is_floating_point_v<Value>) return static_cast<Value>(config.number(n));
    else if constexpr (std::is_same_v<Value, std::chrono::milliseconds>) return config.duration(n);
    else if constexpr (std::is_same_v<Value, ByteSize>) return ByteSize{config.byte_size(n)};
    else if constexpr (std::is_same_v<Value, std::vector<std::string>>) return config.strings(n);
    else if constexpr (std::is_same_v<Value, JsonValue>) return JsonValue{config.json(n)};
  }
  std::string allowed_list() const {
    std::string out;
    for (const auto& c : choices_) out += (out.empty() ? "" : ", ") + c.first;
    return out;
  }
  std::string render(const Value& v) const {
    if constexpr (std::is_same_v<Value, std::string>) return json_string(v);
    else if constexpr (std::is_same_v<Value, bool>) return v ? "true" : "false";
    else if constexpr (std::is_enum_v<Value>) {
      for (const auto& c : choices_)
        if (c.second == v) return json_string(c.first);
      return "null";
    } else if constexpr (std::is_integral_v<Value>) return std::to_string(v);
    else if constexpr (std::is_floating_point_v<Value>) {
      std::string text = std::to_string(v);
      while (text.size() > 1 && text.back() == '0' && text[text.size() - 2] != '.') text.pop_back();
      return text;
    } else if constexpr (std::is_same_v<Value, std::chrono::milliseconds>) return json_string(format_duration(v));
    else if constexpr (std::is_same_v<Value, ByteSize>) return json_string(format_byte_size(v.bytes));
    else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
      std::string out = "[";
      for (const auto& s : v) out += (out.size() > 1 ? "," : "") + json_string(s);
      return out + "]";
    } else if constexpr (std::is_same_v<Value, JsonValue>) return v.text;
  }

  std::string name_, help_;
  Member Settings::*member_;
  uint32_t flags_ = 0;
  std::optional<Value> fallback_;
  std::vector<std::pair<std::string, Value>> choices_;
  std::vector<std::function<std::optional<std::string>(const Value&)>> checks_;
};

template <class Settings, class Member>
OptionBuilder<Settings, Member> option(std::string name, Member Settings::*member) {
  return OptionBuilder<Settings, Member>(std::move(name), member);
}

// Options shared by several sinks (tls, auth, http, batching): declared once on their own
// struct, mounted into a sink's settings with group(&Settings::member, the_group), optionally
// under a key prefix ("tls_").
template <class Sub>
class OptionGroup {
 public:
  template <class... Builders>
  explicit OptionGroup(std::string prefix, Builders&&... builders) : prefix_(std::move(prefix)) {
    (add(std::forward<Builders>(builders)), ...);
  }
  template <class Outer>
  std::vector<BoundOption<Outer>> bind(std::function<Sub&(Outer&)> path, std::string_view outer_prefix) const {
    std::vector<BoundOption<Outer>> out;
    const std::string prefix = std::string(outer_prefix) + prefix_;
    for (const auto& b : binders_) {
      auto bound = b(prefix);  // bound into Sub, then re-pointed at Outer through `path`
      BoundOption<Outer> o{bound.name,        bound.default_json, bound.allowed, bound.help, bound.has_default,
                           bound.has_allowed, bound.type,         bound.flags,   nullptr};
      o.read = [read = bound.read, path](const sdk::Config& c, Outer& outer) { return read(c, path(outer)); };
      out.push_back(std::move(o));
    }
    return out;
  }

 private:
  template <class Builder>
  void add(Builder builder) {
    binders_.push_back([builder](std::string_view prefix) {
      return builder.template bind<Sub>([](Sub& s) -> Sub& { return s; }, prefix);
    });
  }
  std::string prefix_;
  std::vector<std::function<BoundOption<Sub>(std::string_view)>> binders_;
};

template <class Settings, class Sub>
struct GroupMount {
  Sub Settings::*member;
  const OptionGroup<Sub>* group;
};
template <class Settings, class Sub>
GroupMount<Settings, Sub> group(Sub Settings::*member, const OptionGroup<Sub>& group) {
  return {member, &group};
}

// The option table of a sink: BaseSink's `options` (it has data() and size()).
template <class Settings>
class OptionTable {
 public:
  template <class... Parts>
  explicit OptionTable(Parts&&... parts) {
    (add(std::forward<Parts>(parts)), ...);
    for (const auto& o : bound_)
      table_.push_back(pmq_option{.name = o.name.c_str(),
                                  .type = o.type,
                                  .flags = o.flags,
                                  .default_json = o.has_default ? o.default_json.c_str() : nullptr,
                                  .allowed = o.has_allowed ? o.allowed.c_str() : nullptr,
                                  .help = o.help.c_str()});
  }
  OptionTable(const OptionTable&) = delete;  // the descriptors point into it
  OptionTable& operator=(const OptionTable&) = delete;

  const pmq_option* data() const { return table_.data(); }
  size_t size() const { return table_.size(); }

  // Every problem of `config` against the table (value checks, choices), each under its key.
  void validate(const sdk::Config& config, sdk::ConfigProblems& problems) const {
    Settings scratch{};
    for (const auto& o : bound_)
      if (auto problem = o.read(config, scratch)) problems.add(o.name, *problem);
  }
  // The settings; throws sdk::FatalError naming every problem (what open() reports).
  Settings parse(const sdk::Config& config) const {
    Settings settings{};
    sdk::ConfigProblems problems;
    for (const auto& o : bound_)
      if (auto problem = o.read(config, settings)) problems.add(o.name, *problem);
    if (!problems.empty()) {
      std::string text = problems.text();
      if (!text.empty() && text.back() == '\n') text.pop_back();
      throw sdk::FatalError(text);
    }
    return settings;
  }

 private:
  template <class Member>
  void add(OptionBuilder<Settings, Member> builder) {
    bound_.push_back(builder.template bind<Settings>([](Settings& s) -> Settings& { return s; }, ""));
  }
  template <class Sub>
  void add(GroupMount<Settings, Sub> mount) {
    auto member = mount.member;
    for (auto& o : mount.group->template bind<Settings>([member](Settings& s) -> Sub& { return s.*member; }, ""))
      bound_.push_back(std::move(o));
  }
  std::deque<BoundOption<Settings>> bound_;  // stable addresses: table_ points into their strings
  std::vector<pmq_option> table_;
};

// ---------------------------------------------------------------- value checks

inline auto at_least(int64_t min) {
  return [min](const auto& v) -> std::optional<std::string> {
    if (static_cast<int64_t>(v) < min) return "must be at least " + std::to_string(min);
    return std::nullopt;
  };
}
inline auto positive_duration() {
  return [](const std::chrono::milliseconds& v) -> std::optional<std::string> {
    if (v.count() <= 0) return std::string("must be longer than 0");
    return std::nullopt;
  };
}
inline auto not_empty() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return std::string("must not be empty");
    return std::nullopt;
  };
}

}  // namespace picomq::kit
