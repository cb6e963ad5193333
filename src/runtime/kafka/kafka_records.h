#pragma once
// A batch's records as librdkafka's messages (KafkaRecords), or copied out of them into one block
// of their own, the messages freed at once (CopiedRecords). A message held until its batch is
// written costs far more than its bytes — librdkafka's op around it and the fetch response it
// points into, which stays allocated while any of its messages lives: ~300 B a record beside its
// payload — but copying costs CPU on the path where batches are written at once (the stdout
// benchmark: 0.81x the records per CPU-second when every batch was copied). So the pipeline copies
// only batches that will wait behind others (block_pipeline.cpp, enqueue).
#include <librdkafka/rdkafka.h>

#include <cstring>
#include <limits>
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

class CopiedRecords final : public ConsumedRecords {
 public:
  // A copy of `source` (KafkaRecords: their messages can be freed as soon as this returns).
  explicit CopiedRecords(const ConsumedRecords& source);
  size_t size() const override { return records_.size(); }
  ConsumedRecord at(size_t i) const override {
    const Record& c = records_[i];
    ConsumedRecord r;
    r.offset = c.offset;
    r.timestamp_ms = c.timestamp_ms;
    r.key = view(c.key);
    r.value = view(c.value);
    return r;
  }
  void headers(size_t i, std::vector<pmq_header>& out) const override {
    const Record& c = records_[i];
    for (uint32_t h = c.first_header; h < c.first_header + c.header_count; ++h)
      out.push_back({view(headers_[h].name), view(headers_[h].value)});
  }

 private:
  static constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();
  struct Span {  // bytes of data_; size kAbsent: none (no key, a tombstone, a header without value)
    uint32_t at = 0, size = kAbsent;
  };
  struct Record {
    int64_t offset;
    int64_t timestamp_ms;
    Span key, value;
    uint32_t first_header, header_count;
  };
  struct Header {
    Span name, value;
  };
  pmq_bytes view(Span s) const {
    if (s.size == kAbsent) return {nullptr, 0};
    return {data_.get() + s.at, s.size};
  }

  std::vector<Record> records_;
  std::vector<Header> headers_;
  std::unique_ptr<uint8_t[]> data_;
};

}  // namespace picomq::runtime::kafka
