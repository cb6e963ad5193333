#pragma once
// Whole-buffer compression of request bodies and objects: gzip (libdeflate) and zstd (libzstd). The
// HTTP client compresses bodies with it (and sets Content-Encoding); the S3 and ClickHouse sinks
// use it for objects and inserts; decompress() reads such a buffer back (the Redshift sink's
// PostgreSQL stand-in reads the files it staged).
//
//   kit::Compressor gzip(kit::Compression::Gzip);
//   std::string wire = gzip.compress(body);      // one gzip member (RFC 1952)
//
// A Compressor keeps its codec state between calls (zstd's context holds megabytes of tables
// that are worth reusing); one Compressor is not for several threads at once.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace picomq::kit {

enum class Compression { None, Gzip, Zstd };

// "none", "gzip", "zstd": the names sink options use.
std::string_view to_string(Compression compression);
std::optional<Compression> parse_compression(std::string_view name);
// The Content-Encoding token (RFC 9110 section 8.4.1; "zstd": RFC 8878 section 7.2); empty for None.
std::string_view content_encoding(Compression compression);

class Compressor {
 public:
  // level 0: the codec's default (gzip 6, zstd 3). Throws std::invalid_argument for a level the
  // codec does not have (gzip 1-12, libdeflate's levels; zstd ZSTD_minCLevel()..ZSTD_maxCLevel()).
  explicit Compressor(Compression compression, int level = 0);
  ~Compressor();
  Compressor(Compressor&&) noexcept;
  Compressor& operator=(Compressor&&) noexcept;

  Compression compression() const { return compression_; }
  // `input` as one gzip member or one zstd frame (with its content size and checksum);
  // None returns it unchanged. Throws std::runtime_error if the codec fails (out of memory).
  std::string compress(std::string_view input);

 private:
  struct Codec;
  Compression compression_;
  int level_;
  std::unique_ptr<Codec> codec_;
};

// One-off compression (a fresh Compressor).
std::string compress(Compression compression, std::string_view input, int level = 0);

// The whole of `input` decompressed: every gzip member (RFC 1952) or zstd frame in it, one after
// another; None returns it unchanged. Throws std::runtime_error naming the codec for input that
// is not a complete, valid stream (a truncated or damaged one, trailing garbage).
std::string decompress(Compression compression, std::string_view input);

}  // namespace picomq::kit
