// The mutable JSON document the transform chain works on.
//
// A small DOM of our own rather than a library's, for one property no packaged C++ JSON library
// has: numbers are kept as their exact JSON text. A record's 2.50 stays 2.50, an id of 30
// digits stays 30 digits, 1E+2 stays 1E+2; the transforms that need a number's value (cast,
// comparisons, timestamps) read the text exactly (decimal arithmetic on the digits, never
// through a double). Objects keep their members in input order, duplicates included.
//
// Parsing is strict RFC 8259 (the same grammar as the runtime's json decoder): one value,
// surrounding whitespace allowed, strings must be valid UTF-8, \u escapes must pair surrogates,
// nesting at most kMaxDepth. Serialising writes compact JSON: no whitespace, strings escaped
// as kit::append_json_escaped does (", \, control characters), non-ASCII kept as is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace picomq::transform::json {

enum class Kind : std::uint8_t { Null, Bool, Number, String, Array, Object };
std::string_view kind_name(Kind kind);  // "null", "boolean", "number", "string", "array", "object"

struct Member;

struct Value {
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;           // Number: its JSON text, exactly as read; String: decoded UTF-8
  std::vector<Member> items;  // Array: elements (keys unused); Object: members in order

  static Value null();
  static Value from_bool(bool b);
  static Value number(std::string text);  // `text` must be a valid JSON number
  static Value string(std::string text);
  static Value object();
  static Value array();

  bool is_object() const { return kind == Kind::Object; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_null() const { return kind == Kind::Null; }

  // Objects: the first member named `key`, or null.
  Value* find(std::string_view key);
  const Value* find(std::string_view key) const;
  // Objects: replaces the first member named `key` (in place) or appends one.
  Value& set(std::string_view key, Value value);
  // Objects: removes every member named `key`; returns how many.
  std::size_t erase(std::string_view key);
};

struct Member {
  std::string key;
  Value value;
};

inline Value Value::null() { return Value(); }

inline constexpr int kMaxDepth = 1024;

// Parses exactly one JSON value. On failure returns false and sets `error` (with the byte
// offset); `out` is then unspecified.
bool parse(std::string_view text, Value& out, std::string& error);

// Appends the compact JSON text of `value` to `out`.
void serialize(const Value& value, std::string& out);
std::string to_string(const Value& value);

// Deep equality: same kind; numbers by value (1.0 == 1 == 1e0, exactly, any size); objects as
// sets of members (order does not matter; duplicates compared by first occurrence).
bool equal(const Value& a, const Value& b);

// ---- numbers, on their text ----

// True when `text` is a JSON number (RFC 8259 grammar).
bool is_number(std::string_view text);
// <0, 0, >0 as a <, ==, > b, exactly. Both must be valid JSON numbers.
int compare_numbers(std::string_view a, std::string_view b);
// True when the number has no fraction or exponent part ("12", "-3"; not "1.0", "1e2").
bool is_integer_text(std::string_view number);
// The integer part of a number, truncated toward zero, as integer text ("2.99" -> "2",
// "-0.5" -> "0", "1.5e3" -> "1500", "12" -> "12"). nullopt when it would have more than
// `max_digits` digits (1e400).
std::optional<std::string> truncate_to_integer(std::string_view number, std::size_t max_digits = 400);
// The value as int64 when it is an integer text in range.
std::optional<std::int64_t> to_int64(std::string_view number);
// True when the number is zero (0, -0, 0.0, 0e5).
bool is_zero(std::string_view number);

}  // namespace picomq::transform::json
