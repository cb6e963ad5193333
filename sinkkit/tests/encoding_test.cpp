#include "picomq/kit/encoding.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace picomq::kit {
namespace {

using namespace std::string_view_literals;

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

std::string json(std::string_view s) {
  std::string out;
  append_json_escaped(out, s);
  return out;
}

// --- base64 -------------------------------------------------------------------------------

TEST(Base64, Rfc4648TestVectors) {
  const std::pair<std::string_view, std::string_view> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
    const auto decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.has_value()) << encoded;
    EXPECT_EQ(*decoded, bytes_of(plain)) << encoded;
  }
}

TEST(Base64, UsesStandardAlphabetNotUrlSafe) {
  const std::vector<uint8_t> bytes = {0xFB, 0xFF};
  EXPECT_EQ(base64_encode(bytes), "+/8=");
  EXPECT_FALSE(base64_decode("-_8=").has_value());
}

TEST(Base64, RoundTripsEveryByteValueAndLength) {
  std::vector<uint8_t> all;
  all.reserve(256);
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<uint8_t>(i));
  for (std::size_t n = 0; n <= all.size(); n += 1) {
    const std::vector<uint8_t> prefix(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string encoded = base64_encode(prefix);
    EXPECT_EQ(encoded.size(), (n + 2) / 3 * 4);
    const auto decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.has_value()) << encoded;
    EXPECT_EQ(*decoded, prefix);
  }
}

TEST(Base64, DecodeRejectsMalformedInput) {
  for (std::string_view bad : {"Zg="sv, "Zg"sv, "Z"sv, "Z==="sv, "===="sv, "Zm9v\n"sv, "Zm 9v"sv, "Zm=v"sv,
                               "Zg==Zg=="sv, "Zm9v*A=="sv, "Zg\0="sv}) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << "accepted: " << bad;
  }
}

TEST(Base64, DecodeRejectsNonZeroPaddingBits) {
  EXPECT_TRUE(base64_decode("Zg==").has_value());
  EXPECT_FALSE(base64_decode("Zh==").has_value());  // 'h' leaves a 1 bit under the padding
  EXPECT_TRUE(base64_decode("Zm8=").has_value());
  EXPECT_FALSE(base64_decode("Zm9=").has_value());
}

// --- UTF-8 --------------------------------------------------------------------------------

TEST(Utf8, AcceptsWellFormedText) {
  for (std::string_view ok :
       {""sv, "abc"sv, "a\0b"sv, "заказы.eu"sv, "\xF0\x9F\x98\x80"sv, "\xEF\xBF\xBD"sv, "\xED\x9F\xBF"sv /* U+D7FF */,
        "\xEE\x80\x80"sv /* U+E000 */, "\xF4\x8F\xBF\xBF"sv /* U+10FFFF */, "\xC2\x80"sv /* U+0080 */,
        "\xE0\xA0\x80"sv /* U+0800 */, "\xF0\x90\x80\x80"sv /* U+10000 */}) {
    EXPECT_TRUE(is_valid_utf8(ok)) << ok;
  }
}

TEST(Utf8, RejectsOverlongsSurrogatesOutOfRangeAndTruncation) {
  for (std::string_view bad : {
           "\xC0\x80"sv,          // overlong NUL
           "\xC1\xBF"sv,          // overlong 0x7F
           "\xE0\x80\xAF"sv,      // overlong '/'
           "\xE0\x9F\xBF"sv,      // overlong U+07FF
           "\xF0\x8F\xBF\xBF"sv,  // overlong U+FFFF
           "\xED\xA0\x80"sv,      // surrogate U+D800
           "\xED\xBF\xBF"sv,      // surrogate U+DFFF
           "\xF4\x90\x80\x80"sv,  // U+110000
           "\xF5\x80\x80\x80"sv,  // lead byte beyond range
           "\xFF"sv, "\xFE"sv,    // never in UTF-8
           "\x80"sv,              // lone continuation
           "a\xBF"sv,             // stray continuation after ASCII
           "\xC3"sv,              // truncated 2-byte
           "\xE2\x82"sv,          // truncated euro sign
           "\xF0\x9F\x98"sv,      // truncated emoji
           "\xC3\x28"sv,          // bad continuation
           "a\xE2\x82\xAC"
           "b\xE2\x82"sv,  // valid, then truncated at the end
       }) {
    EXPECT_FALSE(is_valid_utf8(bad)) << "accepted bytes of length " << bad.size();
  }
}

