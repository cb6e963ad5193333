#include "elasticsearch/items.h"

#include <simdjson.h>

#include <array>
#include <utility>

namespace picomq::elasticsearch {
namespace {

// The error types of the table in items.h, by outcome. Types not listed go by status.
constexpr std::array kRejectedTypes{
    std::string_view("mapper_parsing_exception"),
    std::string_view("document_parsing_exception"),
    std::string_view("strict_dynamic_mapping_exception"),
    std::string_view("illegal_argument_exception"),
    std::string_view("action_request_validation_exception"),
    std::string_view("parse_exception"),
    std::string_view("json_parse_exception"),
    std::string_view("x_content_parse_exception"),
    std::string_view("document_source_missing_exception"),
};
constexpr std::array kRetryTypes{
    std::string_view("es_rejected_execution_exception"),
    std::string_view("rejected_execution_exception"),
    std::string_view("circuit_breaking_exception"),
    std::string_view("unavailable_shards_exception"),
    std::string_view("no_shard_available_action_exception"),
    std::string_view("node_not_connected_exception"),
    std::string_view("node_closed_exception"),
    std::string_view("process_cluster_event_timeout_exception"),
    std::string_view("resource_already_exists_exception"),
    std::string_view("timeout_exception"),
};
constexpr std::array kFatalTypes{
    std::string_view("index_not_found_exception"), std::string_view("invalid_index_name_exception"),
    std::string_view("index_closed_exception"),    std::string_view("cluster_block_exception"),
    std::string_view("security_exception"),
};

template <size_t N>
bool listed(const std::array<std::string_view, N>& types, std::string_view type) {
  for (auto t : types)
    if (t == type) return true;
  return false;
}

std::string text_of(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get_string().get(v)) return {};
  return std::string(v);
}

}  // namespace

std::string_view to_string(ItemOutcome o) {
  switch (o) {
    case ItemOutcome::Written: return "written";
    case ItemOutcome::AlreadyThere: return "already there";
    case ItemOutcome::Rejected: return "rejected";
    case ItemOutcome::Retry: return "retry";
    case ItemOutcome::Fatal: return "fatal";
  }
  return "fatal";
}

kit::Result<BulkResponse> parse_bulk_response(std::string_view body, size_t expected) {
  using R = kit::Result<BulkResponse>;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(body.data(), body.size()).get(root))
    return R::failure(std::string("the _bulk response is not JSON: ") + simdjson::error_message(error));
  BulkResponse out;
  if (root["errors"].get_bool().get(out.errors)) return R::failure("the _bulk response has no `errors` field");
  simdjson::dom::array items;
  if (root["items"].get_array().get(items)) {
    // filter_path drops `items` when no item matched a filter: never, since each has a status.
    return R::failure("the _bulk response has no `items`");
  }
  out.items.reserve(expected);
  for (simdjson::dom::element wrapper : items) {
    simdjson::dom::object obj;
    if (wrapper.get_object().get(obj) || obj.size() != 1)
      return R::failure("a _bulk response item is not {action: {...}}");
    const simdjson::dom::element item = (*obj.begin()).value;
    ItemResult r;
    int64_t status = 0;
    if (item["status"].get_int64().get(status)) return R::failure("a _bulk response item has no status");
    r.status = static_cast<int>(status);
    r.result = text_of(item, "result");
    simdjson::dom::element error;
    if (!item["error"].get(error)) {
      std::string_view plain;
      if (!error.get_string().get(plain)) {
        r.reason = std::string(plain);  // very old clusters: the error as a string
      } else {
        r.type = text_of(error, "type");
        r.reason = text_of(error, "reason");
        simdjson::dom::element cause;
        if (!error["caused_by"].get(cause)) {
          const std::string cause_type = text_of(cause, "type"), cause_reason = text_of(cause, "reason");
          if (!cause_type.empty() || !cause_reason.empty())
            r.reason += " (caused by " + cause_type + (cause_reason.empty() ? "" : ": " + cause_reason) + ")";
        }
      }
    }
    out.items.push_back(std::move(r));
  }
  if (out.items.size() != expected)
    return R::failure("the _bulk response has " + std::to_string(out.items.size()) + " items for " +
                      std::to_string(expected) + " sent");
  return R::success(std::move(out));
}

ItemOutcome classify_item(const ItemResult& item, Op op, bool external_versions, std::string* reason) {
  auto why = [&](std::string text) {
    if (reason) *reason = std::move(text);
  };
  const std::string described = (item.type.empty() ? "status " + std::to_string(item.status) : item.type) +
                                (item.reason.empty() ? "" : ": " + item.reason);
  if (item.status >= 200 && item.status < 300) return ItemOutcome::Written;
  if (op == Op::Delete && item.status == 404 && item.type.empty()) {
    why("already deleted (not_found)");
    return ItemOutcome::Written;
  }
  if (item.type == "version_conflict_engine_exception") {
    why(described);
    if (op == Op::Create || external_versions) return ItemOutcome::AlreadyThere;
    return ItemOutcome::Rejected;
  }
  why(described);
  // The ingest pipeline named by `pipeline` is missing: every item says so, as an
  // illegal_argument_exception (Elasticsearch 7 / 8, OpenSearch 2). Configuration, not a bad record.
  if (item.type == "illegal_argument_exception" && item.reason.starts_with("pipeline with id [") &&
      item.reason.find("] does not exist") != std::string::npos)
    return ItemOutcome::Fatal;
  if (listed(kRejectedTypes, item.type)) return ItemOutcome::Rejected;
  if (listed(kRetryTypes, item.type)) return ItemOutcome::Retry;
  if (listed(kFatalTypes, item.type)) {
    // A flood-stage block is temporary: Elasticsearch 7.x answers it with 429, and it lifts
    // itself once disk is freed.
    if (item.status == 429) return ItemOutcome::Retry;
    return ItemOutcome::Fatal;
  }
  if (item.status == 429 || item.status >= 500) return ItemOutcome::Retry;
  if (item.status == 400 || item.status == 409 || item.status == 413 || item.status == 422)
    return ItemOutcome::Rejected;
  return ItemOutcome::Fatal;
}

}  // namespace picomq::elasticsearch
