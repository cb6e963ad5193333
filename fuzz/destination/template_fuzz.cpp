// libFuzzer target for destination name templates (docs/destinations.md): the first line of the
// input is a target template as a user writes it in [plugin_config], the rest a topic name.
// parse() must accept or refuse with a message; an accepted template resolves any topic to a
// name or an error, and every sanitisation policy turns a resolved name into a legal one or
// refuses it with a message, never crashing or returning an empty name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/sanitize.hpp"

namespace dest = picomq::kit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view text = input.substr(0, newline);
  const std::string_view topic =
      newline == std::string_view::npos ? std::string_view("orders.eu") : input.substr(newline + 1);
  auto parsed = dest::NameTemplate::parse(text);
  if (!parsed) {
    if (parsed.error().empty()) std::abort();  // a refusal always says why
    return 0;
  }
  auto resolved = parsed.value().resolve(topic);
  if (!resolved) {
    if (resolved.error().empty()) std::abort();
    return 0;
  }
  for (auto policy : {dest::NamePolicy::SqlIdentifier, dest::NamePolicy::IndexName, dest::NamePolicy::ObjectKey,
                      dest::NamePolicy::Verbatim}) {
    auto name = dest::sanitize_name(resolved.value(), policy);
    if (name ? name.value().empty() : name.error().empty()) std::abort();
  }
  return 0;
}
