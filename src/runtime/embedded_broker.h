#pragma once
// An in-process Kafka-protocol broker (librdkafka's mock cluster) for the quickstart and for
// trying definitions without a server. It speaks real Kafka protocol on loopback ports, so
// kcat and other clients can reach it while the runtime runs.
#include <librdkafka/rdkafka.h>

#include <string>

#include "config/runtime_config.h"

namespace picomq::runtime {

class EmbeddedBroker {
 public:
  // Starts the cluster, creates the configured topics and produces the seed files.
  static std::unique_ptr<EmbeddedBroker> start(const config::RuntimeConfig& config, std::string& error);
  ~EmbeddedBroker();
  const std::string& bootstrap_servers() const { return bootstrap_; }

 private:
  EmbeddedBroker() = default;
  bool produce_seed(const config::EmbeddedSeed& seed, std::string& error);
  rd_kafka_t* rk_ = nullptr;
  std::string bootstrap_;
};

}  // namespace picomq::runtime