TEST(Utf8, CodePointsAreAppendedAtEachLength) {
  std::string out;
  for (char32_t cp : {U'A', U'\u00e9', U'\u263a', U'\U0001F600', char32_t{0x10FFFF}}) kit::append_utf8(out, cp);
  EXPECT_EQ(out, "A\xC3\xA9\xE2\x98\xBA\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF");
  EXPECT_TRUE(kit::is_valid_utf8(out));
}

TEST(Utf8, SequenceLength) {
  EXPECT_EQ(utf8_sequence_length({}), 0u);
  const auto euro = bytes_of("\xE2\x82\xAC");
  EXPECT_EQ(utf8_sequence_length(euro), 3u);
  EXPECT_EQ(utf8_sequence_length(std::span(euro).first(2)), 0u);
  const auto emoji = bytes_of("\xF0\x9F\x98\x80!");
  EXPECT_EQ(utf8_sequence_length(emoji), 4u);
}

// --- headers ------------------------------------------------------------------------------

TEST(HeaderValue, ValidUtf8IsKeptAsIs) {
  bool was_base64 = true;
  EXPECT_EQ(header_value_as_string(bytes_of("text/plain; charset=utf-8"), &was_base64), "text/plain; charset=utf-8");
  EXPECT_FALSE(was_base64);
  EXPECT_EQ(header_value_as_string(bytes_of("заказ 😀"), &was_base64), "заказ 😀");
  EXPECT_FALSE(was_base64);
  EXPECT_EQ(header_value_as_string({}, &was_base64), "");
  EXPECT_FALSE(was_base64);
}

TEST(HeaderValue, InvalidUtf8BecomesBase64) {
  bool was_base64 = false;
  const std::vector<uint8_t> binary = {0xFF, 0xFE, 0x00};
  EXPECT_EQ(header_value_as_string(binary, &was_base64), "//4A");
  EXPECT_TRUE(was_base64);
  EXPECT_EQ(header_value_as_string(bytes_of("\xC0\x80"), &was_base64), "wIA=");  // overlong
  EXPECT_TRUE(was_base64);
  EXPECT_EQ(header_value_as_string(bytes_of("\xED\xA0\x80"), &was_base64), "7aCA");  // surrogate
  EXPECT_TRUE(was_base64);
  EXPECT_EQ(header_value_as_string(bytes_of("ok\xE2\x82")), base64_encode("ok\xE2\x82"sv));
}

// --- JSON ---------------------------------------------------------------------------------

