#include "picomq/kit/compression.hpp"

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <random>
#include <stdexcept>
#include <string>

namespace picomq::kit {
namespace {

// Independent decoders: zlib's inflate and libzstd's one-shot decompression.
std::string gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out;
  char buffer[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << "a complete gzip member";
  EXPECT_EQ(z.avail_in, 0u) << "and nothing after it";
  inflateEnd(&z);
  return out;
}

std::string unzstd(const std::string& in) {
  const unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
  EXPECT_NE(size, ZSTD_CONTENTSIZE_ERROR);
  EXPECT_NE(size, ZSTD_CONTENTSIZE_UNKNOWN) << "the frame says how large it is";
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

std::string sample_json(size_t records) {
  std::string s;
  for (size_t i = 0; i < records; ++i)
    s += R"({"id":)" + std::to_string(i) + R"(,"name":"order-)" + std::to_string(i % 97) + "\"}\n";
  return s;
}

TEST(Compression, GzipRoundTripsThroughZlib) {
  const std::string input = sample_json(5000);
  const std::string wire = compress(Compression::Gzip, input);
  EXPECT_EQ(static_cast<unsigned char>(wire[0]), 0x1f) << "gzip magic (RFC 1952)";
  EXPECT_EQ(static_cast<unsigned char>(wire[1]), 0x8b);
  EXPECT_LT(wire.size(), input.size() / 4);
  EXPECT_EQ(gunzip(wire), input);
}

TEST(Compression, ZstdRoundTripsThroughLibzstd) {
  const std::string input = sample_json(5000);
  const std::string wire = compress(Compression::Zstd, input);
  EXPECT_EQ(wire.substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4)) << "zstd frame magic (RFC 8878)";
  EXPECT_LT(wire.size(), input.size() / 4);
  EXPECT_EQ(unzstd(wire), input);
}

TEST(Compression, OneCompressorServesManyInputsEachComplete) {
  for (Compression c : {Compression::Gzip, Compression::Zstd}) {
    Compressor compressor(c, 1);
    for (size_t n : {0, 1, 100, 20000, 3}) {
      const std::string input = sample_json(n);
      const std::string wire = compressor.compress(input);
      EXPECT_EQ(c == Compression::Gzip ? gunzip(wire) : unzstd(wire), input) << to_string(c) << " " << n;
    }
  }
}

TEST(Compression, IncompressibleAndBinaryInputSurvive) {
  std::mt19937 rng(7);
  std::string noise(300000, '\0');
  for (char& ch : noise) ch = static_cast<char>(rng());
  EXPECT_EQ(gunzip(compress(Compression::Gzip, noise, 9)), noise);
  EXPECT_EQ(unzstd(compress(Compression::Zstd, noise, 19)), noise);
}

// Independent encoders for decompress(): zlib's deflate (gzip wrapper) and libzstd's one-shot
// compression.
std::string zlib_gzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string libzstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(Compression, DecompressReadsWhatZlibAndLibzstdWrote) {
  const std::string input = sample_json(20000);
  EXPECT_EQ(decompress(Compression::Gzip, zlib_gzip(input)), input);
  EXPECT_EQ(decompress(Compression::Zstd, libzstd(input)), input);
  EXPECT_EQ(decompress(Compression::Gzip, compress(Compression::Gzip, input)), input) << "and our own";
  EXPECT_EQ(decompress(Compression::Zstd, compress(Compression::Zstd, input)), input);
  EXPECT_EQ(decompress(Compression::None, input), input);
  // Members and frames one after another are the concatenation (RFC 1952 2.2, RFC 8878 3).
  EXPECT_EQ(decompress(Compression::Gzip, zlib_gzip("first ") + zlib_gzip("second")), "first second");
  EXPECT_EQ(decompress(Compression::Zstd, libzstd("first ") + libzstd("second")), "first second");
  // A member larger than its trailer's first guess, and one of incompressible bytes.
  std::mt19937 rng(7);
  std::string noise(3 << 20, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  EXPECT_EQ(decompress(Compression::Gzip, zlib_gzip(noise)), noise);
  EXPECT_EQ(decompress(Compression::Zstd, libzstd(noise)), noise);
}

TEST(Compression, DecompressRefusesTruncatedDamagedAndForeignInput) {
  const std::string input = sample_json(2000);
  for (Compression c : {Compression::Gzip, Compression::Zstd}) {
    const std::string wire = c == Compression::Gzip ? zlib_gzip(input) : libzstd(input);
    const std::string name(to_string(c));
    EXPECT_THROW(decompress(c, wire.substr(0, wire.size() / 2)), std::runtime_error) << name << ": truncated";
    std::string damaged = compress(c, input);  // ours: a gzip CRC-32 and ISIZE, a zstd checksum
    damaged[damaged.size() / 2] ^= 0x5a;
    damaged[damaged.size() - 2] ^= 0x5a;  // the trailer too: caught even where the data still decodes
    EXPECT_THROW(decompress(c, damaged), std::runtime_error) << name << ": damaged";
    EXPECT_THROW(decompress(c, input), std::runtime_error) << name << ": not compressed at all";
    EXPECT_THROW(decompress(c, ""), std::runtime_error) << name << ": empty";
    try {
      decompress(c, input);
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ":", 0), 0u) << e.what();
    }
  }
}

TEST(Compression, NoneIsTheInputUnchanged) {
  EXPECT_EQ(compress(Compression::None, "as is"), "as is");
  EXPECT_EQ(content_encoding(Compression::None), "");
}

TEST(Compression, NamesAndContentEncodings) {
  EXPECT_EQ(parse_compression("gzip"), Compression::Gzip);
  EXPECT_EQ(parse_compression("zstd"), Compression::Zstd);
  EXPECT_EQ(parse_compression("none"), Compression::None);
  EXPECT_EQ(parse_compression("GZIP"), std::nullopt) << "option values are exact";
  EXPECT_EQ(parse_compression("br"), std::nullopt);
  EXPECT_EQ(content_encoding(Compression::Gzip), "gzip");
  EXPECT_EQ(content_encoding(Compression::Zstd), "zstd");
}

// gzip is libdeflate's, whose levels go to 12; every level is a gzip member zlib reads back, and
// the higher levels are not larger on this input.
TEST(Compression, EveryGzipLevelRoundTripsThroughZlib) {
  const std::string input = sample_json(20000);
  size_t level1 = 0, level12 = 0;
  for (int level = 1; level <= 12; ++level) {
    Compressor c(Compression::Gzip, level);
    const std::string wire = c.compress(input);
    EXPECT_EQ(gunzip(wire), input) << "level " << level;
    EXPECT_EQ(gunzip(c.compress(input)), input) << "level " << level << ", the compressor reused";
    if (level == 1) level1 = wire.size();
    if (level == 12) level12 = wire.size();
  }
  EXPECT_LT(level12, level1);
  EXPECT_EQ(gunzip(compress(Compression::Gzip, "")), "") << "an empty body is still one member";
}

TEST(Compression, LevelsOutsideTheCodecAreRefused) {
  EXPECT_THROW(Compressor(Compression::Gzip, 13), std::invalid_argument);
  EXPECT_THROW(Compressor(Compression::Gzip, -1), std::invalid_argument);
  EXPECT_THROW(Compressor(Compression::Zstd, ZSTD_maxCLevel() + 1), std::invalid_argument);
  EXPECT_NO_THROW(Compressor(Compression::Zstd, -5)) << "zstd's fast negative levels exist";
  EXPECT_NO_THROW(Compressor(Compression::Gzip, 0)) << "0: the default";
}

}  // namespace
}  // namespace picomq::kit
