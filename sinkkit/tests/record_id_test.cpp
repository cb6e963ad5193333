#include "picomq/kit/record_id.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace kit = picomq::kit;

TEST(KitRecordId, UrlSafeIdsUseOnlyTheRestrictedAlphabetAndReadBack) {
  auto id = kit::url_safe_record_id("orders.eu", 0, 42);
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, "orders_2Eeu-0-42");
  EXPECT_EQ(*kit::url_safe_record_id("a-b_c", 12, 7), "a-b_5Fc-12-7") << "'-' kept, '_' escaped";
  for (const std::string topic : {"a-b-1-2", "x.y:z", "__", "-", "T\xc3\xa9st"}) {
    auto encoded = kit::url_safe_record_id(topic, 5, 9000000000);
    ASSERT_TRUE(encoded);
    for (char c : *encoded)
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << *encoded;
    auto back = kit::parse_url_safe_record_id(*encoded);
    ASSERT_TRUE(back) << *encoded;
    EXPECT_EQ(*back, (kit::RecordCoordinates{topic, 5, 9000000000}));
  }
  EXPECT_FALSE(kit::url_safe_record_id(std::string(249, '.'), 0, 0, 511)) << "747 bytes: refused, not cut";
}

TEST(KitRecordId, TheEncodingIsInjectiveAndRefusesTextThatIsNotOne) {
  std::mt19937 rng(7);
  std::set<std::string> ids;
  std::set<std::string> topics;
  const std::string alphabet = "ab-_.:0";
  for (int i = 0; i < 5000; ++i) {
    std::string t;
    for (int n = 1 + rng() % 5; n > 0; --n) t += alphabet[rng() % alphabet.size()];
    if (!topics.insert(t).second) continue;
    ids.insert(*kit::url_safe_record_id(t, 1, 2));
  }
  EXPECT_EQ(ids.size(), topics.size()) << "no two topics share an id";
  EXPECT_FALSE(kit::from_url_safe("a_2e"));  // lowercase hex is not the spelling
  EXPECT_FALSE(kit::from_url_safe("a_41"));  // 'A' needs no escape
  EXPECT_FALSE(kit::from_url_safe("a_2"));   // cut short
  EXPECT_FALSE(kit::from_url_safe("a.b"));   // outside the alphabet
  EXPECT_FALSE(kit::parse_url_safe_record_id("t-01-2")) << "one spelling per number";
  EXPECT_EQ(*kit::parse_record_id("a:b:3:4"), (kit::RecordCoordinates{"a:b", 3, 4}));
}
