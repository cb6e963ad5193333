#pragma once
// Every librdkafka handle the runtime creates logs through the runtime's logger, with the
// sink/block it serves, instead of librdkafka's own unformatted stderr lines.
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <string>

namespace picomq::runtime::kafka {

// What a handle's callbacks find through rd_kafka_opaque(): its log context, and whether the
// broker is reachable (set by the error callback, cleared by whoever sees it answer again).
struct LoggedClient {
  std::string log_prefix;  // e.g. "sink 'orders' topics[0]"
  std::atomic<bool> broker_down{false};
  std::atomic<int64_t> broker_down_since_ms{0};  // system clock, epoch ms
};

// Sets `client` as the conf's opaque and routes its log and error callbacks to the logger.
void route_client_logs(rd_kafka_conf_t* conf, LoggedClient* client);

}  // namespace picomq::runtime::kafka
