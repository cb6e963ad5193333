#pragma once
// The configuration every auxiliary librdkafka handle starts from (the lag reader, the offsets
// endpoints' client, the group-protocol probe, the dead-letter producer): [broker.properties] — TLS, SASL and the rest
// reach the broker the same way as the consumer's — then the bootstrap servers and the handle's own.
#include <librdkafka/rdkafka.h>

#include <string>
#include <utility>
#include <vector>

namespace picomq::runtime::kafka {

using ClientProperties = std::vector<std::pair<std::string, std::string>>;

// librdkafka's reconnect.backoff.ms (default 100 ms) also delays a new handle's first connection
// to each broker it learns from the bootstrap's metadata (librdkafka 2.x drops the bootstrap
// connection then): every handle waited ~50 ms before its first request to the cluster, twice at
// start (the group-protocol probe, the consumer). 10 ms: the start waits ~5 ms; reconnects in an
// outage still back off exponentially up to reconnect.backoff.max.ms (10 s). The operator's
// properties override it.
inline constexpr const char* kReconnectBackoffMs = "10";

class ClientConf {
 public:
  // A property [broker.properties] holds that librdkafka refuses makes error() say which.
  ClientConf(const ClientProperties& broker_properties, const std::string& bootstrap_servers);
  ~ClientConf();
  ClientConf(const ClientConf&) = delete;
  ClientConf& operator=(const ClientConf&) = delete;

  // The handle's own settings, after the operator's.
  void set(const std::string& key, const std::string& value);
  rd_kafka_conf_t* get() { return conf_; }
  const std::string& error() const { return error_; }
  // The handle for this configuration (which rd_kafka_new takes over); null with error() set.
  // Created whatever error() said before: the caller decides whether a refused property matters.
  rd_kafka_t* create(rd_kafka_type_t type);

 private:
  rd_kafka_conf_t* conf_;
  std::string error_;
};

}  // namespace picomq::runtime::kafka
