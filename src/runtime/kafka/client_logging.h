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
  std::atomic<int64_t> recovered_at_ms{0};       // the broker answered again then; not said yet

  // An outage is said once, and its end once it held this long: a broker shutting down answers
  // a request on an open connection after it refused a new one, which is no recovery.
  static constexpr int64_t kRecoverySettleMs = 2000;
  // The broker did not answer: true when this starts an outage to say (not when one is going on,
  // or when it went down again within kRecoverySettleMs of answering: the same outage).
  bool begin_outage(int64_t now_ms) {
    if (broker_down.exchange(true)) return false;
    const int64_t recovered = recovered_at_ms.exchange(0);
    if (recovered != 0 && now_ms - recovered < kRecoverySettleMs) return false;
    broker_down_since_ms = now_ms;
    return true;
  }
  // The broker answered: the outage is over (said by settled_recovery() once it held).
  void end_outage(int64_t now_ms) {
    if (broker_down.exchange(false)) recovered_at_ms = now_ms;
  }
  // The outage's length in ms once its end held kRecoverySettleMs (once per outage), else -1.
  int64_t settled_recovery(int64_t now_ms) {
    int64_t recovered = recovered_at_ms.load();
    if (recovered == 0 || broker_down || now_ms - recovered < kRecoverySettleMs) return -1;
    if (!recovered_at_ms.compare_exchange_strong(recovered, 0)) return -1;
    return recovered - broker_down_since_ms.load();
  }
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
