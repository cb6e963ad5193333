#include "runtime/kafka/client_logging.h"

#include <spdlog/spdlog.h>

namespace picomq::runtime::kafka {
namespace {

const LoggedClient* client_of(const rd_kafka_t* rk) { return static_cast<const LoggedClient*>(rd_kafka_opaque(rk)); }

void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  const LoggedClient* c = client_of(rk);
  const char* prefix = c ? c->log_prefix.c_str() : "?";
  const auto lvl = level <= 3 ? spdlog::level::err
                   : level <= 4 ? spdlog::level::warn
                   : level <= 6 ? spdlog::level::info
                                : spdlog::level::debug;
  spdlog::log(lvl, "{}: kafka {} {}: {}", prefix, rd_kafka_name(rk), fac, buf);
}

void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* c = static_cast<LoggedClient*>(opaque);
  const char* prefix = c ? c->log_prefix.c_str() : "?";
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
    // Retried by librdkafka forever; said once per outage, and the status shows it.
    if (c && !c->broker_down.exchange(true)) {
      c->broker_down_since_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch()).count();
      spdlog::warn("{}: broker unreachable ({}); retrying", prefix, reason);
    }
  } else if (code == RD_KAFKA_RESP_ERR__TRANSPORT || code == RD_KAFKA_RESP_ERR__RESOLVE) {
    // During an outage each reconnect attempt fails again: said once, at its start.
    spdlog::log(c && c->broker_down ? spdlog::level::debug : spdlog::level::warn,
                "{}: broker connection failed ({}); retrying", prefix, reason);
  } else if (rd_kafka_fatal_error(rk, nullptr, 0)) {
    spdlog::error("{}: fatal Kafka client error: {}", prefix, reason);
  } else {
    spdlog::warn("{}: Kafka client: {} ({})", prefix, reason, rd_kafka_err2name(code));
  }
}

}  // namespace

namespace {
std::atomic<size_t> left_behind{0};
}

void leave_behind(LoggedClient* client) {
  client->owner = nullptr;
  left_behind.fetch_add(1);
}

size_t handles_left_behind() { return left_behind.load(); }

void route_client_logs(rd_kafka_conf_t* conf, LoggedClient* client) {
  rd_kafka_conf_set_opaque(conf, client);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  rd_kafka_conf_set_error_cb(conf, error_cb);
}

}  // namespace picomq::runtime::kafka
