#pragma once
// JSON text into BSON the way libbson's bson_init_from_json reads it, fast. libbson's reader costs
// more than the rest of the sink together (profile in bench/README.md): a fresh reader of ~20 KB,
// zeroed, per document, a character-at-a-time parser and a string compare of every key against
// the Extended JSON keywords. Payloads that need none of that (no key starting with '$', numbers
// within int64 or double, depth within libbson's) are parsed with simdjson and appended directly;
// the rest go through libbson, so the document is the same either way (tests/core_test.cpp
// compares the two byte for byte).
#include <bson/bson.h>
#include <simdjson.h>

#include <string_view>

namespace picomq::mongodb {

// The JSON object `json` parsed by `parser` (valid until its next parse), or an error when it is
// not an object simdjson reads.
simdjson::simdjson_result<simdjson::dom::object> parse_object(simdjson::dom::parser& parser, std::string_view json);

// A key libbson reads as a plain key: not Extended JSON ('$...') and without a NUL.
bool is_plain_key(std::string_view key);

// Appends `value` under `key` as libbson's reader would. False when it is not plain (a '$' key
// inside, a number beyond int64, -0.0, a NUL in a string, nested deeper than libbson reads): the
// document is then to be read by libbson instead, and `into` thrown away.
bool append_plain_value(bson_t* into, std::string_view key, simdjson::dom::element value);

// Appends the members of the JSON object `json` to `into`, which must be empty. False when it is
// not a plain object (above); `has_pico_key` is set when a top-level key begins with "pico_" (the
// metadata names a payload field may take).
bool append_plain_json_object(std::string_view json, bson_t* into, bool& has_pico_key);

}  // namespace picomq::mongodb
