#pragma once
// Object key templates for sinks that write objects or files per topic-partition (S3; the
// lakehouse sinks' data files follow the same rules). A key is resolved once per object, from the
// object's first record:
//   "{topic}/partition={partition}/{topic}+{partition}+{start_offset}.{ext}"
// Placeholders:
//   {topic}, {topic_segment[N]}  the topic, or its segment N split on '.' (-1: the last), made
//                                safe for keys: sanitize_name(ObjectKey) and '/' as %2F, so a
//                                hostile topic ("../x", "a/b", "ä b") stays one path segment
//   {partition}                  the partition number
//   {start_offset}               the object's first offset, zero-padded to 20 digits (keys sort
//                                in offset order; a replay from that offset resolves the same key)
//   {sink_key}                   the sink definition's key
//   {year} {month} {day} {hour}  UTC date and hour of the object's first record *timestamp*
//                                (never the wall clock: a replay resolves the same key); a
//                                record without a timestamp counts as 1970-01-01T00
//   {ext}                        the sink's file extension ("json", "json.gz"...)
//   {{ }}                        literal braces
// Literal text may not hold control characters or start with '/'. Which placeholders a sink
// requires (e.g. {start_offset} for unique keys) is its own check, through uses().
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/result.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::kit {

struct ObjectKeyFields {
  std::string_view topic{};
  int32_t partition = 0;
  int64_t start_offset = 0;
  int64_t timestamp_ms = -1;  // of the object's first record; < 0: none
  std::string_view sink_key{};
  std::string_view ext{};
};

class ObjectKeyTemplate {
 public:
  enum class Field { Literal, Topic, Segment, Partition, StartOffset, SinkKey, Year, Month, Day, Hour, Ext };

  static Result<ObjectKeyTemplate> parse(std::string_view text);

  // Fails only when a {topic_segment[N]} does not exist in the topic, or the topic sanitises to
  // nothing usable.
  Result<std::string> resolve(const ObjectKeyFields& fields) const;

  // The key up to its first {start_offset} (fields.start_offset unused): every key of the
  // partition's objects in that time bucket starts with it, followed by the 20 offset digits.
  // What a sink lists to find, after a restart, the object a resumed offset is in.
  Result<std::string> resolve_prefix(const ObjectKeyFields& fields) const;

  bool uses(Field field) const;
  // The placeholders after the first {start_offset}, in order: a sink that finds objects by
  // listing the keys up to {start_offset} (resolve_prefix) cannot narrow the listing by these.
  std::vector<Field> after_start_offset() const;
  // Why the keys cannot tell apart every topic `blocks` may hand the sink (a pattern, or two
  // listed topics resolving to the same keys, without {topic}), or a listed topic the template
  // cannot resolve ({topic_segment[N]} it lacks); nullopt when they can.
  std::optional<std::string> topics_problem(const std::vector<Subscription>& blocks) const;
  static std::string_view name(Field field);
  // Two timestamps that resolve to the same date/hour fields have the same bucket (0 for every
  // timestamp when the template has no time field): a sink starts a new object when a record's
  // bucket differs from its object's, so that every record's time fields match its object's key.
  int64_t time_bucket(int64_t timestamp_ms) const;

  std::string_view source() const { return source_; }

 private:
  struct Part {
    Field field;
    std::string literal;  // Field::Literal
    int index = 0;        // Field::Segment
  };
  ObjectKeyTemplate() = default;
  Result<std::string> resolve_parts(const ObjectKeyFields& fields, bool until_start_offset) const;
  std::string source_;
  std::vector<Part> parts_;
  Field finest_time_ = Field::Literal;  // Literal: no time field
};

}  // namespace picomq::kit
