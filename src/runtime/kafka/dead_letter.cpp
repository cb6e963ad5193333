#include "runtime/kafka/dead_letter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "runtime/kafka/client_conf.h"
#include "transform/time.h"

namespace picomq::runtime::kafka {
namespace {

// One record's delivery report. The producer's callback owns a reference, so a report that
// arrives after send() gave up writes into live memory.
struct Slot {
  bool done = false;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
};

void delivery_report(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  auto* slot = static_cast<std::shared_ptr<Slot>*>(m->_private);
  (*slot)->done = true;
  (*slot)->err = m->err;
  delete slot;
}

std::string utc_now_rfc3339() {
  const auto now = std::chrono::system_clock::now();
  return transform::time::to_rfc3339(transform::time::from_millis(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count()));
}

}  // namespace

std::unique_ptr<DeadLetterProducer> DeadLetterProducer::create(
    const std::string& bootstrap_servers, const std::vector<std::pair<std::string, std::string>>& client_properties,
    std::string topic, std::string sink_key, std::string log_prefix, std::string& error) {
  ClientConf conf(client_properties, bootstrap_servers);
  // The operator's client.id, when [broker.properties] names one, is kept.
  if (std::none_of(client_properties.begin(), client_properties.end(),
                   [](const auto& property) { return property.first == "client.id"; }))
    conf.set("client.id", "picomq-connect-" + sink_key + "-dead-letter");
  // Committing past a dead-lettered record is only safe once it is durably in the topic.
  conf.set("enable.idempotence", "true");
  conf.set("acks", "all");
  conf.set("linger.ms", "5");
  // A record not acknowledged by then fails its attempt (send() retries it, so it is not kept
  // queued for librdkafka's default of 5 minutes and then written twice).
  conf.set("message.timeout.ms", "10000");
  if (!conf.error().empty()) {
    error = "dead-letter producer: " + conf.error();
    return nullptr;
  }
  rd_kafka_conf_set_dr_msg_cb(conf.get(), delivery_report);
  std::unique_ptr<DeadLetterProducer> p(new DeadLetterProducer());
  p->LoggedClient::log_prefix = std::move(log_prefix) + " dead-letter producer";
  route_client_logs(conf.get(), p.get());
  p->rk_ = conf.create(RD_KAFKA_PRODUCER);
  if (!p->rk_) {
    error = "dead-letter producer: " + conf.error();
    return nullptr;
  }
  p->topic_ = std::move(topic);
  p->sink_key_ = std::move(sink_key);
  return p;
}

DeadLetterProducer::~DeadLetterProducer() {
  if (!rk_) return;
  rd_kafka_flush(rk_, 5000);
  rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(rk_, 0);  // serves the purged records' reports, which free their slots
  rd_kafka_destroy(rk_);
}

bool DeadLetterProducer::send(const PreparedJob& job, const std::vector<BadRecord>& bad, std::string& error) {
  std::vector<std::shared_ptr<Slot>> slots;
  slots.reserve(bad.size());
  const std::string now = utc_now_rfc3339();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<pmq_header> original;
  for (const auto& b : bad) {
    const ConsumedRecord m = job.records->at(b.index);
    original.clear();
    job.records->headers(b.index, original);
    rd_kafka_headers_t* headers = rd_kafka_headers_new(original.size() + 8);
    for (const auto& h : original)
      rd_kafka_header_add(headers, reinterpret_cast<const char*>(h.name.data), static_cast<ssize_t>(h.name.size),
                          h.value.data, h.value.data ? static_cast<ssize_t>(h.value.size) : 0);
    auto add = [&](const char* name, const std::string& value) {
      rd_kafka_header_add(headers, name, -1, value.data(), static_cast<ssize_t>(value.size()));
    };
    const int64_t timestamp = m.timestamp_ms;
    add("pico_error_stage", std::string(to_string(b.stage)));
    add("pico_error_reason", b.reason);
    add("pico_error_sink", sink_key_);
    add("pico_error_topic", job.tp.topic);
    add("pico_error_partition", std::to_string(job.tp.partition));
    add("pico_error_offset", std::to_string(m.offset));
    add("pico_error_timestamp", std::to_string(timestamp));
    add("pico_error_time", now);
    if (extra_headers)
      for (const auto& [name, value] : extra_headers(job, b.index)) add(name.c_str(), value);

    auto* opaque = new std::shared_ptr<Slot>(std::make_shared<Slot>());
    slots.push_back(*opaque);
    for (;;) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          rk_, RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(m.key.data, m.key.size), RD_KAFKA_V_VALUE(const_cast<uint8_t*>(m.value.data), m.value.size),
          RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(opaque),
          RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;  // the producer owns the headers now
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && std::chrono::steady_clock::now() < deadline) {
        rd_kafka_poll(rk_, 10);
        continue;
      }
      rd_kafka_headers_destroy(headers);
      delete opaque;
      slots.pop_back();
      error = "cannot produce to dead-letter topic '" + topic_ + "': " + rd_kafka_err2str(err);
      rd_kafka_flush(rk_, timeout_ms);  // let what was queued finish before the caller retries
      return false;
    }
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  rd_kafka_flush(rk_, static_cast<int>(std::max<int64_t>(left.count(), 100)));
  for (size_t i = 0; i < slots.size(); ++i) {
    std::string what;
    if (!slots[i]->done) what = "not confirmed by the broker within " + std::to_string(timeout_ms) + " ms";
    else if (slots[i]->err) what = rd_kafka_err2str(slots[i]->err);
    else continue;
    error = "dead-letter write of " + job.tp.to_string() + " offset " +
            std::to_string(job.records->at(bad[i].index).offset) + " to '" + topic_ + "' failed: " + what;
    return false;
  }
  return true;
}

}  // namespace picomq::runtime::kafka
