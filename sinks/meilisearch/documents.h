#pragma once
// The Meilisearch sink's encoder: which record of a batch becomes which operation with which
// document id (refused records named with their reason), and the body text of one item — an
// NDJSON document line with the id as the primary key's field, or a JSON string id for
// documents/delete-batch. A batch of change events (docs/changes.md) names each document by its
// row's key (change_document_id). No I/O.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meilisearch/config.h"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/result.hpp"
#include "picomq/sink_abi.h"

namespace picomq::meilisearch {

// What an item does; also the sink's request form for a run of them.
enum class Op : uint32_t {
  Write = 0,     // the document sent (POST replaces it, PUT with method = update merges it)
  Delete = 1,    // deleted by id (documents/delete-batch): a tombstone, a change's delete
  Patch = 2,     // a change's patch: PUT, its fields merged into the document (added when missing)
  Truncate = 3,  // a change's truncate: DELETE /indexes/{uid}/documents (no body)
};

struct Item {
  size_t record;   // index in the batch
  Op op;           // Write, or Delete for a tombstone (tombstones = delete); any under changes
  std::string id;  // [A-Za-z0-9_-]; empty with id = field (the payload carries it) and for a truncate
};

struct DocumentPlan {
  std::vector<Item> items;                              // in record order
  std::vector<std::pair<size_t, std::string>> refused;  // (record, why), for the bad-record policy
  size_t skipped_tombstones = 0;
};

// A batch of change events (pmq_batch_has_changes) is planned by its records' operations:
// upsert -> Write, patch -> Patch, delete -> Delete, truncate -> Truncate, ids from the row's key.
DocumentPlan plan_documents(const Settings& s, const pmq_batch& batch);

// The document id of a change's row key (a JSON object, docs/changes.md): one field, its value's
// text (a string as it is, another value as its JSON: {"id":7} -> 7); several fields, the key
// object's compact JSON ({"order_id":1,"line":2}); then in the kit's reversible [A-Za-z0-9_-]
// encoding (every byte outside [A-Za-z0-9-], '_' included, becomes '_' and two hex digits:
// a-1 -> a-1, a_1 -> a_5F1, {"order_id":1,"line":2} -> _7B_22order_5Fid_22_3A1_2C_22line_22_3A2_7D).
// A failure (no key, not an object, empty, longer than 511 bytes encoded) says why.
kit::Result<std::string> change_document_id(std::string_view key_json);

// Appends `item`'s text: with an id, {"<primary_key>":"<id>", ...the record's document...}\n;
// without, the document line as `json` writes it; a deletion, "<id>" (an array element).
void render_item(std::string& out, const Item& item, const kit::BatchJsonWriter& json, const pmq_batch& batch,
                 std::string_view primary_key);

}  // namespace picomq::meilisearch
