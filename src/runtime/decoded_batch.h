#pragma once
// A batch after decoding: the ABI view the plugin receives, plus the storage behind it.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "picomq/kit/arrow_export.hpp"
#include "picomq/sink_abi.h"
#include "runtime/bucketer.h"

namespace picomq::runtime {

struct DecodedBatch {
  TopicPartition tp;
  uint32_t block_index = 0;  // the [[topics]] block it came from
  std::string schema;
  pmq_payload_format format = PMQ_PAYLOAD_RAW;
  bool changes = false;             // the block has `changes`: every record's op is a change (ABI 2.8)
  std::vector<pmq_record> records;  // payload/key/key_json/headers point into broker messages or `owned`
  std::vector<pmq_header> headers;  // all records' headers, records[i].headers points in here
  std::deque<std::string> owned;    // storage for payloads a decoder had to rewrite (stable addresses)
  // avro blocks (ABI 2.4): records[i]'s writer schema text, or null; empty for other schemas.
  // `writer_schema_texts` keeps the distinct texts alive (the registry's cache may drop them).
  std::vector<const char*> writer_schemas;
  std::vector<std::shared_ptr<const std::string>> writer_schema_texts;
  // Arrow-plane sinks: the batch exported as it was prepared, by whichever thread had time; each
  // write (a retry too) hands the sink a copy of it (arrow::lend_export), not a new export.
  std::shared_ptr<const arrow::HeldExport> arrow_export;

  pmq_batch abi_view() const {
    pmq_batch b{};
    b.struct_size = sizeof(pmq_batch);
    b.topic = tp.topic.c_str();
    b.partition = tp.partition;
    b.payload_format = format;
    b.schema = schema.c_str();
    b.records = records.data();
    b.record_count = records.size();
    b.record_size = sizeof(pmq_record);
    b.block_index = block_index;
    b.writer_schemas = writer_schemas.empty() ? nullptr : writer_schemas.data();
    b.changes = changes ? 1 : 0;
    return b;
  }
};

}  // namespace picomq::runtime
