// The HTTP sink's request planning, without the network.
#include "http/bodies.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "picomq/kit/testing/fake_host.hpp"

namespace hs = picomq::http_sink;
namespace kit = picomq::kit;
using kit::testing::TestBatch;
using kit::testing::TestRecord;

namespace {
TestBatch mixed() {
  return TestBatch("shop.orders", 2,
                   {{.offset = 10, .payload = R"({"id":1})", .key = "a"},
                    {.offset = 11, .payload = std::nullopt, .key = "user/7"},
                    {.offset = 12, .payload = std::nullopt},
                    {.offset = 13, .payload = R"({"id":4})"}});
}
}  // namespace

TEST(HttpBodies, TombstonesAreSkippedSentOrTurnedIntoDeletesAndAKeylessDeleteIsRefused) {
  auto skip = hs::plan_batch(mixed().raw(), hs::Tombstones::Skip);
  EXPECT_EQ(skip.in_bodies, (std::vector<size_t>{0, 3}));
  EXPECT_TRUE(skip.deletes.empty() && skip.refused.empty());
  auto send = hs::plan_batch(mixed().raw(), hs::Tombstones::Send);
  EXPECT_EQ(send.in_bodies, (std::vector<size_t>{0, 1, 2, 3}));
  auto del = hs::plan_batch(mixed().raw(), hs::Tombstones::Delete);
  EXPECT_EQ(del.in_bodies, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(del.deletes, (std::vector<size_t>{1}));
  ASSERT_EQ(del.refused.size(), 1u);
  EXPECT_EQ(del.refused[0].first, 2u);
  EXPECT_EQ(hs::key_path_segment("user/7"), "user%2F7");
  EXPECT_EQ(hs::key_path_segment(".."), "%2E%2E");
}

TEST(HttpBodies, NdjsonAndArrayBodiesRespectTheLimitsAndSingleAndRawCarryOneRecordEach) {
  TestBatch batch =
      TestBatch::json("t", 0, 100, {R"({"a":1})", R"({"a":2})", R"({"a":3})", R"({"a":4})", R"({"a":5})"});
  kit::RecordJsonWriter payload_only({.layout = kit::JsonLayout::PayloadOnly});
  const auto json = payload_only.begin(batch.raw());
  std::vector<size_t> all{0, 1, 2, 3, 4};
  auto nd = hs::render_bodies(batch.raw(), all, 0, 5, hs::BodyFormat::Ndjson, json, {.max_records = 2});
  ASSERT_EQ(nd.size(), 3u);
  EXPECT_EQ(nd[0].bytes, "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(nd[2].first, 4u);
  auto arr = hs::render_bodies(batch.raw(), all, 1, 3, hs::BodyFormat::JsonArray, json, {.max_bytes = 1000});
  ASSERT_EQ(arr.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(arr[0].bytes), nlohmann::json::parse(R"([{"a":2},{"a":3},{"a":4}])"));
  auto single = hs::render_bodies(batch.raw(), all, 0, 5, hs::BodyFormat::Single, json, {});
  EXPECT_EQ(single.size(), 5u);
  EXPECT_EQ(single[3].bytes, R"({"a":4})");
  TestBatch raw("t", 0, {{.offset = 0, .payload = std::string("\x00\xff", 2)}}, PMQ_PAYLOAD_RAW, "raw");
  auto bytes = hs::render_bodies(raw.raw(), {0}, 0, 1, hs::BodyFormat::Raw, payload_only.begin(raw.raw()), {});
  EXPECT_EQ(bytes[0].bytes, std::string("\x00\xff", 2)) << "raw bodies are the payload's bytes";
  EXPECT_EQ(hs::default_content_type(hs::BodyFormat::Raw, PMQ_PAYLOAD_RAW), "application/octet-stream");
}

TEST(HttpBodies, IdempotencyKeysNameTheRecordsAndStatusesParse) {
  EXPECT_EQ(hs::idempotency_key("shop.orders", 3, 100, 149), "shop_2Eorders-3-100-149");
  EXPECT_NE(hs::idempotency_key("a-1", 2, 3, 4), hs::idempotency_key("a", 12, 3, 4));
  std::string error;
  auto statuses = hs::parse_statuses({"200", "202-204", "3xx"}, &error);
  ASSERT_TRUE(statuses) << error;
  EXPECT_EQ(statuses->size(), 1u + 3u + 100u);
  EXPECT_FALSE(hs::parse_statuses({"2xy"}, &error));
  EXPECT_FALSE(hs::parse_statuses({"700"}, &error));
  EXPECT_FALSE(hs::parse_statuses({"204-200"}, &error));
  EXPECT_TRUE(hs::parse_statuses({"200, 201"}, &error));
}
