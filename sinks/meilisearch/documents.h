#pragma once
// The Meilisearch sink's encoder: which record of a batch becomes which operation with which
// document id (refused records named with their reason), and the body text of one item — an
// NDJSON document line with the id as the primary key's field, or a JSON string id for
// documents/delete-batch. No I/O.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meilisearch/config.h"
#include "picomq/kit/record_json.hpp"
#include "picomq/sink_abi.h"

namespace picomq::meilisearch {

struct Item {
  size_t record;   // index in the batch
  bool del;        // a tombstone deleted by id (tombstones = delete)
  std::string id;  // [A-Za-z0-9_-]; empty with id = field (the payload carries it)
};

struct DocumentPlan {
  std::vector<Item> items;                              // in record order
  std::vector<std::pair<size_t, std::string>> refused;  // (record, why), for the bad-record policy
  size_t skipped_tombstones = 0;
};

DocumentPlan plan_documents(const Settings& s, const pmq_batch& batch);

// Appends `item`'s text: with an id, {"<primary_key>":"<id>", ...the record's document...}\n;
// without, the document line as `json` writes it; a deletion, "<id>" (an array element).
void render_item(std::string& out, const Item& item, const kit::BatchJsonWriter& json, const pmq_batch& batch,
                 std::string_view primary_key);

}  // namespace picomq::meilisearch
