// fuzz_decoder_text: arbitrary bytes through the text schema's decoder. Differential against a
// byte-by-byte UTF-8 check written from RFC 3629 (no overlongs, no surrogates, <= U+10FFFF).
#include "common.h"
#include "decoders/payload_decoder.h"

namespace {
bool utf8_reference(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto decoder = picomq::decoders::make_decoder(picomq::config::Schema::Text);
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  const bool ok = decoder->decode_record({data, size}, out, owned, error) == picomq::decoders::Status::ok;
  if (ok != utf8_reference(data, size)) picomq::fuzz::die("text decoder and RFC 3629 disagree", error);
  if (ok && (out.data != data || out.size != size)) picomq::fuzz::die("text payload not passed on as is", "");
  return 0;
}
