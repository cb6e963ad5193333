#pragma once
// A consumer group's offsets, read and set from outside the group (the operations API's
// GET / POST /sinks/{key}/offsets, after KIP-875): a client of its own with the group's id that
// never joins it. The broker accepts such a commit only while the group has no member, which
// is why a sink must be stopped before its offsets are reset.
#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/sink_definition.h"

namespace picomq::runtime::kafka {

struct GroupSpec {
  std::string bootstrap_servers;
  std::vector<std::pair<std::string, std::string>> client_properties;  // [broker.properties]
  std::string group_id;
  std::vector<std::string> topics;              // explicit topics of the block
  std::optional<std::string> anchored_pattern;  // and/or the topics matching this
};

// The groups of a sink's [[topics]] blocks, in block order (block i's group is element i).
std::vector<GroupSpec> sink_groups(const config::SinkDefinition& sink, const std::string& bootstrap_servers,
                                   const std::vector<std::pair<std::string, std::string>>& client_properties);

struct PartitionOffsets {
  std::string topic;
  int32_t partition = 0;
  int64_t committed = -1;  // -1: the group has committed nothing here
  int64_t low = -1, high = -1;
  int64_t lag() const { return high < 0 ? -1 : committed < 0 ? high - std::max<int64_t>(low, 0) : high - committed; }
};

// Every partition of the spec's topics (the explicit ones and the pattern's matches), sorted.
std::vector<std::pair<std::string, int32_t>> group_partitions(rd_kafka_t* rk, const GroupSpec& spec,
                                                              std::string& error);

// The group's committed offset, and the log's start and end, for every partition of its topics.
// Empty `error` on success.
std::vector<PartitionOffsets> read_group_offsets(const GroupSpec& spec, std::string& error);

struct OffsetTarget {
  enum class Kind { Earliest, Latest, Timestamp, Explicit } kind = Kind::Earliest;
  int64_t timestamp_ms = 0;  // Timestamp: the first offset at or after it (the end when none)
  std::map<std::pair<std::string, int32_t>, int64_t> offsets;  // Explicit: topic-partition -> offset
};

// Commits the target offsets for the group (every partition of its topics, or the ones named
// for Explicit). Empty on success, else why (a partition or offset that does not exist, a group
// with active members, an unreachable broker).
std::string reset_group_offsets(const GroupSpec& spec, const OffsetTarget& target);

}  // namespace picomq::runtime::kafka
