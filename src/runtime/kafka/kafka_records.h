#pragma once
// A batch's records as librdkafka's messages: they own the bytes the decoded batch points
// into, and free them when the job is done.
#include <librdkafka/rdkafka.h>

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/delivery/consumed_records.h"

namespace picomq::runtime::kafka {

struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

inline size_t message_bytes(const rd_kafka_message_t* m) { return m->len + m->key_len; }

class KafkaRecords final : public ConsumedRecords {
 public:
  explicit KafkaRecords(std::vector<MessagePtr> messages) : messages_(std::move(messages)) {}
  size_t size() const override { return messages_.size(); }
  ConsumedRecord at(size_t i) const override {
    const rd_kafka_message_t* m = messages_[i].get();
    ConsumedRecord r;
    r.offset = m->offset;
    rd_kafka_timestamp_type_t type;
    r.timestamp_ms = rd_kafka_message_timestamp(m, &type);
    if (m->key) r.key = {static_cast<const uint8_t*>(m->key), m->key_len};
    if (m->payload) r.value = {static_cast<const uint8_t*>(m->payload), m->len};
    return r;
  }
  void headers(size_t i, std::vector<pmq_header>& out) const override {
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(messages_[i].get(), &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR || !hdrs) return;
    const char* name;
    const void* value;
    size_t size;
    for (size_t h = 0; rd_kafka_header_get_all(hdrs, h, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++h)
      out.push_back({{reinterpret_cast<const uint8_t*>(name), std::strlen(name)},
                     {static_cast<const uint8_t*>(value), value ? size : 0}});
  }

 private:
  std::vector<MessagePtr> messages_;
};

}  // namespace picomq::runtime::kafka
