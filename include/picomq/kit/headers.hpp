#pragma once
// pico_headers as JSON: the one rendering every sink uses (docs/destinations.md, "Headers as
// JSON"). Kafka allows a header name more than once; a JSON object must not repeat a key.
#include <cstddef>
#include <span>
#include <string>

#include "picomq/sink_abi.h"

namespace picomq::kit {

// Appends `headers` to `out` as one JSON object. Keys are the header names in the order they
// first appear; a name that occurs once maps to its value, a name that occurs more than once
// to a JSON array of its values in record order:
//   a=1, b=x, a=2   ->   {"a":["1","2"],"b":"x"}
// A value is a JSON string: the bytes as they are when valid UTF-8, else their base64
// (header_value_as_string); a null header value is JSON null. Names follow the same rule, and
// names are grouped by that rendering, so the object never holds a key twice. No headers: {}.
void append_headers_json(std::string& out, std::span<const pmq_header> headers);

}  // namespace picomq::kit
