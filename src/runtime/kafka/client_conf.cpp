#include "runtime/kafka/client_conf.h"

namespace picomq::runtime::kafka {

ClientConf::ClientConf(const ClientProperties& broker_properties, const std::string& bootstrap_servers)
    : conf_(rd_kafka_conf_new()) {
  char err[512];
  rd_kafka_conf_set(conf_, "reconnect.backoff.ms", kReconnectBackoffMs, err, sizeof err);
  for (const auto& [key, value] : broker_properties)
    if (rd_kafka_conf_set(conf_, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK && error_.empty())
      error_ = "[broker.properties] " + key + ": " + err;
  set("bootstrap.servers", bootstrap_servers);
}

ClientConf::~ClientConf() {
  if (conf_) rd_kafka_conf_destroy(conf_);
}

void ClientConf::set(const std::string& key, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf_, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK && error_.empty())
    error_ = key + ": " + err;
}

rd_kafka_t* ClientConf::create(rd_kafka_type_t type) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf_, err, sizeof err);
  if (!rk) error_ = std::string("cannot create a Kafka client: ") + err;
  else conf_ = nullptr;  // the handle owns it now
  return rk;
}

}  // namespace picomq::runtime::kafka
