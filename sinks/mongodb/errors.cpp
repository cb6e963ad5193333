#include "mongodb/errors.h"

#include <algorithm>
#include <string_view>

namespace picomq::mongodb {
namespace {

std::string utf8_of(const bson_iter_t& it) {
  if (!BSON_ITER_HOLDS_UTF8(&it)) return {};
  uint32_t len = 0;
  const char* s = bson_iter_utf8(&it, &len);
  return {s, len};
}

bool has_label(const bson_t& doc, const char* label) {
  bson_iter_t it, child;
  if (!bson_iter_init_find(&it, &doc, "errorLabels") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &child))
    return false;
  while (bson_iter_next(&child))
    if (utf8_of(child) == label) return true;
  return false;
}

}  // namespace

DuplicateOn duplicate_on(int32_t code, const bson_t* key_pattern, const std::string& message) {
  if (code != 11000 && code != 11001) return DuplicateOn::None;
  if (key_pattern) {
    bson_iter_t it;
    uint32_t n = 0;
    bool id = false;
    if (bson_iter_init(&it, key_pattern))
      while (bson_iter_next(&it)) {
        ++n;
        id = std::string_view(bson_iter_key(&it)) == "_id";
      }
    if (n) return n == 1 && id ? DuplicateOn::Id : DuplicateOn::Other;
  }
  const size_t index = message.find("index: ");
  if (index == std::string::npos) return DuplicateOn::Unnamed;
  return message.compare(index + 7, 5, "_id_ ") == 0 ? DuplicateOn::Id : DuplicateOn::Other;
}

ItemOutcome classify_item(const WriteError& e, bool is_insert) {
  switch (e.code) {
    case 11000:
    case 11001:
      // An upsert that races another on the same key gets 11000: resend, it then matches.
      if (!is_insert) return e.duplicate == DuplicateOn::Other ? ItemOutcome::Rejected : ItemOutcome::Retry;
      switch (e.duplicate) {
        case DuplicateOn::Id: return ItemOutcome::Written;  // this record, replayed or resent
        case DuplicateOn::Unnamed: return ItemOutcome::Verify;
        case DuplicateOn::Other:
        case DuplicateOn::None: return ItemOutcome::Rejected;  // conflicts with another document
      }
      return ItemOutcome::Rejected;
    // The document or the operation is refused as it is.
    case 2:      // BadValue
    case 9:      // FailedToParse
    case 14:     // TypeMismatch
    case 22:     // InvalidBSON
    case 28:     // PathNotViable
    case 52:     // DollarPrefixedFieldName
    case 53:     // InvalidIdField
    case 54:     // NotSingleValueField
    case 55:     // InvalidDBRef
    case 56:     // EmptyFieldName
    case 57:     // DottedFieldName
    case 66:     // ImmutableField
    case 67:     // CannotCreateIndex
    case 121:    // DocumentValidationFailure
    case 10334:  // BSONObjectTooLarge
    case 17419:  // document too large after the update
    case 17280:  // KeyTooLong
      return ItemOutcome::Rejected;
    // The server could not take it now.
    case 6:      // HostUnreachable
    case 7:      // HostNotFound
    case 50:     // MaxTimeMSExpired
    case 64:     // WriteConcernFailed
    case 89:     // NetworkTimeout
    case 91:     // ShutdownInProgress
    case 112:    // WriteConflict
    case 189:    // PrimarySteppedDown
    case 262:    // ExceededTimeLimit
    case 9001:   // SocketException
    case 10107:  // NotWritablePrimary
    case 11600:  // InterruptedAtShutdown
    case 11602:  // InterruptedDueToReplStateChange
    case 13435:  // NotPrimaryNoSecondaryOk
    case 13436:  // NotPrimaryOrSecondary
      return ItemOutcome::Retry;
    // The sink cannot write here at all.
    case 13:  // Unauthorized
    case 18:  // AuthenticationFailed
    case 73:  // InvalidNamespace
      return ItemOutcome::Fatal;
    default:
      // A code this sink does not know, on one document while the others were written: the
      // server refused that document. Rejected, with the code in the reason (the bad-record
      // policy's default, fail, stops the sink on it rather than dropping it).
      return ItemOutcome::Rejected;
  }
}

