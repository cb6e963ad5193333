#include "decoders/payload_decoder.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

namespace picomq::decoders {
namespace {

struct Decoded {
  bool ok;
  std::string error;
};

Decoded decode(config::Schema schema, std::string_view payload) {
  auto decoder = make_decoder(schema);
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  const bool ok =
      decoder->decode({reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, out, owned, error);
  if (ok) {
    EXPECT_EQ(out.size, payload.size());
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(out.data), out.size), payload)
        << "payload passed on as is";
  }
  return {ok, error};
}

TEST(Decoder, JsonAcceptsEveryDocumentShape) {
  for (std::string_view doc : {R"({"a":1,"b":[true,null,"x"],"c":{"d":-1.5e3}})", "[]", "42", R"("just a string")",
                               "null", " { \"spaced\" : 1 } "})
    EXPECT_TRUE(decode(config::Schema::Json, doc).ok) << doc;
}

TEST(Decoder, JsonAcceptsIntegersBeyond64BitsButNotNumbersBeyondADouble) {
  EXPECT_TRUE(decode(config::Schema::Json, R"({"id":123456789012345678901234567890,"neg":-9223372036854775809})").ok);
  EXPECT_TRUE(decode(config::Schema::Json, "18446744073709551616").ok);
  EXPECT_TRUE(decode(config::Schema::Json, R"({"tiny":1e-400})").ok);
  // The fallback for big integers keeps simdjson's depth limit (1023 levels pass, 1024 do not).
  auto nested = [](size_t levels) {
    return "[123456789012345678901," + std::string(levels - 1, '[') + std::string(levels, ']');
  };
  EXPECT_TRUE(decode(config::Schema::Json, nested(1023)).ok);
  const auto deep = decode(config::Schema::Json, nested(1024));
  EXPECT_FALSE(deep.ok);
  EXPECT_NE(deep.error.find("too deep"), std::string::npos) << deep.error;
  const auto huge = decode(config::Schema::Json, R"({"huge":1e400})");
  EXPECT_FALSE(huge.ok);
  EXPECT_NE(huge.error.find("number out of range (number overflow parsing '1e400')"), std::string::npos) << huge.error;
  EXPECT_FALSE(decode(config::Schema::Json, R"({"id":123456789012345678901234567890,)").ok)
      << "still a full grammar check";
  EXPECT_FALSE(decode(config::Schema::Json, "{\"id\":123456789012345678901234567890,\"s\":\"\xff\"}").ok)
      << "and UTF-8";
}

TEST(Decoder, JsonRejectsWhatIsNotOneDocumentAndSaysWhy) {
  for (std::string_view doc : {R"({"a":1)", R"({"a":1} {"b":2})", R"({'a':1})", "{\"a\":\"\xff\"}", "tru", "",
                               R"({"a":01})", R"(["unterminated)"}) {
    auto r = decode(config::Schema::Json, doc);
    EXPECT_FALSE(r.ok) << doc;
    EXPECT_NE(r.error.find("not valid JSON"), std::string::npos) << r.error;
  }
}

TEST(Decoder, TextNeedsUtf8AndRawTakesAnything) {
  EXPECT_TRUE(decode(config::Schema::Text, "h\xc3\xa9llo").ok);
  auto bad = decode(config::Schema::Text, "h\xc3llo");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("UTF-8"), std::string::npos);
  EXPECT_TRUE(decode(config::Schema::Raw, std::string_view("\x00\xff\xfe", 3)).ok);
}

// The JSON decoder parses in place when the bytes simdjson over-reads past a payload lie on
// the payload's own page. A payload that ends right before an unmapped page must still parse
// (via a copy), not fault; so must a truncated one that makes the parser look further.
TEST(Decoder, JsonPayloadEndingAtAnUnmappedPageIsCopiedNotOverRead) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* area =
      static_cast<uint8_t*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  ASSERT_EQ(mprotect(area + page, page, PROT_NONE), 0);
  auto decoder = make_decoder(config::Schema::Json);
  for (std::string_view doc : {R"({"ok":true,"n":[1,2,3]})", R"({"cut":)", "7"}) {
    for (size_t gap : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}}) {
      uint8_t* at = area + page - gap - doc.size();
      std::memcpy(at, doc.data(), doc.size());
      std::deque<std::string> owned;
      pmq_bytes out{};
      std::string error;
      const bool ok = decoder->decode({at, doc.size()}, out, owned, error);
      EXPECT_EQ(ok, doc != R"({"cut":)") << doc << " gap " << gap << ": " << error;
    }
  }
  munmap(area, 2 * page);
}

}  // namespace
}  // namespace picomq::decoders
