#include "config/regex.h"

#include <cctype>
#include <stdexcept>

namespace picomq::config {
namespace {

// No backreference or repeat count a std::regex can hold has more digits than this: a pattern
// has far fewer than a billion groups, and _GLIBCXX_REGEX_STATE_LIMIT (100,000 states) refuses
// repeat counts long before.
constexpr std::size_t kMaxDigits = 9;

std::size_t digits_at(const std::string& s, std::size_t i) {
  std::size_t n = 0;
  while (i + n < s.size() && std::isdigit(static_cast<unsigned char>(s[i + n]))) ++n;
  return n;
}

void refuse_long_numbers(const std::string& pattern) {
  bool in_class = false;  // inside [...], where '{' is a plain character
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 < pattern.size() && digits_at(pattern, i + 1) > kMaxDigits)
        throw std::invalid_argument("backreference '\\" + pattern.substr(i + 1, digits_at(pattern, i + 1)) +
                                    "' has more than " + std::to_string(kMaxDigits) + " digits");
      ++i;  // the escaped character is never special here
    } else if (in_class) {
      if (c == ']') in_class = false;
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;  // a leading ']' is literal
    } else if (c == '{') {
      for (std::size_t j = i + 1; j < pattern.size();) {
        const std::size_t n = digits_at(pattern, j);
        if (n > kMaxDigits)
          throw std::invalid_argument("repeat count '" + pattern.substr(j, n) + "' has more than " +
                                      std::to_string(kMaxDigits) + " digits");
        j += n;
        if (j < pattern.size() && pattern[j] == ',') {
          ++j;
          continue;
        }
        break;
      }
    }
  }
}

}  // namespace

std::regex compile_regex(const std::string& pattern) {
  refuse_long_numbers(pattern);
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::regex_error& e) {
    if (e.code() == std::regex_constants::error_complexity)
      throw std::invalid_argument("backreferences are not supported (regular expressions match in linear time)");
    throw std::invalid_argument(e.what());
  }
}

}  // namespace picomq::config
