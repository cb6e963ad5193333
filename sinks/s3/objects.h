#pragma once
// The objects of one topic-partition, built record by record: where an object ends is decided
// by the records alone (their count, encoded size and timestamps, and the key's time fields), so
// that a replay from an object's first offset rebuilds the same object under the same key with
// the same bytes; flush() (ABI 2.2 flush, a revoke, shutdown) ends the open one early. No I/O:
// sealed objects go to the sink's callback, which uploads them.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/object_key.hpp"

namespace picomq::s3 {

struct Rotation {
  uint64_t max_records = 0;  // 0: no limit
  uint64_t max_bytes = 0;    // of the encoded records, before compression; 0: no limit
  int64_t interval_ms = 0;   // record-time windows aligned to the epoch; 0: off
  // Streaming: the encoded records are cut into chunks of about this size (after the record
  // that reaches it: the cut depends on the records alone), each compressed on its own (a gzip
  // member, a zstd frame, an Avro block) and uploaded while the object grows. 0: one chunk at the seal.
  uint64_t chunk_bytes = 0;
};

// Whoever waits for the objects that hold some of its records (the sink's batch write).
struct Owner {
  virtual ~Owner() = default;
  // It now has records in one more object (called once per object, as the object takes it).
  virtual void joined() {}
};

// Encoded records cut from an object, in order.
struct Chunk {
  std::string data;
  uint64_t records = 0;
};

struct Object {
  std::string topic;
  int32_t partition = 0;
  std::string key;
  int64_t first_offset = 0, last_offset = 0;
  int64_t first_timestamp_ms = -1;
  uint64_t records = 0;
  uint64_t bytes = 0;   // encoded so far (a CSV header included), before compression: max_bytes
  std::string head;     // bytes uploaded as they are before the first chunk (an Avro container header)
  std::string sync;     // an Avro container's sync marker
  std::string schema;   // the writer schema its records are encoded by (Avro from the topic), or empty
  std::string staging;  // encoded records not cut into a chunk yet
  uint64_t staging_records = 0;
  std::deque<Chunk> chunks;                    // cut, not yet taken by the uploader
  uint64_t chunk_bytes = 0;                    // of `chunks`
  bool sealed = false;                         // complete: every record is in `chunks` (or taken)
  bool dropped = false;                        // failed while the uploader had it: it aborts what it started
  std::vector<std::shared_ptr<Owner>> owners;  // each once, in append order
  std::string sealed_by;  // "max_records", "max_bytes", "rotate_interval", "time_field", "schema", "flush"
  // Rotation state of the open object.
  int64_t bucket = 0;
  int64_t window_end = 0;
};

struct KeyContext {
  const kit::ObjectKeyTemplate* key_template = nullptr;
  std::string prefix;  // "" or ending in '/'
  std::string sink_key;
  std::string ext;
  std::string object_header;  // the first encoded bytes of every object (a CSV header line), or empty
  // The raw first bytes of the object with this key and records of this writer schema (an Avro
  // container header), or none.
  std::function<std::string(const std::string& key, const std::string& schema)> container_header;
  // The sync marker of the object with this key (Avro), or none.
  std::function<std::string(const std::string& key)> sync_marker;
};

class PartitionObjects {
 public:
  using Sealed = std::function<void(std::shared_ptr<Object>)>;
  // `sealed`: an object is complete (its last chunk cut); `chunked`: the open object has a new chunk.
  PartitionObjects(std::string topic, int32_t partition, Rotation rotation, KeyContext keys, Sealed sealed,
                   std::function<void()> chunked = {})
      : topic_(std::move(topic)),
        partition_(partition),
        rotation_(rotation),
        keys_(std::move(keys)),
        sealed_(std::move(sealed)),
        chunked_(std::move(chunked)) {}

  // Adds one encoded record (its bytes as they go into the object, separator included) owned by
  // `owner`, encoded by writer schema `schema` (Avro from the topic; else empty). Seals the open
  // object first when the record cannot join it (another time bucket or window, too many bytes,
  // another schema: a container file has one), and after it when the object is full. Throws
  // sdk::FatalError when the key cannot be resolved.
  void append(int64_t offset, int64_t timestamp_ms, std::string_view encoded, const std::shared_ptr<Owner>& owner,
              std::string_view schema = {});
  // Seals the open object (if any) with `why`.
  void seal(const char* why);
  // Drops the open object without sealing it; returns it (its owners must be failed).
  std::shared_ptr<Object> take_open() { return std::move(open_); }
  const std::shared_ptr<Object>& open() const { return open_; }
  // The offset just past the last record appended (0 before any).
  int64_t next_offset() const { return next_offset_; }
  void restart_at(int64_t next_offset) { next_offset_ = next_offset; }

 private:
  void start(int64_t offset, int64_t timestamp_ms, std::string_view schema);
  void cut();
  std::string topic_;
  int32_t partition_;
  Rotation rotation_;
  KeyContext keys_;
  Sealed sealed_;
  std::function<void()> chunked_;
  std::shared_ptr<Object> open_;
  int64_t next_offset_ = 0;
};

}  // namespace picomq::s3
