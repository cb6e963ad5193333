#pragma once
// A batch's records copied out of librdkafka's messages into one block of their own, the
// messages freed at once. A message held until its batch is written costs far more than its
// bytes: librdkafka's op around it and the fetch response it points into, which stays allocated
// while any of its messages lives — ~1 KB a record of 200 B held by a slow sink, against ~40 B
// here (bench/README.md, "Memory per record held").
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
  // Takes the messages and frees them once copied.
  explicit KafkaRecords(std::vector<MessagePtr> messages);
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
