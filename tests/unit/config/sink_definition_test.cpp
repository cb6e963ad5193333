#include "config/sink_definition.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace picomq::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::error_for;
using testing::fake_env;

// The spec's "Definition" example, verbatim.
constexpr std::string_view kSpecExample = R"(type = "sink"
key = "orders_pg"
enabled = true
version = 0
name = "Orders to Postgres"
path = "libpicomq_connector_postgres_sink"

[[topics]]
pattern = 'orders\..*'
schema = "json"
batch_length = 1000
poll_interval = "100ms"

[plugin_config]
connection_string = "postgres://user:pass@db:5432/app"
target_table = "orders_{topic_segment[-1]}"
auto_create_table = true
)";

// A valid minimal head; tests append [[topics]] blocks.
constexpr std::string_view kHead = R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
)";

SinkDefinitionResult parse(std::string_view text, const EnvLookup& env = fake_env()) {
  return parse_sink_definition(text, "sink.toml", env);
}

SinkDefinitionResult parse_with_head(std::string_view rest, const EnvLookup& env = fake_env()) {
  return parse(std::string(kHead) + std::string(rest), env);
}

TEST(SinkDefinition, ParsesTheSpecExample) {
  auto result = parse(kSpecExample);
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& def = *result.definition;
  EXPECT_EQ(def.file, "sink.toml");
  EXPECT_EQ(def.type, "sink");
  EXPECT_EQ(def.key, "orders_pg");
  EXPECT_TRUE(def.enabled);
  EXPECT_EQ(def.version, 0);
  EXPECT_EQ(def.name, "Orders to Postgres");
  EXPECT_EQ(def.path, "libpicomq_connector_postgres_sink");
  ASSERT_EQ(def.topics.size(), 1u);
  const auto& block = def.topics[0];
  EXPECT_EQ(block.index, 0);
  EXPECT_EQ(block.line, 8);
  EXPECT_TRUE(block.topics.empty());
  EXPECT_EQ(block.pattern, "orders\\..*");
  EXPECT_EQ(block.anchored_pattern, "^orders\\..*");
  EXPECT_EQ(block.schema, Schema::Json);
  EXPECT_EQ(block.batch_length, 1000u);
  EXPECT_EQ(block.poll_interval, 100ms);
  EXPECT_EQ(block.auto_offset_reset, OffsetReset::Earliest);
  EXPECT_EQ(block.group_id(def.key), "picomq-connect-sink-orders_pg");
  EXPECT_EQ(def.plugin_config_json,
            R"({"auto_create_table":true,"connection_string":"postgres://user:pass@db:5432/app",)"
            R"("target_table":"orders_{topic_segment[-1]}"})");
}

TEST(SinkDefinition, AppliesDefaults) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\n");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& def = *result.definition;
  EXPECT_TRUE(def.enabled);
  EXPECT_EQ(def.version, 0);
  EXPECT_EQ(def.name, "s1");  // name defaults to key
  EXPECT_EQ(def.plugin_config_json, "{}");
  const auto& block = def.topics[0];
  EXPECT_EQ(block.topics, std::vector<std::string>{"a"});
  EXPECT_FALSE(block.pattern);
  EXPECT_EQ(block.schema, Schema::Json);
  EXPECT_EQ(block.batch_length, 1000u);
  EXPECT_EQ(block.poll_interval, 100ms);
  EXPECT_FALSE(block.consumer_group);
  EXPECT_EQ(block.auto_offset_reset, OffsetReset::Earliest);
  EXPECT_TRUE(block.properties.empty());
}

