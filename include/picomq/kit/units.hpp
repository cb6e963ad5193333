// Durations ("100ms", "1.5s") and byte sizes ("64MiB") as written in config files.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace picomq::kit {

using Millis = std::chrono::milliseconds;

// A non-negative number with an optional fraction, followed by a unit: ms, s, m or h.
// Spaces between number and unit are allowed ("100 ms"); nothing else is.
// The result must be a whole number of milliseconds ("1.5s" yes, "0.5ms" no).
// Rejected: "100" (no unit), "fast", "-1s", "250us" (milliseconds are the finest unit).
// On failure returns nullopt and, when error is not null, sets *error to a sentence.
std::optional<Millis> parse_duration(std::string_view text, std::string* error);

// A non-negative number with an optional fraction, followed by a unit:
// B; decimal kB/KB, MB, GB, TB; binary KiB, MiB, GiB, TiB. The result must be whole bytes.
std::optional<std::size_t> parse_byte_size(std::string_view text, std::string* error);

}  // namespace picomq::kit
