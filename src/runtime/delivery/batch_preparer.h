#pragma once
// Turns consumed records into the batch a sink is handed (pure: no Kafka, no plugin): decodes
// each payload per the block's schema, runs the transform chain, and sorts out the records that
// do not go to the sink — dropped by a filter (counted), bad (the block's policy), or, under
// `fail`, the bad record the batch stops at — and says where the committed offset may go.
#include <memory>
#include <string>

#include "config/sink_definition.h"
#include "decoders/payload_decoder.h"
#include "picomq/kit/arrow_export.hpp"
#include "runtime/delivery/job.h"
#include "transform/chain.h"

namespace picomq::runtime {

class BatchPreparer {
 public:
  struct Settings {
    config::Schema schema = config::Schema::Json;
    config::BadRecordPolicy on_bad_record = config::BadRecordPolicy::Fail;
    uint32_t block_index = 0;
    // Set for arrow-plane sinks: prepared batches are exported with these options too.
    const arrow::ExportOptions* arrow_export = nullptr;
  };
  // `transforms` may be null (no [[transforms]]) and must outlive the preparer; it is shared,
  // the decoder is this preparer's own (decoders keep parser state).
  BatchPreparer(Settings settings, std::unique_ptr<decoders::PayloadDecoder> decoder,
                const transform::Chain* transforms);

  // `wants_headers`: whether anyone reads headers (the sink or the transforms); librdkafka
  // parses them on request only, about a tenth of the per-record work.
  PreparedBatch prepare(const TopicPartition& tp, const ConsumedRecords& records, bool wants_headers);

 private:
  Settings settings_;
  std::string schema_name_;
  std::unique_ptr<decoders::PayloadDecoder> decoder_;
  const transform::Chain* transforms_;
};

}  // namespace picomq::runtime