TEST(SinkDefinition, ReadsEveryBlockKey) {
  auto result = parse_with_head(R"(enabled = false
version = 7
[[topics]]
topics = ["a", "b.c"]
pattern = '^x-.*'
schema = "text"
batch_length = 5
poll_interval = "1.5s"
consumer_group = "my-group"
auto_offset_reset = "latest"
[topics.properties]
"fetch.min.bytes" = 1024
"check.crcs" = true
"some.ratio" = 0.5
"client.rack" = "r1"
)");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& def = *result.definition;
  EXPECT_FALSE(def.enabled);
  EXPECT_EQ(def.version, 7);
  const auto& block = def.topics[0];
  EXPECT_EQ(block.topics, (std::vector<std::string>{"a", "b.c"}));
  EXPECT_EQ(block.pattern, "^x-.*");
  EXPECT_EQ(block.anchored_pattern, "^x-.*");  // already anchored: unchanged
  EXPECT_EQ(block.schema, Schema::Text);
  EXPECT_EQ(block.batch_length, 5u);
  EXPECT_EQ(block.poll_interval, 1500ms);
  EXPECT_EQ(block.group_id(def.key), "my-group");
  EXPECT_EQ(block.auto_offset_reset, OffsetReset::Latest);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(block.properties,
            (std::vector<P>{
                {"check.crcs", "true"}, {"client.rack", "r1"}, {"fetch.min.bytes", "1024"}, {"some.ratio", "0.5"}}));
}

TEST(SinkDefinition, SchemaRawIsAccepted) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\nschema = \"raw\"\n");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_EQ(result.definition->topics[0].schema, Schema::Raw);
  EXPECT_EQ(to_string(Schema::Flatbuffer), "flatbuffer");
}

// docs/changes.md: `changes`, the record key's schema ([topics.key]) and key_fields.
TEST(SinkDefinition, ChangesReadTheirKeysAndDecodeJsonKeysByDefault) {
  auto result = parse_with_head(R"([[topics]]
topics = ["pg.public.orders"]
changes = "debezium"

[[topics]]
topics = ["carts"]
changes = "keyed"
key = { schema = "text" }

[[topics]]
topics = ["lines"]
changes = "keyed"
key_fields = ["order_id", "line"]

[[topics]]
topics = ["plain"]
)");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& t = result.definition->topics;
  EXPECT_EQ(t[0].changes, ChangeEvents::Debezium);
  ASSERT_TRUE(t[0].key_schema);
  EXPECT_EQ(t[0].key_schema->schema, Schema::Json);
  EXPECT_EQ(t[0].changes_line, 6);
  EXPECT_EQ(t[1].changes, ChangeEvents::Keyed);
  ASSERT_TRUE(t[1].key_schema);
  EXPECT_EQ(t[1].key_schema->schema, Schema::Text);
  EXPECT_EQ(t[2].key_fields, (std::vector<std::string>{"order_id", "line"}));
  EXPECT_FALSE(t[2].key_schema);  // the key comes from the payload: keys stay bytes
  EXPECT_EQ(t[3].changes, ChangeEvents::None);
  EXPECT_FALSE(t[3].key_schema);
  EXPECT_EQ(to_string(ChangeEvents::Debezium), "debezium");
}

TEST(SinkDefinition, ChangeSettingsThatCannotWorkAreErrorsAtTheirKeys) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]
changes = "cdc"

[[topics]]
topics = ["b"]
key_fields = ["id"]

[[topics]]
topics = ["c"]
changes = "keyed"
key = { schema = "raw" }

[[topics]]
topics = ["d"]
changes = "keyed"
key_fields = ["id", "id", ""]

[[topics]]
topics = ["e"]
key = { schema = "avro" }

[[topics]]
topics = ["f"]
schema = "text"
changes = "debezium"
)");
  EXPECT_FALSE(result.definition);
  EXPECT_NE(error_for(result.errors, "topics[0].changes").message.find("must be \"keyed\""), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[1].key_fields").message.find("set 'changes' too"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[2].key").message.find("leaves keys as they are"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[3].key_fields[1]").message.find("listed twice"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[3].key_fields[2]").message.find("must not be empty"), std::string::npos);
  // The key's schema keys are checked as the payload's are, under topics[N].key.
  EXPECT_NE(error_for(result.errors, "topics[4].key.schema").message.find("avro_schema_json"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[5].changes").message.find("payloads decoded to JSON"), std::string::npos);
}

TEST(SinkDefinition, ErrorCarriesFileLineColumnAndDottedKey) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]

