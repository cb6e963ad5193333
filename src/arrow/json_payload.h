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
