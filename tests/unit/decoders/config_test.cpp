// The schema keys of [[topics]] blocks: validated when the definition loads (files exist and
// compile, the message / root type exists, the Avro schema parses, the registry URL is sound),
// errors with file, line, key and the compiler's reason; paths relative to the definition.
#include <gtest/gtest.h>

#include <map>

#include "../config/test_support.h"
#include "config/sink_definition.h"
#include "decoders/payload_decoder.h"
#include "payloads.h"

namespace picomq::config {
namespace {

using testing::error_for;

const std::string kDir = PICOMQ_DECODERS_DATA;
const std::string kFile = kDir + "/sink.toml";  // relative paths resolve against its folder

SinkDefinitionResult parse(const std::string& block, std::map<std::string, std::string> env = {}) {
  const std::string text = "type = \"sink\"\nkey = \"k\"\npath = \"libx\"\n[[topics]]\ntopics = [\"t\"]\n" + block;
  return parse_sink_definition(text, kFile, testing::fake_env(std::move(env)), decoders::compile_block_schema);
}

TEST(DecodersConfig, ProtoKeysResolveAndCompile) {
  auto r = parse(
      "schema = \"proto\"\nproto_files = \"all_types.proto\"\nproto_include_paths = [\".\"]\n"
      "proto_message = \"picomq.test.Order\"\nproto_int64 = \"string\"\nproto_field_names = \"json\"\n");
  ASSERT_TRUE(r.definition) << testing::dump(r.errors);
  const TopicsBlock& b = r.definition->topics[0];
  EXPECT_EQ(b.schema, Schema::Proto);
  EXPECT_EQ(b.proto_files, std::vector<std::string>{kDir + "/all_types.proto"});
  EXPECT_EQ(b.proto_include_paths, std::vector<std::string>{kDir + "/"});
  EXPECT_EQ(b.proto_message, "picomq.test.Order");
  EXPECT_TRUE(b.proto_int64_as_string);
  EXPECT_TRUE(b.proto_json_names);
}

TEST(DecodersConfig, ProtoErrorsNameTheFileAndTheReason) {
  auto missing = parse("schema = \"proto\"\nproto_files = [\"nope.proto\"]\nproto_message = \"a.B\"\n");
  auto e = error_for(missing.errors, "topics[0].proto_files");
  EXPECT_EQ(e.message, "cannot read '" + kDir + "/nope.proto': No such file or directory");
  EXPECT_EQ(e.line, 7);

  auto broken = parse("schema = \"proto\"\nproto_files = \"broken.proto\"\nproto_message = \"picomq.broken.Broken\"\n");
  EXPECT_EQ(error_for(broken.errors, "topics[0].proto_files").message, "broken.proto:5:3: Expected \";\".");

  auto message = parse("schema = \"proto\"\nproto_files = \"all_types.proto\"\nproto_message = \"picomq.test.Nope\"\n");
  e = error_for(message.errors, "topics[0].proto_message");
  EXPECT_EQ(e.line, 8);
  EXPECT_EQ(e.message.rfind("message type 'picomq.test.Nope' is not defined", 0), 0u) << e.message;

  auto no_message = parse("schema = \"proto\"\nproto_files = \"all_types.proto\"\n");
  EXPECT_NE(error_for(no_message.errors, "topics[0].schema").message.find("needs 'proto_message'"), std::string::npos);
  auto nothing = parse("schema = \"proto\"\nproto_message = \"a.B\"\n");
  EXPECT_NE(error_for(nothing.errors, "topics[0].schema").message.find("needs 'proto_files'"), std::string::npos);
  auto both = parse(
      "schema = \"proto\"\nproto_files = \"all_types.proto\"\nproto_descriptor_set = \"x.pb\"\n"
      "proto_message = \"a.B\"\n");
  EXPECT_EQ(error_for(both.errors, "topics[0].proto_descriptor_set").message,
            "set only one of 'proto_files' and 'proto_descriptor_set'");
  auto bad_option = parse(
      "schema = \"proto\"\nproto_files = \"all_types.proto\"\nproto_message = \"picomq.test.Order\"\n"
      "proto_int64 = \"text\"\n");
  EXPECT_EQ(error_for(bad_option.errors, "topics[0].proto_int64").message,
            "'proto_int64' must be \"number\" or \"string\", got \"text\"");
}

TEST(DecodersConfig, KeysOfAnotherSchemaAreErrors) {
  auto r =
      parse("schema = \"json\"\nproto_message = \"a.B\"\nflatbuffer_schema = \"x.fbs\"\navro_framing = \"plain\"\n");
  EXPECT_EQ(error_for(r.errors, "topics[0].proto_message").message,
            "'proto_message' is only valid with schema = \"proto\"");
  EXPECT_EQ(error_for(r.errors, "topics[0].flatbuffer_schema").message,
            "'flatbuffer_schema' is only valid with schema = \"flatbuffer\"");
  EXPECT_EQ(error_for(r.errors, "topics[0].avro_framing").message,
            "'avro_framing' is only valid with schema = \"avro\"");
  auto typo = parse("schema = \"proto\"\nproto_files = \"all_types.proto\"\nproto_mesage = \"a.B\"\n");
  EXPECT_NE(error_for(typo.errors, "topics[0].proto_mesage").message.find("did you mean 'proto_message'"),
            std::string::npos);
}

TEST(DecodersConfig, FlatbufferKeys) {
  auto ok = parse("schema = \"flatbuffer\"\nflatbuffer_schema = \"inventory.fbs\"\n");
  ASSERT_TRUE(ok.definition) << testing::dump(ok.errors);
  EXPECT_EQ(ok.definition->topics[0].flatbuffer_schema, kDir + "/inventory.fbs");
  auto root =
      parse("schema = \"flatbuffer\"\nflatbuffer_schema = \"inventory.fbs\"\nflatbuffer_root_type = \"Nope\"\n");
  EXPECT_EQ(error_for(root.errors, "topics[0].flatbuffer_root_type").message,
            "root type 'Nope' is not a table of '" + kDir + "/inventory.fbs'");
  auto broken = parse("schema = \"flatbuffer\"\nflatbuffer_schema = \"broken.fbs\"\n");
  EXPECT_NE(error_for(broken.errors, "topics[0].flatbuffer_schema").message.find("broken.fbs:4: "), std::string::npos);
  auto none = parse("schema = \"flatbuffer\"\n");
  EXPECT_NE(error_for(none.errors, "topics[0].schema").message.find("needs 'flatbuffer_schema'"), std::string::npos);
}

TEST(DecodersConfig, AvroPlainKeys) {
  auto inline_schema =
      parse("schema = \"avro\"\navro_schema_json = '{\"type\":\"record\",\"name\":\"R\",\"fields\":[]}'\n");
  ASSERT_TRUE(inline_schema.definition) << testing::dump(inline_schema.errors);
  EXPECT_EQ(inline_schema.definition->topics[0].avro_framing, TopicsBlock::AvroFraming::Plain);
  auto bad = parse("schema = \"avro\"\navro_schema_json = '{\"type\":\"record\",\"name\":\"R\"}'\n");
  EXPECT_EQ(error_for(bad.errors, "topics[0].avro_schema_json").message.rfind("invalid Avro schema: ", 0), 0u);
  auto missing = parse("schema = \"avro\"\navro_schema_path = \"none.avsc\"\n");
  EXPECT_EQ(error_for(missing.errors, "topics[0].avro_schema_path").message,
            "'" + kDir + "/none.avsc': cannot open file: No such file or directory");
  auto unparsable = parse("schema = \"avro\"\navro_schema_path = \"broken.proto\"\n");
  EXPECT_EQ(error_for(unparsable.errors, "topics[0].avro_schema_path")
                .message.rfind("'" + kDir + "/broken.proto': invalid Avro schema: ", 0),
            0u);
  auto url = parse("schema = \"avro\"\navro_schema_json = '\"long\"'\navro_registry_url = \"http://r:8081\"\n");
  EXPECT_EQ(error_for(url.errors, "topics[0].avro_registry_url").message,
            "'avro_registry_url' is only used with avro_framing = \"registry\"");
  auto framing = parse("schema = \"avro\"\navro_schema_json = '\"long\"'\navro_framing = \"confluent\"\n");
  EXPECT_NE(error_for(framing.errors, "topics[0].avro_framing").message.find("must be \"plain\""), std::string::npos);
}

TEST(DecodersConfig, AvroRegistryKeys) {
  auto ok = parse(
      "schema = \"avro\"\navro_framing = \"registry\"\navro_registry_url = "
      "\"http://${REG_USER}:${REG_PASS}@reg:8081\"\n",
      {{"REG_USER", "u"}, {"REG_PASS", "s3cret"}});
  ASSERT_TRUE(ok.definition) << testing::dump(ok.errors);
  EXPECT_EQ(ok.definition->topics[0].avro_framing, TopicsBlock::AvroFraming::Registry);
  EXPECT_EQ(*ok.definition->topics[0].avro_registry_url, "http://u:s3cret@reg:8081");
  auto no_url = parse("schema = \"avro\"\navro_framing = \"registry\"\n");
  EXPECT_EQ(error_for(no_url.errors, "topics[0].avro_framing").message,
            "avro_framing = \"registry\" needs 'avro_registry_url'");
  auto with_schema = parse(
      "schema = \"avro\"\navro_framing = \"registry\"\navro_registry_url = \"http://r\"\n"
      "avro_schema_json = '\"long\"'\n");
  EXPECT_NE(error_for(with_schema.errors, "topics[0].avro_schema_json").message.find("comes from the registry"),
            std::string::npos);
  auto bad_url = parse("schema = \"avro\"\navro_framing = \"registry\"\navro_registry_url = \"ftp://u:s3cret@r\"\n");
  const auto e = error_for(bad_url.errors, "topics[0].avro_registry_url");
  EXPECT_EQ(e.message, "'ftp://***@r' must be an http:// or https:// URL");
  EXPECT_EQ(e.message.find("s3cret"), std::string::npos);
}

}  // namespace
}  // namespace picomq::config