[[topics]]
topics = ["b"]
consumer_group = "g2"
poll_interval = "soon"
)");
  EXPECT_FALSE(result.definition);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  const auto& e = result.errors[0];
  EXPECT_EQ(e.file, "sink.toml");
  EXPECT_EQ(e.line, 10);
  EXPECT_EQ(e.column, 17);
  EXPECT_EQ(e.key, "topics[1].poll_interval");
  EXPECT_EQ(e.to_string(),
            "sink.toml:10:17: key 'topics[1].poll_interval': invalid duration 'soon': expected a number "
            "followed by a unit (ms, s, m or h, e.g. \"100ms\", \"1.5s\")");
}

TEST(SinkDefinition, UnknownKeyWithSuggestion) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\nbach_length = 10\n");
  EXPECT_FALSE(result.definition);
  auto e = error_for(result.errors, "topics[0].bach_length");
  EXPECT_EQ(e.message, "unknown key 'bach_length' (did you mean 'batch_length'?)");
  EXPECT_EQ(e.line, 6);
  EXPECT_EQ(e.column, 1);
}

TEST(SinkDefinition, UnknownKeyWithoutCloseMatchHasNoSuggestion) {
  auto result = parse_with_head("colour = 'blue'\n[[topics]]\ntopics = [\"a\"]\n");
  auto e = error_for(result.errors, "colour");
  EXPECT_EQ(e.message, "unknown key 'colour'");
}

TEST(SinkDefinition, UnknownTopLevelTableIsReported) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\n[plugin_confg]\nx = 1\n");
  auto e = error_for(result.errors, "plugin_confg");
  EXPECT_EQ(e.message, "unknown key 'plugin_confg' (did you mean 'plugin_config'?)");
}

TEST(SinkDefinition, WrongTypes) {
  auto result = parse(R"(type = "sink"
key = "s1"
path = "p"
enabled = "yes"
version = 1.5
name = 3
[[topics]]
topics = "a"
batch_length = "12"
poll_interval = 100
auto_offset_reset = 1
properties = "x"
[plugin_config]
)");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "enabled").message, "'enabled' must be a boolean (true or false), got string");
  EXPECT_EQ(error_for(result.errors, "version").message, "'version' must be an integer, got float");
  EXPECT_EQ(error_for(result.errors, "name").message, "'name' must be a string, got integer");
  EXPECT_EQ(error_for(result.errors, "topics[0].topics").message, "'topics' must be an array of strings, got string");
  EXPECT_EQ(error_for(result.errors, "topics[0].batch_length").message,
            "'batch_length' must be an integer, got string");
  EXPECT_NE(error_for(result.errors, "topics[0].poll_interval").message.find("must be a duration string"),
            std::string::npos);
  EXPECT_EQ(error_for(result.errors, "topics[0].auto_offset_reset").message,
            "'auto_offset_reset' must be a string, got integer");
  EXPECT_EQ(error_for(result.errors, "topics[0].properties").message, "'properties' must be a table, got string");
}

TEST(SinkDefinition, CollectsAllErrorsOfAFile) {
  auto result = parse(R"(type = "source"
key = "bad key"
path = "./libx.so"
[[topics]]
topics = ["ok", "bad topic"]
batch_length = 0
poll_interval = "5"
schema = "xml"
auto_offset_reset = "newest"
[[topics]]
pattern = 'a('
)");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(result.errors.size(), 9u) << dump(result.errors);
  EXPECT_EQ(error_for(result.errors, "type").message, "'type' must be \"sink\", got \"source\"");
  EXPECT_NE(error_for(result.errors, "key").message.find("A-Z a-z 0-9 _ . -"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "path").message.find("not a file path"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[1]").message.find("bad topic 'bad topic'"), std::string::npos);
  EXPECT_EQ(error_for(result.errors, "topics[0].batch_length").message, "'batch_length' must be at least 1, got 0");
  EXPECT_NE(error_for(result.errors, "topics[0].poll_interval").message.find("missing unit"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].schema").message.find("unknown schema 'xml'"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].auto_offset_reset").message.find("\"newest\""), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[1].pattern").message.find("invalid regular expression 'a('"),
            std::string::npos);
}

TEST(SinkDefinition, ErrorsAreInFileOrder) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]
schema = "proto"
bach_length = 1000
poll_interval = "100"
[plugni_config]
x = 1
)");
  ASSERT_EQ(result.errors.size(), 4u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "topics[0].schema");
  EXPECT_EQ(result.errors[1].key, "topics[0].bach_length");
  EXPECT_EQ(result.errors[2].key, "topics[0].poll_interval");
  EXPECT_EQ(result.errors[3].key, "plugni_config");
  for (std::size_t i = 1; i < result.errors.size(); ++i) EXPECT_LT(result.errors[i - 1].line, result.errors[i].line);
}

