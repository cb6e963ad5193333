#include "arrow/json_scan.h"

#include <string>

namespace picomq::arrow::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// `pos` is at the opening quote; returns the index past the closing one.
size_t scan_string(std::string_view text, size_t pos) {
  if (pos >= text.size() || text[pos] != '"') return kScanFailed;
  for (size_t i = pos + 1; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"') return i + 1;
    if (c < 0x20) return kScanFailed;  // control characters must be escaped
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return kScanFailed;
    const char escaped = text[i + 1];
    if (escaped == 'u') {
      if (i + 6 > text.size()) return kScanFailed;
      for (size_t h = i + 2; h < i + 6; ++h) {
        if (!is_hex(text[h])) return kScanFailed;
      }
      i += 6;
    } else if (std::string_view("\"\\/bfnrt").find(escaped) != std::string_view::npos) {
      i += 2;
    } else {
      return kScanFailed;
    }
  }
  return kScanFailed;
}

size_t scan_digits(std::string_view text, size_t pos) {
  const size_t start = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  return pos == start ? kScanFailed : pos;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
size_t scan_number(std::string_view text, size_t pos) {
  if (pos < text.size() && text[pos] == '-') ++pos;
  if (pos >= text.size()) return kScanFailed;
  if (text[pos] == '0') {
    ++pos;
  } else {
    pos = scan_digits(text, pos);
    if (pos == kScanFailed) return kScanFailed;
  }
  if (pos < text.size() && text[pos] == '.') {
    pos = scan_digits(text, pos + 1);
    if (pos == kScanFailed) return kScanFailed;
  }
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
    pos = scan_digits(text, pos);
  }
  return pos;
}

size_t scan_literal(std::string_view text, size_t pos, std::string_view literal) {
  return text.substr(pos, literal.size()) == literal ? pos + literal.size() : kScanFailed;
}

// A scalar (string, number, literal) at `pos`; kScanFailed for anything else.
size_t scan_scalar(std::string_view text, size_t pos) {
  switch (text[pos]) {
    case '"': return scan_string(text, pos);
    case 't': return scan_literal(text, pos, "true");
    case 'f': return scan_literal(text, pos, "false");
    case 'n': return scan_literal(text, pos, "null");
    default: return scan_number(text, pos);
  }
}

}  // namespace

// Iterative, with an explicit stack of open containers, so deep nesting cannot overflow ours.
size_t scan_value(std::string_view text, size_t pos) {
  std::string open;  // '{' or '[' per open container
  enum class Expect { Value, Key, AfterValue } expect = Expect::Value;
  for (;;) {
    if (expect == Expect::AfterValue && open.empty()) return pos;  // trailing space is not the value's
    pos = skip_space(text, pos);
    if (expect == Expect::AfterValue) {
      if (pos >= text.size()) return kScanFailed;
      const char closer = open.back() == '{' ? '}' : ']';
      if (text[pos] == closer) {
        open.pop_back();
        ++pos;
      } else if (text[pos] == ',') {
        ++pos;
        expect = open.back() == '{' ? Expect::Key : Expect::Value;
      } else {
        return kScanFailed;
      }
      continue;
    }
    if (pos >= text.size()) return kScanFailed;
    if (expect == Expect::Key) {
      pos = scan_string(text, pos);
      if (pos == kScanFailed) return kScanFailed;
      pos = skip_space(text, pos);
      if (pos >= text.size() || text[pos] != ':') return kScanFailed;
      ++pos;
      expect = Expect::Value;
      continue;
    }
    const char c = text[pos];
    if (c == '{' || c == '[') {
      const size_t inner = skip_space(text, pos + 1);
      const char closer = c == '{' ? '}' : ']';
      if (inner < text.size() && text[inner] == closer) {  // empty container
        pos = inner + 1;
        expect = Expect::AfterValue;
      } else {
        open.push_back(c);
        pos = pos + 1;
        expect = c == '{' ? Expect::Key : Expect::Value;
      }
      continue;
    }
    pos = scan_scalar(text, pos);
    if (pos == kScanFailed) return kScanFailed;
    expect = Expect::AfterValue;
  }
}

