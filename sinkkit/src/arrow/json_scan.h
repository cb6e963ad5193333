#pragma once
// A small validating JSON scanner that finds where values start and end in the original text.
// simdjson's DOM cannot say that (nor represent numbers beyond 64 bits or a double's range); the
// exporter uses this to keep a value's original text for JSON columns and to read payloads that
// simdjson refuses only because of such numbers.
#include <cstddef>
#include <string_view>
#include <vector>

namespace picomq::arrow::detail {

inline constexpr size_t kScanFailed = static_cast<size_t>(-1);

// Index just past the well-formed JSON value (RFC 8259 grammar; UTF-8 is not checked) that
// starts at `pos` after optional whitespace, or kScanFailed.
size_t scan_value(std::string_view text, size_t pos);

// True when `token` is exactly one JSON number (grammar only, whatever its magnitude).
bool is_json_number(std::string_view token);

struct RawMember {
  std::string_view key;    // the key's string token, quotes and escapes included
  std::string_view value;  // the value's text, without surrounding whitespace
};

// Splits `text`, which must be exactly one JSON object (whitespace around it allowed), into its
// members in document order, duplicates included. False when it is anything else.
bool split_object(std::string_view text, std::vector<RawMember>& members);

// The same split for text already known to be exactly one valid JSON object (simdjson accepted
// it): structure only, no grammar checks. False when the text does not start with an object.
bool split_valid_object(std::string_view text, std::vector<RawMember>& members);

}  // namespace picomq::arrow::detail
