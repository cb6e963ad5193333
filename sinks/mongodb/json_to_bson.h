#pragma once
// JSON text into BSON the way libbson's bson_init_from_json reads it, fast. libbson's reader costs
// more than the rest of the sink together (profile in bench/README.md): a fresh reader of ~20 KB,
// zeroed, per document, a character-at-a-time parser and a string compare of every key against
// the Extended JSON keywords. Payloads that need none of that (no key starting with '$', numbers
// within int64 or double, depth within libbson's) are parsed with simdjson and appended directly;
// the rest go through libbson, so the document is the same either way (tests/core_test.cpp
// compares the two byte for byte).
#include <bson/bson.h>

#include <string>
#include <string_view>

namespace picomq::mongodb {

// Appends the members of the JSON object `json` to `into`, which must be empty. False when it is
// not such a plain object and libbson must read it instead; `into` is then to be thrown away
// (or bson_reinit). `has_pico_key` is set when a top-level key begins with "pico_" (the metadata
// names a payload field may take).
bool append_plain_json_object(std::string_view json, bson_t* into, bool& has_pico_key);

}  // namespace picomq::mongodb
