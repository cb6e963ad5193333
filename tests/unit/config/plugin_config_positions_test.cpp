// Where [plugin_config] and its keys are, kept in the definition so that problems only the
// plugin can find (option table, validate(): at --check and at start) point into the file.
#include <gtest/gtest.h>

#include "config/sink_definition.h"
#include "temp_dir.h"
#include "test_support.h"

namespace picomq::config {
namespace {

using testing::dump;
using testing::fake_env;
using testing::TempDir;

SinkDefinition parse(std::string_view text) {
  auto result = parse_sink_definition(text, "sinks.d/s.toml", fake_env());
  EXPECT_TRUE(result.definition) << dump(result.errors);
  return result.definition ? *result.definition : SinkDefinition{};
}

constexpr std::string_view kDefinition = R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["a"]

[plugin_config]
mode = "insert"
  key_field   = "id"
"not bare" = 1
[plugin_config.auth]
user = "u"
)";

TEST(PluginConfigPositions, KeysTableAndPathAreKeptInFileOrder) {
  auto def = parse(kDefinition);
  EXPECT_EQ(def.positions.path.line, 3);
  EXPECT_EQ(def.positions.path.column, 8);
  EXPECT_EQ(def.positions.table.line, 7);
  EXPECT_EQ(def.positions.table.column, 1);
  ASSERT_EQ(def.positions.keys.size(), 4u);
  EXPECT_EQ(def.positions.keys[0].name, "mode");
  EXPECT_EQ(def.positions.keys[0].key.line, 8);
  EXPECT_EQ(def.positions.keys[0].key.column, 1);
  EXPECT_EQ(def.positions.keys[0].value.column, 8);
  EXPECT_EQ(def.positions.keys[1].name, "key_field");
  EXPECT_EQ(def.positions.keys[1].key.line, 9);
  EXPECT_EQ(def.positions.keys[1].key.column, 3);
  EXPECT_EQ(def.positions.keys[1].value.column, 17);
  EXPECT_EQ(def.positions.keys[2].name, "not bare");
  EXPECT_EQ(def.positions.keys[2].key.line, 10);
  EXPECT_EQ(def.positions.keys[3].name, "auth");
  EXPECT_EQ(def.positions.keys[3].key.line, 11);
}

TEST(PluginConfigPositions, ErrorsPointAtTheValueTheKeyOrTheTable) {
  auto def = parse(kDefinition);
  EXPECT_EQ(def.plugin_config_error("key_field", "needs mode = \"upsert\"").to_string(),
            "sinks.d/s.toml:9:17: key 'plugin_config.key_field': needs mode = \"upsert\"");
  EXPECT_EQ(def.plugin_config_error("key_field", "unknown option", /*at_key=*/true).to_string(),
            "sinks.d/s.toml:9:3: key 'plugin_config.key_field': unknown option");
  EXPECT_EQ(def.plugin_config_error("not bare", "x").to_string(),
            "sinks.d/s.toml:10:14: key 'plugin_config.\"not bare\"': x");
  // Not written (a missing required option, a default validate() objects to): the table.
  EXPECT_EQ(def.plugin_config_error("url", "missing required option").to_string(),
            "sinks.d/s.toml:7:1: key 'plugin_config.url': missing required option");
  // About the table as a whole.
  EXPECT_EQ(def.plugin_config_error("", "refused").to_string(), "sinks.d/s.toml:7:1: key 'plugin_config': refused");
  // A path into a table option: the position of its top-level key.
  EXPECT_EQ(def.plugin_config_error("auth.user", "x").to_string(),
            "sinks.d/s.toml:11:1: key 'plugin_config.auth.user': x");
  EXPECT_EQ(def.path_error("plugin not found").to_string(), "sinks.d/s.toml:3:8: key 'path': plugin not found");
}

TEST(PluginConfigPositions, WithoutTheTableErrorsPointAtTheDefinitionStart) {
  auto def = parse("type = \"sink\"\nkey = \"s1\"\npath = \"libx\"\n[[topics]]\ntopics = [\"a\"]\n");
  EXPECT_TRUE(def.positions.keys.empty());
  EXPECT_EQ(def.plugin_config_error("url", "missing required option").to_string(),
            "sinks.d/s.toml:1:1: key 'plugin_config.url': missing required option");
}

TEST(PluginConfigPositions, InlineTableAndDottedKeys) {
  auto inline_def = parse(
      "type = \"sink\"\nkey = \"s1\"\npath = \"libx\"\nplugin_config = { a = 1, b = 2 }\n"
      "[[topics]]\ntopics = [\"a\"]\n");
  ASSERT_EQ(inline_def.positions.keys.size(), 2u);
  EXPECT_EQ(inline_def.positions.table.line, 4);
  EXPECT_EQ(inline_def.plugin_config_error("b", "x").to_string(), "sinks.d/s.toml:4:30: key 'plugin_config.b': x");
  auto dotted = parse(
      "type = \"sink\"\nkey = \"s1\"\npath = \"libx\"\nplugin_config.a = 1\n"
      "[[topics]]\ntopics = [\"a\"]\n");
  ASSERT_EQ(dotted.positions.keys.size(), 1u);
  EXPECT_EQ(dotted.plugin_config_error("a", "x").line, 4);
}

constexpr std::string_view kHead = "type = \"sink\"\nkey = \"s1\"\npath = \"libx\"\n";

TEST(PartialDefinition, ABadFileKeepsItsPluginPartWhenThatWasReadWithoutError) {
  auto result = parse_sink_definition(std::string(kHead) +
                                          "[[topics]]\ntopics = [\"a\"]\nbach_length = 3\n"
                                          "[plugin_config]\nmdoe = 1\n",
                                      "s.toml", fake_env());
  EXPECT_FALSE(result.definition);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  ASSERT_TRUE(result.partial);
  EXPECT_EQ(result.partial->path, "libx");
  EXPECT_EQ(result.partial->plugin_config_json, R"({"mdoe":1})");
  EXPECT_EQ(result.partial->plugin_config_error("mdoe", "x", true).line, 8);
}

TEST(PartialDefinition, NoneWhenPathOrPluginConfigHasAnError) {
  const std::string topics = "[[topics]]\ntopics = [\"a\"]\n";
  for (const std::string text : {
           "type = \"sink\"\nkey = \"s1\"\n" + topics,                           // no path
           "type = \"sink\"\nkey = \"s1\"\npath = \"a/b\"\n" + topics,           // a file path
           std::string(kHead) + topics + "[plugin_config]\nx = \"${UNSET}\"\n",  // unset variable
           std::string(kHead) + "plugin_config = 5\n" + topics,                  // not a table
       }) {
    auto result = parse_sink_definition(text, "s.toml", fake_env());
    EXPECT_FALSE(result.errors.empty()) << text;
    EXPECT_FALSE(result.partial) << text;
  }
  auto good = parse_sink_definition(std::string(kHead) + topics, "s.toml", fake_env());
  EXPECT_TRUE(good.definition);
  EXPECT_FALSE(good.partial) << "only for definitions with errors";
}

TEST(PartialDefinition, TheDirectoryListsRejectedDefinitions) {
  TempDir dir;
  const std::string topics = "[[topics]]\ntopics = [\"a\"]\n";
  dir.write("a.toml", "type = \"sink\"\nkey = \"k\"\npath = \"liba\"\n" + topics);
  dir.write("b.toml", "type = \"sink\"\nkey = \"k\"\npath = \"libb\"\n" + topics);  // key taken
  dir.write("c.toml", "type = \"sink\"\nkey = \"c\"\npath = \"libc\"\nbogus = 1\n" + topics);
  dir.write("d.toml", "key = [\n");  // syntax error: nothing
  auto result = load_sink_directory(dir.path(), fake_env());
  ASSERT_EQ(result.definitions.size(), 1u);
  EXPECT_EQ(result.definitions[0].path, "liba");
  ASSERT_EQ(result.rejected.size(), 2u);
  EXPECT_EQ(result.rejected[0].path, "libb");
  EXPECT_EQ(result.rejected[1].path, "libc");
  EXPECT_EQ(result.errors.size(), 3u) << dump(result.errors);
}

}  // namespace
}  // namespace picomq::config
