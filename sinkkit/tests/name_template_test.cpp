#include "picomq/kit/name_template.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace picomq::kit {
namespace {

// Parses `text` (which must be valid) and resolves it for `topic` (which must succeed).
std::string resolve(std::string_view text, std::string_view topic) {
  auto tmpl = NameTemplate::parse(text);
  EXPECT_TRUE(tmpl.ok()) << tmpl.error();
  if (!tmpl.ok()) return "<parse failed>";
  auto name = tmpl.value().resolve(topic);
  EXPECT_TRUE(name.ok()) << name.error();
  return name.ok() ? name.value() : "<resolve failed>";
}

// Passes when `text` contains every one of `parts`; shows the whole text when it does not.
testing::AssertionResult contains(const std::string& text, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) {
    if (text.find(part) == std::string::npos) {
      return testing::AssertionFailure() << "\"" << part << "\" not in: " << text;
    }
  }
  return testing::AssertionSuccess();
}

// The parse error of `text`, which must not parse.
std::string parse_error(std::string_view text) {
  auto tmpl = NameTemplate::parse(text);
  EXPECT_FALSE(tmpl.ok()) << "parsed: " << text;
  return tmpl.error();
}

TEST(NameTemplate, ConstantTemplateIgnoresTopic) {
  auto tmpl = NameTemplate::parse("events");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error();
  EXPECT_FALSE(tmpl.value().depends_on_topic());
  EXPECT_EQ(tmpl.value().source(), "events");
  EXPECT_EQ(tmpl.value().resolve("orders.eu").value(), "events");
  EXPECT_EQ(tmpl.value().resolve("").value(), "events");
}

TEST(NameTemplate, WholeTopic) {
  EXPECT_EQ(resolve("{topic}", "orders.eu"), "orders.eu");
  EXPECT_EQ(resolve("raw_{topic}_v1", "orders"), "raw_orders_v1");
  EXPECT_EQ(resolve("{topic}{topic}", "a"), "aa");
}

TEST(NameTemplate, SegmentsFromTheFrontAndTheBack) {
  EXPECT_EQ(resolve("orders_{topic_segment[-1]}", "shop.orders.eu"), "orders_eu");
  EXPECT_EQ(resolve("{topic_segment[0]}_{topic_segment[1]}", "shop.orders.eu"), "shop_orders");
  EXPECT_EQ(resolve("{topic_segment[-3]}", "a.b.c"), "a");
  EXPECT_EQ(resolve("{topic_segment[2]}", "a.b.c"), "c");
  EXPECT_EQ(resolve("{topic_segment[0]}|{topic_segment[-1]}", "nodots"), "nodots|nodots");
}

TEST(NameTemplate, EmptySegmentsCount) {
  EXPECT_EQ(resolve("x{topic_segment[1]}y", "a..b"), "xy");
  EXPECT_EQ(resolve("{topic_segment[-1]}", "a.b."), "");
  EXPECT_EQ(resolve("{topic_segment[0]}", ".a"), "");
}

TEST(NameTemplate, DoubledBracesAreLiteral) {
  EXPECT_EQ(resolve("{{topic}}", "t"), "{topic}");
  EXPECT_EQ(resolve("{{{topic}}}", "t"), "{t}");
  EXPECT_EQ(resolve("}}{{", "t"), "}{");
}

TEST(NameTemplate, UnicodeTemplateAndTopic) {
  EXPECT_EQ(resolve("заказы_{topic_segment[-1]}", "заказы.eu"), "заказы_eu");
  EXPECT_EQ(resolve("{topic_segment[0]}", "заказы.eu"), "заказы");
  EXPECT_EQ(resolve("{topic_segment[-1]}", "logs.😀"), "😀");
}

