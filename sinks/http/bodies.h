#pragma once
// What the HTTP sink sends for a batch, as pure functions: which records go in bodies and which
// are tombstones handled apart, how records are framed into request bodies, each request's
// idempotency key, and the success-status list. No I/O (tests/bodies_test.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/record_json.hpp"
#include "picomq/kit/splitter.hpp"
#include "picomq/sink_abi.h"

namespace picomq::http_sink {

enum class BodyFormat {
  Ndjson,     // records one per line (application/x-ndjson)
  JsonArray,  // one JSON array of records (application/json)
  Single,     // one record per request, a JSON document (application/json)
  Raw,        // one record per request, the payload's bytes as they are
};
enum class Tombstones { Skip, Send, Delete };

std::string_view default_content_type(BodyFormat format, int32_t payload_format);

// The records of a batch by what happens to them.
struct BatchPlan {
  std::vector<size_t> in_bodies;                        // indices of records that go into request bodies
  std::vector<size_t> deletes;                          // tombstones sent as DELETE (Tombstones::Delete, with a key)
  std::vector<std::pair<size_t, std::string>> refused;  // records that cannot be sent, and why
};
BatchPlan plan_batch(const pmq_batch& batch, Tombstones tombstones);

// How a body holds its records: one per line, a JSON array, or (Single, Raw) one record alone.
kit::Framing framing(BodyFormat format);
// The request limits for a format: Single and Raw carry one record per request.
kit::SplitLimits limits(BodyFormat format, kit::SplitLimits configured);
// One record as it sits in a body: its JSON (Ndjson, JsonArray, Single) or its payload's bytes
// (Raw; a tombstone: nothing).
void render_record(const pmq_record& r, BodyFormat format, const kit::BatchJsonWriter& json, std::string& out);

// One request body: records `records[first .. first + count)` of the plan's list.
struct Body {
  size_t first = 0, count = 0;  // a range of the index list it was cut from
  std::string bytes;
};

// Cuts records (indices into the batch) into bodies of at most `limits`, as the sink's requests
// cut them (the pieces above, through the kit's splitter). Single and Raw put one record in each body.
std::vector<Body> render_bodies(const pmq_batch& batch, const std::vector<size_t>& records, size_t first, size_t count,
                                BodyFormat format, const kit::BatchJsonWriter& json, kit::SplitLimits limits);

// "<topic>-<partition>-<first offset>-<last offset>" of the records a request carries, with the
// topic in the kit's url-safe encoding (a header value; '-' never splits it ambiguously, since
// offsets and partitions are digits). The same records always give the same key, so a receiver
// that remembers keys drops a retried or replayed request that carries the same records.
std::string idempotency_key(std::string_view topic, int32_t partition, int64_t first_offset, int64_t last_offset);

// "2xx", "200", "200-204", "201,204": the statuses that mean written. nullopt + error for a
// spelling outside these or a status outside 100-599.
std::optional<std::vector<long>> parse_statuses(const std::vector<std::string>& specs, std::string* error);

// The key of a record as a URL path segment (percent-encoded, RFC 3986 unreserved kept).
std::string key_path_segment(std::string_view key);

}  // namespace picomq::http_sink
