#pragma once
// MongoDB server error codes and bulk-write replies, as the sink acts on them (pure: libbson, no
// I/O). Codes from MongoDB's error_codes.yml; what each means for a record:
//   Written   11000 DuplicateKey on _id of an insert: the document with this _id is there. With
//             a deterministic _id (record id, key, field) that is a replay of this very record;
//             with a generated ObjectId it is a resend of this commit (the sink made the id).
//   Rejected  the document itself is refused (BadValue 2, DocumentValidationFailure 121,
//             BSONObjectTooLarge 10334, DollarPrefixedFieldName 52, ImmutableField 66,
//             TypeMismatch 14, DuplicateKey on another unique index ...): the bad-record policy.
//   Retry     the server could not take it now (network, NotWritablePrimary 10107, shutdown,
//             write-concern failures, an error labelled RetryableWriteError ...): resent.
//   Fatal     the sink cannot write at all (Unauthorized 13, AuthenticationFailed 18,
//             InvalidNamespace 73 ...): the sink stops in Error naming it.
#include <bson/bson.h>

#include <cstdint>
#include <string>
#include <vector>

namespace picomq::mongodb {

// Verify: an 11000 that names no index (FerretDB): written when a document with this _id is
// there, else a conflict on another unique index (rejected). The sink looks the _ids up.
enum class ItemOutcome { Written, Rejected, Retry, Fatal, Verify };

// The unique index an 11000 DuplicateKey is on.
enum class DuplicateOn { None, Id, Other, Unnamed };

// One writeErrors[] entry of a bulk reply.
struct WriteError {
  uint32_t index = 0;  // into the bulk's operations
  int32_t code = 0;
  std::string message;
  DuplicateOn duplicate = DuplicateOn::None;
};

struct BulkReply {
  std::vector<WriteError> write_errors;
  std::vector<std::string> write_concern_errors;  // "code: message"
  bool retryable_label = false;                   // errorLabels holds RetryableWriteError
  int64_t inserted = 0, upserted = 0, matched = 0, modified = 0, removed = 0;
};

// What a code means for one document of an insert (is_insert) or upsert/delete.
ItemOutcome classify_item(const WriteError& e, bool is_insert);
// What an error of the bulk as a whole (no writeErrors entry: network, server selection, a
// command error) means: Retry or Fatal. `labelled_retryable`: the RetryableWriteError label.
ItemOutcome classify_command(int32_t code, bool labelled_retryable);

// A mongoc bulk reply (or a command reply) read into its parts.
BulkReply parse_bulk_reply(const bson_t& reply);

// Which index an 11000 DuplicateKey is on: MongoDB names it in keyPattern ({_id: 1}) and in the
// message ("index: _id_ dup key"); FerretDB 1.24 gives neither (only "E11000 duplicate key
// error collection: db.c"): Unnamed.
DuplicateOn duplicate_on(int32_t code, const bson_t* key_pattern, const std::string& message);

}  // namespace picomq::mongodb
