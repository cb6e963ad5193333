#pragma once
// How close a misspelt key is to a declared one, for "did you mean" suggestions: the runtime's
// config reader and the plugin_config check (plugin_options.hpp) name the closest key alike.
#include <cstddef>
#include <string_view>

namespace picomq::kit {

// Optimal string alignment distance (insertions, deletions, substitutions, transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace picomq::kit
