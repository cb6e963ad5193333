#include "picomq/kit/compression.hpp"

#include <libdeflate.h>
#include <zstd.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace picomq::kit {

namespace {

// gzip is libdeflate's: whole buffers only (all the kit compresses), and on JSON lines its level 6
// is ~1.5x zlib's speed with output ~8% smaller (bench/README.md, "gzip: libdeflate").
constexpr int kGzipDefaultLevel = 6;
constexpr int kGzipMaxLevel = 12;     // libdeflate's levels 10-12: slower, smaller (zlib stops at 9)
constexpr int kZstdDefaultLevel = 3;  // ZSTD_CLEVEL_DEFAULT

int checked_level(Compression compression, int level) {
  switch (compression) {
    case Compression::None: return 0;
    case Compression::Gzip:
      if (level == 0) return kGzipDefaultLevel;
      if (level < 1 || level > kGzipMaxLevel)
        throw std::invalid_argument("gzip level must be 1-" + std::to_string(kGzipMaxLevel) + ", not " +
                                    std::to_string(level));
      return level;
    case Compression::Zstd:
      if (level == 0) return kZstdDefaultLevel;
      if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
        throw std::invalid_argument("zstd level must be " + std::to_string(ZSTD_minCLevel()) + ".." +
                                    std::to_string(ZSTD_maxCLevel()) + ", not " + std::to_string(level));
      return level;
  }
  throw std::invalid_argument("unknown compression");
}

}  // namespace

std::string_view to_string(Compression compression) {
  switch (compression) {
    case Compression::None: return "none";
    case Compression::Gzip: return "gzip";
    case Compression::Zstd: return "zstd";
  }
  return "?";
}

std::optional<Compression> parse_compression(std::string_view name) {
  for (Compression c : {Compression::None, Compression::Gzip, Compression::Zstd})
    if (name == to_string(c)) return c;
  return std::nullopt;
}

std::string_view content_encoding(Compression compression) {
  return compression == Compression::None ? std::string_view() : to_string(compression);
}

// The live codec state; created on first use, reset (not rebuilt) for each input.
struct Compressor::Codec {
  libdeflate_compressor* gzip = nullptr;
  ZSTD_CCtx* zstd = nullptr;

  ~Codec() {
    libdeflate_free_compressor(gzip);
    ZSTD_freeCCtx(zstd);
  }
};

Compressor::Compressor(Compression compression, int level)
    : compression_(compression), level_(checked_level(compression, level)), codec_(std::make_unique<Codec>()) {}
Compressor::~Compressor() = default;
Compressor::Compressor(Compressor&&) noexcept = default;
Compressor& Compressor::operator=(Compressor&&) noexcept = default;

std::string Compressor::compress(std::string_view input) {
  switch (compression_) {
    case Compression::None: return std::string(input);
    case Compression::Gzip: {
      if (!codec_->gzip && !(codec_->gzip = libdeflate_alloc_compressor(level_)))
        throw std::runtime_error("gzip: cannot create a compressor (out of memory)");
      std::string out;
      out.resize(libdeflate_gzip_compress_bound(codec_->gzip, input.size()));
      const size_t produced =
          libdeflate_gzip_compress(codec_->gzip, input.data(), input.size(), out.data(), out.size());
      if (produced == 0) throw std::runtime_error("gzip: compression failed");  // cannot happen with the bound's room
      out.resize(produced);
      return out;
    }
    case Compression::Zstd: {
      if (!codec_->zstd) {
        codec_->zstd = ZSTD_createCCtx();
        if (!codec_->zstd) throw std::runtime_error("zstd: cannot create a compression context");
        ZSTD_CCtx_setParameter(codec_->zstd, ZSTD_c_compressionLevel, level_);
        ZSTD_CCtx_setParameter(codec_->zstd, ZSTD_c_checksumFlag, 1);  // the receiver can tell a damaged frame
      }
      std::string out(ZSTD_compressBound(input.size()), '\0');
      // compress2 resets the session and keeps the parameters set above.
      const size_t n = ZSTD_compress2(codec_->zstd, out.data(), out.size(), input.data(), input.size());
      if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
      out.resize(n);
      return out;
    }
  }
  throw std::logic_error("unknown compression");
}

std::string compress(Compression compression, std::string_view input, int level) {
  return Compressor(compression, level).compress(input);
}

namespace {

// gzip members one after another. libdeflate wants the output's room up front: the member's
// trailer says its size modulo 2^32 (the last member's is a first guess), doubled until it fits.
std::string gunzip(std::string_view input) {
  std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> d(libdeflate_alloc_decompressor(),
                                                                                      &libdeflate_free_decompressor);
  if (!d) throw std::runtime_error("gzip: cannot create a decompressor (out of memory)");
  if (input.empty()) throw std::runtime_error("gzip: empty input, not a gzip stream");
  std::string out;
  size_t room = 64 * 1024;
  if (input.size() >= 4) {
    const auto* tail = reinterpret_cast<const unsigned char*>(input.data() + input.size() - 4);
    room = std::max<size_t>(room, tail[0] | (tail[1] << 8) | (tail[2] << 16) | (size_t{tail[3]} << 24));
  }
  size_t used = 0;
  while (used < input.size()) {
    const size_t start = out.size();
    for (;;) {
      out.resize(start + room);
      size_t in_used = 0, out_used = 0;
      const auto rc = libdeflate_gzip_decompress_ex(d.get(), input.data() + used, input.size() - used,
                                                    out.data() + start, room, &in_used, &out_used);
      if (rc == LIBDEFLATE_SUCCESS) {
        out.resize(start + out_used);
        used += in_used;
        break;
      }
      if (rc != LIBDEFLATE_INSUFFICIENT_SPACE || room > std::numeric_limits<size_t>::max() / 4)
        throw std::runtime_error("gzip: not a valid gzip stream (at byte " + std::to_string(used) + " of " +
                                 std::to_string(input.size()) + ")");
      room *= 2;
    }
  }
  return out;
}

// zstd frames one after another, streamed (a frame need not say its size).
std::string unzstd(std::string_view input) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> d(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!d) throw std::runtime_error("zstd: cannot create a decompression context");
  if (input.empty()) throw std::runtime_error("zstd: empty input, not a zstd frame");
  std::string out;
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer in{input.data(), input.size(), 0};
  size_t left = 0;  // 0: the last frame is complete
  while (in.pos < in.size) {
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    left = ZSTD_decompressStream(d.get(), &o, &in);
    if (ZSTD_isError(left)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
    out.append(chunk.data(), o.pos);
  }
  for (ZSTD_outBuffer o{chunk.data(), chunk.size(), chunk.size()}; left != 0 && o.pos == o.size;) {
    o.pos = 0;  // what the last call could not put out yet
    left = ZSTD_decompressStream(d.get(), &o, &in);
    if (ZSTD_isError(left)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
    out.append(chunk.data(), o.pos);
  }
  if (left != 0) throw std::runtime_error("zstd: the input ends inside a frame");
  return out;
}

}  // namespace

std::string decompress(Compression compression, std::string_view input) {
  switch (compression) {
    case Compression::None: return std::string(input);
    case Compression::Gzip: return gunzip(input);
    case Compression::Zstd: return unzstd(input);
  }
  throw std::logic_error("unknown compression");
}

}  // namespace picomq::kit
