#pragma once
// What a _bulk response says about each item (pure, no I/O). A 200 response can carry per-item
// failures: the sink walks every item and decides per item, by the error type the cluster gives
// (the same names on Elasticsearch 7/8/9 and OpenSearch 1/2, except where noted) and, for types it
// does not know, by the item's status:
//
//   2xx                                             Written
//   delete, 404 without an error ("not_found")      Written        already gone
//   version_conflict_engine_exception (409)         AlreadyThere   under create, or external versioning
//                                                                  (the document, or a newer one, is there);
//                                                  Rejected       otherwise
//   mapper_parsing_exception (ES 7, OpenSearch),    Rejected       the document does not fit the index's
//   document_parsing_exception (ES 8.8+),                         mapping, is malformed, or fails a check:
//   strict_dynamic_mapping_exception,                             the bad-record policy decides
//   illegal_argument_exception,
//   action_request_validation_exception,
//   parse_exception, json_parse_exception, x_content_parse_exception,
//   document_source_missing_exception
//   es_rejected_execution_exception (ES),           Retry          the write queue is full / the node is
//   rejected_execution_exception (OpenSearch),                    overloaded, shards are briefly away:
//   circuit_breaking_exception, unavailable_shards_exception,    resend only these items
//   no_shard_available_action_exception, node_not_connected_exception,
//   node_closed_exception, process_cluster_event_timeout_exception,
//   resource_already_exists_exception (an auto-create race), timeout_exception
//   index_not_found_exception, invalid_index_name_exception,  Fatal    the index is gone and cannot be created, its
//   index_closed_exception, cluster_block_exception (403),         name is refused, it is closed or read-only,
//   security_exception,                                             the credentials lack a right,
//   illegal_argument_exception "pipeline with id [p]               the ingest pipeline is missing: configuration
//     does not exist"
//   unknown type: 429 and 5xx Retry; 400, 409, 413, 422 Rejected; anything else Fatal
#include <string>
#include <string_view>
#include <vector>

#include "elasticsearch/bulk.h"
#include "picomq/kit/result.hpp"

namespace picomq::elasticsearch {

struct ItemResult {
  int status = 0;
  std::string result;  // "created", "updated", "deleted", "not_found", ...
  std::string type;    // error type, empty without an error
  std::string reason;  // error reason (and its caused_by), as the cluster wrote it
};

struct BulkResponse {
  bool errors = false;
  std::vector<ItemResult> items;
};

// Parses a _bulk response (the full one or the sink's filter_path subset). `expected` items: a
// response with another count is an error (the sink cannot tell which item is which).
kit::Result<BulkResponse> parse_bulk_response(std::string_view body, size_t expected);

enum class ItemOutcome { Written, AlreadyThere, Rejected, Retry, Fatal };
std::string_view to_string(ItemOutcome o);

// The outcome of one item; `reason` gets the text for the user ("mapper_parsing_exception: ...").
ItemOutcome classify_item(const ItemResult& item, Op op, bool external_versions, std::string* reason);

}  // namespace picomq::elasticsearch
