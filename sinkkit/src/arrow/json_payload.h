#pragma once
// Reads one JSON payload into its top-level kind and, for an object, its members with typed
// values (simdjson DOM) and, on request, each value's original text.
#include <simdjson.h>

#include <string>
#include <string_view>
#include <vector>

#include "arrow/json_scan.h"

namespace picomq::arrow::detail {

// Uint64: an integer above INT64_MAX (simdjson's only use of that type). BigNumber: a number
// simdjson cannot represent (an integer beyond 64 bits, a double beyond its range).
enum class JsonKind { Null, Bool, Int64, Uint64, Double, String, Object, Array, BigNumber };

// For rejection reasons: "found <describe(kind)>".
std::string_view describe(JsonKind kind);

struct JsonValue {
  JsonKind kind = JsonKind::Null;
  simdjson::dom::element element;  // meaningful for scalars other than BigNumber only
  std::string_view raw;            // original text, when the read asked for it (always for BigNumber)
};

struct JsonMember {
  std::string_view key;
  JsonValue value;
};

struct ParsedPayload {
  JsonKind kind = JsonKind::Null;   // of the whole payload
  std::vector<JsonMember> members;  // when kind == Object: document order, duplicates included
  bool validated = true;            // simdjson accepted the whole text (not the big-number path)
};

// One top-level member of an object payload as simdjson On-Demand reads it in a single pass:
// the scalar, the unescaped string, and the member's original text where it lies in the payload.
struct FlatMember {
  std::string_view key;  // unescaped; valid until the next read
  JsonKind kind = JsonKind::Null;
  union {  // by kind (a union: members are written per field of every record)
    bool boolean;
    int64_t integer;
    uint64_t unsigned_integer;  // kind Uint64 (only from the validating reader)
    double floating;
  };
  std::string_view text;  // kind String: the unescaped value; valid until the next read
  size_t raw_begin = 0;   // the value's original text: payload.substr(raw_begin, raw_size)
  size_t raw_size = 0;

  FlatMember() : integer(0) {}
};

// Reads object payloads with simdjson On-Demand: one pass, no DOM, and the original text of
// nested objects and arrays taken where they lie (no second scan). It does not validate what it
// skips (the inside of nested values): only for payloads the runtime's JSON decoder validated
// already. false when the payload is not an object or holds anything it does not read plainly
// (a number beyond int64 / double, an error): the caller then uses JsonPayloadReader, which
// validates and explains.
class FlatObjectReader {
 public:
  bool read(std::string_view payload, std::vector<FlatMember>& out);

 private:
  simdjson::ondemand::parser parser_;
  std::string padded_;
};

// The members of an object payload that `parser` holds parsed (its last parse, of `payload`):
// values from the DOM, each member's original text from stage 1's structural positions, so a
// payload the caller parsed already (the runtime's JSON decoder) is not read again. Gives the
// same members as FlatObjectReader. false when the payload is not an object or holds a number
// beyond int64 (the caller then reads it in the general way). Keys and strings stay valid until
// the parser's next parse.
bool read_parsed_object(const simdjson::dom::parser& parser, std::string_view payload, std::vector<FlatMember>& out);

// The same reading, each member handed to `visit(const FlatMember&) -> bool` as it is read
// (false stops it, and the call returns false) instead of kept: the one-pass columns append each
// member straight into its column. Defined below.
template <typename Visit>
bool for_each_parsed_member(const simdjson::dom::parser& parser, std::string_view payload, Visit&& visit);

// The length of `text` without trailing JSON whitespace.
inline size_t trimmed_size(std::string_view text) {
  size_t n = text.size();
  while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' || text[n - 1] == '\r')) --n;
  return n;
}

// One per export; not thread-safe. What a read returns stays valid until the next read.
class JsonPayloadReader {
 public:
  // Returns why the payload cannot be read (a record rejection), or an empty string.
  std::string read(std::string_view payload, bool want_raw, ParsedPayload& out);

  // The top-level members' original text of an object payload that read() accepted (as in
  // `validated`), without parsing it again; false when the text does not split.
  static bool split(std::string_view payload, bool validated, std::vector<RawMember>& out) {
    return validated ? split_valid_object(payload, out) : split_object(payload, out);
  }

 private:
  std::string read_with_big_numbers(std::string_view payload, ParsedPayload& out);

  simdjson::dom::parser parser_;
  std::vector<RawMember> raw_members_;
  std::string patched_;
  std::vector<bool> replaced_;
};

template <typename Visit>
bool for_each_parsed_member(const simdjson::dom::parser& parser, std::string_view payload, Visit&& visit) {
  namespace dom = simdjson::dom;
  if (!parser.implementation || parser.implementation->n_structural_indexes == 0) return false;
  const dom::element root = parser.doc.root();
  if (root.type() != dom::element_type::OBJECT) return false;
  // Stage 1 marks every structural character outside strings and the first character of every
  // scalar: a member is key, ':', value, then ',' or '}' (the next member or the end).
  const uint32_t* at = parser.implementation->structural_indexes.get();
  const size_t count = parser.implementation->n_structural_indexes;
  const auto char_at = [&](size_t s) { return s < count && at[s] < payload.size() ? payload[at[s]] : '\0'; };
  if (char_at(0) != '{') return false;
  size_t s = 1;
  const dom::object object = root.get_object().value_unsafe();
  // The iterator's key() and value() rather than a key_value_pair: a pair built on the stack and
  // read back as one 16-byte string_view stalls store forwarding on every member.
  FlatMember m;
  const auto end = object.end();
  for (auto field = object.begin(); field != end; ++field) {
    if (char_at(s) != '"' || char_at(s + 1) != ':') return false;
    const size_t value = s + 2;
    size_t next = value + 1;  // the structural after the value
    const char first = char_at(value);
    const bool container = first == '{' || first == '[';
    if (container) {
      size_t depth = 1;
      for (; depth > 0 && next < count; ++next) {
        const char c = payload[at[next]];
        depth += (c == '{' || c == '[');
        depth -= (c == '}' || c == ']');
      }
      if (depth != 0) return false;
    }
    if (next >= count) return false;
    m.key = field.key();
    m.raw_begin = at[value];
    // A container ends with its closing bracket; a scalar where the next structural begins,
    // less the whitespace before it.
    m.raw_size =
        container ? at[next - 1] + 1 - at[value] : trimmed_size(payload.substr(at[value], at[next] - at[value]));
    const dom::element v = field.value();
    switch (v.type()) {
      case dom::element_type::OBJECT: m.kind = JsonKind::Object; break;
      case dom::element_type::ARRAY: m.kind = JsonKind::Array; break;
      case dom::element_type::INT64:
        m.kind = JsonKind::Int64;
        m.integer = v.get_int64().value_unsafe();
        break;
      case dom::element_type::DOUBLE:
        m.kind = JsonKind::Double;
        m.floating = v.get_double().value_unsafe();
        break;
      case dom::element_type::STRING:
        m.kind = JsonKind::String;
        m.text = v.get_string().value_unsafe();
        break;
      case dom::element_type::BOOL:
        m.kind = JsonKind::Bool;
        m.boolean = v.get_bool().value_unsafe();
        break;
      case dom::element_type::NULL_VALUE: m.kind = JsonKind::Null; break;
      case dom::element_type::UINT64: return false;  // the general reading's rules
    }
    if (!visit(static_cast<const FlatMember&>(m))) return false;
    const char after = char_at(next);
    if (after == ',') {
      s = next + 1;
    } else if (after == '}') {
      s = next;
    } else {
      return false;
    }
  }
  return char_at(s) == '}';
}

}  // namespace picomq::arrow::detail
