#pragma once
// The _bulk request body of a batch (pure, no I/O): which record becomes which action (index,
// create, delete), which is refused before it is sent (and why), and each item's two NDJSON lines
//   {"index":{"_index":"orders","_id":"shop.orders:0:42"}}
//   {"pico_topic":"shop.orders",...,"id":7}
// rendered straight into the body by the kit's record JSON writer. The items of a body are sent in
// order, so the n-th item of the response is the n-th item of the request.
//
// A batch of change events (docs/changes.md, docs/sinks/elasticsearch.md "Change events") names
// each document by its row's key (change_document_id): an upsert is an `index` of the whole
// document, a delete a `delete`, a patch an `update` {"doc": ..., "doc_as_upsert": true}, and a
// truncate an item of its own (Op::Truncate) that the sink runs as _delete_by_query between the
// _bulk requests of the rows before and after it.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elasticsearch/config.h"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/result.hpp"
#include "picomq/sink_abi.h"

namespace picomq::elasticsearch {

enum class Op { Index, Create, Delete, Update, Truncate };
std::string_view to_string(Op op);

struct Item {
  size_t record;  // index in the batch
  Op op;
  std::string id;  // change events: the document _id from the row's key (empty otherwise)
};

struct BatchPlan {
  bool changes = false;                                 // the batch is one of change events
  std::vector<Item> items;                              // in record order
  std::vector<std::pair<size_t, std::string>> refused;  // record index, reason
  size_t skipped = 0;                                   // tombstones skipped
};

// The longest _id Elasticsearch and OpenSearch take (bytes).
inline constexpr size_t kMaxIdBytes = 512;

// The document _id of a change event's row key (a JSON object, pmq_record_key_json): a key of one
// field is that field's value as text ({"id":7} -> 7, {"sku":"a-1"} -> a-1; a value that is not a
// string as its compact JSON), a key of several fields the compact JSON of the whole key object,
// its fields in key order ({"order_id":1,"line":2} -> {"order_id":1,"line":2}): JSON texts cannot
// collide, and equal keys are equal texts. An error when the key is not a non-empty object, or the
// _id would be empty or longer than kMaxIdBytes.
kit::Result<std::string> change_document_id(std::string_view key_json);

class BulkEncoder {
 public:
  BulkEncoder(const Settings& settings, std::vector<std::string> routing_path);

  // What each record of the batch becomes; a batch of change events by its records' ops.
  BatchPlan plan(const pmq_batch& batch) const;

  // One batch's renderer: the batch's part of the action line rendered once.
  class ForBatch {
   public:
    // Appends the item's action line and document line (a delete: the action line alone; an
    // update: {"doc": <document>, "doc_as_upsert": true}; a truncate: nothing, it is no bulk item).
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
  BatchPlan plan_changes(const pmq_batch& batch) const;
  void append_routing(std::string& out, const pmq_batch& batch, const pmq_record& r) const;
  Settings settings_;
  std::vector<std::string> routing_path_;
  kit::RecordJsonWriter writer_;
};

}  // namespace picomq::elasticsearch
