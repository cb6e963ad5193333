#pragma once
// Records into MongoDB write operations (pure: libbson only, no I/O): the document of each
// record — _id by the id strategy, the pico_* metadata, the payload's fields (or the payload
// under a field), timestamp fields as BSON Date — and, per write strategy, the insert, the
// replace-one / update-one upsert with its filter, or the delete-one of a tombstone. A record
// that cannot become a document (no key for id_strategy key, a timestamp field that is not a
// date, a document over 16 MiB...) is a rejection with its reason; the rest of the batch goes on.
#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <string>
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

enum class OpKind { Insert, Replace, Update, Delete };

struct Op {
  OpKind kind = OpKind::Insert;
  BsonPtr filter;       // Replace / Update / Delete
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
// The document as relaxed Extended JSON (for messages and tests).
std::string to_json(const bson_t& doc);

class DocumentEncoder {
 public:
  explicit DocumentEncoder(Settings settings) : s_(std::move(settings)) {}
  // `now_ms`: the write's time (update strategy's inserted_at / updated_at fields).
  Encoded encode(const pmq_batch& batch, int64_t now_ms) const;
  const Settings& settings() const { return s_; }

 private:
  // The record's document, or the reason it has none.
  kit::Result<BsonPtr> document(const pmq_batch& batch, const pmq_record& r, bool with_id) const;
  bool id_value(const pmq_batch& batch, const pmq_record& r, const bson_t* payload, bson_t* into, const char* name,
                std::string& problem) const;
  Settings s_;
};

}  // namespace picomq::mongodb
