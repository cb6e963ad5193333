#pragma once
// A definition's test fixtures (`picomq-connect test`, docs/testing.md): records as a broker
// would hand them over, and what the sink should be called with after decoding, change events
// and transforms — or which records go bad, at which stage, and which a filter drops. One TOML
// file names its definition and holds any number of [[tests]]. Every problem is a ConfigError
// naming the file, line and key, all of a file's in one pass.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/env.h"
#include "config/error.h"

namespace picomq::config {

using FixtureHeaders = std::vector<std::pair<std::string, std::optional<std::string>>>;  // nullopt: null value

struct FixtureInput {
  int line = 0;
  std::optional<int64_t> offset;  // unset: the one after the previous input's (the first: 0)
  int64_t timestamp_ms = -1;      // -1: none
  std::optional<std::string> key;
  FixtureHeaders headers;
  std::optional<std::string> payload;  // nullopt: a tombstone
};

// What one record the sink is called with must be; only what is written is compared.
struct FixtureExpectedRecord {
  int line = 0;
  std::string where;  // "tests[0].expect[1]"
  enum class Payload { Unchecked, Json, Bytes, Tombstone } payload_kind = Payload::Unchecked;
  std::string payload;  // JSON text (Json, compared as JSON) or the exact bytes (Bytes)
  // Json: fields that must be there whatever their value (a time stamped by a transform), as
  // dotted paths into objects ("meta.ingested_at").
  std::vector<std::string> ignore_fields;
  std::optional<std::string> key;       // the record key's bytes
  std::optional<std::string> key_json;  // the decoded key ([topics.key], change events), compared as JSON
  std::optional<FixtureHeaders> headers;
  bool headers_ordered = false;   // written as an array of pairs: the order counts too
  std::optional<std::string> op;  // "append" | "upsert" | "delete" | "truncate" | "patch"
  std::optional<int64_t> offset;
};

// A record that must not reach the sink because it is bad (decode, transform or sink stage).
struct FixtureExpectedBad {
  int line = 0;
  std::string where;
  int64_t offset = 0;                 // the input's offset
  std::optional<std::string> stage;   // "decode" | "transform" | "sink"
  std::optional<std::string> reason;  // a part of the reason
};

struct FixtureCase {
  int line = 0;
  std::string where;  // "tests[0]"
  std::string name;
  std::optional<std::string> topic;  // unset: the definition's only topic
  int32_t partition = 0;
  std::optional<int> block;  // unset: the [[topics]] block that takes the topic
  std::vector<FixtureInput> input;
  std::optional<std::vector<FixtureExpectedRecord>> expect;  // `expect = []`: the sink gets nothing
  std::vector<FixtureExpectedBad> expect_bad;
  std::optional<int64_t> expect_filtered;
};

struct Fixture {
  std::string file;
  std::filesystem::path definition;  // resolved against the fixture's folder
  int definition_line = 0;
  std::vector<FixtureCase> tests;
};

struct FixtureResult {
  std::optional<Fixture> fixture;  // set only when errors is empty
  std::vector<ConfigError> errors;
};

// `definition_override`: the definition to test instead of the one the file names (which may
// then be left out): the docs' examples, whose definitions live in Markdown.
FixtureResult parse_fixture(std::string_view toml_text, const std::string& file_name, const EnvLookup& env,
                            const std::optional<std::filesystem::path>& definition_override = std::nullopt);
FixtureResult load_fixture(const std::filesystem::path& file, const EnvLookup& env,
                           const std::optional<std::filesystem::path>& definition_override = std::nullopt);

}  // namespace picomq::config
