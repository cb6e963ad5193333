#include "runtime/kafka/client_logging.h"

#include <spdlog/spdlog.h>

namespace picomq::runtime::kafka {
namespace {

const LoggedClient* client_of(const rd_kafka_t* rk) { return static_cast<const LoggedClient*>(rd_kafka_opaque(rk)); }

}  // namespace

spdlog::level::level_enum runtime_level_of(int syslog_level, std::string_view facility) {
  // Each failed connection attempt: librdkafka logs it at error level (FAIL) and hands the same
  // error to error_cb below, which says an outage once and each reconnect after it at debug. At
  // error level here they paged operators for an outage librdkafka rides out by itself.
  if (facility == "FAIL") return spdlog::level::debug;
  return syslog_level <= 3   ? spdlog::level::err
         : syslog_level <= 4 ? spdlog::level::warn
         : syslog_level <= 6 ? spdlog::level::info
                             : spdlog::level::debug;
}

namespace {

void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  const LoggedClient* c = client_of(rk);
  const char* prefix = c ? c->log_prefix.c_str() : "?";
  spdlog::log(runtime_level_of(level, fac), "{}: kafka {} {}: {}", prefix, rd_kafka_name(rk), fac, buf);
}

void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* c = static_cast<LoggedClient*>(opaque);
  const char* prefix = c ? c->log_prefix.c_str() : "?";
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  // The start of an outage: librdkafka 2.12 says ALL_BROKERS_DOWN only once every broker it
  // knows (bootstrap ones included) has failed, which a consumer that learned its broker from the
  // bootstrap one may never reach; a connection attempt that fails (not a connection that closed)
  // says it at once. Retried by librdkafka forever; said once per outage, and the status shows it.
  const std::string_view text = reason ? reason : "";
  const bool cannot_connect =
      code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || code == RD_KAFKA_RESP_ERR__RESOLVE ||
      (code == RD_KAFKA_RESP_ERR__TRANSPORT && text.find("Connect to ") != std::string_view::npos);
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  if (cannot_connect && c && c->broker_down) {
    spdlog::debug("{}: broker still unreachable ({})", prefix, reason);
  } else if (cannot_connect && c && c->begin_outage(now_ms)) {
    spdlog::warn("{}: broker unreachable ({}); retrying", prefix, reason);
  } else if (cannot_connect && c) {
    spdlog::debug("{}: broker unreachable again within {} s of answering: the same outage ({})", prefix,
                  LoggedClient::kRecoverySettleMs / 1000, reason);
  } else if (is_credentials_refusal(code)) {
    spdlog::error("{}: {}", prefix, authentication_refusal(reason));
    if (c) c->refuse(authentication_refusal(reason));
  } else if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
    spdlog::debug("{}: {}", prefix, reason);
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

bool is_credentials_refusal(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR__AUTHENTICATION || code == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED;
}

std::string authentication_refusal(const char* reason) {
  return std::string("the broker refused the client's credentials: ") + (reason ? reason : "") +
         " (check sasl.mechanisms, sasl.username and sasl.password in [broker.properties]; not retried)";
}

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
