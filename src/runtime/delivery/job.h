#pragma once
// One batch on its way from the buckets to the sink: the consumed records, and once prepared
// (decoded, transformed, bad records sorted out) what the sink is handed and where the
// committed offset may go.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/bucketer.h"
#include "runtime/decoded_batch.h"
#include "runtime/delivery/consumed_records.h"

namespace picomq::runtime {

// Where in the pipeline a record went bad.
enum class BadRecordStage { Decode, Transform, Sink };
std::string_view to_string(BadRecordStage stage);  // "decode" | "transform" | "sink"

// A record the bad-record policy (skip / dead_letter) takes care of instead of the sink.
struct BadRecord {
  size_t index;  // in the job's records
  BadRecordStage stage;
  std::string reason;
};

struct PreparedBatch {
  DecodedBatch batch;   // what the sink gets
  std::string failure;  // `fail` policy: the record the batch stops at (the batch holds those before it)
  BadRecordStage failure_stage = BadRecordStage::Decode;  // where that record went bad
  std::vector<BadRecord> bad;  // other policies: records left out of the batch, in offset order
  size_t filtered = 0;         // records a transform dropped
  std::string retry_error;     // a record cannot be decoded for now (schema registry): prepare again later
  // Where the committed offset goes once the batch is written and its bad records handled:
  // past the last record, or (failure, retry_error) at the record it stopped at.
  int64_t commit_to = -1;
};

// A batch as the consumer read it, on its way to the preparation stage.
struct Job {
  TopicPartition tp;
  std::unique_ptr<ConsumedRecords> records;
  size_t bytes = 0;  // keys + values, for the buffer limit
  // The partition's read generation when the records were consumed: a rewind (a released
  // write failed, its records are read again) makes every job of an older one stale.
  uint64_t generation = 0;
};

// A job the preparation stage is done with (runtime/delivery/preparation_stage.h): what the
// delivery window takes.
struct PreparedJob : Job {
  PreparedJob() = default;
  PreparedJob(Job job, PreparedBatch prepared) : Job(std::move(job)), out(std::move(prepared)) {}
  PreparedBatch out;
  // The sink released the batch (ABI 2.3): its records are freed and no longer counted in
  // the buffer; `records` only knows their number and first / last offsets.
  bool released = false;
};

// What is left of a released batch's records: how many, and where they started and ended.
class ReleasedRecords final : public ConsumedRecords {
 public:
  explicit ReleasedRecords(const ConsumedRecords& records)
      : size_(records.size()),
        first_(records.empty() ? ConsumedRecord{} : records.at(0)),
        last_offset_(records.empty() ? 0 : records.last_offset()) {
    first_.key = first_.value = pmq_bytes{nullptr, 0};
  }
  size_t size() const override { return size_; }
  // Only the first and the last record are known (offset and timestamp of the first).
  ConsumedRecord at(size_t index) const override {
    ConsumedRecord r = first_;
    if (index > 0) {
      r.offset = last_offset_;
      r.timestamp_ms = -1;
    }
    return r;
  }
  void headers(size_t, std::vector<pmq_header>&) const override {}

 private:
  size_t size_;
  ConsumedRecord first_;
  int64_t last_offset_;
};

}  // namespace picomq::runtime