ItemOutcome classify_command(int32_t code, bool labelled_retryable) {
  if (labelled_retryable) return ItemOutcome::Retry;
  switch (code) {
    case 13:    // Unauthorized
    case 18:    // AuthenticationFailed
    case 73:    // InvalidNamespace
    case 8000:  // AtlasError (quota, permissions)
    case 11:    // UserNotFound
      return ItemOutcome::Fatal;
    default:
      // Network, server selection, shutdown, a primary stepping down, FerretDB's backend gone:
      // resent until retry_timeout.
      return ItemOutcome::Retry;
  }
}

BulkReply parse_bulk_reply(const bson_t& reply) {
  BulkReply out;
  bson_iter_t it, child, field;
  auto int_of = [&](const char* name) -> int64_t {
    bson_iter_t i;
    return bson_iter_init_find(&i, &reply, name) && BSON_ITER_HOLDS_NUMBER(&i) ? bson_iter_as_int64(&i) : 0;
  };
  out.inserted = int_of("nInserted");
  out.upserted = int_of("nUpserted");
  out.matched = int_of("nMatched");
  out.modified = int_of("nModified");
  out.removed = int_of("nRemoved");
  out.retryable_label = has_label(reply, "RetryableWriteError");
  if (bson_iter_init_find(&it, &reply, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &child)) {
    while (bson_iter_next(&child)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&child)) continue;
      uint32_t len = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&child, &len, &data);
      bson_t item;
      if (!bson_init_static(&item, data, len)) continue;
      WriteError e;
      if (bson_iter_init_find(&field, &item, "index") && BSON_ITER_HOLDS_NUMBER(&field))
        e.index = static_cast<uint32_t>(bson_iter_as_int64(&field));
      if (bson_iter_init_find(&field, &item, "code") && BSON_ITER_HOLDS_NUMBER(&field))
        e.code = static_cast<int32_t>(bson_iter_as_int64(&field));
      if (bson_iter_init_find(&field, &item, "errmsg")) e.message = utf8_of(field);
      bson_t pattern;
      bool has_pattern = false;
      if (bson_iter_init_find(&field, &item, "keyPattern") && BSON_ITER_HOLDS_DOCUMENT(&field)) {
        uint32_t plen = 0;
        const uint8_t* pdata = nullptr;
        bson_iter_document(&field, &plen, &pdata);
        has_pattern = bson_init_static(&pattern, pdata, plen);
      }
      e.duplicate = duplicate_on(e.code, has_pattern ? &pattern : nullptr, e.message);
      out.write_errors.push_back(std::move(e));
    }
  }
  if (bson_iter_init_find(&it, &reply, "writeConcernErrors") && BSON_ITER_HOLDS_ARRAY(&it) &&
      bson_iter_recurse(&it, &child)) {
    while (bson_iter_next(&child)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&child)) continue;
      bson_iter_t inner;
      std::string text;
      if (bson_iter_recurse(&child, &inner)) {
        int64_t code = 0;
        std::string msg;
        while (bson_iter_next(&inner)) {
          const std::string_view k = bson_iter_key(&inner);
          if (k == "code" && BSON_ITER_HOLDS_NUMBER(&inner)) code = bson_iter_as_int64(&inner);
          if (k == "errmsg") msg = utf8_of(inner);
        }
        text = std::to_string(code) + ": " + msg;
      }
      out.write_concern_errors.push_back(std::move(text));
    }
  }
  return out;
}

