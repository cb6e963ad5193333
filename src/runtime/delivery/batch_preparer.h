#pragma once
// Turns consumed records into the batch a sink is handed (pure: no Kafka, no plugin): decodes
// each payload per the block's schema (and each key per [topics.key]), reads change events
// (`changes`, docs/changes.md), runs the transform chain, and sorts out the records that
// do not go to the sink — dropped by a filter (counted), bad (the block's policy), or, under
// `fail`, the bad record the batch stops at — and says where the committed offset may go.
#include <memory>
#include <string>

#include "config/sink_definition.h"
#include "decoders/change_events.h"
#include "decoders/payload_decoder.h"
#include "picomq/kit/arrow_export.hpp"
#include "runtime/delivery/job.h"
#include "transform/chain.h"

namespace picomq::runtime {

class Tap;

// How an arrow-plane sink's batches of `block` are exported: its declared columns (none: inferred
// from each batch), and JSON payloads taken as validated (the json decoder parsed each; other
// decoders and transforms write JSON themselves).
arrow::ExportOptions arrow_export_options(const config::TopicsBlock& block);

class BatchPreparer {
 public:
  struct Settings {
    config::Schema schema = config::Schema::Json;
    config::BadRecordPolicy on_bad_record = config::BadRecordPolicy::Fail;
    uint32_t block_index = 0;
    // Set for arrow-plane sinks: prepared batches are exported with these options too.
    const arrow::ExportOptions* arrow_export = nullptr;
    // The block's `changes` and key_fields, and the change operations the sink applies (ABI 2.8
    // change_ops): a truncate it does not apply is a bad record of its stage.
    config::ChangeEvents changes = config::ChangeEvents::None;
    std::vector<std::string> key_fields{};
    uint32_t change_ops = 0;
    // The sink's tap (runtime/tap.h): records after decoding and after the transforms are offered
    // to it while it is armed. May be null.
    Tap* tap = nullptr;
  };
  // `transforms` may be null (no [[transforms]]) and must outlive the preparer; it is shared,
  // the decoders are this preparer's own (decoders keep parser state). `key_decoder`: null when
  // keys stay bytes (no [topics.key]).
  BatchPreparer(Settings settings, std::unique_ptr<decoders::PayloadDecoder> decoder,
                std::unique_ptr<decoders::PayloadDecoder> key_decoder, const transform::Chain* transforms);

  // `wants_headers`: whether anyone reads headers (the sink or the transforms); librdkafka
  // parses them on request only, about a tenth of the per-record work.
  PreparedBatch prepare(const TopicPartition& tp, const ConsumedRecords& records, bool wants_headers);

 private:
  Settings settings_;
  std::string schema_name_;
  std::unique_ptr<decoders::PayloadDecoder> decoder_;
  std::unique_ptr<decoders::PayloadDecoder> key_decoder_;
  std::unique_ptr<decoders::ChangeReader> changes_;  // null without `changes`
  const transform::Chain* transforms_;
};

}  // namespace picomq::runtime
