#pragma once
// The objects of one topic-partition, built record by record: where an object ends is decided
// by the records alone (their count, encoded size and timestamps, and the key's time fields), so
// that a replay from an object's first offset rebuilds the same object under the same key with
// the same bytes; flush() (ABI 2.2 flush, a revoke, shutdown) ends the open one early. No I/O:
// sealed objects go to the sink's callback, which uploads them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/object_key.hpp"

namespace picomq::s3 {

struct Rotation {
  uint64_t max_records = 0;     // 0: no limit
  uint64_t max_bytes = 0;       // of the encoded records, before compression; 0: no limit
  int64_t interval_ms = 0;      // record-time windows aligned to the epoch; 0: off
};

// Whoever waits for the objects that hold some of its records (the sink's batch write).
struct Owner {
  virtual ~Owner() = default;
  // It now has records in one more object (called once per object, as the object takes it).
  virtual void joined() {}
};

struct Object {
  std::string topic;
  int32_t partition = 0;
  std::string key;
  int64_t first_offset = 0, last_offset = 0;
  int64_t first_timestamp_ms = -1;
  uint64_t records = 0;
  std::string body;  // encoded records, uncompressed
  std::vector<std::shared_ptr<Owner>> owners;  // each once, in append order
  std::string sealed_by;                       // "max_records", "max_bytes", "rotate_interval", "time_field", "flush"
  // Rotation state of the open object.
  int64_t bucket = 0;
  int64_t window_end = 0;
};

struct KeyContext {
  const kit::ObjectKeyTemplate* key_template = nullptr;
  std::string prefix;  // "" or ending in '/'
  std::string sink_key;
  std::string ext;
  std::string object_header;  // the first bytes of every object (a CSV header line), or empty
};

class PartitionObjects {
 public:
  using Sealed = std::function<void(std::unique_ptr<Object>)>;
  PartitionObjects(std::string topic, int32_t partition, Rotation rotation, KeyContext keys, Sealed sealed)
      : topic_(std::move(topic)), partition_(partition), rotation_(rotation), keys_(std::move(keys)),
        sealed_(std::move(sealed)) {}

  // Adds one encoded record (its bytes as they go into the object, separator included) owned by
  // `owner`. Seals the open object first when the record cannot join it, and after it when the
  // object is full. Throws sdk::FatalError when the key cannot be resolved.
  void append(int64_t offset, int64_t timestamp_ms, std::string_view encoded, const std::shared_ptr<Owner>& owner);
  // Seals the open object (if any) with `why`.
  void seal(const char* why);
  // Drops the open object without sealing it; returns it (its owners must be failed).
  std::unique_ptr<Object> take_open() { return std::move(open_); }
  const Object* open() const { return open_.get(); }
  // The offset just past the last record appended (0 before any).
  int64_t next_offset() const { return next_offset_; }
  void restart_at(int64_t next_offset) { next_offset_ = next_offset; }

 private:
  void start(int64_t offset, int64_t timestamp_ms);
  std::string topic_;
  int32_t partition_;
  Rotation rotation_;
  KeyContext keys_;
  Sealed sealed_;
  std::unique_ptr<Object> open_;
  int64_t next_offset_ = 0;
};

}  // namespace picomq::s3
