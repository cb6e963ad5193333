#include "quickwit/answers.h"

#include <simdjson.h>

#include <unordered_map>

namespace picomq::quickwit {

std::optional<IngestAnswer> read_ingest_answer(std::string_view body, std::string_view sent, size_t lines) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
    return std::nullopt;
  IngestAnswer out;
  if (root["num_rejected_docs"].get_uint64().get(out.rejected)) out.rejected = 0;
  if (root["num_ingested_docs"].get_uint64().get(out.ingested)) out.ingested = lines;
  simdjson::dom::array failures;
  if (out.rejected == 0 || root["parse_failures"].get_array().get(failures)) return out;
  // The lines sent, in order: line k is the request's item k.
  std::unordered_multimap<std::string_view, size_t> by_text;
  size_t from = 0;
  for (size_t k = 0; k < lines && from <= sent.size(); ++k) {
    const size_t nl = sent.find('\n', from);
    by_text.emplace(sent.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from), k);
    if (nl == std::string_view::npos) break;
    from = nl + 1;
  }
  for (simdjson::dom::element f : failures) {
    std::string_view document, message, reason;
    if (f["document"].get_string().get(document)) continue;
    if (f["message"].get_string().get(message)) message = "";
    if (f["reason"].get_string().get(reason)) reason = "refused";
    auto it = by_text.find(document);
    if (it == by_text.end()) continue;
    out.failures.emplace_back(it->second, std::string(reason) + ": " + std::string(message));
    by_text.erase(it);
  }
  return out;
}

std::optional<BulkAnswer> read_bulk_answer(std::string_view body, size_t lines) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
    return std::nullopt;
  BulkAnswer out;
  if (root["num_docs_for_processing"].get_uint64().get(out.taken)) out.taken = lines;
  bool errors = false;
  simdjson::dom::array items;
  if (root["errors"].get_bool().get(errors) || !errors || root["items"].get_array().get(items)) return out;
  for (simdjson::dom::element item : items) {
    simdjson::dom::object action;
    if (item.get_object().get(action) || action.begin() == action.end()) continue;
    const simdjson::dom::element result = (*action.begin()).value;
    uint64_t status = 0;
    if (result["status"].get_uint64().get(status) || status < 300) continue;
    std::string_view reason = "(no reason given)";
    if (result["error"]["reason"].get_string().get(reason)) reason = "(no reason given)";
    out.failed_item = {status, std::string(reason)};
    break;
  }
  return out;
}

}  // namespace picomq::quickwit
