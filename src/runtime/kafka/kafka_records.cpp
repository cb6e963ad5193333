#include "runtime/kafka/kafka_records.h"

#include <stdexcept>

namespace picomq::runtime::kafka {
namespace {

rd_kafka_headers_t* headers_of(rd_kafka_message_t* m) {
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return nullptr;
  return hdrs;
}

}  // namespace

CopiedRecords::CopiedRecords(std::vector<MessagePtr> messages) {
  // One pass to size the block (a record batch is far below 4 GiB: the broker's message.max.bytes
  // and the runtime's buffer bound it), one to copy.
  size_t total = 0, header_count = 0;
  for (const auto& m : messages) {
    total += message_bytes(m.get());
    if (rd_kafka_headers_t* hdrs = headers_of(m.get())) {
      const char* name;
      const void* value;
      size_t size;
      for (size_t h = 0; rd_kafka_header_get_all(hdrs, h, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++h) {
        total += std::strlen(name) + (value ? size : 0);
        ++header_count;
      }
    }
  }
  if (total >= kAbsent) throw std::length_error("a batch of records over 4 GiB");
  data_ = std::make_unique_for_overwrite<uint8_t[]>(total ? total : 1);
  records_.reserve(messages.size());
  headers_.reserve(header_count);
  uint32_t used = 0;
  auto copy = [&](const void* bytes, size_t size) {
    const Span s{used, static_cast<uint32_t>(size)};
    if (size) std::memcpy(data_.get() + used, bytes, size);
    used += static_cast<uint32_t>(size);
    return s;
  };
  for (const auto& m : messages) {
    Record r{};
    r.offset = m->offset;
    rd_kafka_timestamp_type_t type;
    r.timestamp_ms = rd_kafka_message_timestamp(m.get(), &type);
    r.key = m->key ? copy(m->key, m->key_len) : Span{};
    r.value = m->payload ? copy(m->payload, m->len) : Span{};
    r.first_header = static_cast<uint32_t>(headers_.size());
    if (rd_kafka_headers_t* hdrs = headers_of(m.get())) {
      const char* name;
      const void* value;
      size_t size;
      for (size_t h = 0; rd_kafka_header_get_all(hdrs, h, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++h)
        headers_.push_back({copy(name, std::strlen(name)), value ? copy(value, size) : Span{}});
    }
    r.header_count = static_cast<uint32_t>(headers_.size()) - r.first_header;
    records_.push_back(r);
  }
  messages.clear();  // freed now, not when the caller's moved-from vector goes
}

}  // namespace picomq::runtime::kafka
