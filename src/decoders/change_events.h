#pragma once
// Change events (docs/changes.md): what one decoded record asks of the destination — an upsert
// of a row, a delete by key, a truncate — under a block's `changes` setting. The Debezium
// envelope (wrapped in {"schema", "payload"} or not, or unwrapped by ExtractNewRecordState) and
// keyed records (a payload upserts its key, a tombstone deletes it). The key is always a JSON
// object naming the row: the record key's own fields, a scalar key as {"key": value}, or the
// block's key_fields taken from the row. A Debezium row with columns Debezium could not read
// (kUnavailableValue: unchanged TOAST values) is a patch of the columns it has.
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/sink_definition.h"
#include "picomq/sink_abi.h"

namespace simdjson::dom {
class parser;
}

namespace picomq::decoders {

struct Change {
  pmq_change_op op = PMQ_OP_APPEND;
  std::string_view row;  // UPSERT: the row, a JSON object; PATCH: the columns it changes
  std::string_view key;  // UPSERT / DELETE: the row's key, a JSON object
  // A record that changes nothing and is left out (Debezium's tombstone after a delete when keys
  // are not decoded, a logical decoding message): counted with the filtered records.
  bool skip = false;
};

// Debezium's unavailable.value.placeholder (its default), as text and as bytes in base64.
inline constexpr std::string_view kUnavailableValue = "__debezium_unavailable_value";
inline constexpr std::string_view kUnavailableValueBase64 = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

class ChangeReader {
 public:
  ChangeReader(config::ChangeEvents mode, std::vector<std::string> key_fields);
  ~ChangeReader();
  ChangeReader(const ChangeReader&) = delete;
  ChangeReader& operator=(const ChangeReader&) = delete;

  // `payload`: the record's decoded JSON, absent for a tombstone; `key`: its decoded key (JSON),
  // absent when it has none or keys are not decoded. What `out` views lives in the inputs or in
  // `owned`. False, with the reason in `error`, for a record that is not a change event of this
  // block (a bad record of the decode stage).
  bool read(std::optional<std::string_view> payload, std::optional<std::string_view> key, Change& out,
            std::deque<std::string>& owned, std::string& error);

  // `base` (a row) with `patch`'s members over it: a patch that follows a full row of its key in
  // one batch becomes a full row. Both are JSON objects the reader made.
  std::string_view merge(std::string_view base, std::string_view patch, std::deque<std::string>& owned);

 private:
  config::ChangeEvents mode_;
  std::vector<std::string> key_fields_;
  std::unique_ptr<simdjson::dom::parser> payload_parser_, key_parser_;
};

}  // namespace picomq::decoders
