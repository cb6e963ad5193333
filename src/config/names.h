// Name rules shared by the sink definition and the runtime config.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace picomq::config {

// Kafka topic name rules: 1..249 characters of [a-zA-Z0-9._-], and not "." or "..".
// Returns why `name` is not a legal topic name, or nullopt when it is.
std::optional<std::string> topic_name_problem(std::string_view name);

// A sink key becomes part of a consumer group id: non-empty, [A-Za-z0-9_.-]+.
bool is_valid_sink_key(std::string_view key);

// librdkafka properties the runtime sets itself and a config file must not override
// (auto-commit would break commit-after-write; group and reset have their own keys).
// Returns the reason for a managed property, nullopt for any other name.
std::optional<std::string> managed_property_reason(std::string_view property);

}  // namespace picomq::config
