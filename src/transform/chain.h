// The transform chain: a sink definition's [[transforms]] compiled once, applied to each decoded
// record before the plugin sees it (docs/transforms.md).
//
//   picomq::transform::Chain chain(definition.transforms);
//   std::string error;
//   switch (chain.apply(meta, payload_json, error)) {
//     case Verdict::Keep: ...   // payload_json holds the transformed record (rewritten in place
//                               // only when a transform changed it)
//     case Verdict::Drop: ...   // a filter dropped it: skip the record, its offset still counts
//     case Verdict::Fail: ...   // a bad record: `error` says which transform, field and why
//   }
//
// Thread safety: a Chain is immutable once built; apply() and apply_without_payload() are const
// and may run on several threads at once (each call works on its own document).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/transforms_config.h"
#include "picomq/sink_abi.h"

namespace picomq::transform {

// What a transform may read about a record besides its payload.
struct RecordMeta {
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = -1;       // -1: the broker gave none
  std::optional<std::string_view> key;  // raw bytes; nullopt: the record has no key
  std::span<const pmq_header> headers;  // as on the broker; a repeated name: the last one counts
};

// The metadata of an ABI record (topic and partition come from its batch).
RecordMeta record_meta(std::string_view topic, std::int32_t partition, const pmq_record& record);

enum class Verdict { Keep, Drop, Fail };

struct ChainOptions {
  // The clock of now_ms / now_rfc3339, epoch milliseconds; the system clock when empty.
  std::function<std::int64_t()> now_ms;
};

class Chain {
 public:
  Chain();  // empty: keeps every record unchanged
  // Throws std::invalid_argument when a spec is inconsistent (never for the specs of a
  // definition that parse_sink_definition accepted).
  explicit Chain(const std::vector<config::TransformSpec>& specs, ChainOptions options = {});
  ~Chain();
  Chain(Chain&&) noexcept;
  Chain& operator=(Chain&&) noexcept;

  // Runs every transform, in order, on one JSON payload (any JSON value). Keep: payload_json
  // holds the result (compact JSON when a transform changed it, the input bytes untouched
  // otherwise). Drop: a filter matched. Fail: the record is bad; `error` reads
  // 'transforms[3] (cast): field "amount": "abc" is not a number'. Input that is not JSON
  // fails too ('transforms[0] (cast): payload is not valid JSON: ...').
  Verdict apply(const RecordMeta& meta, std::string& payload_json, std::string& error) const;

  // For a record without a JSON payload (schema raw or text, or a tombstone): only filters run,
  // with payload field conditions seeing no fields (a missing field); every other transform is
  // skipped. Returns Keep or Drop; Fail when a condition cannot be evaluated (a header or key
  // longer than 'matches' reads).
  Verdict apply_without_payload(const RecordMeta& meta, std::string& error) const;

  bool empty() const;
  std::size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace picomq::transform
