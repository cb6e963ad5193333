#pragma once
// Every librdkafka handle the runtime creates logs through the runtime's logger, with the
// sink/block it serves, instead of librdkafka's own unformatted stderr lines.
#include <librdkafka/rdkafka.h>
#include <spdlog/common.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

namespace picomq::runtime::kafka {

// What a handle's callbacks find through rd_kafka_opaque(): its log context, and whether the
// broker is reachable (set by the error callback, cleared by whoever sees it answer again).
struct LoggedClient {
  std::string log_prefix;  // e.g. "sink 'orders' topics[0]"
  void* owner = nullptr;   // the object serving the handle's other callbacks; null once it let go
  std::atomic<bool> broker_down{false};
  std::atomic<int64_t> broker_down_since_ms{0};  // system clock, epoch ms
  // Set when the broker refused this client's credentials: librdkafka would retry forever, the
  // runtime stops the block with this instead (a configuration error, not an outage).
  std::string refusal() const {
    std::lock_guard lock(refusal_mutex);
    return refusal_text;
  }
  void refuse(std::string why) {
    std::lock_guard lock(refusal_mutex);
    if (refusal_text.empty()) refusal_text = std::move(why);
  }

 private:
  mutable std::mutex refusal_mutex;
  std::string refusal_text;
};

// Whether an error librdkafka reports is the broker refusing the client's credentials (SASL or TLS
// authentication), which librdkafka would retry forever.
bool is_credentials_refusal(rd_kafka_resp_err_t code);

// What the runtime says when the broker refused a client's SASL credentials (librdkafka's reason,
// which never holds the password, and where to look).
std::string authentication_refusal(const char* reason);

// The runtime's level for a librdkafka log line (syslog level, facility): librdkafka's own, except
// for lines that the error callback already reports once per outage.
spdlog::level::level_enum runtime_level_of(int syslog_level, std::string_view facility);

// Sets `client` as the conf's opaque and routes its log and error callbacks to the logger.
void route_client_logs(rd_kafka_conf_t* conf, LoggedClient* client);

// A handle that cannot be destroyed in reasonable time (librdkafka waits for a broker that is
// gone) is left running, with its LoggedClient, for the process exit to end: the process must
// then leave with std::_Exit, not through static destructors its threads could still reach.
void leave_behind(LoggedClient* client);
size_t handles_left_behind();

}  // namespace picomq::runtime::kafka
