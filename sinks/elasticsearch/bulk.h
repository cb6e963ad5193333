#pragma once
// The _bulk request body of a batch (pure, no I/O): which record becomes which action (index,
// create, delete), which is refused before it is sent (and why), and each item's two NDJSON lines
//   {"index":{"_index":"orders","_id":"shop.orders:0:42"}}
//   {"pico_topic":"shop.orders",...,"id":7}
// rendered straight into the body by the kit's record JSON writer. The items of a body are sent in
// order, so the n-th item of the response is the n-th item of the request.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elasticsearch/config.h"
#include "picomq/kit/record_json.hpp"
#include "picomq/sink_abi.h"

namespace picomq::elasticsearch {

enum class Op { Index, Create, Delete };
std::string_view to_string(Op op);

struct Item {
  size_t record;  // index in the batch
  Op op;
};

struct BatchPlan {
  std::vector<Item> items;                              // in record order
  std::vector<std::pair<size_t, std::string>> refused;  // record index, reason
  size_t skipped = 0;                                   // tombstones skipped
};

// The longest _id Elasticsearch and OpenSearch take (bytes).
inline constexpr size_t kMaxIdBytes = 512;

class BulkEncoder {
 public:
  BulkEncoder(const Settings& settings, std::vector<std::string> routing_path);

  BatchPlan plan(const pmq_batch& batch) const;

  // One batch's renderer: the batch's part of the action line rendered once.
  class ForBatch {
   public:
    // Appends the item's action line and document line (a delete: the action line alone).
    void append(std::string& out, const Item& item) const;

   private:
    friend class BulkEncoder;
    ForBatch(const BulkEncoder& encoder, const pmq_batch& batch, std::string_view index);
    const BulkEncoder* encoder_;
    const pmq_batch* batch_;
    kit::BatchJsonWriter json_;
    std::string index_;      // "_index":"name"
    std::string id_prefix_;  // ,"_id":"topic:partition:   (id = record)
  };
  ForBatch begin(const pmq_batch& batch, std::string_view index) const { return ForBatch(*this, batch, index); }

 private:
  void append_routing(std::string& out, const pmq_batch& batch, const pmq_record& r) const;
  Settings settings_;
  std::vector<std::string> routing_path_;
  kit::RecordJsonWriter writer_;
};

}  // namespace picomq::elasticsearch
