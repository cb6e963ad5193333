#include "transform/json.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "picomq/kit/encoding.hpp"

namespace picomq::transform::json {

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "boolean";
    case Kind::Number: return "number";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "unknown";
}

Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}

Value Value::number(std::string text) {
  Value v;
  v.kind = Kind::Number;
  v.text = std::move(text);
  return v;
}

Value Value::string(std::string text) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(text);
  return v;
}

Value Value::object() {
  Value v;
  v.kind = Kind::Object;
  return v;
}

Value Value::array() {
  Value v;
  v.kind = Kind::Array;
  return v;
}

Value* Value::find(std::string_view key) {
  for (auto& m : items)
    if (m.key == key) return &m.value;
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  for (const auto& m : items)
    if (m.key == key) return &m.value;
  return nullptr;
}

Value& Value::set(std::string_view key, Value value) {
  if (Value* existing = find(key)) {
    *existing = std::move(value);
    return *existing;
  }
  items.push_back(Member{std::string(key), std::move(value)});
  return items.back().value;
}

std::size_t Value::erase(std::string_view key) {
  const std::size_t before = items.size();
  items.erase(std::remove_if(items.begin(), items.end(), [&](const Member& m) { return m.key == key; }), items.end());
  return before - items.size();
}

// ---------------------------------------------------------------------------------------------
// Parser

namespace {

// Characters that end a run of plain string bytes: '"', '\\', controls, and non-ASCII (which
// needs UTF-8 validation).
struct StopTable {
  bool stop[256];
  constexpr StopTable() : stop() {
    for (int c = 0; c < 256; ++c) stop[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
  }
};
constexpr StopTable kStop;

class Reader {
 public:
  Reader(std::string_view text) : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  bool document(Value& out, std::string& error) {
    skip_ws();
    if (!value(out, 0)) {
      error = error_ + " at byte " + std::to_string(p_ - begin_);
      return false;
    }
    skip_ws();
    if (p_ != end_) {
      error = "unexpected content after the JSON value at byte " + std::to_string(p_ - begin_);
      return false;
    }
    return true;
  }

 private:
  bool fail(const char* why) {
    error_ = why;
    return false;
  }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
      return fail("invalid literal");
    p_ += word.size();
    return true;
  }

  bool value(Value& out, int depth) {
    if (p_ == end_) return fail("unexpected end of input");
    switch (*p_) {
      case '{': return object(out, depth + 1);
      case '[': return array(out, depth + 1);
      case '"': out.kind = Kind::String; return string(out.text);
      case 't':
        out.kind = Kind::Bool;
        out.boolean = true;
        return literal("true");
      case 'f':
        out.kind = Kind::Bool;
        out.boolean = false;
        return literal("false");
      case 'n': out.kind = Kind::Null; return literal("null");
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(out);
        return fail("unexpected character");
    }
  }

  bool object(Value& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than 1024 levels");
    out.kind = Kind::Object;
    ++p_;
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    out.items.reserve(8);
    for (;;) {
      if (p_ == end_ || *p_ != '"') return fail("expected a member name");
      Member& m = out.items.emplace_back();
      if (!string(m.key)) return false;
      skip_ws();
      if (p_ == end_ || *p_ != ':') return fail("expected ':'");
      ++p_;
      skip_ws();
      if (!value(m.value, depth)) return false;
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an object");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool array(Value& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than 1024 levels");
    out.kind = Kind::Array;
    ++p_;
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    out.items.reserve(4);
    for (;;) {
      Member& m = out.items.emplace_back();
      if (!value(m.value, depth)) return false;
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an array");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool hex4(unsigned& out) {
    if (end_ - p_ < 4) return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hex(p_[i]);
      if (h < 0) return fail("invalid \\u escape");
      out = out * 16 + static_cast<unsigned>(h);
    }
    p_ += 4;
    return true;
  }

  // At the opening quote; leaves p_ after the closing one.
  bool string(std::string& out) {
    ++p_;
    for (;;) {
      const char* run = p_;
      while (p_ != end_ && !kStop.stop[static_cast<unsigned char>(*p_)]) ++p_;
      out.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == end_) return fail("unterminated string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c >= 0x80) {
        std::size_t n = kit::utf8_sequence_length(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p_), static_cast<std::size_t>(end_ - p_)));
        if (n == 0) return fail("invalid UTF-8 in a string");
        out.append(p_, n);
        p_ += n;
        continue;
      }
      if (c < 0x20) return fail("unescaped control character in a string");
      // Backslash.
      ++p_;
      if (p_ == end_) return fail("unterminated string");
      switch (*p_++) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail("unpaired surrogate in a \\u escape");
            p_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("unpaired surrogate in a \\u escape");
          }
          kit::append_utf8(out, cp);
          break;
        }
        default: return fail("invalid escape in a string");
      }
    }
  }

  bool digits() {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  bool number(Value& out) {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return fail("invalid number");
    if (*p_ == '0') {
      ++p_;
    } else if (!digits()) {
      return fail("invalid number");
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!digits()) return fail("invalid number: digits must follow '.'");
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return fail("invalid number: digits must follow the exponent");
    }
    out.kind = Kind::Number;
    out.text.assign(start, static_cast<std::size_t>(p_ - start));
    return true;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::string error_;
};