TEST(SinkDefinition, RequiredKeysAreReported) {
  auto result = parse("enabled = true\n");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "type").message, "missing required key 'type'");
  EXPECT_EQ(error_for(result.errors, "key").message, "missing required key 'key'");
  EXPECT_EQ(error_for(result.errors, "path").message, "missing required key 'path'");
  auto topics = error_for(result.errors, "topics");
  EXPECT_EQ(topics.message, "missing required key 'topics' (at least one [[topics]] block)");
  EXPECT_EQ(topics.line, 1);
  EXPECT_EQ(result.errors.size(), 4u) << dump(result.errors);
}

TEST(SinkDefinition, KeyMustBeNonEmptyAndGroupIdSafe) {
  for (const char* key : {"", "a b", "a/b", "ä", "x:y"}) {
    auto result = parse_sink_definition(
        std::string("type = \"sink\"\nkey = \"") + key + "\"\npath = \"p\"\n[[topics]]\ntopics = [\"a\"]\n", "f.toml",
        fake_env());
    EXPECT_FALSE(result.definition) << key;
    error_for(result.errors, "key");
  }
  auto ok = parse_sink_definition("type = \"sink\"\nkey = \"A-z_0.9\"\npath = \"p\"\n[[topics]]\ntopics = [\"a\"]\n",
                                  "f.toml", fake_env());
  EXPECT_TRUE(ok.definition) << dump(ok.errors);
}

TEST(SinkDefinition, TopicsMustBeBlocks) {
  auto result = parse_with_head("topics = [\"a\", \"b\"]\n");
  EXPECT_NE(error_for(result.errors, "topics").message.find("must be an array of tables ([[topics]] blocks)"),
            std::string::npos);
  auto empty = parse_with_head("topics = []\n");
  EXPECT_EQ(error_for(empty.errors, "topics").message, "at least one [[topics]] block is required");
}

TEST(SinkDefinition, BlockNeedsTopicsOrPattern) {
  auto result = parse_with_head("[[topics]]\nschema = \"json\"\n[[topics]]\ntopics = []\nconsumer_group = \"g\"\n");
  EXPECT_FALSE(result.definition);
  auto e0 = error_for(result.errors, "topics[0]");
  EXPECT_NE(e0.message.find("needs 'topics'"), std::string::npos);
  EXPECT_EQ(e0.line, 4);
  EXPECT_EQ(error_for(result.errors, "topics[1]").line, 6);
}

TEST(SinkDefinition, EmptyTopicsListWithPatternIsFine) {
  auto result = parse_with_head("[[topics]]\ntopics = []\npattern = 'x'\n");
  EXPECT_TRUE(result.definition) << dump(result.errors);
}

TEST(SinkDefinition, EmptyPatternIsAnError) {
  auto result = parse_with_head("[[topics]]\npattern = ''\n");
  EXPECT_NE(error_for(result.errors, "topics[0].pattern").message.find("must not be empty"), std::string::npos);
}

TEST(SinkDefinition, BadRegexReportsTheRegexError) {
  auto result = parse_with_head("[[topics]]\npattern = 'orders[.*'\n");
  auto e = error_for(result.errors, "topics[0].pattern");
  EXPECT_EQ(e.message.rfind("invalid regular expression 'orders[.*': ", 0), 0u) << e.message;
  EXPECT_GT(e.message.size(), std::string("invalid regular expression 'orders[.*': ").size());
  EXPECT_EQ(e.line, 5);
}

