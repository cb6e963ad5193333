#include "runtime/kafka/group_protocol.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <regex>

#include "runtime/kafka/client_conf.h"
#include "runtime/kafka/client_logging.h"

namespace picomq::runtime::kafka {
namespace {

using config::GroupProtocol;

// librdkafka has no call that returns a broker's ApiVersions; with `debug = feature` it logs
// them as "  ApiKey ConsumerGroupHeartbeat (68) Versions 0..1" on connecting.
struct ApiVersionsSeen {
  std::string log_prefix;  // the block's
  LoggedClient refused;    // the broker refused the credentials
  std::mutex mutex;
  std::optional<int> heartbeat_max_version;  // ConsumerGroupHeartbeat (68)
  bool answered = false;                     // any ApiVersions answer was logged
};

void probe_log_cb(const rd_kafka_t* rk, int level, const char* facility, const char* line) {
  auto* seen = static_cast<ApiVersionsSeen*>(rd_kafka_opaque(rk));
  if (std::string_view(facility) != "APIVERSION") {
    // The FEATURE lines `debug` asked for are this probe's business alone.
    const auto runtime_level =
        std::string_view(facility) == "FEATURE" ? spdlog::level::trace : runtime_level_of(level, facility);
    spdlog::log(runtime_level, "{}: kafka {} {}: {}", seen->log_prefix, rd_kafka_name(rk), facility, line);
    return;
  }
  static const std::regex kHeartbeat(R"(ApiKey \S+ \(68\) Versions (\d+)\.\.(\d+))");
  std::lock_guard lock(seen->mutex);
  if (std::string_view(line).find("Broker API support") != std::string_view::npos) seen->answered = true;
  std::cmatch m;
  if (std::regex_search(line, m, kHeartbeat)) seen->heartbeat_max_version = std::stoi(m[2].str());
}

}  // namespace

std::optional<bool> broker_offers_consumer_protocol(const std::string& bootstrap_servers,
                                                    const std::vector<std::pair<std::string, std::string>>& properties,
                                                    std::chrono::milliseconds timeout, const std::string& log_prefix,
                                                    std::string& refusal) {
  ApiVersionsSeen seen;
  seen.log_prefix = log_prefix;
  // The consumer's own properties (TLS, SASL...) reach the broker the same way; no group.id, so
  // this handle joins nothing. A property librdkafka refuses is the consumer's to report (it names
  // where the property came from); the probe goes on without it.
  ClientProperties connection;
  for (const auto& [k, v] : properties)
    if (k != "group.id" && k != "group.instance.id") connection.emplace_back(k, v);
  ClientConf conf(connection, bootstrap_servers);
  conf.set("client.id", "picomq-connect-group-protocol-probe");
  conf.set("debug", "feature");
  rd_kafka_conf_set_opaque(conf.get(), &seen);
  rd_kafka_conf_set_log_cb(conf.get(), probe_log_cb);
  rd_kafka_conf_set_error_cb(conf.get(), [](rd_kafka_t*, int err, const char* reason, void* opaque) {
    if (is_credentials_refusal(static_cast<rd_kafka_resp_err_t>(err)))
      static_cast<ApiVersionsSeen*>(opaque)->refused.refuse(authentication_refusal(reason));
  });
  rd_kafka_t* rk = conf.create(RD_KAFKA_CONSUMER);
  if (!rk) {
    spdlog::debug("group protocol probe: {}", conf.error());
    return std::nullopt;
  }
  // A metadata round trip: the connection's ApiVersions exchange comes first.
  const rd_kafka_metadata_t* md = nullptr;
  const bool answered =
      rd_kafka_metadata(rk, 0, nullptr, &md, static_cast<int>(timeout.count())) == RD_KAFKA_RESP_ERR_NO_ERROR;
  if (md) rd_kafka_metadata_destroy(md);
  // Errors reach error_cb only through a poll.
  rd_kafka_poll(rk, 0);
  rd_kafka_destroy(rk);
  refusal = seen.refused.refusal();
  std::lock_guard lock(seen.mutex);
  if (!answered || !seen.answered) return std::nullopt;
  return seen.heartbeat_max_version.value_or(-1) >= 1;
}

std::optional<GroupProtocolChoice> choose_group_protocol(
    GroupProtocol setting, const std::string& bootstrap_servers,
    const std::vector<std::pair<std::string, std::string>>& properties, bool static_membership,
    std::chrono::milliseconds probe_timeout, const std::string& log_prefix, std::string& refusal) {
  using Choice = GroupProtocolChoice;
  if (setting == GroupProtocol::Consumer) return Choice{GroupProtocol::Consumer, "group_protocol = \"consumer\""};
  if (setting == GroupProtocol::Classic) return Choice{GroupProtocol::Classic, "group_protocol = \"classic\""};
  for (const auto& [k, v] : properties)
    if (config::is_classic_group_property(k))
      return Choice{GroupProtocol::Classic, "auto: property '" + k + "' belongs to the classic protocol"};
  // Under KIP-848 a runtime restarted after a crash with the same group.instance.id is fenced until
  // the broker's session timeout; the classic protocol hands it the partitions at once.
  if (static_membership) return Choice{GroupProtocol::Classic, "auto: group_instance_id (static membership) is set"};

  static std::mutex mutex;
  static std::map<std::string, bool> answers;  // bootstrap servers -> offers KIP-848
  std::lock_guard lock(mutex);
  auto known = answers.find(bootstrap_servers);
  if (known == answers.end()) {
    const auto offered =
        broker_offers_consumer_protocol(bootstrap_servers, properties, probe_timeout, log_prefix, refusal);
    if (!offered) return std::nullopt;
    known = answers.emplace(bootstrap_servers, *offered).first;
  }
  if (known->second) return Choice{GroupProtocol::Consumer, "auto: the broker offers KIP-848"};
  return Choice{GroupProtocol::Classic, "auto: the broker does not offer KIP-848"};
}

}  // namespace picomq::runtime::kafka
