#include "picomq/kit/encoding.hpp"

#include <array>
#include <cstring>

namespace picomq::kit {

namespace {

constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0-63 for alphabet characters, 0xFF for everything else ('=' included: padding is handled
// separately).
constexpr std::array<uint8_t, 256> make_base64_reverse() {
  std::array<uint8_t, 256> table{};
  for (auto& v : table) v = 0xFF;
  for (std::size_t i = 0; i < kBase64Alphabet.size(); ++i) {
    table[static_cast<uint8_t>(kBase64Alphabet[i])] = static_cast<uint8_t>(i);
  }
  return table;
}
constexpr auto kBase64Reverse = make_base64_reverse();

std::span<const uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// True for the bytes JSON requires escaped; everything else is copied in runs.
constexpr std::array<bool, 256> make_json_needs_escape() {
  std::array<bool, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = true;
  table['"'] = true;
  table['\\'] = true;
  return table;
}
constexpr auto kJsonNeedsEscape = make_json_needs_escape();

// Eight bytes at a time ("SWAR"): most text is ASCII without a character JSON must escape, and
// checking a word for that costs what one byte's table lookup does.
constexpr uint64_t kOnes = 0x0101010101010101ull, kHighBits = 0x8080808080808080ull;
inline uint64_t load_word(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
// Whether any byte of `w` is below 0x20, '"', '\\' or 0x80 and above.
inline bool word_needs_attention(uint64_t w) {
  const uint64_t control = (w - kOnes * 0x20) & ~w;
  const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
  const uint64_t zero_quote = (quote - kOnes) & ~quote, zero_backslash = (backslash - kOnes) & ~backslash;
  return ((control | zero_quote | zero_backslash) & kHighBits) != 0 || (w & kHighBits) != 0;
}

}  // namespace

std::size_t utf8_sequence_length(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return 0;
  const uint8_t b0 = bytes[0];
  if (b0 < 0x80) return 1;
  // Unicode 15, table 3-7: the lead byte fixes the length and narrows the second byte's range
  // (that narrowing is what excludes overlongs, surrogates and code points above U+10FFFF).
  std::size_t length;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // below: overlong
    if (b0 == 0xED) hi = 0x9F;  // above: surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // below: overlong
    if (b0 == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 (always overlong) or F5-FF
  }
  if (bytes.size() < length) return 0;
  if (bytes[1] < lo || bytes[1] > hi) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (bytes[i] < 0x80 || bytes[i] > 0xBF) return 0;
  }
  return length;
}

bool is_valid_utf8(std::span<const uint8_t> bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (i + 8 <= bytes.size() && !(load_word(bytes.data() + i) & kHighBits)) {  // 8 ASCII bytes
      i += 8;
      continue;
    }
    if (bytes[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(bytes.subspan(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool is_valid_utf8(std::string_view text) { return is_valid_utf8(as_bytes(text)); }

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void append_base64(std::string& out, std::span<const uint8_t> bytes) {
  const std::size_t at = out.size();
  out.resize(at + (bytes.size() + 2) / 3 * 4);  // one size check, then plain stores
  char* w = out.data() + at;
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3, w += 4) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    w[0] = kBase64Alphabet[(v >> 18) & 63];
    w[1] = kBase64Alphabet[(v >> 12) & 63];
    w[2] = kBase64Alphabet[(v >> 6) & 63];
    w[3] = kBase64Alphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{bytes[i]} << 16;
    if (rest == 2) v |= uint32_t{bytes[i + 1]} << 8;
    w[0] = kBase64Alphabet[(v >> 18) & 63];
    w[1] = kBase64Alphabet[(v >> 12) & 63];
    w[2] = rest == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=';
    w[3] = '=';
  }
}

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out;
  append_base64(out, bytes);
  return out;
}

std::string base64_encode(std::string_view bytes) { return base64_encode(as_bytes(bytes)); }

std::optional<std::vector<uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3 - padding);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t data_chars = last ? 4 - padding : 4;
    uint32_t v = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      uint8_t d = 0;
      if (j < data_chars) {
        d = kBase64Reverse[static_cast<uint8_t>(text[i + j])];
        if (d == 0xFF) return std::nullopt;  // '=' in the middle lands here too
      }
      v = (v << 6) | d;
    }
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (data_chars >= 3) out.push_back(static_cast<uint8_t>(v >> 8));
    if (data_chars == 4) out.push_back(static_cast<uint8_t>(v));
    // Bits under the padding must be zero, or two texts would decode to the same bytes.
    if (data_chars == 2 && (v & 0xFFFF) != 0) return std::nullopt;
    if (data_chars == 3 && (v & 0xFF) != 0) return std::nullopt;
  }
  return out;
}

std::string header_value_as_string(std::span<const uint8_t> value, bool* was_base64) {
  const bool utf8 = is_valid_utf8(value);
  if (was_base64 != nullptr) *was_base64 = !utf8;
  if (utf8) return std::string(reinterpret_cast<const char*>(value.data()), value.size());
  return base64_encode(value);
}

void append_json_escaped(std::string& out, std::string_view utf8) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  const auto bytes = as_bytes(utf8);
  out.reserve(out.size() + utf8.size() + 2);
  out.push_back('"');
  std::size_t run_start = 0;  // start of the pending run of bytes copied verbatim
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (i + 8 <= bytes.size() && !word_needs_attention(load_word(bytes.data() + i))) {
      i += 8;  // stays in the run
      continue;
    }
    const uint8_t c = bytes[i];
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(bytes.subspan(i));
      if (n != 0) {
        i += n;  // well-formed: stays in the run
        continue;
      }
    } else if (!kJsonNeedsEscape[c]) {
      ++i;
      continue;
    }
    out.append(utf8.data() + run_start, i - run_start);
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (c >= 0x80) {
          out.append(kReplacement);
        } else {
          const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out.append(escape, sizeof escape);
        }
    }
    ++i;
    run_start = i;
  }
  out.append(utf8.data() + run_start, bytes.size() - run_start);
  out.push_back('"');
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace picomq::kit
