#pragma once
// How close a misspelt key is to a declared one, for "did you mean" suggestions. Apart from the
// TOML reader so that the sink kit's fake host (which checks options as the runtime does) needs
// no TOML library.
#include <cstddef>
#include <string_view>

namespace picomq::config::detail {

// Optimal string alignment distance (insertions, deletions, substitutions, transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace picomq::config::detail
