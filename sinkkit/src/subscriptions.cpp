#include "picomq/kit/subscriptions.hpp"

#include <nlohmann/json.hpp>

namespace picomq::kit {

std::optional<std::vector<Subscription>> parse_subscriptions(std::string_view json) {
  if (json.empty()) return std::nullopt;
  const auto blocks = nlohmann::json::parse(json, nullptr, false);
  if (!blocks.is_array()) return std::nullopt;
  std::vector<Subscription> out;
  for (const auto& b : blocks) {
    if (!b.is_object()) return std::nullopt;
    Subscription s;
    if (const auto t = b.find("topics"); t != b.end() && t->is_array())
      for (const auto& topic : *t)
        if (topic.is_string()) s.topics.push_back(topic.get<std::string>());
    if (const auto p = b.find("pattern"); p != b.end() && p->is_string()) s.pattern = p->get<std::string>();
    if (const auto c = b.find("changes"); c != b.end() && c->is_string()) s.changes = c->get<std::string>();
    out.push_back(std::move(s));
  }
  return out;
}

bool has_changes(const std::vector<Subscription>& blocks) {
  for (const auto& b : blocks)
    if (b.changes != "none") return true;
  return false;
}

bool has_changes(const sdk::Config& config) {
  const auto blocks = subscriptions(config);
  return blocks && has_changes(*blocks);
}

std::optional<std::vector<Subscription>> subscriptions(const sdk::Config& config) {
  return parse_subscriptions(config.subscriptions_json());
}

}  // namespace picomq::kit
