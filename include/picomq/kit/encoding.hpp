#pragma once
// Byte-level helpers shared by sinks: strict UTF-8 validation, RFC 4648 base64, the spec's
// header rendering rule and a JSON string escaper for hot paths.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace picomq::kit {

// Length (1-4) of the well-formed UTF-8 sequence at the start of `bytes`, or 0 when it is not
// one: stray continuation byte, overlong form, surrogate (U+D800-DFFF), above U+10FFFF,
// or cut short by the end of `bytes`. Also 0 for an empty span.
std::size_t utf8_sequence_length(std::span<const uint8_t> bytes);

// Strict validation per Unicode table 3-7 (see utf8_sequence_length). Empty is valid.
bool is_valid_utf8(std::span<const uint8_t> bytes);
bool is_valid_utf8(std::string_view text);
// Appends the code point `cp` (at most U+10FFFF; the caller checks) as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// Standard alphabet, '=' padded (RFC 4648 section 4).
std::string base64_encode(std::span<const uint8_t> bytes);
// The same, appended to `out` in place (no temporary: on the hot path of document sinks).
void append_base64(std::string& out, std::span<const uint8_t> bytes);
std::string base64_encode(std::string_view bytes);

// Strict inverse of base64_encode: nullopt for a length that is not a multiple of 4, a
// character outside the alphabet (including whitespace and the URL-safe '-' '_'), misplaced
// padding, or non-zero bits in the padding (a non-canonical encoding, RFC 4648 section 3.5).
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

// Spec: "Headers, where kept, arrive as strings when they are valid UTF-8 and base64
// otherwise". Returns the bytes unchanged when they are valid UTF-8, else their base64; tells
// which through `was_base64` when given.
std::string header_value_as_string(std::span<const uint8_t> value, bool* was_base64 = nullptr);

// Appends `utf8` to `out` as a JSON string literal, quotes included. Escapes '"', '\\' and
// the control characters U+0000-001F (\b \f \n \r \t by name, the rest as \u00XX); keeps all
// other text as is, non-ASCII included. Input that is not valid UTF-8 does not make the
// output invalid JSON: each byte that does not start a well-formed sequence becomes U+FFFD.
void append_json_escaped(std::string& out, std::string_view utf8);

// Percent-encoding (RFC 3986 section 2.1) of every byte outside the unreserved characters
// A-Z a-z 0-9 - . _ ~ (section 2.3), hex in upper case: a safe URL path segment or query value.
std::string percent_encode(std::string_view text);

}  // namespace picomq::kit
