#pragma once
// Turns a resolved destination name (see name_template.h) into one the destination accepts.
// Each sink picks the policy of its destination kind. Every policy is deterministic and
// idempotent: sanitising an already sanitised name returns it unchanged, so a sink may
// sanitise a name the user wrote by hand without changing it.
//
// Too long: a name over the policy's byte limit is cut (never inside a UTF-8 character or a
// %XX escape) to limit - 9 bytes or less and gets "_" + 8 lowercase hex digits of the FNV-1a
// 32-bit hash of the whole, uncut name after the character rules below. Two long names that
// differ only past the cut thus stay distinct (up to a 1 in 2^32 hash collision).
// An empty name is an error under every policy.
//
// SqlIdentifier (Postgres-style; the sink always double-quotes it, so quotes, semicolons and
//   spaces are kept as data, not stripped): valid UTF-8 kept; control characters (U+0000-001F,
//   U+007F, U+0080-009F) and each byte of invalid UTF-8 become '_'; limit 63 bytes
//   (Postgres' NAMEDATALEN - 1).
// IndexName (Elasticsearch / OpenSearch / Meilisearch-style): ASCII letters lowercased; every
//   character outside [a-z0-9._-] becomes one '_' (a multi-byte UTF-8 character becomes one
//   '_', each invalid byte one '_'); a name starting with '-', '_', '+' or '.' gets the
//   prefix 'i' (so neither '.' nor '..' nor a hidden/system ".name" can result); limit 255.
// ObjectKey (S3-style key prefix): bytes in [A-Za-z0-9] and ! - _ . * ' ( ) / kept; every
//   other byte percent-encoded as %XX (uppercase), except that an existing %XX escape with
//   uppercase hex digits is kept (that is what makes the policy idempotent; the price is that
//   topics "a b" and "a%20b" share the key "a%20b");
//   leading '/' removed; a path segment equal to "." becomes "_" and one equal to ".."
//   becomes "__", so a topic can never climb out of the configured prefix; limit 1024 bytes.
// Verbatim: unchanged (for destinations that take any string, e.g. a URL-encoded path the
//   sink escapes itself).
#include <cstddef>
#include <string>
#include <string_view>

#include "picomq/kit/result.hpp"

namespace picomq::kit {

enum class NamePolicy { SqlIdentifier, IndexName, ObjectKey, Verbatim };

Result<std::string> sanitize_name(std::string_view resolved, NamePolicy policy);

// The "too long" rule above on its own, for a sink whose limit is not a policy's (MongoDB: the
// namespace database.collection): `name` (valid UTF-8) unchanged when it fits in `max_bytes`,
// else cut there minus 9 bytes (never inside a UTF-8 character) plus "_" and the 8 hex digits of
// its FNV-1a hash. Idempotent. `max_bytes` must be at least 10.
std::string fit_name(std::string name, std::size_t max_bytes);

// Byte limit of a policy's names; 0 for Verbatim (no limit).
std::size_t max_name_bytes(NamePolicy policy);

std::string_view to_string(NamePolicy policy);

}  // namespace picomq::kit
