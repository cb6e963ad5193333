#pragma once
// The records of one batch as consumed, before decoding: what the preparer reads and what a
// dead letter carries. At run time librdkafka's messages, or a copy of them for a batch that
// waits (kafka/kafka_records.h), owning the bytes the decoded batch points into; in tests, plain
// vectors.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::runtime {

struct ConsumedRecord {
  int64_t offset = 0;
  int64_t timestamp_ms = -1;
  pmq_bytes key{nullptr, 0};    // data == nullptr: no key
  pmq_bytes value{nullptr, 0};  // data == nullptr: tombstone
};

class ConsumedRecords {
 public:
  virtual ~ConsumedRecords() = default;
  virtual size_t size() const = 0;
  virtual ConsumedRecord at(size_t index) const = 0;
  // Appends record `index`'s headers, in order, viewing storage these records own.
  virtual void headers(size_t index, std::vector<pmq_header>& out) const = 0;

  bool empty() const { return size() == 0; }
  int64_t first_offset() const { return at(0).offset; }
  int64_t last_offset() const { return at(size() - 1).offset; }
  // The index of the record at `offset`, or size() when there is none.
  size_t index_of(int64_t offset) const {
    size_t lo = 0, hi = size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (at(mid).offset < offset) lo = mid + 1;
      else hi = mid;
    }
    return lo < size() && at(lo).offset == offset ? lo : size();
  }
};

}  // namespace picomq::runtime
