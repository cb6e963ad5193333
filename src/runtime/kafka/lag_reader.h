#pragma once
// How far each consumer group is behind, read from the broker and not from a running consumer, so
// that it holds for a sink that is paused, stopped or failing as for one that runs (the signal an
// autoscaler reads, docs/operations.md "Lag"): per partition, the log end minus the group's
// committed offset, and the age of the record at the committed offset — the oldest one not yet
// written for good.
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/kafka/client_logging.h"
#include "runtime/kafka/group_offsets.h"

namespace picomq::runtime::kafka {

struct GroupPartitionLag {
  std::string topic;
  int32_t partition = 0;
  int64_t committed = -1;  // -1: the group has committed nothing here (lag counts from the log start)
  int64_t end = -1;        // the log end (high watermark)
  int64_t records = -1;    // end - committed (or - start); -1 while unknown
  double seconds = -1;     // age of the record at the committed offset; 0 without lag, -1 unknown
  int64_t oldest_ms = -1;  // that record's timestamp; -1 unknown
};

class LagReader {
 public:
  LagReader(std::string bootstrap_servers, std::vector<std::pair<std::string, std::string>> client_properties);
  ~LagReader();
  LagReader(const LagReader&) = delete;
  LagReader& operator=(const LagReader&) = delete;

  // The group's lag on every partition of its topics. Empty `error` on success.
  std::vector<GroupPartitionLag> read(const GroupSpec& spec, std::string& error);

 private:
  std::string open();
  std::map<std::pair<std::string, int32_t>, int64_t> committed_offsets(
      const GroupSpec& spec, const std::vector<std::pair<std::string, int32_t>>& tps, std::string& error);
  // Timestamps of the records at these offsets (topic, partition, offset), fetched at once.
  void fetch_timestamps(const std::vector<std::tuple<std::string, int32_t, int64_t>>& at);

  std::string bootstrap_servers_;
  std::vector<std::pair<std::string, std::string>> client_properties_;
  LoggedClient log_;  // outlives rk_: destroyed after it
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_queue_t* admin_results_ = nullptr;
  // (topic, partition, offset) -> the record's timestamp (epoch ms): an offset's record does not change.
  std::map<std::tuple<std::string, int32_t, int64_t>, int64_t> timestamps_;
};

}  // namespace picomq::runtime::kafka
