#pragma once
// The stage between the job queue and the delivery window: each consumed job becomes a prepared
// one (decoded, headers read, transformed, bad records sorted out, Arrow-exported for an
// arrow-plane sink) exactly once, by whichever thread has time:
//  - the consumer thread prepares a job as it queues it while the delivery thread has work
//    waiting (the sink is the bottleneck): prepare_ahead();
//  - otherwise the delivery thread prepares it as it takes it (the consumer is the bottleneck):
//    ready(), which also waits out a record that cannot be decoded for now.
// Decoders keep parser state, so each side has a preparer of its own; the transform chain is
// immutable and shared.
#include <memory>
#include <optional>
#include <string>

#include "decoders/payload_decoder.h"
#include "runtime/delivery/batch_preparer.h"
#include "runtime/delivery/job.h"
#include "runtime/delivery/retry.h"

namespace picomq::runtime {

// A job in the queue between the consumer and the delivery window.
struct QueuedJob {
  Job job;
  std::optional<PreparedBatch> prepared;  // set when the consumer thread prepared it
};

class PreparationStage {
 public:
  struct Settings {
    BatchPreparer::Settings preparer;
    // Whether anyone reads record headers (the sink, or the transforms): librdkafka parses them
    // on request only.
    bool reads_headers = true;
    // Between attempts to decode a record that cannot be decoded for now (the schema registry
    // is down): unlimited attempts, until the block stops.
    RetryPolicy decode_retry{0, std::chrono::milliseconds(200), std::chrono::milliseconds(1600)};
    std::string log_prefix;
  };
  // `transforms` may be null and must outlive the stage; `key_decoders` is null when keys stay
  // bytes; `waiter` ends the decode waits at stop.
  PreparationStage(Settings settings, const decoders::DecoderFactory& decoders,
                   const decoders::DecoderFactory* key_decoders, const transform::Chain* transforms, Waiter& waiter);

  // Consumer thread: prepares `job` now.
  void prepare_ahead(QueuedJob& job);
  // Delivery thread: the job prepared (now, unless the consumer did it). A record that cannot be
  // decoded for now is not a bad record: like an unreachable broker it is waited for, until the
  // decode goes through or the block stops (the prepared batch then holds the records before it
  // and commits up to it, so it is the first one read on restart).
  PreparedJob ready(QueuedJob job);

 private:
  Settings settings_;
  Waiter& waiter_;
  BatchPreparer consumer_side_;
  BatchPreparer delivery_side_;
};

}  // namespace picomq::runtime
