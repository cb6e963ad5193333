#pragma once
// Avro object container files (Avro 1.11 specification, "Object Container Files") of a declared
// writer schema: the header (magic, avro.schema, avro.codec, a 16-byte sync marker), then blocks
// of records (count, size, the codec's bytes, the sync marker). Records come as JSON payloads
// (a json topic, or an avro / proto / flatbuffer topic the runtime decoded to JSON) and are
// encoded by the schema: record fields by name (missing: the field's default, else null in a
// union with null, else refused), unions by the first branch that takes the value, bytes and
// fixed from base64 strings, enums from their symbol, date / time / timestamp logical types from
// numbers or the ISO strings the runtime's Avro decoder writes, decimals from exact decimal
// strings. Top-level fields named pico_topic, pico_partition, pico_offset, pico_timestamp,
// pico_key that the payload does not have are filled from the record's metadata. Nothing
// random: the sync marker is derived from the object key, so a replay writes the same bytes.
// The schema is parsed by avro-c (its messages are the errors) and compiled here. No I/O.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "picomq/kit/compression.hpp"
#include "picomq/sink_abi.h"

namespace picomq::s3 {

class AvroEncoder {
 public:
  // Throws std::invalid_argument naming what is wrong with the schema. `codec`: None ("null"),
  // Gzip ("deflate", raw RFC 1951 per block), Zstd ("zstandard"): the header's avro.codec.
  AvroEncoder(std::string_view schema_json, kit::Compression codec);
  ~AvroEncoder();
  AvroEncoder(AvroEncoder&&) noexcept;
  AvroEncoder& operator=(AvroEncoder&&) noexcept;

  // The container header for an object with this key (its sync marker: the first 16 bytes of
  // MD5("picomq-avro-sync:" + key)).
  std::string header(std::string_view object_key) const;
  static std::string sync_marker(std::string_view object_key);
  // Appends record `r` of `batch` as one Avro datum; returns why it cannot instead (nothing appended).
  std::optional<std::string> append(std::string& out, const pmq_batch& batch, const pmq_record& r);
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The blocks of a container: `records` datums `data` through the codec, framed, ended by the
// object's sync marker. Keeps the codec's state: one per thread.
class AvroBlocks {
 public:
  AvroBlocks(kit::Compression codec, int level);
  ~AvroBlocks();
  AvroBlocks(AvroBlocks&&) noexcept;
  AvroBlocks& operator=(AvroBlocks&&) noexcept;
  std::string block(std::string_view data, uint64_t records, std::string_view sync);

 private:
  kit::Compression codec_;
  int level_;
  std::optional<kit::Compressor> zstd_;
  struct Deflate;
  std::unique_ptr<Deflate> deflate_;
};

// Avro's zig-zag varint of a long.
void append_avro_long(std::string& out, int64_t v);

}  // namespace picomq::s3
