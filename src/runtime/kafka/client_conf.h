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
