#include "runtime/embedded_broker.h"

#include <librdkafka/rdkafka_mock.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <memory>

namespace picomq::runtime {

std::unique_ptr<EmbeddedBroker> EmbeddedBroker::start(const config::RuntimeConfig& config, std::string& error) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", errstr, sizeof errstr) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "client.id", "picomq-connect-embedded", errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    error = std::string("embedded broker: ") + errstr;
    return nullptr;
  }
  // librdkafka announces the mock cluster at NOTICE level on its own stderr format; route its
  // log lines through ours.
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int level, const char* fac, const char* buf) {
    if (level <= 4) spdlog::warn("embedded broker {}: {}", fac, buf);
    else spdlog::debug("embedded broker {}: {}", fac, buf);
  });
  std::unique_ptr<EmbeddedBroker> broker(new EmbeddedBroker());
  broker->rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!broker->rk_) {
    error = std::string("embedded broker: ") + errstr;
    return nullptr;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_handle_mock_cluster(broker->rk_);
  if (!cluster) {
    error = "embedded broker: this librdkafka has no mock cluster";
    return nullptr;
  }
  broker->bootstrap_ = rd_kafka_mock_cluster_bootstraps(cluster);
  for (const auto& topic : config.embedded_topics) {
    if (auto err = rd_kafka_mock_topic_create(cluster, topic.c_str(), config.embedded_partitions, 1)) {
      error = "embedded broker: cannot create topic '" + topic + "': " + rd_kafka_err2str(err);
      return nullptr;
    }
  }
  for (const auto& seed : config.embedded_seeds)
    if (!broker->produce_seed(seed, error)) return nullptr;
  spdlog::info("embedded broker listening on {} (Kafka protocol; e.g. kcat -b {} -L)", broker->bootstrap_,
               broker->bootstrap_);
  return broker;
}

bool EmbeddedBroker::produce_seed(const config::EmbeddedSeed& seed, std::string& error) {
  std::ifstream in(seed.file);
  if (!in) {
    error = "embedded broker: cannot read seed file " + seed.file;
    return false;
  }
  size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto err = rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(seed.topic.c_str()), RD_KAFKA_V_VALUE(line.data(), line.size()),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (err) {
      error = "embedded broker: cannot produce seed record to '" + seed.topic + "': " + rd_kafka_err2str(err);
      return false;
    }
    ++count;
  }
  if (auto err = rd_kafka_flush(rk_, 10000)) {
    error = "embedded broker: seeding '" + seed.topic + "' did not finish: " + rd_kafka_err2str(err);
    return false;
  }
  spdlog::info("embedded broker: produced {} records from {} onto '{}'", count, seed.file, seed.topic);
  return true;
}

EmbeddedBroker::~EmbeddedBroker() {
  if (rk_) rd_kafka_destroy(rk_);
}

}  // namespace picomq::runtime
