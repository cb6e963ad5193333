#include "picomq/kit/object_key.hpp"

#include <gtest/gtest.h>

namespace picomq::kit {
namespace {

std::string resolve(std::string_view tmpl, ObjectKeyFields f) {
  auto t = ObjectKeyTemplate::parse(tmpl);
  EXPECT_TRUE(t) << t.error();
  auto r = t.value().resolve(f);
  EXPECT_TRUE(r) << r.error();
  return r ? r.value() : "";
}

TEST(ObjectKeyTemplate, ResolvesTheDefaultLayoutWithAZeroPaddedStartOffset) {
  EXPECT_EQ(resolve("{topic}/partition={partition}/{topic}+{partition}+{start_offset}.{ext}",
                    {.topic = "shop.orders", .partition = 3, .start_offset = 42, .ext = "json.gz"}),
            "shop.orders/partition=3/shop.orders+3+00000000000000000042.json.gz");
}

TEST(ObjectKeyTemplate, DateAndHourComeFromTheRecordTimestampInUtc) {
  // 2023-11-14T22:13:20Z
  const ObjectKeyFields f{.topic = "t", .start_offset = 0, .timestamp_ms = 1'700'000'000'000};
  EXPECT_EQ(resolve("{year}/{month}/{day}/{hour}/{start_offset}", f), "2023/11/14/22/00000000000000000000");
  ObjectKeyFields none = f;
  none.timestamp_ms = -1;
  EXPECT_EQ(resolve("{year}-{month}-{day}T{hour}", none), "1970-01-01T00");
}

TEST(ObjectKeyTemplate, TimeBucketsFollowTheFinestTimeField) {
  auto hourly = ObjectKeyTemplate::parse("{day}/{hour}/{start_offset}").value();
  EXPECT_EQ(hourly.time_bucket(3'600'000 * 5 + 1), hourly.time_bucket(3'600'000 * 5 + 3'599'999));
  EXPECT_NE(hourly.time_bucket(3'600'000 * 5), hourly.time_bucket(3'600'000 * 6));
  auto monthly = ObjectKeyTemplate::parse("{year}/{month}/{start_offset}").value();
  EXPECT_EQ(monthly.time_bucket(1'700'000'000'000), monthly.time_bucket(1'700'000'000'000 + 86'400'000));  // Nov 15
  EXPECT_NE(monthly.time_bucket(1'700'000'000'000), monthly.time_bucket(1'700'000'000'000 + 20 * 86'400'000LL));  // Dec
  auto timeless = ObjectKeyTemplate::parse("{start_offset}").value();
  EXPECT_EQ(timeless.time_bucket(0), timeless.time_bucket(1'700'000'000'000));
}

TEST(ObjectKeyTemplate, HostileTopicsStayOneSafeSegment) {
  const char* tmpl = "out/{topic}/{start_offset}";
  const std::string climbing = resolve(tmpl, {.topic = "../etc"});
  EXPECT_EQ(climbing.find("/../"), std::string::npos) << climbing;
  EXPECT_EQ(climbing.rfind("out/", 0), 0u);
  EXPECT_EQ(resolve(tmpl, {.topic = "a/b c"}), "out/a%2Fb%20c/00000000000000000000");
  EXPECT_EQ(resolve(tmpl, {.topic = ".."}), "out/__/00000000000000000000");
}

TEST(ObjectKeyTemplate, SegmentsAndSinkKey) {
  EXPECT_EQ(resolve("{sink_key}/{topic_segment[0]}/{topic_segment[-1]}/{start_offset}",
                    {.topic = "shop.eu.orders", .start_offset = 7, .sink_key = "orders_s3"}),
            "orders_s3/shop/orders/00000000000000000007");
  auto t = ObjectKeyTemplate::parse("{topic_segment[3]}/{start_offset}").value();
  auto r = t.resolve({.topic = "a.b"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("has no segment 3"), std::string::npos) << r.error();
}

TEST(ObjectKeyTemplate, ThePrefixIsTheKeyUpToTheStartOffset) {
  auto t = ObjectKeyTemplate::parse("{topic}/{hour}/{partition}+{start_offset}.{ext}").value();
  const ObjectKeyFields f{.topic = "t", .partition = 1, .start_offset = 5, .timestamp_ms = 3'600'000, .ext = "json"};
  EXPECT_EQ(t.resolve_prefix(f).value(), "t/01/1+");
  EXPECT_EQ(t.resolve(f).value().rfind(t.resolve_prefix(f).value(), 0), 0u);
}

TEST(ObjectKeyTemplate, ParseErrorsNameTheProblemAndColumn) {
  auto unknown = ObjectKeyTemplate::parse("{topic}/{offset}");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown placeholder '{offset}' (column 9)"), std::string::npos) << unknown.error();
  EXPECT_FALSE(ObjectKeyTemplate::parse("/{topic}"));
  EXPECT_FALSE(ObjectKeyTemplate::parse("{topic"));
  EXPECT_FALSE(ObjectKeyTemplate::parse("a}b"));
  EXPECT_FALSE(ObjectKeyTemplate::parse("a\nb"));
  EXPECT_FALSE(ObjectKeyTemplate::parse("{topic_segment[x]}"));
  EXPECT_EQ(resolve("{{literal}}/{start_offset}", {}), "{literal}/00000000000000000000");
  auto t = ObjectKeyTemplate::parse("{topic}/{start_offset}").value();
  EXPECT_TRUE(t.uses(ObjectKeyTemplate::Field::StartOffset));
  EXPECT_FALSE(t.uses(ObjectKeyTemplate::Field::Partition));
}

TEST(ObjectKeyTemplate, ThePlaceholdersAfterTheStartOffsetAreNamed) {
  using F = ObjectKeyTemplate::Field;
  EXPECT_TRUE(ObjectKeyTemplate::parse("{topic}/{partition}/{start_offset}.x").value().after_start_offset().empty());
  EXPECT_EQ(ObjectKeyTemplate::parse("{topic}/{start_offset}-{partition}-{hour}.{ext}").value().after_start_offset(),
            (std::vector<F>{F::Partition, F::Hour, F::Ext}));
  EXPECT_EQ(ObjectKeyTemplate::name(F::Partition), "partition");
  EXPECT_EQ(ObjectKeyTemplate::name(F::Segment), "topic_segment[N]");
}

TEST(ObjectKeyTemplate, ATemplateMustTellApartTheTopicsItsBlocksSubscribeTo) {
  const auto by_partition = ObjectKeyTemplate::parse("p{partition}/{start_offset}.{ext}").value();
  const auto by_segment = ObjectKeyTemplate::parse("{topic_segment[-1]}/p{partition}/{start_offset}.{ext}").value();
  const auto by_topic = ObjectKeyTemplate::parse("{topic}/p{partition}/{start_offset}.{ext}").value();
  const std::vector<Subscription> one{{.topics = {"orders.eu"}, .pattern = std::nullopt}};
  const std::vector<Subscription> two{{.topics = {"orders.eu"}, .pattern = std::nullopt},
                                      {.topics = {"returns.eu", "orders.eu"}, .pattern = std::nullopt}};
  const std::vector<Subscription> regions{{.topics = {"orders.eu", "orders.us"}, .pattern = std::nullopt}};
  const std::vector<Subscription> pattern{{.topics = {}, .pattern = "^orders\\..*"}};
  EXPECT_FALSE(by_partition.topics_problem(one));
  EXPECT_NE(by_partition.topics_problem(two).value_or("").find("topics 'orders.eu' and 'returns.eu'"),
            std::string::npos);
  EXPECT_TRUE(by_segment.topics_problem(two)) << "both end in 'eu'";
  EXPECT_FALSE(by_segment.topics_problem(regions));
  EXPECT_NE(by_segment.topics_problem(pattern).value_or("").find("subscribes by pattern '^orders\\..*'"),
            std::string::npos);
  EXPECT_FALSE(by_topic.topics_problem(pattern));
  EXPECT_FALSE(by_topic.topics_problem(two));
  const auto deep = ObjectKeyTemplate::parse("{topic_segment[2]}/{topic}/{partition}{start_offset}").value();
  EXPECT_NE(deep.topics_problem(one).value_or("").find("has no segment 2"), std::string::npos);
  EXPECT_EQ(parse_subscriptions(R"([{"topics":["a"],"pattern":null},{"topics":[],"pattern":"^b.*"}])")->size(), 2u);
  EXPECT_FALSE(parse_subscriptions(""));
  EXPECT_FALSE(parse_subscriptions("{}"));
}

}  // namespace
}  // namespace picomq::kit
