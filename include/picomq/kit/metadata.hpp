#pragma once
// Field names every sink uses when it adds record metadata to what it writes (spec, sinks
// "Destinations"). One definition, so a Postgres column and an Elasticsearch field agree.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace picomq::kit {

inline constexpr std::string_view kTopicField = "pico_topic";          // source topic
inline constexpr std::string_view kPartitionField = "pico_partition";  // always 0 on PicoMQ
inline constexpr std::string_view kOffsetField = "pico_offset";        // record offset
inline constexpr std::string_view kTimestampField = "pico_timestamp";  // epoch milliseconds
inline constexpr std::string_view kKeyField = "pico_key";              // base64 if no binary type
inline constexpr std::string_view kHeadersField = "pico_headers";      // JSON: destination/headers.h

// "topic:partition:offset": unique per record, so sinks that upsert by id make replays
// idempotent. The topic goes first and unescaped; partition and offset never contain ':',
// so the id still parses from the right even when a topic does.
inline std::string record_id(std::string_view topic, int32_t partition, int64_t offset) {
  char numbers[48];  // ":partition:offset", written without temporaries (a per-record cost)
  char* end = numbers;
  *end++ = ':';
  end = std::to_chars(end, numbers + sizeof numbers, partition).ptr;
  *end++ = ':';
  end = std::to_chars(end, numbers + sizeof numbers, offset).ptr;
  std::string id;
  id.reserve(topic.size() + static_cast<std::size_t>(end - numbers));
  id.append(topic);
  id.append(numbers, end);
  return id;
}

}  // namespace picomq::kit
