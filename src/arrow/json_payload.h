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
  JsonKind kind = JsonKind::Null;  // of the whole payload
  std::vector<JsonMember> members; // when kind == Object: document order, duplicates included
  bool validated = true;           // simdjson accepted the whole text (not the big-number path)
};

// One top-level member of an object payload as simdjson On-Demand reads it in a single pass:
// the scalar, the unescaped string, and the member's original text where it lies in the payload.
struct FlatMember {
  std::string_view key;  // unescaped; valid until the next read
  JsonKind kind = JsonKind::Null;
  union {                 // by kind (a union: members are written per field of every record)
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

}  // namespace picomq::arrow::detail
