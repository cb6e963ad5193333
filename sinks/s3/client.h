#pragma once
// The S3 sink's writes, on the kit's S3 client (picomq/kit/s3.hpp: SigV4, S3's statuses as
// outcomes, resends within retry_timeout, listing, HEAD and GET): a PUT that carries the object's
// last offset and, with conditional_create, If-None-Match: * (the first upload of a key wins);
// multipart uploads part by part with the last offset in a marker object; the probe that the
// store honours conditional writes; and what an object there holds (docs/sinks/s3.md, "Errors"
// and "Behaviour under replay and crashes"):
//   412 on a conditional PUT or          written when the object there is this upload (it names
//   CompleteMultipartUpload              our marker: a resend whose first answer was lost) or has
//                                        our bytes (same ETag), else KeyTaken with the last offset
//                                        the object there holds (from its metadata; fatal when it
//                                        has none, when its marker is gone, or when it holds
//                                        another topic-partition's records)
// Each call blocks (the sink calls them from its upload threads).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/s3.hpp"
#include "picomq/sdk.hpp"
#include "s3/config.h"

namespace picomq::s3 {

// Lower-case hex MD5 of bytes: the ETag S3 gives an object written by one PUT.
std::string md5_hex(std::string_view bytes);
// The ETag of the same bytes uploaded in parts of `part_size`: MD5 of the parts' binary MD5s,
// "-<parts>" (what S3 and SeaweedFS give a multipart object).
std::string multipart_etag(std::string_view bytes, uint64_t part_size);
// The same from the parts' binary MD5s, concatenated.
std::string multipart_etag_of(std::string_view part_digests, size_t parts);
// The 16 bytes of MD5 of `bytes`.
std::string md5_binary(std::string_view bytes);
// Where a streamed object's last offset is kept: "<folder>/_picomq/<name>.<token>.last-offset" (a
// folder starting with '_', which Hive, Spark, Trino and Athena skip when they read a table's
// files). `token` is the upload's own (kit::random_token()): two uploads of one key never share a marker, so a
// losing upload's marker cannot change what the winning object's marker says.
std::string marker_key(const std::string& key, const std::string& token);

// The topic-partition an object holds records of, in its metadata (x-amz-meta-picomq-topic,
// percent-encoded, and x-amz-meta-picomq-partition): an object of another topic-partition under
// the same key (two definitions sharing bucket, prefix and template) is never taken for ours.
struct Source {
  std::string topic;
  int32_t partition = 0;
};

// The key is taken: an object with other content is there (a killed run's upload that landed
// late, or a run that cut the records at other offsets), holding the records up to
// `last_offset`. Not written; the sink continues after that offset (docs/sinks/s3.md, "Replay
// and crashes"). A RetryableError: the batches come again and skip what the object holds.
class KeyTaken : public sdk::RetryableError {
 public:
  KeyTaken(std::string taken_key, int64_t taken_last_offset, const std::string& message)
      : sdk::RetryableError(message), key(std::move(taken_key)), last_offset(taken_last_offset) {}
  std::string key;
  int64_t last_offset;
};

class Client {
 public:
  struct Hooks {
    std::function<void(const std::string&)> log_warn;
    std::function<void(const char*, uint64_t)> count;
  };
  Client(const Plan& plan, size_t max_in_flight, Hooks hooks);
  ~Client();

  // Writes `body` at `key` in one PUT; returns when S3 has it. Throws sdk::RetryableError (not
  // written, or cut: the runtime retries), KeyTaken or sdk::FatalError. With conditional_create
  // the PUT carries If-None-Match: * (the first upload of a key wins).
  // `last_offset` goes into the object's metadata (x-amz-meta-picomq-last-offset): what a
  // restart reads to find where the object it resumes in ends.
  void put_object(const std::string& key, std::string_view body, const std::string& content_type, int64_t last_offset,
                  const Source& source);

  // A multipart upload step by step, as a streamed object grows (parts in order, each resent on
  // its own). Its last offset is not known when the upload starts: the metadata names a marker
  // object (`marker`, marker_key) that holds it, written by put_marker before the upload is completed.
  std::string create_multipart(const std::string& key, const std::string& content_type, const std::string& marker,
                               const Source& source);  // the upload id
  std::string upload_part(const std::string& key, const std::string& upload_id, size_t number,
                          std::string_view part);  // its ETag
  void put_marker(const std::string& marker, int64_t last_offset);
  // With conditional_create, If-None-Match: *. Completed: written by this call, or by an earlier
  // send of it whose answer was lost (the object names this upload's `marker`). TakenBySameBytes:
  // another upload of our bytes (ETag `ours`) has the key; this upload and its marker are then
  // the caller's to remove. Throws KeyTaken when the object there holds other bytes.
  enum class Completion { Completed, TakenBySameBytes };
  Completion complete_multipart(const std::string& key, const std::string& upload_id, const std::string& parts_xml,
                                const std::string& ours, const std::string& marker, const Source& source);
  // Best effort (counters multipart_aborted / multipart_abort_failed).
  void abort_multipart(const std::string& key, const std::string& upload_id);
  // Best effort: a marker of an upload that lost its key.
  void delete_object(const std::string& key);
  // conditional_create, once before the first upload: that the store refuses a second
  // If-None-Match: * PUT, and a CompleteMultipartUpload with it, of an existing key (a probe object
  // <prefix>_picomq/conditional-write-probe). Throws sdk::FatalError when it does not (the store
  // would let a late upload replace an object), sdk::RetryableError when it cannot be asked now.
  void check_conditional_writes();
  // Keys under `prefix` (ListObjectsV2, every page). Throws like put_object.
  std::vector<std::string> list_keys(const std::string& prefix);
  // The last offset of the object at `key`: its picomq-last-offset metadata, or the one in the
  // marker its picomq-last-offset-in metadata names; nullopt when there is no object. An object
  // whose end cannot be read (no picomq metadata, or its marker gone) or that holds another
  // topic-partition's records is never taken as absent: sdk::FatalError naming it.
  std::optional<int64_t> last_offset(const std::string& key, const Source& source);
  // A start-up check: throws sdk::FatalError when the bucket does not exist or the credentials
  // are refused; returns a warning text when the server cannot be reached (writes then retry).
  std::string check_bucket();

  // Cuts every wait and request short (close()).
  void close() { objects_.close(); }
  const kit::Redactor& redactor() const { return objects_.redactor(); }

 private:
  // After a 412 on a conditional write of `key` (our bytes' ETag `ours`; `marker`: a multipart
  // upload's own marker): who has the key. Throws KeyTaken when the object there holds other
  // records, sdk::FatalError when what it holds cannot be read or is another topic-partition's.
  enum class Taken { Free, ThisUpload, SameBytes };
  Taken taken(const std::string& key, const std::string& ours, const std::string& marker, const Source& source);
  // Whether the object a HEAD answered for is the multipart upload whose own marker is `marker`
  // (counted as already_written).
  bool is_this_upload(const kit::HttpResponse& head, const std::string& marker) const;
  // The last offset of the object a HEAD answered for: see last_offset().
  int64_t end_of(const std::string& key, const kit::HttpResponse& head, const Source& source);
  const Plan& plan_;
  Hooks hooks_;
  kit::s3::Client objects_;
};

}  // namespace picomq::s3
