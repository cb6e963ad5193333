#pragma once
// Record ids for destinations with a restricted id alphabet. The record id of
// picomq/kit/metadata.hpp, "topic:partition:offset", holds ':' and whatever a topic holds ('.',
// '_'); Meilisearch document ids allow only [A-Za-z0-9_-] (at most 511 bytes), and others are
// as strict. This encoding is reversible and collision-free:
//   - a byte in [A-Za-z0-9-] stands for itself;
//   - every other byte, '_' included, is '_' and two uppercase hex digits ("." -> "_2E");
//   - the record id joins the encoded topic, the partition and the offset with '-':
//       orders.eu, 0, 42   ->   orders_2Eeu-0-42
//     Partition and offset are digits, so the last two '-' always split it, whatever '-' the
//     topic holds; and since the escape is injective, two records never share an id.
// A result longer than a destination's limit cannot be shortened without losing one of those
// properties: url_safe_record_id reports it (a 249-byte topic of dots encodes to 747 bytes),
// and the sink refuses the record with that reason instead of writing a colliding id.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace picomq::kit {

// Appends `bytes` encoded to [A-Za-z0-9_-] (the rule above).
void append_url_safe(std::string& out, std::span<const uint8_t> bytes);
std::string url_safe(std::string_view bytes);
// The inverse; nullopt for text that is not an encoding (a byte outside the alphabet, a '_'
// without two uppercase hex digits, or an escaped byte that did not need escaping).
std::optional<std::string> from_url_safe(std::string_view text);

struct RecordCoordinates {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  friend bool operator==(const RecordCoordinates&, const RecordCoordinates&) = default;
};

// "orders_2Eeu-0-42"; nullopt when longer than max_bytes (0: no limit).
std::optional<std::string> url_safe_record_id(std::string_view topic, int32_t partition, int64_t offset,
                                              size_t max_bytes = 0);
std::optional<RecordCoordinates> parse_url_safe_record_id(std::string_view id);
// "topic:partition:offset" read back (the topic may hold ':'; the last two split it).
std::optional<RecordCoordinates> parse_record_id(std::string_view id);

}  // namespace picomq::kit
