#include "picomq/kit/record_id.hpp"

#include <charconv>

namespace picomq::kit {
namespace {

bool stands_for_itself(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lowercase is not the encoding: one spelling per byte keeps it collision-free
}

template <class Int>
std::optional<Int> digits(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;  // one spelling per number
  Int value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

// Splits "<topic><sep><partition><sep><offset>" at the last two separators.
std::optional<RecordCoordinates> split_coordinates(std::string_view id, char sep) {
  const size_t last = id.rfind(sep);
  if (last == std::string_view::npos || last == 0) return std::nullopt;
  const size_t middle = id.rfind(sep, last - 1);
  if (middle == std::string_view::npos) return std::nullopt;
  auto partition = digits<int32_t>(id.substr(middle + 1, last - middle - 1));
  auto offset = digits<int64_t>(id.substr(last + 1));
  if (!partition || !offset) return std::nullopt;
  return RecordCoordinates{std::string(id.substr(0, middle)), *partition, *offset};
}

}  // namespace

void append_url_safe(std::string& out, std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (uint8_t c : bytes) {
    if (stands_for_itself(c)) {
      out += static_cast<char>(c);
    } else {
      out += '_';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
}

std::string url_safe(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_url_safe(out, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  return out;
}

std::optional<std::string> from_url_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (stands_for_itself(c)) {
      out += text[i];
      continue;
    }
    if (c != '_' || i + 2 >= text.size()) return std::nullopt;
    const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const auto byte = static_cast<uint8_t>(hi * 16 + lo);
    if (stands_for_itself(byte)) return std::nullopt;  // escaped needlessly: not an encoding
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

std::optional<std::string> url_safe_record_id(std::string_view topic, int32_t partition, int64_t offset,
                                              size_t max_bytes) {
  std::string id = url_safe(topic);
  // "-<partition>-<offset>": at most 1 + 11 + 1 + 20 characters.
  char numbers[48];
  char* const limit = numbers + sizeof numbers;
  char* end = numbers;
  *end++ = '-';
  end = std::to_chars(end, limit - 22, partition).ptr;  // room left for the offset, whatever happens
  *end++ = '-';
  end = std::to_chars(end, limit, offset).ptr;
  id.append(numbers, end);
  if (max_bytes && id.size() > max_bytes) return std::nullopt;
  return id;
}

std::optional<RecordCoordinates> parse_url_safe_record_id(std::string_view id) {
  auto parts = split_coordinates(id, '-');
  if (!parts) return std::nullopt;
  auto topic = from_url_safe(parts->topic);
  if (!topic || topic->empty()) return std::nullopt;
  parts->topic = std::move(*topic);
  return parts;
}

std::optional<RecordCoordinates> parse_record_id(std::string_view id) { return split_coordinates(id, ':'); }

}  // namespace picomq::kit