TEST(JsonEscape, QuotesAndBackslashes) {
  EXPECT_EQ(json(R"(he said "hi")"), R"("he said \"hi\"")");
  EXPECT_EQ(json(R"(C:\dir\)"), R"("C:\\dir\\")");
  EXPECT_EQ(json(R"("; DROP TABLE x; --)"), R"("\"; DROP TABLE x; --")");
  EXPECT_EQ(json(""), R"("")");
}

TEST(JsonEscape, ControlCharacters) {
  EXPECT_EQ(json("a\nb\tc\rd\be\ff"), R"("a\nb\tc\rd\be\ff")");
  EXPECT_EQ(json("\x01\x1f"), R"("\u0001\u001f")");
  EXPECT_EQ(json("a\0b"sv), R"("a\u0000b")");
  EXPECT_EQ(json("\x7f"), "\"\x7f\"");  // DEL needs no escape in JSON
}

TEST(JsonEscape, KeepsUtf8AsIs) {
  EXPECT_EQ(json("заказы.eu 😀 €"), "\"заказы.eu 😀 €\"");
  EXPECT_EQ(json("\xF4\x8F\xBF\xBF"), "\"\xF4\x8F\xBF\xBF\"");
}

TEST(JsonEscape, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(json("a\xFF"
                 "b"),
            "\"a\xEF\xBF\xBD"
            "b\"");
  EXPECT_EQ(json("\xC0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");                  // one per byte
  EXPECT_EQ(json("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
  EXPECT_EQ(json("x\xE2\x82"), "\"x\xEF\xBF\xBD\xEF\xBF\xBD\"");                // truncated at end
}

TEST(JsonEscape, AppendsToExistingOutput) {
  std::string out = R"({"k":)";
  append_json_escaped(out, "v\"");
  out.push_back('}');
  EXPECT_EQ(out, R"({"k":"v\""})");
}

TEST(JsonEscape, LongPlainRunIsCopied) {
  const std::string plain(100000, 'a');
  EXPECT_EQ(json(plain), "\"" + plain + "\"");
}

TEST(JsonEscape, OutputOfRandomBytesIsValidJsonStringText) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 2000; ++round) {
    std::string input(static_cast<std::size_t>(round % 40), '\0');
    for (char& c : input) c = static_cast<char>(byte(rng));
    const std::string out = json(input);
    ASSERT_TRUE(is_valid_utf8(out));
    ASSERT_GE(out.size(), 2u);
    ASSERT_EQ(out.front(), '"');
    ASSERT_EQ(out.back(), '"');
    // No raw control character, and every '"' inside is escaped by an odd run of '\'.
    for (std::size_t i = 1; i + 1 < out.size(); ++i) {
      ASSERT_GE(static_cast<uint8_t>(out[i]), 0x20) << "raw control byte at " << i;
      if (out[i] == '"') {
        std::size_t backslashes = 0;
        while (backslashes < i && out[i - 1 - backslashes] == '\\') ++backslashes;
        ASSERT_EQ(backslashes % 2, 1u) << "unescaped quote at " << i;
      }
    }
  }
}

// The word-at-a-time scan must find an escape at every position of a word, and agree with
// nlohmann's escaping on printable ASCII text that mixes plain runs with quotes, backslashes and
// control characters.
TEST(JsonEscape, WordAtATimeScanAgreesWithAReferenceAtEveryOffset) {
  for (const char special : {'"', '\\', '\n', '\x01', '\x1f', '\t'}) {
    for (std::size_t length = 1; length <= 24; ++length) {
      for (std::size_t at = 0; at < length; ++at) {
        std::string input(length, 'a');
        input[at] = special;
        EXPECT_EQ(json(input), nlohmann::json(input).dump()) << "special " << int(special) << " at " << at;
      }
    }
  }
  std::string ascii_only(40, 'x');
  EXPECT_TRUE(is_valid_utf8(ascii_only));
  ascii_only[17] = static_cast<char>(0xC3);  // a lead byte without its continuation, mid-word
  EXPECT_FALSE(is_valid_utf8(ascii_only));
}

TEST(PercentEncode, KeepsTheUnreservedCharactersAndEncodesEveryOtherByteInUpperCaseHex) {
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("a b/c?d=e&f#g%"), "a%20b%2Fc%3Fd%3De%26f%23g%25");
  EXPECT_EQ(percent_encode("INSERT INTO `t` (a) FORMAT RowBinary"),
            "INSERT%20INTO%20%60t%60%20%28a%29%20FORMAT%20RowBinary");
  EXPECT_EQ(percent_encode(std::string_view("\xC3\xA9\x00\xFF", 4)), "%C3%A9%00%FF");
  EXPECT_EQ(percent_encode(""), "");
}

}  // namespace
}  // namespace picomq::kit