TEST(SinkDefinition, PatternNumbersTooLongForStdRegexAreRefused) {
  auto result = parse_with_head("[[topics]]\npattern = '(o)\\99999999999999999999'\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].pattern").message,
            "invalid regular expression '(o)\\99999999999999999999': backreference '\\99999999999999999999' "
            "has more than 9 digits");
}

TEST(SinkDefinition, TopicNamesFollowKafkaRules) {
  std::string long_name(250, 'x');
  auto result = parse_with_head("[[topics]]\ntopics = [\"ok-1.a_b\", \".\", \"..\", \"a/b\", \"" + long_name +
                                "\", \"\", \"" + std::string(249, 'y') + "\"]\n");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(result.errors.size(), 5u) << dump(result.errors);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[1]").message.find("bad topic '.'"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[2]").message.find("bad topic '..'"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[3]").message.find("illegal character"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[4]").message.find("at most 249"), std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].topics[5]").message.find("must not be empty"), std::string::npos);
}

TEST(SinkDefinition, TopicListedTwiceIsAnError) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\", \"a\"]\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].topics[1]").message, "topic 'a' is listed twice");
}

TEST(SinkDefinition, NonStringTopicEntryIsAnError) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\", 2]\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].topics[1]").message, "'topics[1]' must be a string, got integer");
}

// proto / flatbuffer / avro need their schema keys (tests/unit/decoders/config_test.cpp has the rest).
TEST(SinkDefinition, SchemasWithoutTheirSchemaKeysAreErrorsNotRaw) {
  for (const char* schema : {"proto", "flatbuffer"}) {
    auto result = parse_with_head(std::string("[[topics]]\ntopics = [\"a\"]\nschema = \"") + schema + "\"\n");
    EXPECT_FALSE(result.definition);
    EXPECT_EQ(error_for(result.errors, "topics[0].schema")
                  .message.rfind(std::string("schema = \"") + schema + "\" needs '", 0),
              0u);
  }
}

TEST(SinkDefinition, AvroSchemaKeysNeedSchemaAvro) {
  auto result = parse_with_head(
      "[[topics]]\ntopics = [\"a\"]\nschema = \"json\"\navro_schema_json = '{}'\navro_schema_path = 'x.avsc'\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].avro_schema_json").message,
            "'avro_schema_json' is only valid with schema = \"avro\"");
  EXPECT_EQ(error_for(result.errors, "topics[0].avro_schema_path").message,
            "'avro_schema_path' is only valid with schema = \"avro\"");
  auto defaulted = parse_with_head("[[topics]]\ntopics = [\"a\"]\navro_schema_json = '{}'\n");
  error_for(defaulted.errors, "topics[0].avro_schema_json");
}

TEST(SinkDefinition, AvroNeedsExactlyOneSchemaSource) {
  auto none = parse_with_head("[[topics]]\ntopics = [\"a\"]\nschema = \"avro\"\n");
  EXPECT_EQ(none.errors.size(), 1u) << dump(none.errors);  // missing schema source
  auto both = parse_with_head(
      "[[topics]]\ntopics = [\"a\"]\nschema = \"avro\"\navro_schema_json = '{}'\navro_schema_path = 'x'\n");
  EXPECT_EQ(error_for(both.errors, "topics[0].avro_schema_path").message,
            "set only one of 'avro_schema_json' and 'avro_schema_path'");
}

TEST(SinkDefinition, PollIntervalMustBePositive) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\npoll_interval = \"0ms\"\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].poll_interval").message, "'poll_interval' must be at least 1ms");
}

TEST(SinkDefinition, PathMustBeALibraryName) {
  auto result = parse("type = \"sink\"\nkey = \"k\"\npath = \"plugins/libx\"\n[[topics]]\ntopics = [\"a\"]\n");
  EXPECT_NE(error_for(result.errors, "path").message.find("no '/'"), std::string::npos);
  auto empty = parse("type = \"sink\"\nkey = \"k\"\npath = \"\"\n[[topics]]\ntopics = [\"a\"]\n");
  EXPECT_EQ(error_for(empty.errors, "path").message, "'path' must not be empty");
}

