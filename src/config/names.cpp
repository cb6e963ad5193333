#include "config/names.h"

#include <array>
#include <utility>

namespace picomq::config {
namespace {
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}
}  // namespace

std::optional<std::string> topic_name_problem(std::string_view name) {
  if (name.empty()) return "a topic name must not be empty";
  if (name.size() > 249) return "topic name is " + std::to_string(name.size()) + " characters long (at most 249)";
  if (name == "." || name == "..") return "'" + std::string(name) + "' is not a legal topic name";
  for (char c : name) {
    if (!is_name_char(c))
      return "topic name '" + std::string(name) + "' contains an illegal character (allowed: a-z A-Z 0-9 . _ -)";
  }
  return std::nullopt;
}

bool is_valid_sink_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!is_name_char(c)) return false;
  return true;
}

std::optional<std::string> managed_property_reason(std::string_view property) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kManaged{{
      {"enable.auto.commit", "the runtime commits offsets itself, after each successful write"},
      {"enable.auto.offset.store", "the runtime stores offsets itself, after each successful write"},
      {"group.id", "set consumer_group in the [[topics]] block instead"},
      {"auto.offset.reset", "set auto_offset_reset in the [[topics]] block instead"},
      {"bootstrap.servers", "set bootstrap_servers in the runtime config's [broker] table instead"},
      {"group.protocol",
       "set group_protocol (auto, consumer or classic) in the runtime config's [broker] table instead"},
  }};
  for (const auto& [name, reason] : kManaged)
    if (name == property)
      return "property '" + std::string(name) + "' is managed by the runtime: " + std::string(reason);
  return std::nullopt;
}

}  // namespace picomq::config
