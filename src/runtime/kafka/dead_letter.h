#pragma once
// The dead-letter topic of a [[topics]] block (on_bad_record = "dead_letter"): a bad record's
// original key, value and headers are produced there, with headers saying why, where and when.
// send() returns only once the broker acknowledged every record (acks=all, idempotent producer),
// because the caller commits past those records right after.
#include <librdkafka/rdkafka.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/delivery/delivery_window.h"
#include "runtime/kafka/client_logging.h"

namespace picomq::runtime::kafka {

// Names of the headers added to a dead-lettered record (docs/bad-records.md).
inline constexpr const char* kDeadLetterHeaders[] = {
    "pico_error_stage",     "pico_error_reason", "pico_error_sink",      "pico_error_topic",
    "pico_error_partition", "pico_error_offset", "pico_error_timestamp", "pico_error_time",
};

class DeadLetterProducer final : public DeadLetters, private LoggedClient {
 public:
  // `client_properties` are the runtime's [broker] properties (TLS, SASL...).
  static std::unique_ptr<DeadLetterProducer> create(
      const std::string& bootstrap_servers, const std::vector<std::pair<std::string, std::string>>& client_properties,
      std::string topic, std::string sink_key, std::string log_prefix, std::string& error);
  ~DeadLetterProducer() override;
  DeadLetterProducer(const DeadLetterProducer&) = delete;
  DeadLetterProducer& operator=(const DeadLetterProducer&) = delete;

  // Produces the job's bad records (original key, value, headers, plus the pico_error_* ones)
  // and waits for the broker to confirm each, at most timeout(). False, with the first
  // failure in `error`, when any of them was not confirmed.
  bool send(const PreparedJob& job, const std::vector<BadRecord>& bad, std::string& error) override;
  std::string topic() const override { return topic_; }
  static constexpr int timeout_ms = 15000;  // per attempt: produce and wait for the broker's acks
  // More headers for record `index` of a job, after the pico_error_* ones (a redrive's id and
  // history); unset: none.
  std::function<std::vector<std::pair<std::string, std::string>>(const PreparedJob& job, size_t index)> extra_headers;
  static constexpr int unused_timeout_ms = 0;  // per attempt: produce and wait for the broker's acks

 private:
  DeadLetterProducer() = default;
  rd_kafka_t* rk_ = nullptr;
  std::string topic_;
  std::string sink_key_;
};

}  // namespace picomq::runtime::kafka
