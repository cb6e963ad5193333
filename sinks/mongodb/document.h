#pragma once
// Records into MongoDB write operations (pure: libbson only, no I/O): the document of each
// record — _id by the id strategy, the pico_* metadata, the payload's fields (or the payload
// under a field), timestamp fields as BSON Date — and, per write strategy, the insert, the
// replace-one / update-one upsert with its filter, or the delete-one of a tombstone; a change
// event (ABI 2.8, docs/changes.md) by its op: replace-one upsert, update-one $set upsert (a
// patch), delete-one by the row's key as _id, or delete-many {} (a truncate). A record
// that cannot become a document (no key for id_strategy key, a timestamp field that is not a
// date, a document over 16 MiB...) is a rejection with its reason; the rest of the batch goes on.
#include <bson/bson.h>

// bson_t is declared aligned(128), an alignment libbson itself neither gives (bson_new() is
// malloc's) nor needs; it is lost through std::unique_ptr<bson_t> and spans (GCC:
// -Wno-ignored-attributes in CMakeLists.txt), after which clang warns at every libbson call.
#ifdef __clang__
#pragma clang diagnostic ignored "-Walign-mismatch"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mongodb/config.h"
#include "picomq/sink_abi.h"

namespace picomq::mongodb {

// MongoDB's document limit (BSONObjectMaxSize): 16 MiB.
inline constexpr size_t kMaxDocumentBytes = 16u * 1024 * 1024;

struct BsonDeleter {
  void operator()(bson_t* b) const { bson_destroy(b); }
};
using BsonPtr = std::unique_ptr<bson_t, BsonDeleter>;
inline BsonPtr new_bson() { return BsonPtr(bson_new()); }

// DeleteAll: deleteMany({}) (a truncate: every document of the collection).
enum class OpKind { Insert, Replace, Update, Delete, DeleteAll };

struct Op {
  OpKind kind = OpKind::Insert;
  BsonPtr filter;       // Replace / Update / Delete / DeleteAll ({})
  BsonPtr doc;          // Insert: the document; Replace: the replacement; Update: {$set, $setOnInsert}
  uint32_t record = 0;  // index in its batch
  size_t bytes = 0;     // of doc
};

struct Rejection {
  uint32_t record;
  std::string reason;
};

struct Encoded {
  std::vector<Op> ops;
  std::vector<Rejection> rejected;
  uint64_t bytes = 0;
};

// The JSON text as a BSON document (Extended JSON read as the types it names); an error names
// what libbson refused.
kit::Result<BsonPtr> bson_from_json(std::string_view json);
// The same, and whether a top-level key begins with "pico_".
kit::Result<BsonPtr> bson_from_json(std::string_view json, bool& has_pico_key);
// The document as relaxed Extended JSON (for messages and tests).
std::string to_json(const bson_t& doc);

// A change event's row key (a JSON object: {"id": 7}, {"order_id": 1, "line": 2}) as `_id`,
// appended to `into`: a one-field key is that field's value (7, with the BSON type its JSON
// reads as), a key of several fields the key object as an embedded document in the key's field
// order. False with `problem` for a key that is not a JSON object or has no field.
bool append_key_id(std::string_view key_json, bson_t* into, std::string& problem);

class DocumentEncoder {
 public:
  explicit DocumentEncoder(Settings settings) : s_(std::move(settings)) {}
  // `now_ms`: the write's time (update strategy's inserted_at / updated_at fields).
  Encoded encode(const pmq_batch& batch, int64_t now_ms) const;
  const Settings& settings() const { return s_; }

 private:
  // The record's document, or the reason it has none. `id`: a document whose _id is the
  // document's (a change's key) instead of the id strategy's.
  kit::Result<BsonPtr> document(const pmq_batch& batch, const pmq_record& r, bool with_id,
                                const bson_t* id = nullptr) const;
  // The same for a JSON object payload, its members appended straight from simdjson; nullopt when
  // libbson must read it (mongodb/json_to_bson.h).
  std::optional<kit::Result<BsonPtr>> plain_document(const pmq_batch& batch, const pmq_record& r, bool with_id,
                                                     const bson_t* id, std::string_view json) const;
  // A change event's operation (op not PMQ_OP_APPEND), or the reason it has none.
  kit::Result<Op> change(const pmq_batch& batch, const pmq_record& r, int32_t op) const;
  bool id_value(const pmq_batch& batch, const pmq_record& r, const bson_t* payload, bson_t* into, const char* name,
                std::string& problem) const;
  Settings s_;
};

}  // namespace picomq::mongodb
