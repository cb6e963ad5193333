#pragma once
// The Quickwit sink's reading of Quickwit's answers to a write, without I/O: the ingest API's
// detailed response (documents ingested, rejected, and the parse failures matched to the lines
// sent) and the _elastic/_bulk response (its first failed item, if it lists any).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace picomq::quickwit {

struct IngestAnswer {
  uint64_t ingested = 0;
  uint64_t rejected = 0;
  // (line of the request, "reason: message") of each parse failure whose document is one of the
  // lines sent; each line matched at most once.
  std::vector<std::pair<size_t, std::string>> failures;
};

// The answer to POST .../ingest?detailed_response=true carrying `lines` NDJSON documents (`sent`
// is the body, line k being item k); nullopt when the body is not Quickwit's ingest response.
// Missing counts read as all ingested, none rejected.
std::optional<IngestAnswer> read_ingest_answer(std::string_view body, std::string_view sent, size_t lines);

struct BulkAnswer {
  uint64_t taken = 0;  // num_docs_for_processing (all the request's when absent)
  // The first item an Elasticsearch-shaped answer lists as failed: its status and reason.
  std::optional<std::pair<uint64_t, std::string>> failed_item;
};

// The answer to POST .../_elastic/<index>/_bulk of `lines` documents; nullopt when not a JSON object.
std::optional<BulkAnswer> read_bulk_answer(std::string_view body, size_t lines);

}  // namespace picomq::quickwit