void write(const Value& v, std::string& out) {
  switch (v.kind) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Kind::Number: out += v.text; return;
    case Kind::String: kit::append_json_escaped(out, v.text); return;
    case Kind::Array: {
      out += '[';
      bool first = true;
      for (const auto& m : v.items) {
        if (!first) out += ',';
        first = false;
        write(m.value, out);
      }
      out += ']';
      return;
    }
    case Kind::Object: {
      out += '{';
      bool first = true;
      for (const auto& m : v.items) {
        if (!first) out += ',';
        first = false;
        kit::append_json_escaped(out, m.key);
        out += ':';
        write(m.value, out);
      }
      out += '}';
      return;
    }
  }
}

// A number as sign, significant digits (no leading or trailing zeros) and exponent, such that
// value = 0.d1d2d3... * 10^exponent. Zero has no digits.
struct Decimal {
  bool negative = false;
  std::string digits;
  std::int64_t exponent = 0;
};

Decimal decimal(std::string_view text) {
  Decimal d;
  std::size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::int64_t point = 0;  // digits before the decimal point, counted after leading zeros
  bool seen_nonzero = false;
  std::int64_t leading_fraction_zeros = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (text[i] == '0' && !seen_nonzero) continue;
    seen_nonzero = true;
    d.digits += text[i];
    ++point;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (text[i] == '0' && !seen_nonzero) {
        ++leading_fraction_zeros;
        continue;
      }
      seen_nonzero = true;
      d.digits += text[i];
    }
  }
  std::int64_t exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (exp < 1'000'000'000'000LL) exp = exp * 10 + (text[i] - '0');  // saturates: beyond any real use
    }
    if (neg) exp = -exp;
  }
  while (!d.digits.empty() && d.digits.back() == '0') d.digits.pop_back();
  if (d.digits.empty()) {
    d.negative = false;
    d.exponent = 0;
    return d;
  }
  d.exponent = (point > 0 ? point : -leading_fraction_zeros) + exp;
  return d;
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.digits.empty() || b.digits.empty()) return a.digits.empty() ? (b.digits.empty() ? 0 : -1) : 1;
  if (a.exponent != b.exponent) return a.exponent < b.exponent ? -1 : 1;
  int c = a.digits.compare(b.digits);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

}  // namespace

bool parse(std::string_view text, Value& out, std::string& error) {
  out = Value();
  Reader reader(text);
  return reader.document(out, error);
}

void serialize(const Value& value, std::string& out) { write(value, out); }

std::string to_string(const Value& value) {
  std::string out;
  write(value, out);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Null: return true;
    case Kind::Bool: return a.boolean == b.boolean;
    case Kind::Number: return a.text == b.text || compare_numbers(a.text, b.text) == 0;
    case Kind::String: return a.text == b.text;
    case Kind::Array:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (!equal(a.items[i].value, b.items[i].value)) return false;
      return true;
    case Kind::Object:
      if (a.items.size() != b.items.size()) return false;
      for (const auto& m : a.items) {
        const Value* other = b.find(m.key);
        if (!other || !equal(*a.find(m.key), *other)) return false;
      }
      for (const auto& m : b.items)
        if (!a.find(m.key)) return false;
      return true;
  }
  return false;
}

bool is_number(std::string_view text) {
  Value v;
  std::string error;
  if (text.empty() || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) return false;
  return parse(text, v, error) && v.kind == Kind::Number && v.text.size() == text.size();
}

int compare_numbers(std::string_view a, std::string_view b) {
  Decimal da = decimal(a), db = decimal(b);
  const bool a_neg = da.negative && !da.digits.empty();
  const bool b_neg = db.negative && !db.digits.empty();
  if (a_neg != b_neg) return a_neg ? -1 : 1;
  int m = compare_magnitude(da, db);
  return a_neg ? -m : m;
}

bool is_integer_text(std::string_view number) { return number.find_first_of(".eE") == std::string_view::npos; }

std::optional<std::string> truncate_to_integer(std::string_view number, std::size_t max_digits) {
  Decimal d = decimal(number);
  if (d.digits.empty() || d.exponent <= 0) return std::string("0");
  if (d.exponent > static_cast<std::int64_t>(max_digits)) return std::nullopt;
  std::string out = d.negative ? "-" : "";
  const auto whole = static_cast<std::size_t>(d.exponent);
  if (d.digits.size() >= whole) {
    out.append(d.digits, 0, whole);
  } else {
    out += d.digits;
    out.append(whole - d.digits.size(), '0');
  }
  return out;
}

std::optional<std::int64_t> to_int64(std::string_view number) {
  if (number.empty() || !is_integer_text(number)) return std::nullopt;
  const bool negative = number[0] == '-';
  std::string_view digits = negative ? number.substr(1) : number;
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  unsigned long long value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (negative) {
    if (value > 9223372036854775808ULL) return std::nullopt;
    return value == 9223372036854775808ULL ? INT64_MIN : -static_cast<std::int64_t>(value);
  }
  if (value > static_cast<unsigned long long>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

bool is_zero(std::string_view number) { return decimal(number).digits.empty(); }

}  // namespace picomq::transform::json
