#pragma once
// Which group protocol a block's consumer joins with ([broker] group_protocol, docs/runtime.md
// "Group protocols"): KIP-848's `consumer` protocol, where the broker coordinates incremental
// assignments, or `classic` with the cooperative-sticky assignor.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/runtime_config.h"

namespace picomq::runtime::kafka {

struct GroupProtocolChoice {
  config::GroupProtocol protocol = config::GroupProtocol::Classic;  // Consumer or Classic
  std::string why;                                                  // said in the block's log line
};

// `properties`: every client property the consumer gets ([broker.properties], then the block's).
// Auto takes `consumer` when the broker offers it (asked once per process and bootstrap list)
// unless static membership or a classic-only property asks for `classic`; nullopt when it had to
// ask and no broker answered within `probe_timeout` (the caller asks again).
std::optional<GroupProtocolChoice> choose_group_protocol(
    config::GroupProtocol setting, const std::string& bootstrap_servers,
    const std::vector<std::pair<std::string, std::string>>& properties, bool static_membership,
    std::chrono::milliseconds probe_timeout, const std::string& log_prefix, std::string& refusal);

// Whether the broker offers ConsumerGroupHeartbeat v1, what librdkafka's KIP-848 consumer needs
// (read from the ApiVersions answer librdkafka logs at debug level); nullopt when no broker
// answered within `timeout`. The probe's own librdkafka lines are logged under `log_prefix`;
// `refusal` says why when the broker refused the credentials.
std::optional<bool> broker_offers_consumer_protocol(const std::string& bootstrap_servers,
                                                    const std::vector<std::pair<std::string, std::string>>& properties,
                                                    std::chrono::milliseconds timeout, const std::string& log_prefix,
                                                    std::string& refusal);

}  // namespace picomq::runtime::kafka