TEST(SinkDefinition, EachBlockGetsItsOwnConsumerGroup) {
  auto defaults = parse_with_head("[[topics]]\ntopics = [\"a\"]\n[[topics]]\ntopics = [\"b\"]\n");
  ASSERT_TRUE(defaults.definition) << dump(defaults.errors);
  EXPECT_EQ(defaults.definition->topics[0].group_id("s1"), "picomq-connect-sink-s1");
  EXPECT_EQ(defaults.definition->topics[1].group_id("s1"), "picomq-connect-sink-s1-1");

  auto same = parse_with_head(
      "[[topics]]\ntopics = [\"a\"]\nconsumer_group = \"g\"\n[[topics]]\ntopics = [\"b\"]\nconsumer_group = \"g\"\n");
  EXPECT_FALSE(same.definition);
  auto e = error_for(same.errors, "topics[1].consumer_group");
  EXPECT_NE(e.message.find("consumer group 'g' is already used by topics[0]"), std::string::npos) << e.message;
  EXPECT_EQ(e.line, 9);

  auto distinct =
      parse_with_head("[[topics]]\ntopics = [\"a\"]\n[[topics]]\ntopics = [\"b\"]\nconsumer_group = \"g2\"\n");
  ASSERT_TRUE(distinct.definition) << dump(distinct.errors);
  EXPECT_EQ(distinct.definition->topics[0].group_id("s1"), "picomq-connect-sink-s1");
  EXPECT_EQ(distinct.definition->topics[1].group_id("s1"), "g2");
  EXPECT_EQ(distinct.definition->topics[1].index, 1);
}

TEST(SinkDefinition, ManagedConsumerPropertiesAreRejected) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]
[topics.properties]
"enable.auto.commit" = true
"group.id" = "x"
"auto.offset.reset" = "latest"
"enable.auto.offset.store" = true
"bootstrap.servers" = "h:1"
)");
  EXPECT_FALSE(result.definition);
  EXPECT_EQ(result.errors.size(), 5u) << dump(result.errors);
  EXPECT_NE(
      error_for(result.errors, "topics[0].properties.\"enable.auto.commit\"").message.find("managed by the runtime"),
      std::string::npos);
  EXPECT_NE(error_for(result.errors, "topics[0].properties.\"group.id\"").message.find("consumer_group"),
            std::string::npos);
}

TEST(SinkDefinition, PropertyValuesMustBeScalars) {
  auto result = parse_with_head("[[topics]]\ntopics = [\"a\"]\n[topics.properties]\n\"x.y\" = [1]\n\"z\" = nan\n");
  EXPECT_EQ(error_for(result.errors, "topics[0].properties.\"x.y\"").message,
            "property 'x.y' must be a string, integer, float or boolean, got array");
  error_for(result.errors, "topics[0].properties.z");
}

TEST(SinkDefinition, SyntaxErrorIsOneErrorWithParserPosition) {
  auto result = parse("type = \"sink\"\nkey = \"k\"\n\npath = \"p\" x\n[[topics]]\ntopics = [\"a\"]\n");
  EXPECT_FALSE(result.definition);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  const auto& e = result.errors[0];
  EXPECT_EQ(e.file, "sink.toml");
  EXPECT_EQ(e.line, 4);
  EXPECT_EQ(e.column, 12);
  EXPECT_TRUE(e.key.empty());
  EXPECT_EQ(e.message.rfind("TOML syntax error: ", 0), 0u) << e.message;
  EXPECT_EQ(e.to_string().rfind("sink.toml:4:", 0), 0u) << e.to_string();
}

TEST(SinkDefinition, DuplicateTomlKeyIsASyntaxError) {
  auto result = parse("type = \"sink\"\ntype = \"sink\"\n");
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].line, 2);
}

