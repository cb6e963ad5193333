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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
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

// One bulk write attempt as libmongoc returned it (mongodb/client.h fills it).
struct BulkAttempt {
  bool executed = false;  // mongoc_bulk_operation_execute succeeded (no error of any kind)
  BulkReply reply;        // writeErrors etc., also when !executed
  uint32_t error_domain = 0, error_code = 0;
  std::string error;          // libmongoc's message when !executed
  bool server_error = false;  // the error is the server's (MONGOC_ERROR_SERVER): error_code is its code
  bool auth_error = false;    // libmongoc could not authenticate
  // Operations libmongoc refused before sending (their index into the ops given), with why.
  std::vector<std::pair<size_t, std::string>> refused;
};

// What an attempt says of each of its operations.
enum class OpState : uint8_t { Pending, Done, Rejected };

struct AttemptVerdict {
  std::vector<OpState> state;        // per operation of the attempt; Pending: resend it
  std::vector<std::string> reasons;  // Rejected: why (the bad-record policy's reason)
  uint64_t already_written = 0;      // 11000 on _id (or found by the lookup): written
  bool looked_up = false;            // the id lookup ran
  std::string retry;                 // non-empty: resend the Pending operations after a back-off
  std::string fatal;                 // non-empty: the sink cannot write here; stop in Error
  size_t resume = 0;                 // ordered: the first operation to send next (size(): none)
};

// Which of the operations at these positions of the attempt have their _id in the collection
// now (the FerretDB 11000s that name no index); nullopt with `error` when the lookup failed.
using IdLookup =
    std::function<std::optional<std::vector<bool>>(const std::vector<size_t>& positions, std::string& error)>;

// The decision on one attempt (pure but for `lookup`): per-document outcomes from writeErrors
// (classify_item); an error of the bulk as a whole that no writeError explains — a network error,
// a write-concern error, NotWritablePrimary or any code with the RetryableWriteError label —
// leaves every operation without a writeError Pending (it may or may not be applied: resent);
// ordered, the operations before the one the server stopped at are applied.
// `is_insert[i]`: operation i is an insert.
AttemptVerdict judge_attempt(const BulkAttempt& a, const std::vector<bool>& is_insert, bool ordered,
                             const std::string& collection, const IdLookup& lookup);

}  // namespace picomq::mongodb
