#pragma once
// Option values every sink family shares, beside the value checks of options.hpp: a name-template
// option's check, and a base URL's normal form.
#include <optional>
#include <string>

#include "picomq/kit/name_template.hpp"

namespace picomq::kit {

// The check of a name-template option (kit::option(...).check(kit::valid_name_template())): the
// template's problem, e.g. an unknown placeholder, or none.
inline auto valid_name_template() {
  return [](const std::string& v) -> std::optional<std::string> { return NameTemplate::parse(v).problem(); };
}

// A base URL as a sink appends paths to it: without trailing '/' ("http://h:9200/" and
// "http://h:9200" are the same endpoint). The URL's check is check_base_url (http_client.hpp).
inline std::string base_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace picomq::kit