TEST(SinkDefinition, InterpolatesEveryStringValue) {
  auto env = fake_env({{"KEY", "orders"},
                       {"LIB", "libpicomq_connector_stdout_sink"},
                       {"TOPIC", "orders.eu"},
                       {"GROUP", "grp"},
                       {"PASS", "s3cr\"et"},
                       {"RACK", "r9"}});
  auto result = parse(R"(type = "sink"
key = "${KEY}_pg"
path = "${LIB}"
name = "Sink for ${KEY} $${NOT_ENV}"
[[topics]]
topics = ["${TOPIC}"]
pattern = '${KEY}\..*'
consumer_group = "${GROUP}"
[topics.properties]
"client.rack" = "${RACK}"
[plugin_config]
connection_string = "postgres://u:${PASS}@db/app"
nested = { list = ["${KEY}", 1, { deep = "${RACK}" }] }
)",
                      env);
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& def = *result.definition;
  EXPECT_EQ(def.key, "orders_pg");
  EXPECT_EQ(def.path, "libpicomq_connector_stdout_sink");
  EXPECT_EQ(def.name, "Sink for orders ${NOT_ENV}");
  EXPECT_EQ(def.topics[0].topics, std::vector<std::string>{"orders.eu"});
  EXPECT_EQ(def.topics[0].pattern, "orders\\..*");
  EXPECT_EQ(def.topics[0].consumer_group, "grp");
  EXPECT_EQ(def.topics[0].properties[0].second, "r9");
  EXPECT_EQ(def.plugin_config_json,
            R"({"connection_string":"postgres://u:s3cr\"et@db/app","nested":{"list":["orders",1,{"deep":"r9"}]}})");
}

TEST(SinkDefinition, InterpolatedValueCannotInjectToml) {
  auto env = fake_env({{"EVIL", "x\"\n[plugin_config]\ninjected = true"}});
  auto result = parse_with_head("name = \"${EVIL}\"\n[[topics]]\ntopics = [\"a\"]\n", env);
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_EQ(result.definition->name, "x\"\n[plugin_config]\ninjected = true");
  EXPECT_EQ(result.definition->plugin_config_json, "{}");
}

TEST(SinkDefinition, UnsetVariableNamesVariableFileLineAndKey) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]
[plugin_config]
auth = { password = "${DB_PASSWORD}" }
)");
  EXPECT_FALSE(result.definition);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].to_string(),
            "sink.toml:7:21: key 'plugin_config.auth.password': environment variable 'DB_PASSWORD' is not set");
}

TEST(SinkDefinition, UnsetVariableInArrayAndProperties) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a", "${NOPE}"]
[topics.properties]
"sasl.password" = "${SECRET}"
)");
  EXPECT_EQ(error_for(result.errors, "topics[0].topics[1]").message, "environment variable 'NOPE' is not set");
  EXPECT_EQ(error_for(result.errors, "topics[0].properties.\"sasl.password\"").message,
            "environment variable 'SECRET' is not set");
}

TEST(SinkDefinition, PluginConfigTypesBecomeJson) {
  auto result = parse_with_head(R"([[topics]]
topics = ["a"]
[plugin_config]
int = -3
float = 2.5
bool = false
array = [1, 2]
date = 1979-05-27
time = 07:32:00
datetime = 1979-05-27T07:32:00Z
offset_datetime = 1979-05-27T00:32:00.5-07:00
[plugin_config.table]
x = "y"
[[plugin_config.items]]
a = 1
[[plugin_config.items]]
a = 2
)");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_EQ(result.definition->plugin_config_json,
            R"({"array":[1,2],"bool":false,"date":"1979-05-27","datetime":"1979-05-27T07:32:00Z",)"
            R"("float":2.5,"int":-3,"items":[{"a":1},{"a":2}],)"
            R"("offset_datetime":"1979-05-27T00:32:00.5-07:00","table":{"x":"y"},"time":"07:32:00"})");
}

TEST(SinkDefinition, PluginConfigRejectsNanAndWrongType) {
  auto nan = parse_with_head("[[topics]]\ntopics = [\"a\"]\n[plugin_config]\nx = nan\n");
  EXPECT_EQ(error_for(nan.errors, "plugin_config.x").message, "nan and inf cannot be represented in JSON");
  auto not_table = parse_with_head("plugin_config = 1\n[[topics]]\ntopics = [\"a\"]\n");
  EXPECT_EQ(error_for(not_table.errors, "plugin_config").message, "'plugin_config' must be a table, got integer");
}

