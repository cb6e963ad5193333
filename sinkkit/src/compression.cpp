#include "picomq/kit/compression.hpp"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace picomq::kit {

namespace {

constexpr int kGzipDefaultLevel = 6;  // zlib's Z_DEFAULT_COMPRESSION
constexpr int kZstdDefaultLevel = 3;  // ZSTD_CLEVEL_DEFAULT
constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, +16: a gzip wrapper instead of zlib's

int checked_level(Compression compression, int level) {
  switch (compression) {
    case Compression::None:
      return 0;
    case Compression::Gzip:
      if (level == 0) return kGzipDefaultLevel;
      if (level < 1 || level > 9) throw std::invalid_argument("gzip level must be 1-9, not " + std::to_string(level));
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
    case Compression::None:
      return "none";
    case Compression::Gzip:
      return "gzip";
    case Compression::Zstd:
      return "zstd";
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
  z_stream gzip{};
  bool gzip_ready = false;
  ZSTD_CCtx* zstd = nullptr;

  ~Codec() {
    if (gzip_ready) deflateEnd(&gzip);
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
    case Compression::None:
      return std::string(input);
    case Compression::Gzip: {
      z_stream& z = codec_->gzip;
      if (!codec_->gzip_ready) {
        if (deflateInit2(&z, level_, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
          throw std::runtime_error("gzip: deflateInit2 failed");
        codec_->gzip_ready = true;
      } else if (deflateReset(&z) != Z_OK) {
        throw std::runtime_error("gzip: deflateReset failed");
      }
      std::string out;
      out.resize(deflateBound(&z, static_cast<uLong>(input.size())) + 64);
      size_t produced = 0;
      size_t consumed = 0;
      // zlib counts in uInt: feed pieces of at most 4 GiB, each drained before the next.
      for (;;) {
        const size_t chunk = std::min<size_t>(input.size() - consumed, std::numeric_limits<uInt>::max());
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data() + consumed));
        z.avail_in = static_cast<uInt>(chunk);
        const int flush = consumed + chunk == input.size() ? Z_FINISH : Z_NO_FLUSH;
        int rc = Z_OK;
        do {
          if (out.size() - produced < 64) out.resize(out.size() * 2);
          const size_t room = std::min<size_t>(out.size() - produced, std::numeric_limits<uInt>::max());
          z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
          z.avail_out = static_cast<uInt>(room);
          rc = deflate(&z, flush);
          if (rc == Z_STREAM_ERROR) throw std::runtime_error("gzip: deflate failed");
          produced += room - z.avail_out;
        } while (flush == Z_FINISH ? rc != Z_STREAM_END : z.avail_in > 0);
        consumed += chunk;
        if (flush == Z_FINISH) break;
      }
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

}  // namespace picomq::kit
