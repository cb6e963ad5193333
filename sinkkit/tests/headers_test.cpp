#include "picomq/kit/headers.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace picomq::kit {
namespace {

// Headers as a test writes them: name and value bytes, nullopt for a null value.
using Spec = std::vector<std::pair<std::string, std::optional<std::string>>>;

pmq_bytes bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string render(const Spec& spec) {
  std::vector<pmq_header> headers;
  for (const auto& [name, value] : spec)
    headers.push_back({bytes(name), value ? bytes(*value) : pmq_bytes{nullptr, 0}});
  std::string out = "prefix:";
  append_headers_json(out, headers);
  EXPECT_EQ(out.rfind("prefix:", 0), 0u) << "appends";
  return out.substr(7);
}

TEST(HeadersJson, NoHeadersIsAnEmptyObject) { EXPECT_EQ(render({}), "{}"); }

TEST(HeadersJson, NamesThatOccurOnceMapToTheirValue) {
  EXPECT_EQ(render({{"a", "1"}}), R"({"a":"1"})");
  EXPECT_EQ(render({{"trace", "abc-é"}, {"b", "x"}}), R"({"trace":"abc-é","b":"x"})");
}

TEST(HeadersJson, ARepeatedNameMapsToAnArrayOfItsValuesInOrder) {
  EXPECT_EQ(render({{"a", "1"}, {"a", "2"}}), R"({"a":["1","2"]})");
  const auto parsed = nlohmann::json::parse(render({{"a", "1"}, {"a", "2"}}));
  EXPECT_EQ(parsed["a"], nlohmann::json::parse(R"(["1","2"])")) << "both values survive a JSON reader";
}

TEST(HeadersJson, ThreeTimesGivesThreeValues) {
  EXPECT_EQ(render({{"a", "1"}, {"a", "2"}, {"a", "3"}}), R"({"a":["1","2","3"]})");
}

TEST(HeadersJson, InterleavedNamesKeepFirstAppearanceOrder) {
  EXPECT_EQ(render({{"b", "1"}, {"a", "2"}, {"b", "3"}, {"c", "4"}, {"a", "5"}}),
            R"({"b":["1","3"],"a":["2","5"],"c":"4"})");
}

TEST(HeadersJson, NonUtf8ValuesAreBase64AlsoInsideAnArray) {
  const std::string bin("\xff\xfe", 2);
  EXPECT_EQ(render({{"bin", bin}}), R"({"bin":"//4="})");
  EXPECT_EQ(render({{"v", "text"}, {"v", bin}}), R"({"v":["text","//4="]})");
}

TEST(HeadersJson, NullValuesAreJsonNull) {
  EXPECT_EQ(render({{"n", std::nullopt}}), R"({"n":null})");
  EXPECT_EQ(render({{"n", std::nullopt}, {"n", "x"}, {"n", std::nullopt}}), R"({"n":[null,"x",null]})");
  EXPECT_EQ(render({{"e", ""}}), R"({"e":""})") << "an empty value is not null";
}

TEST(HeadersJson, EmptyNamesAreAKeyLikeAnyOther) {
  EXPECT_EQ(render({{"", "1"}}), R"({"":"1"})");
  EXPECT_EQ(render({{"", "1"}, {"a", "2"}, {"", "3"}}), R"({"":["1","3"],"a":"2"})");
}

TEST(HeadersJson, NamesAreEscapedAndNonUtf8NamesBase64) {
  EXPECT_EQ(render({{"q\"\n", "v"}}), R"({"q\"\n":"v"})");
  const std::string bin("\xff", 1);
  EXPECT_EQ(render({{bin, "1"}, {bin, "2"}}), R"({"/w==":["1","2"]})");
  // A UTF-8 name equal to another name's base64 is the same key once rendered: one group.
  EXPECT_EQ(render({{bin, "1"}, {"/w==", "2"}}), R"({"/w==":["1","2"]})");
}

TEST(HeadersJson, ManyHeadersAreGroupedToo) {
  Spec spec;
  for (int i = 0; i < 100; ++i) spec.push_back({"h" + std::to_string(i % 7), std::to_string(i)});
  const auto parsed = nlohmann::json::parse(render(spec));
  ASSERT_EQ(parsed.size(), 7u);
  for (int k = 0; k < 7; ++k) {
    nlohmann::json expected = nlohmann::json::array();
    for (int i = k; i < 100; i += 7) expected.push_back(std::to_string(i));
    EXPECT_EQ(parsed["h" + std::to_string(k)], expected) << k;
  }
  const std::string text = render(spec);
  EXPECT_LT(text.find("\"h0\""), text.find("\"h1\"")) << "first-appearance order";
  EXPECT_LT(text.find("\"h5\""), text.find("\"h6\""));
}

}  // namespace
}  // namespace picomq::kit
