#pragma once
// What a sink instance can be handed: the definition's [[topics]] blocks, as the host passes them
// (sink ABI 2.7, pmq_host_api.subscriptions). A sink that names its destinations by a template
// checks at validate() that the template tells apart every topic it may see, instead of finding
// out when two topics' records meet under one name.
#include <optional>
#include <string>
#include <vector>

#include "picomq/sdk.hpp"

namespace picomq::kit {

struct Subscription {
  std::vector<std::string> topics;     // the explicit list
  std::optional<std::string> pattern;  // anchored, as the runtime matches it
  std::string changes = "none";        // ABI 2.8: the block's `changes`: none | keyed | debezium
};

// Whether any block hands the sink change events (docs/changes.md).
bool has_changes(const std::vector<Subscription>& blocks);
// The same for the definition the host passes (false from a host older than ABI 2.7): what a
// sink's validate() / open() asks before refusing a setting changes cannot honour.
bool has_changes(const sdk::Config& config);

// The blocks, or nullopt from a host older than ABI 2.7 (or a text that is not the host's JSON).
std::optional<std::vector<Subscription>> subscriptions(const sdk::Config& config);
std::optional<std::vector<Subscription>> parse_subscriptions(std::string_view json);

}  // namespace picomq::kit
