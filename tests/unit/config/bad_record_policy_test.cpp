// The bad-record policy keys of a [[topics]] block: on_bad_record and dead_letter_topic.
#include <gtest/gtest.h>

#include "config/sink_definition.h"
#include "test_support.h"

namespace picomq::config {
namespace {

using testing::error_for;
using testing::fake_env;

SinkDefinitionResult parse_block(const std::string& block_body) {
  return parse_sink_definition("type = \"sink\"\nkey = \"s\"\npath = \"libx\"\n[[topics]]\n" + block_body, "s.toml",
                               fake_env());
}

TEST(BadRecordPolicy, DefaultsToFail) {
  auto result = parse_block("topics = [\"a\"]\n");
  ASSERT_TRUE(result.definition) << testing::dump(result.errors);
  EXPECT_EQ(result.definition->topics[0].on_bad_record, BadRecordPolicy::Fail);
  EXPECT_FALSE(result.definition->topics[0].dead_letter_topic);
}

TEST(BadRecordPolicy, ReadsSkipAndDeadLetter) {
  auto skip = parse_block("topics = [\"a\"]\non_bad_record = \"skip\"\n");
  ASSERT_TRUE(skip.definition) << testing::dump(skip.errors);
  EXPECT_EQ(skip.definition->topics[0].on_bad_record, BadRecordPolicy::Skip);

  auto dead = parse_block("topics = [\"a\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"a.dlq\"\n");
  ASSERT_TRUE(dead.definition) << testing::dump(dead.errors);
  EXPECT_EQ(dead.definition->topics[0].on_bad_record, BadRecordPolicy::DeadLetter);
  EXPECT_EQ(dead.definition->topics[0].dead_letter_topic, "a.dlq");
  EXPECT_EQ(to_string(BadRecordPolicy::DeadLetter), "dead_letter");
}

TEST(BadRecordPolicy, UnknownPolicyIsNamedWithItsPosition) {
  auto result = parse_block("topics = [\"a\"]\non_bad_record = \"ignore\"\n");
  EXPECT_FALSE(result.definition);
  const auto e = error_for(result.errors, "topics[0].on_bad_record");
  EXPECT_EQ(e.message, "'on_bad_record' must be \"fail\", \"skip\" or \"dead_letter\", got \"ignore\"");
  EXPECT_EQ(e.line, 6);
}

TEST(BadRecordPolicy, DeadLetterNeedsATopic) {
  auto result = parse_block("topics = [\"a\"]\non_bad_record = \"dead_letter\"\n");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "topics[0].on_bad_record").message,
            "on_bad_record = \"dead_letter\" needs 'dead_letter_topic', the topic bad records are produced to");
}

TEST(BadRecordPolicy, DeadLetterTopicWithoutThePolicyIsAnError) {
  auto result = parse_block("topics = [\"a\"]\ndead_letter_topic = \"a.dlq\"\n");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "topics[0].dead_letter_topic").message,
            "'dead_letter_topic' is only used with on_bad_record = \"dead_letter\"");
}

TEST(BadRecordPolicy, DeadLetterTopicMustBeALegalTopicName) {
  auto result = parse_block("topics = [\"a\"]\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"bad topic!\"\n");
  EXPECT_FALSE(result.definition);
  EXPECT_NE(error_for(result.errors, "topics[0].dead_letter_topic").message.find("invalid dead-letter topic"),
            std::string::npos);
}

TEST(BadRecordPolicy, DeadLetterTopicMustNotBeConsumedByTheSameBlock) {
  // It would read its own dead letters back, fail them again and produce them again, forever.
  for (const std::string subscription : {"topics = [\"a\", \"a.dlq\"]\n", "pattern = 'a.*'\n"}) {
    auto result = parse_block(subscription + "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"a.dlq\"\n");
    EXPECT_FALSE(result.definition) << subscription;
    EXPECT_EQ(error_for(result.errors, "topics[0].dead_letter_topic").message,
              "the dead-letter topic 'a.dlq' is one this block consumes");
  }
  auto other = parse_block("pattern = 'a\\.x.*'\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"a.dlq\"\n");
  EXPECT_TRUE(other.definition) << testing::dump(other.errors);
}

}  // namespace
}  // namespace picomq::config