AttemptVerdict judge_attempt(const BulkAttempt& a, const std::vector<bool>& is_insert, bool ordered,
                             const std::string& collection, const IdLookup& lookup) {
  const size_t n = is_insert.size();
  AttemptVerdict v;
  v.state.assign(n, OpState::Pending);
  v.reasons.resize(n);
  for (const auto& [i, why] : a.refused)
    if (i < n) {
      v.state[i] = OpState::Rejected;
      v.reasons[i] = "libmongoc refused the operation: " + why;
    }
  auto retry = [&](std::string why) {
    if (v.retry.empty()) v.retry = std::move(why);
  };
  size_t first_unapplied = n;  // ordered: where the server stopped
  bool untrusted = false;      // a writeErrors index out of range: no operation is known written
  std::vector<size_t> verify;  // positions whose 11000 named no index
  std::vector<std::string> verify_messages;
  for (const WriteError& e : a.reply.write_errors) {
    if (e.index >= n) {  // not an operation of this bulk: nothing can be concluded
      retry("collection " + collection + ": a writeErrors index out of range");
      untrusted = true;
      continue;
    }
    const ItemOutcome o = classify_item(e, is_insert[e.index]);
    switch (o) {
      case ItemOutcome::Written:
        v.state[e.index] = OpState::Done;
        ++v.already_written;
        break;
      case ItemOutcome::Rejected:
        v.state[e.index] = OpState::Rejected;
        v.reasons[e.index] = "MongoDB refused the document (error " + std::to_string(e.code) + "): " + e.message;
        break;
      case ItemOutcome::Retry:
        retry("collection " + collection + ": MongoDB error " + std::to_string(e.code) + ": " + e.message);
        break;
      case ItemOutcome::Fatal:
        v.fatal = "collection " + collection + ": MongoDB error " + std::to_string(e.code) + ": " + e.message;
        return v;
      case ItemOutcome::Verify:
        verify.push_back(e.index);
        verify_messages.push_back(e.message);
        break;
    }
    if (ordered) first_unapplied = std::min<size_t>(first_unapplied, e.index + (o == ItemOutcome::Retry ? 0 : 1));
  }
  // 11000s that name no index (FerretDB): written when a document with that _id is there, else
  // the conflict is on another unique index.
  if (!verify.empty()) {
    v.looked_up = true;
    std::string error;
    if (auto present = lookup(verify, error); present && present->size() == verify.size()) {
      for (size_t k = 0; k < verify.size(); ++k) {
        if ((*present)[k]) {
          v.state[verify[k]] = OpState::Done;
          ++v.already_written;
        } else {
          v.state[verify[k]] = OpState::Rejected;
          v.reasons[verify[k]] =
              "MongoDB refused the document (error 11000, a unique index other than _id): " + verify_messages[k];
        }
      }
    } else {
      retry("collection " + collection + ": looking up the _ids of duplicate-key errors: " + error);
      // Ordered: not known to be applied, so the resend starts there.
      if (ordered)
        for (size_t at : verify) first_unapplied = std::min(first_unapplied, at);
    }
  }
  // An error of the bulk as a whole that its writeErrors do not explain: whatever has no
  // writeError entry may or may not be written. A write-concern error: the operations were
  // applied but not acknowledged as the write concern asks; every one without a writeError is
  // resent (inserts then answer 11000, upserts and deletes repeat harmlessly).
  const auto& errors = a.reply.write_errors;
  const bool explained = a.reply.write_concern_errors.empty() &&
                         (a.executed || (a.server_error && !errors.empty() &&
                                         std::any_of(errors.begin(), errors.end(), [&](const WriteError& e) {
                                           return static_cast<uint32_t>(e.code) == a.error_code;
                                         })));
  if (!a.reply.write_concern_errors.empty()) {
    retry("collection " + collection + ": write concern error " + a.reply.write_concern_errors[0]);
  } else if (!explained) {
    const ItemOutcome o = a.auth_error ? ItemOutcome::Fatal
                          : a.server_error
                              ? classify_command(static_cast<int32_t>(a.error_code), a.reply.retryable_label)
                              : ItemOutcome::Retry;
    const std::string what = "collection " + collection + ": " + a.error + " (libmongoc error " +
                             std::to_string(a.error_domain) + "." + std::to_string(a.error_code) + ")";
    if (o == ItemOutcome::Fatal) {
      v.fatal = what;
      return v;
    }
    v.retry = what;
  } else if (v.retry.empty()) {
    // Everything without a writeError entry is written (ordered: up to where the server stopped;
    // the rest, after the refused one, goes again at once).
    for (size_t b = 0; b < first_unapplied; ++b)
      if (v.state[b] == OpState::Pending) v.state[b] = OpState::Done;
    v.resume = first_unapplied;
    return v;
  }
  // Something to resend.
  if (ordered) {
    // The operations before the one that failed were applied (explained), or may have been.
    if (explained && !untrusted)
      for (size_t b = 0; b < first_unapplied; ++b)
        if (v.state[b] == OpState::Pending) v.state[b] = OpState::Done;
    v.resume = first_unapplied < n ? first_unapplied : 0;
  } else if (explained && !untrusted) {
    // Unordered with only per-document retry errors: the others are written.
    std::vector<bool> failed(n, false);
    for (const auto& e : errors)
      if (e.index < n) failed[e.index] = true;
    for (size_t b = 0; b < n; ++b)
      if (!failed[b] && v.state[b] == OpState::Pending) v.state[b] = OpState::Done;
  }
  return v;
}

}  // namespace picomq::mongodb
