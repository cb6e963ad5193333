#include "picomq/kit/units.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <utility>

namespace picomq::kit {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t scale;
};

// Parses "<digits>[.<digits>][ ]*<unit>" into an exact integer count of the base unit.
// `what` names the kind of value in error messages ("duration", "byte size").
template <std::size_t N>
std::optional<std::uint64_t> parse_scaled(std::string_view text, const std::array<Unit, N>& units,
                                          std::string_view what, std::string_view unit_list, std::string* error) {
  auto fail = [&](const std::string& reason) -> std::optional<std::uint64_t> {
    if (error) *error = "invalid " + std::string(what) + " '" + std::string(text) + "': " + reason;
    return std::nullopt;
  };
  std::size_t pos = 0;
  auto digits_at = [&](std::size_t from) {
    std::size_t end = from;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    return end;
  };
  std::size_t int_end = digits_at(0);
  if (int_end == 0) {
    if (!text.empty() && (text[0] == '-' || text[0] == '+'))
      return fail("no sign allowed, it must be a non-negative number followed by a unit (" + std::string(unit_list) +
                  ")");
    return fail("expected a number followed by a unit (" + std::string(unit_list) + ")");
  }
  std::string_view int_part = text.substr(0, int_end);
  std::string_view frac_part;
  pos = int_end;
  if (pos < text.size() && text[pos] == '.') {
    std::size_t frac_end = digits_at(pos + 1);
    if (frac_end == pos + 1) return fail("expected digits after '.'");
    frac_part = text.substr(pos + 1, frac_end - pos - 1);
    pos = frac_end;
  }
  while (pos < text.size() && text[pos] == ' ') ++pos;
  std::string_view unit_text = text.substr(pos);
  if (unit_text.empty()) return fail("missing unit (" + std::string(unit_list) + ")");
  const Unit* unit = nullptr;
  for (const auto& u : units)
    if (u.name == unit_text) unit = &u;
  if (!unit) return fail("unknown unit '" + std::string(unit_text) + "' (" + std::string(unit_list) + ")");

  std::uint64_t whole = 0;
  auto [p, ec] = std::from_chars(int_part.data(), int_part.data() + int_part.size(), whole);
  (void)p;
  if (ec != std::errc()) return fail("number is too large");
  std::uint64_t total = 0;
  if (__builtin_mul_overflow(whole, unit->scale, &total)) return fail("number is too large");

  while (!frac_part.empty() && frac_part.back() == '0') frac_part.remove_suffix(1);
  if (!frac_part.empty()) {
    if (frac_part.size() > 18) return fail("too many digits after '.'");
    std::uint64_t frac = 0;
    std::from_chars(frac_part.data(), frac_part.data() + frac_part.size(), frac);
    unsigned __int128 pow10 = 1;
    for (std::size_t i = 0; i < frac_part.size(); ++i) pow10 *= 10;
    unsigned __int128 scaled = static_cast<unsigned __int128>(frac) * unit->scale;
    if (scaled % pow10 != 0)
      return fail(what == "duration" ? "not a whole number of milliseconds" : "not a whole number of bytes");
    if (__builtin_add_overflow(total, static_cast<std::uint64_t>(scaled / pow10), &total))
      return fail("number is too large");
  }
  return total;
}

constexpr std::array<Unit, 4> kDurationUnits{{{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};

constexpr std::array<Unit, 10> kByteUnits{{{"B", 1},
                                           {"kB", 1000},
                                           {"KB", 1000},
                                           {"MB", 1000'000},
                                           {"GB", 1000'000'000},
                                           {"TB", 1000'000'000'000},
                                           {"KiB", 1ull << 10},
                                           {"MiB", 1ull << 20},
                                           {"GiB", 1ull << 30},
                                           {"TiB", 1ull << 40}}};

}  // namespace

std::optional<Millis> parse_duration(std::string_view text, std::string* error) {
  auto ms = parse_scaled(text, kDurationUnits, "duration", "ms, s, m or h, e.g. \"100ms\", \"1.5s\"", error);
  if (!ms) return std::nullopt;
  if (*ms > static_cast<std::uint64_t>(std::numeric_limits<Millis::rep>::max())) {
    if (error) *error = "invalid duration '" + std::string(text) + "': number is too large";
    return std::nullopt;
  }
  return Millis(static_cast<Millis::rep>(*ms));
}

std::optional<std::size_t> parse_byte_size(std::string_view text, std::string* error) {
  auto bytes =
      parse_scaled(text, kByteUnits, "byte size", "B, kB, MB, GB, TB, KiB, MiB, GiB or TiB, e.g. \"64MiB\"", error);
  if (!bytes) return std::nullopt;
  if (*bytes > std::numeric_limits<std::size_t>::max()) {
    if (error) *error = "invalid byte size '" + std::string(text) + "': number is too large";
    return std::nullopt;
  }
  return static_cast<std::size_t>(*bytes);
}

}  // namespace picomq::kit
