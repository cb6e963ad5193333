#pragma once
// The SurrealDB sink's requests and what their answers say (pure, no I/O).
//
// Every write is one POST /rpc in CBOR (Content-Type and Accept application/cbor):
//   {"id": n, "method": "query", "params": [<statement text>, {"tb": <table>, "v": [<item>...]}]}
// The statement text is one of a few constants; the table name and every record travel as bound
// variables, never in the text. CBOR rather than JSON because the server turns JSON strings that
// look like record ids, datetimes or UUIDs into those types ("t:0:1" became the record t:0 in
// 3.3.5), while a CBOR text string stays a string.
//
// Items: insert mode without deletes, the record object with its id in `id`
//   INSERT IGNORE INTO $tb $v RETURN NONE
// upsert mode, or a chunk with tombstones to delete, [id, content | null] pairs applied in order
//   FOR $o IN $v { IF $o[1] == NULL { DELETE ... } ELSE { UPSERT type::record($tb, $o[0]) CONTENT $o[1] } }
// (in insert mode the ELSE is INSERT IGNORE). A batch of change events (docs/changes.md), each
// item [op, id, content | null] with op "u" (upsert), "p" (patch), "d" (delete), "t" (truncate):
//   FOR $o IN $v { IF $o[0] == 'd' { DELETE type::record($tb, $o[1]) }
//                  ELSE IF $o[0] == 't' { DELETE type::table($tb) }
//                  ELSE IF $o[0] == 'p' { LET $r = type::record($tb, $o[1]);
//                                         UPSERT $r CONTENT object::extend($r.* ?? {}, $o[2]) }
//                  ELSE { UPSERT type::record($tb, $o[1]) CONTENT $o[2] } }
// (a patch extends the record's top-level fields: MERGE would merge nested objects too, keeping
// keys an object column's new value no longer has). A statement is atomic: one record the server
// refuses fails it whole, and the sink then sends the same records one statement each
// (`[$v[i]]`) to learn which.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/kit/record_json.hpp"
#include "picomq/kit/result.hpp"
#include "picomq/sink_abi.h"
#include "surrealdb/config.h"

namespace picomq::surrealdb {

enum class Shape { Insert, Ops, Changes };

// The statement text for `count` items bound as $v: one statement for all of them, or (per_item)
// one per item, so that the n-th answer is the n-th item's.
std::string statement_text(Shape shape, Mode mode, size_t count, bool per_item);

// The CBOR body of a query of `text` with $tb = table and $v = the items (each already CBOR).
std::string rpc_body(uint64_t id, std::string_view text, std::string_view table, const std::vector<std::string>& items,
                     size_t first, size_t count);
// The same with the items' CBOR already one after the other in `items` (`count` of them).
std::string rpc_body(uint64_t id, std::string_view text, std::string_view table, size_t count, std::string_view items);

// One statement's answer.
struct StatementResult {
  bool ok = false;
  std::string kind;     // ERR: "Internal", "NotFound", "AlreadyExists", ...
  std::string message;  // ERR: the server's text
};

// The statements' answers of an /rpc query response (CBOR), or the error: the RPC-level error
// ({"error": {...}}), or a body that is not such a response.
struct RpcResponse {
  std::vector<StatementResult> statements;
  std::optional<std::string> error;  // RPC-level error message (with its kind)
};
kit::Result<RpcResponse> parse_rpc_response(std::string_view cbor);

enum class ErrorClass {
  AlreadyThere,  // AlreadyExists: a replayed CREATE; counts as written
  Retry,         // transaction conflict, timeout: resend
  TableGone,     // the table does not exist (removed while the sink ran): define again, resend
  Fatal,         // namespace / database missing, permissions: the sink stops
  Record,        // anything else: a record the server refuses (coercion, ASSERT, field rules...)
};
std::string_view to_string(ErrorClass c);
ErrorClass classify_error(const StatementResult& r);

// One record as the item it becomes, or why it is refused / skipped.
struct Item {
  size_t record = 0;
  bool remove = false;  // a tombstone to DELETE
  std::string cbor;
};
struct ItemPlan {
  std::vector<Item> items;
  std::vector<std::pair<size_t, std::string>> refused;
  size_t skipped = 0;  // tombstones skipped
  bool has_removes = false;
  bool changes = false;  // a batch of change events: items of the Changes shape
};

// The record id of a change's row key (a JSON object, docs/changes.md): one field, its value (a
// string or an integer as it is, {"id": 7} -> table:7; another value as a one-element array); several
// fields, the array of their values in key order ({"order_id": 1, "line": 2} -> table:[1, 2]). A
// failure (no key, not an object, a null value, an integer beyond int64) says why.
kit::Result<nlohmann::ordered_json> change_record_id(std::string_view key_json);

class Encoder {
 public:
  explicit Encoder(const Settings& settings);
  ItemPlan plan(const pmq_batch& batch) const;
  Shape shape(const ItemPlan& plan) const {
    if (plan.changes) return Shape::Changes;
    return settings_.mode == Mode::Upsert || plan.has_removes ? Shape::Ops : Shape::Insert;
  }
  // Items of insert shape are objects with the id inside; ops shape [id, content]. plan() renders
  // insert shape unless upsert mode or a removal is in the batch.

 private:
  ItemPlan plan_changes(const pmq_batch& batch) const;
  // A record's document as the record's content (nullopt with `why` when it cannot be one).
  std::optional<nlohmann::json> content(const pmq_batch& batch, const pmq_record& r, std::string& text,
                                        std::string& why) const;
  Settings settings_;
  kit::RecordJsonWriter writer_;
};

}  // namespace picomq::surrealdb