bool is_json_number(std::string_view token) { return !token.empty() && scan_number(token, 0) == token.size(); }

bool split_object(std::string_view text, std::vector<RawMember>& members) {
  members.clear();
  size_t pos = skip_space(text, 0);
  if (pos >= text.size() || text[pos] != '{') return false;
  pos = skip_space(text, pos + 1);
  if (pos < text.size() && text[pos] == '}') {
    ++pos;
  } else {
    for (;;) {
      const size_t key_start = pos;
      const size_t key_end = scan_string(text, key_start);
      if (key_end == kScanFailed) return false;
      pos = skip_space(text, key_end);
      if (pos >= text.size() || text[pos] != ':') return false;
      const size_t value_start = skip_space(text, pos + 1);
      const size_t value_end = scan_value(text, value_start);
      if (value_end == kScanFailed) return false;
      members.push_back(
          {text.substr(key_start, key_end - key_start), text.substr(value_start, value_end - value_start)});
      pos = skip_space(text, value_end);
      if (pos >= text.size()) return false;
      if (text[pos] == '}') {
        ++pos;
        break;
      }
      if (text[pos] != ',') return false;
      pos = skip_space(text, pos + 1);
    }
  }
  return skip_space(text, pos) == text.size();
}

namespace {

// Characters the structural split of valid JSON stops at: 1 = string delimiters ('"', '\\'),
// 2 = structure ('"', '{', '[', '}', ']', ',').
struct SplitTable {
  unsigned char of[256] = {};
  constexpr SplitTable() {
    of[static_cast<unsigned char>('"')] = 1 | 2;
    of[static_cast<unsigned char>('\\')] = 1;
    for (char c : {'{', '[', '}', ']', ','}) of[static_cast<unsigned char>(c)] = 2;
  }
};
constexpr SplitTable kSplit;

// `pos` is at the opening quote of a valid string; returns the index past the closing one.
size_t skip_valid_string(const char* data, size_t size, size_t pos) {
  for (size_t i = pos + 1; i < size; ++i) {
    if (!(kSplit.of[static_cast<unsigned char>(data[i])] & 1)) continue;
    if (data[i] == '"') return i + 1;
    ++i;  // the escaped character
  }
  return size;
}

}  // namespace

bool split_valid_object(std::string_view text, std::vector<RawMember>& members) {
  members.clear();
  const char* const data = text.data();
  const size_t size = text.size();
  size_t pos = skip_space(text, 0);
  if (pos >= size || data[pos] != '{') return false;
  pos = skip_space(text, pos + 1);
  if (pos < size && data[pos] == '}') return true;
  while (pos < size) {
    const size_t key_start = pos;
    const size_t key_end = skip_valid_string(data, size, key_start);
    pos = skip_space(text, key_end);
    if (pos >= size || data[pos] != ':') return false;
    const size_t value_start = skip_space(text, pos + 1);
    size_t depth = 0;
    size_t end = value_start;
    for (; end < size; ++end) {
      if (!(kSplit.of[static_cast<unsigned char>(data[end])] & 2)) continue;
      const char c = data[end];
      if (c == '"') {
        end = skip_valid_string(data, size, end) - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == ',') {
        if (depth == 0) break;
      } else {  // '}' or ']'
        if (depth == 0) break;
        --depth;
      }
    }
    if (end >= size) return false;
    size_t value_end = end;
    while (value_end > value_start && is_space(data[value_end - 1])) --value_end;
    members.push_back({text.substr(key_start, key_end - key_start), text.substr(value_start, value_end - value_start)});
    if (data[end] == '}') return true;
    pos = skip_space(text, end + 1);
  }
  return false;
}

}  // namespace picomq::arrow::detail
