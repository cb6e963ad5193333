#include <gtest/gtest.h>

#include "config/sink_definition.h"
#include "temp_dir.h"
#include "test_support.h"

namespace picomq::config {
namespace {

using testing::dump;
using testing::fake_env;
using testing::TempDir;

std::string sink(std::string_view key, std::string_view extra = "") {
  return "type = \"sink\"\nkey = \"" + std::string(key) +
         "\"\npath = \"libpicomq_connector_stdout_sink\"\n[[topics]]\ntopics = [\"a\"]\n" + std::string(extra);
}

TEST(SinkDirectory, LoadsTomlFilesInNameOrder) {
  TempDir dir;
  dir.write("b.toml", sink("b"));
  dir.write("a.toml", sink("a"));
  dir.write("c.toml", sink("c", "[plugin_config]\nx = 1\n"));
  dir.write("notes.txt", "not a sink");
  dir.write(".hidden.toml", "this is not toml at all [");
  dir.write("sub.toml/inner.toml", sink("inner"));  // a directory named *.toml is skipped
  auto result = load_sink_directory(dir.path(), fake_env());
  EXPECT_TRUE(result.errors.empty()) << dump(result.errors);
  ASSERT_EQ(result.definitions.size(), 3u);
  EXPECT_EQ(result.definitions[0].key, "a");
  EXPECT_EQ(result.definitions[1].key, "b");
  EXPECT_EQ(result.definitions[2].key, "c");
  EXPECT_EQ(result.definitions[0].file, (dir.path() / "a.toml").string());
  EXPECT_EQ(result.definitions[2].plugin_config_json, R"({"x":1})");
}

TEST(SinkDirectory, BadFileContributesErrorsOnly) {
  TempDir dir;
  dir.write("a.toml", sink("a"));
  dir.write("b.toml", sink("b", "bogus = 1\n"));
  dir.write("c.toml", "key = [\n");
  auto result = load_sink_directory(dir.path(), fake_env());
  ASSERT_EQ(result.definitions.size(), 1u);
  EXPECT_EQ(result.definitions[0].key, "a");
  ASSERT_EQ(result.errors.size(), 2u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].file, (dir.path() / "b.toml").string());
  EXPECT_EQ(result.errors[0].key, "topics[0].bogus");
  EXPECT_EQ(result.errors[1].file, (dir.path() / "c.toml").string());
}

TEST(SinkDirectory, DuplicateKeyInALaterFileIsAnErrorAndThatSinkDoesNotStart) {
  TempDir dir;
  dir.write("a.toml", sink("orders"));
  dir.write("b.toml", sink("orders", "[plugin_config]\nsecond = true\n"));
  auto result = load_sink_directory(dir.path(), fake_env());
  ASSERT_EQ(result.definitions.size(), 1u);
  EXPECT_EQ(result.definitions[0].file, (dir.path() / "a.toml").string());
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  const auto& e = result.errors[0];
  EXPECT_EQ(e.file, (dir.path() / "b.toml").string());
  EXPECT_EQ(e.key, "key");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 7);
  EXPECT_NE(e.message.find("sink key 'orders' is already used by " + (dir.path() / "a.toml").string()),
            std::string::npos)
      << e.message;
}

TEST(SinkDirectory, SharedConsumerGroupAcrossFilesIsAnError) {
  TempDir dir;
  dir.write("a.toml", sink("a"));
  // Different key, but its consumer_group is sink a's default group.
  dir.write("b.toml", sink("b", "consumer_group = \"picomq-connect-sink-a\"\n"));
  auto result = load_sink_directory(dir.path(), fake_env());
  ASSERT_EQ(result.definitions.size(), 1u);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "topics[0].consumer_group");
  EXPECT_EQ(result.errors[0].line, 6);
  EXPECT_NE(result.errors[0].message.find("consumer group 'picomq-connect-sink-a' is already used"), std::string::npos);
}

TEST(SinkDirectory, DisabledSinksAreReturned) {
  TempDir dir;
  dir.write("a.toml", sink("a", "") + "");
  dir.write("b.toml", "enabled = false\n" + sink("b"));
  auto result = load_sink_directory(dir.path(), fake_env());
  ASSERT_EQ(result.definitions.size(), 2u) << dump(result.errors);
  EXPECT_FALSE(result.definitions[1].enabled);
}

TEST(SinkDirectory, MissingDirectoryIsAnError) {
  auto result = load_sink_directory("/nonexistent/picomq/sinks.d", fake_env());
  EXPECT_TRUE(result.definitions.empty());
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].file, "/nonexistent/picomq/sinks.d");
}

TEST(SinkDirectory, LoadSinkDefinitionReadsAFile) {
  TempDir dir;
  auto file = dir.write("x.toml", sink("x"));
  auto result = load_sink_definition(file, fake_env());
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_EQ(result.definition->file, file.string());
}

}  // namespace
}  // namespace picomq::config
