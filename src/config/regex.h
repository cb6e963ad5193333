// Users' regular expressions (a block's topic `pattern`, a condition's `matches`).
#pragma once

#include <regex>
#include <string>

namespace picomq::config {

// Compiles `pattern` as ECMAScript for matching in polynomial time (libstdc++'s __polynomial: a
// breadth-first matcher instead of backtracking, so no pattern can take exponential time on a
// record — `orders\*` and forty more `*` against a topic name ran for minutes; found by fuzz_transform_config — at
// the price of backreferences, which it refuses). Throws std::invalid_argument with the reason
// when it does not compile, and before std::regex sees them refuses numbers it cannot be given
// safely: GCC 12's regex compiler reads a backreference number or a {m,n} bound into a long
// without an overflow check (undefined behaviour past 18 digits; found by fuzz_transform_config).
std::regex compile_regex(const std::string& pattern);

}  // namespace picomq::config