TEST(NameTemplate, HostileTopicsResolveLiterallyAndAreNotSanitisedHere) {
  EXPECT_EQ(resolve("{topic}", R"("; DROP TABLE x; --)"), R"("; DROP TABLE x; --)");
  EXPECT_EQ(resolve("t_{topic_segment[1]}", "a.{topic}.b"), "t_{topic}");
  EXPECT_EQ(resolve("{topic_segment[-1]}", "../../etc/passwd"), "/etc/passwd");
}

TEST(NameTemplate, EmptyTemplateIsAnError) { EXPECT_TRUE(contains(parse_error(""), {"empty"})); }

TEST(NameTemplate, UnknownPlaceholderNamesItAndItsColumn) {
  EXPECT_TRUE(contains(parse_error("{topik}"), {"unknown placeholder {topik}", "column 1"}));
  EXPECT_TRUE(contains(parse_error("events_{partition}"), {"unknown placeholder {partition}", "column 8"}));
  EXPECT_TRUE(contains(parse_error("{ topic }"), {"unknown placeholder { topic }"}));
  EXPECT_TRUE(contains(parse_error("{TOPIC}"), {"unknown placeholder {TOPIC}"}));
  EXPECT_TRUE(contains(parse_error("a{}"), {"empty placeholder", "column 2"}));
  // The message says what is allowed.
  EXPECT_TRUE(contains(parse_error("{offset}"), {"{topic}", "{topic_segment[N]}"}));
}

TEST(NameTemplate, ColumnsCountCharactersNotBytes) {
  EXPECT_TRUE(contains(parse_error("заказы_{topik}"), {"column 8"}));
}

TEST(NameTemplate, MalformedIndex) {
  EXPECT_TRUE(contains(parse_error("{topic_segment[x]}"), {"malformed index 'x'", "column 16"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[]}"), {"empty index", "column 16"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[1.5]}"), {"malformed index '1.5'"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[+1]}"), {"malformed index '+1'"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[ 1]}"), {"malformed index ' 1'"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[-0]}"), {"malformed index '-0'"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[99999999999]}"), {"out of range"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment[1]x}"), {"after ']'", "column 18"}));
  EXPECT_TRUE(contains(parse_error("{topic_segment}"), {"unknown placeholder {topic_segment}"}));
}

TEST(NameTemplate, MissingBracketOrBrace) {
  EXPECT_TRUE(contains(parse_error("{topic_segment[1}"), {"missing ']'", "column 17"}));
  EXPECT_TRUE(contains(parse_error("x_{topic_segment[1]"), {"missing '}'", "column 3"}));
  EXPECT_TRUE(contains(parse_error("{topic"), {"missing '}'", "column 1"}));
  EXPECT_TRUE(contains(parse_error("{to{topic}"), {"unclosed '{'", "column 1"}));
}

TEST(NameTemplate, UnbalancedBraces) {
  EXPECT_TRUE(contains(parse_error("a}b"), {"unbalanced '}'", "column 2", "'}}'"}));
  EXPECT_TRUE(contains(parse_error("{topic}}"), {"unbalanced '}'", "column 8"}));
  EXPECT_TRUE(contains(parse_error("a{"), {"unclosed '{'", "column 2", "'{{'"}));
  EXPECT_TRUE(contains(parse_error("{{{"), {"unclosed '{'", "column 3"}));
}

TEST(NameTemplate, ParseErrorQuotesTheTemplate) {
  EXPECT_TRUE(contains(parse_error("orders_{topik}"), {"\"orders_{topik}\""}));
}

TEST(NameTemplate, OutOfRangeSegmentIsAResolveError) {
  auto tmpl = NameTemplate::parse("t_{topic_segment[3]}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error();
  auto name = tmpl.value().resolve("a.b");
  ASSERT_FALSE(name.ok());
  EXPECT_TRUE(contains(name.error(), {"\"a.b\"", "2 segments", "{topic_segment[3]}"}));
  // The same template works for a topic that is long enough.
  EXPECT_EQ(tmpl.value().resolve("a.b.c.d").value(), "t_d");

  auto back = NameTemplate::parse("{topic_segment[-3]}");
  ASSERT_TRUE(back.ok());
  auto short_topic = back.value().resolve("solo");
  ASSERT_FALSE(short_topic.ok());
  EXPECT_TRUE(contains(short_topic.error(), {"\"solo\"", "1 segment,", "{topic_segment[-3]}"}));
}

TEST(NameTemplate, IsCopyableAndKeepsSource) {
  auto parsed = NameTemplate::parse("{{x}}_{topic_segment[-1]}");
  ASSERT_TRUE(parsed.ok());
  const NameTemplate copy = parsed.value();
  EXPECT_EQ(copy.source(), "{{x}}_{topic_segment[-1]}");
  EXPECT_TRUE(copy.depends_on_topic());
  EXPECT_EQ(copy.resolve("a.b").value(), "{x}_b");
}

}  // namespace
}  // namespace picomq::kit
