#pragma once
// The dead-letter topic of a [[topics]] block (on_bad_record = "dead_letter"): a bad record's
// original key, value and headers are produced there, with headers saying why, where and when.
// send() returns only once the broker acknowledged every record (acks=all, idempotent producer),
// because the caller commits past those records right after.
#include <librdkafka/rdkafka.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace picomq::runtime {

// Where in the pipeline a record went bad.
enum class BadRecordStage { Decode, Transform, Sink };
std::string_view to_string(BadRecordStage stage);  // "decode" | "transform" | "sink"

struct DeadLetter {
  const rd_kafka_message_t* original;  // the record as consumed: topic, partition, offset, key, value, headers
  BadRecordStage stage;
  std::string reason;
};

// Names of the headers added to a dead-lettered record (docs/bad-records.md).
inline constexpr const char* kDeadLetterHeaders[] = {
    "pico_error_stage",   "pico_error_reason", "pico_error_sink",      "pico_error_topic",
    "pico_error_partition", "pico_error_offset", "pico_error_timestamp", "pico_error_time",
};

class DeadLetterProducer {
 public:
  // `client_properties` are the runtime's [broker] properties (TLS, SASL...).
  static std::unique_ptr<DeadLetterProducer> create(const std::string& bootstrap_servers,
                                                    const std::vector<std::pair<std::string, std::string>>& client_properties,
                                                    std::string topic, std::string sink_key, std::string& error);
  ~DeadLetterProducer();
  DeadLetterProducer(const DeadLetterProducer&) = delete;
  DeadLetterProducer& operator=(const DeadLetterProducer&) = delete;

  // Produces every record and waits for the broker to confirm each (at most `timeout_ms`).
  // False, with the first failure in `error`, when any of them was not confirmed.
  bool send(const std::vector<DeadLetter>& records, int timeout_ms, std::string& error);
  const std::string& topic() const { return topic_; }

 private:
  DeadLetterProducer() = default;
  rd_kafka_t* rk_ = nullptr;
  std::string topic_;
  std::string sink_key_;
};

}  // namespace picomq::runtime
