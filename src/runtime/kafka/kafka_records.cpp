#include "runtime/kafka/kafka_records.h"

#include <stdexcept>

namespace picomq::runtime::kafka {

CopiedRecords::CopiedRecords(const ConsumedRecords& source) {
  // One pass to size the block (a record batch is far below 4 GiB: the broker's message.max.bytes
  // and the runtime's buffer bound it), one to copy.
  std::vector<pmq_header> hdrs;
  size_t total = 0, header_count = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    const ConsumedRecord r = source.at(i);
    total += r.key.size + r.value.size;
    hdrs.clear();
    source.headers(i, hdrs);
    for (const pmq_header& h : hdrs) total += h.name.size + h.value.size;
    header_count += hdrs.size();
  }
  if (total >= kAbsent) throw std::length_error("a batch of records over 4 GiB");
  data_ = std::make_unique_for_overwrite<uint8_t[]>(total ? total : 1);
  records_.reserve(source.size());
  headers_.reserve(header_count);
  uint32_t used = 0;
  auto copy = [&](const pmq_bytes& b) {
    if (!b.data) return Span{};  // absent stays absent (no key, a tombstone, a header without value)
    const Span s{used, static_cast<uint32_t>(b.size)};
    if (b.size) std::memcpy(data_.get() + used, b.data, b.size);
    used += static_cast<uint32_t>(b.size);
    return s;
  };
  for (size_t i = 0; i < source.size(); ++i) {
    const ConsumedRecord c = source.at(i);
    Record r{};
    r.offset = c.offset;
    r.timestamp_ms = c.timestamp_ms;
    r.key = copy(c.key);
    r.value = copy(c.value);
    r.first_header = static_cast<uint32_t>(headers_.size());
    hdrs.clear();
    source.headers(i, hdrs);
    for (const pmq_header& h : hdrs) headers_.push_back({copy(h.name), copy(h.value)});
    r.header_count = static_cast<uint32_t>(hdrs.size());
    records_.push_back(r);
  }
}

}  // namespace picomq::runtime::kafka