TEST(SinkDefinition, LoadReadsAFileAndReportsMissingOnes) {
  auto missing = load_sink_definition("/nonexistent/dir/x.toml", fake_env());
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0].file, "/nonexistent/dir/x.toml");
  EXPECT_EQ(missing.errors[0].line, 0);
  EXPECT_EQ(missing.errors[0].to_string().rfind("/nonexistent/dir/x.toml: cannot open file", 0), 0u)
      << missing.errors[0].to_string();
}

TEST(ConfigError, FormatsWithAndWithoutPositionAndKey) {
  EXPECT_EQ((ConfigError{"f.toml", 3, 7, "topics[0].poll_interval", "bad"}).to_string(),
            "f.toml:3:7: key 'topics[0].poll_interval': bad");
  EXPECT_EQ((ConfigError{"f.toml", 3, 7, "", "bad"}).to_string(), "f.toml:3:7: bad");
  EXPECT_EQ((ConfigError{"f.toml", 0, 0, "", "bad"}).to_string(), "f.toml: bad");
  EXPECT_EQ(format_errors({{"a", 1, 1, "", "x"}, {"b", 2, 2, "k", "y"}}), "a:1:1: x\nb:2:2: key 'k': y\n");
}

}  // namespace
}  // namespace picomq::config

namespace picomq::config {
namespace {

SinkDefinitionResult parse_block(std::string_view block) {
  std::string text(R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["a"]
)");
  text += block;
  return parse_sink_definition(text, "s1.toml", testing::fake_env());
}

TEST(SinkDefinition, ArrowSchemaKeepsTheDeclaredOrder) {
  auto result = parse_block(R"(arrow_schema = [
  { name = "zeta", type = "utf8", nullable = false },
  { name = "alpha", type = "float64" },
  { name = "ts", type = "timestamp_ms" },
]
)");
  ASSERT_TRUE(result.definition) << testing::dump(result.errors);
  const auto& cols = result.definition->topics[0].arrow_schema;
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[0].name, "zeta");
  EXPECT_EQ(cols[0].type, "utf8");
  EXPECT_FALSE(cols[0].nullable);
  EXPECT_EQ(cols[1].name, "alpha");
  EXPECT_TRUE(cols[1].nullable);
  EXPECT_EQ(cols[2].type, "timestamp_ms");
}

TEST(SinkDefinition, ArrowSchemaProblemsAreNamedWithTheirKey) {
  auto result = parse_block(R"(arrow_schema = [
  { name = "a", type = "int32" },
  { name = "a", type = "utf8" },
  { name = "pico_offset", type = "int64" },
  { type = "utf8" },
  { name = "b", type = "bool", nulable = true },
  "c",
]
)");
  EXPECT_FALSE(result.definition);
  EXPECT_NE(
      testing::error_for(result.errors, "topics[0].arrow_schema[0].type").message.find("unknown column type 'int32'"),
      std::string::npos)
      << testing::dump(result.errors);
  EXPECT_EQ(testing::error_for(result.errors, "topics[0].arrow_schema[1].name").message,
            "column 'a' is declared twice");
  EXPECT_NE(
      testing::error_for(result.errors, "topics[0].arrow_schema[2].name").message.find("collide with the metadata"),
      std::string::npos);
  EXPECT_NE(testing::error_for(result.errors, "topics[0].arrow_schema[3].name").message, "");
  EXPECT_NE(
      testing::error_for(result.errors, "topics[0].arrow_schema[4].nulable").message.find("did you mean 'nullable'"),
      std::string::npos)
      << testing::dump(result.errors);
  EXPECT_EQ(testing::error_for(result.errors, "topics[0].arrow_schema").message,
            "entry 5 must be a table { name = \"...\", type = \"...\" }");
  auto not_array = parse_block("arrow_schema = { a = \"utf8\" }\n");
  EXPECT_NE(testing::error_for(not_array.errors, "topics[0].arrow_schema").message.find("must be an array of tables"),
            std::string::npos)
      << testing::dump(not_array.errors);
}

}  // namespace
}  // namespace picomq::config
