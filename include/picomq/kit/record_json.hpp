#pragma once
// Records as JSON documents: the one rendering every document sink shares (stdout, HTTP,
// Elasticsearch, MongoDB, Meilisearch, Quickwit, SurrealDB...), on their hot path, so it copies
// the payload's bytes instead of parsing them.
//
// Layouts (docs/destinations.md, "Records as JSON"):
//   Envelope     {"pico_topic":"t","pico_partition":0,"pico_offset":7,"pico_timestamp":1700000000000,
//                 "pico_key":"a2V5","pico_headers":{...},"payload":<payload>}
//   Flat         the payload object's own fields with the pico_* fields in front of them:
//                 {"pico_topic":"t",...,"id":1,"amount":2.5}; a payload that is not a JSON object
//                 (an array, a scalar, text, raw bytes, a tombstone) goes under "payload" as in
//                 Envelope, so no record is ever dropped. A payload field named like a pico_*
//                 field then appears twice in the object; most readers keep the last (the payload's).
//   PayloadOnly  <payload> alone.
// Payload rendering: a json payload as it arrived (with one_line, CR and LF in its whitespace
// become spaces — valid JSON has them nowhere else — so a document is one NDJSON line); text a
// JSON string; raw bytes a base64 string; a tombstone null. Keys: base64 (JSON has no bytes), or
// with KeyRendering::Text the key as a string when it is valid UTF-8 and base64 otherwise (the
// headers' rule). Headers: the pico_headers object of picomq/kit/headers.hpp. A batch of changes
// (ABI 2.8, docs/changes.md) adds "pico_op" ("upsert" | "patch" | "delete" | "truncate") and "pico_row_key"
// (the row's key object) after the headers: an append-only destination keeps the operation as data.
#include <optional>
#include <string>
#include <string_view>

#include "picomq/sink_abi.h"

namespace picomq::kit {

enum class JsonLayout { Envelope, Flat, PayloadOnly };
enum class KeyRendering { Base64, Text };

struct RecordJsonOptions {
  JsonLayout layout = JsonLayout::Envelope;
  bool include_key = true;      // pico_key (when the record has a key)
  bool include_headers = true;  // pico_headers (when the record has headers)
  KeyRendering key = KeyRendering::Base64;
  bool one_line = true;  // CR/LF of a json payload's whitespace become spaces
  std::string_view payload_field = "payload";
};

class RecordJsonWriter;

// A writer bound to one batch: the batch's part of the metadata (topic and partition, escaped)
// rendered once, so each record costs only its own fields. What a sink's write_batch uses:
//   auto json = writer.begin(batch.raw());
//   for (const auto& r : batch) { json.append(out, r.raw()); out += '\n'; }
class BatchJsonWriter {
 public:
  void append(std::string& out, const pmq_record& r) const;
  const pmq_batch& batch() const { return *batch_; }

 private:
  friend class RecordJsonWriter;
  BatchJsonWriter(const RecordJsonWriter& writer, const pmq_batch& batch);
  void append_metadata(std::string& out, const pmq_record& r) const;
  const RecordJsonWriter* writer_;
  const pmq_batch* batch_;
  std::string prefix_;  // "pico_topic":"...","pico_partition":N,"pico_offset":
};

class RecordJsonWriter {
 public:
  explicit RecordJsonWriter(RecordJsonOptions options = {}) : options_(options) {}

  BatchJsonWriter begin(const pmq_batch& batch) const { return BatchJsonWriter(*this, batch); }
  // Appends record `r` of `batch` as one JSON value (no trailing newline). For many records of
  // one batch, begin() is cheaper.
  void append(std::string& out, const pmq_batch& batch, const pmq_record& r) const {
    if (options_.layout == JsonLayout::PayloadOnly) append_payload(out, batch, r);
    else begin(batch).append(out, r);
  }
  // Appends just the payload rendering (json as is, text as a string, raw as base64, null).
  void append_payload(std::string& out, const pmq_batch& batch, const pmq_record& r) const;

  const RecordJsonOptions& options() const { return options_; }

 private:
  friend class BatchJsonWriter;
  RecordJsonOptions options_;
};

// The tail of a JSON object's text after its '{' when `payload` is one ("{" + ws + ...), with a
// flag telling whether it has no members: what the Flat layout splices metadata in front of.
// nullopt when the text is not an object.
struct ObjectBody {
  std::string_view members;  // from the first member to the closing '}' included
  bool empty;
};
std::optional<ObjectBody> json_object_body(std::string_view payload);

// Puts `member` (`"name":value`, JSON text) first in the JSON object whose text starts at
// out[start], after any whitespace a payload kept: {"pico_id":"t-0-1","a":1}, {"pico_id":"t-0-2"}.
// What the document sinks that carry an id field inside the document use (Meilisearch, Quickwit).
// False, and `out` untouched, when no object starts there.
bool insert_first_member(std::string& out, size_t start, std::string_view member);

}  // namespace picomq::kit
