// Sink definitions: one TOML file per sink (see docs/configuration.md and the spec's
// "Definition"). Parsing never stops at the first problem: every error of a file is
// collected, and a definition is returned only when there are none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/env.h"
#include "config/error.h"
#include "config/transforms_config.h"
#include "picomq/kit/units.hpp"

namespace picomq::config {

enum class Schema { Json, Raw, Text, Proto, Flatbuffer, Avro };
std::string_view to_string(Schema schema);  // "json", "raw", ...

enum class OffsetReset { Earliest, Latest };
std::string_view to_string(OffsetReset reset);  // "earliest" | "latest"

// What happens to a record that cannot be decoded or transformed, or that the sink rejects.
enum class BadRecordPolicy { Fail, Skip, DeadLetter };
std::string_view to_string(BadRecordPolicy policy);  // "fail" | "skip" | "dead_letter"

// How a payload (or a record key) is decoded: `schema` and the keys that go with it
// (docs/decoders.md). Paths are resolved against the definition file's folder; each schema is
// compiled once at load time to validate it (SchemaCompiler).
struct PayloadSchema {
  Schema schema = Schema::Json;
  std::optional<std::string> avro_schema_json, avro_schema_path;  // the path resolved against the file's folder
  std::vector<std::string> proto_files, proto_include_paths;
  std::optional<std::string> proto_descriptor_set;
  std::string proto_message;           // fully qualified
  bool proto_int64_as_string = false;  // proto_int64 = "string"
  bool proto_json_names = false;       // proto_field_names = "json"
  std::string flatbuffer_schema;       // .fbs or .bfbs
  std::string flatbuffer_root_type;    // empty: the schema's root_type
  std::vector<std::string> flatbuffer_include_paths;
  enum class AvroFraming { Plain, Registry };
  AvroFraming avro_framing = AvroFraming::Plain;
  std::optional<std::string> avro_registry_url;  // after ${ENV}; may hold credentials: never log it
};

// What a block's records are (docs/changes.md): plain records (none), or changes of rows by key —
// `keyed`: a record with a payload is an upsert of its key, a tombstone a delete; `debezium`: the
// Debezium envelope (op c / r / u: upsert of `after`, d: delete, t: truncate), wrapped in
// {"schema", "payload"} or not, or already unwrapped by ExtractNewRecordState.
enum class ChangeEvents { None, Keyed, Debezium };
std::string_view to_string(ChangeEvents changes);  // "none" | "keyed" | "debezium"

// One [[topics]] block: one consumer in its own consumer group. Its payload schema is the base.
struct TopicsBlock : PayloadSchema {
  int index = 0;                                // position of the [[topics]] table in the file (0-based)
  int line = 0;                                 // line of its [[topics]] header
  std::vector<std::string> topics;              // explicit list, validated Kafka topic names
  std::optional<std::string> pattern;           // as written by the user
  std::optional<std::string> anchored_pattern;  // '^' prepended when the user did not anchor it
  // [topics.key]: how record keys are decoded (the same keys as the payload's schema); unset: keys
  // stay bytes. Under `changes` without key_fields it defaults to json (Debezium's converter).
  std::optional<PayloadSchema> key_schema;
  ChangeEvents changes = ChangeEvents::None;
  int changes_line = 0, changes_column = 0;  // where `changes` is written (a sink that cannot apply them)
  // Under `changes`: the row's key from these payload fields instead of the record key.
  std::vector<std::string> key_fields;
  std::size_t batch_length = 1000;
  kit::Millis poll_interval{100};
  // The least time between two offset commits of this block's group: the offsets written
  // meanwhile go out together with the next (runtime/delivery/offset_committer.h). 0: a commit
  // as soon as the previous one is answered.
  kit::Millis offset_commit_interval{1000};
  std::optional<std::string> consumer_group;
  OffsetReset auto_offset_reset = OffsetReset::Earliest;
  BadRecordPolicy on_bad_record = BadRecordPolicy::Fail;
  std::optional<std::string> dead_letter_topic;  // set exactly when on_bad_record is DeadLetter
  // on_write_failure = "dead_letter": a batch whose write still fails after the retries (RETRY
  // or PARTIAL, not FATAL) goes to the dead-letter topic (stage sink) and the block goes on,
  // instead of failing the sink (docs/bad-records.md). Needs on_bad_record = "dead_letter".
  bool dead_letter_write_failures = false;
  // librdkafka consumer properties, values as strings, sorted by name. Never contains the
  // properties the runtime manages (see names.h: managed_property_reason).
  std::vector<std::pair<std::string, std::string>> properties;
  // Declared payload columns for sinks on the Arrow plane, in order (docs/arrow.md); empty:
  // inferred from each batch. Types are validated names ("int64", "utf8", ...).
  struct ArrowColumn {
    std::string name;
    std::string type;
    bool nullable = true;
  };
  std::vector<ArrowColumn> arrow_schema;

  // consumer_group, or "picomq-connect-sink-<sink_key>" for the first block and
  // "picomq-connect-sink-<sink_key>-<index>" for later ones. Distinct for every block of a valid
  // definition (and of a SinkDirectory).
  std::string group_id(std::string_view sink_key) const;
  // Whether this block reads `topic`: one of its topics, or a match of its pattern.
  bool reads(const std::string& topic) const;
};

// A place in a definition file: 1-based line and column (0 when unknown).
struct SourcePosition {
  int line = 0;
  int column = 0;
};

// Where the plugin's part of a definition is written, for the problems only the plugin can
// find, after loading (its option table and its validate(): at --check and at start).
struct PluginConfigPositions {
  SourcePosition path;   // the value of `path`
  SourcePosition table;  // the [plugin_config] table; the definition's start when there is none
  struct Key {
    std::string name;      // a top-level key of [plugin_config], unquoted
    SourcePosition key;    // the key itself
    SourcePosition value;  // its value
  };
  std::vector<Key> keys;  // in file order
};

struct SinkDefinition {
  std::string file;
  std::string type;  // always "sink"
  std::string key;
  bool enabled = true;
  std::int64_t version = 0;
  std::string name;  // defaults to key
  std::string path;  // plugin library name, e.g. "libpicomq_connector_stdout_sink" (no '/')
  std::vector<TopicsBlock> topics;
  std::string plugin_config_json = "{}";  // [plugin_config] as a JSON object, after ${ENV} interpolation
  std::vector<TransformSpec> transforms;  // [[transforms]] in file order (docs/transforms.md)
  PluginConfigPositions positions;

  // A problem with [plugin_config] found after loading, in this file's error format: `option`
  // is the option it is about ("" for the table as a whole; "auth.user" finds the key "auth").
  // It points at the option's value, or at its key with `at_key` (an option the plugin does not
  // know), or at the table when the option is not written (a missing required option).
  ConfigError plugin_config_error(std::string_view option, std::string message, bool at_key = false) const;
  // A problem with the plugin itself (not found, refused), at the `path` value.
  ConfigError path_error(std::string message) const;
};

struct SinkDefinitionResult {
  std::optional<SinkDefinition> definition;  // set only when errors is empty
  std::vector<ConfigError> errors;
  // With errors: the definition as far as it was read, when none of them is about `path` or
  // [plugin_config], so that --check can still check those against the plugin. Never run.
  std::optional<SinkDefinition> partial;
};

// A block's schema compiled, to validate it when the definition loads (proto, flatbuffer and avro;
// json, raw and text have nothing to compile): decoders::compile_block_schema, on the decoders'
// side, which this library does not link. It is called once the block's schema keys read without
// error; a problem names the key it is about ("schema" for the block as a whole) and becomes an
// error there. Without one the keys are read and checked, but no schema file is opened.
struct SchemaProblem {
  std::string key;
  std::string message;
};
using SchemaCompiler = std::function<std::optional<SchemaProblem>(const PayloadSchema& schema)>;

SinkDefinitionResult parse_sink_definition(std::string_view toml_text, const std::string& file_name,
                                           const EnvLookup& env, const SchemaCompiler& compile_schema = {});
SinkDefinitionResult load_sink_definition(const std::filesystem::path& file, const EnvLookup& env,
                                          const SchemaCompiler& compile_schema = {});

// All regular "*.toml" files of a directory (names starting with '.' are skipped), in name
// order. A file with errors contributes its errors only. A sink whose key or one of whose
// consumer groups was already taken by an earlier file is an error of the later file, and
// that sink is not in `definitions`. Disabled sinks (enabled = false) are included.
struct SinkDirectory {
  std::vector<SinkDefinition> definitions;
  std::vector<ConfigError> errors;
  // Definitions that do not start (errors above) but whose `path` and [plugin_config] were read
  // without error: the partial definitions of bad files and the sinks refused for a key or a
  // group taken earlier. --check checks their plugins too, so a file's problems come in one pass.
  std::vector<SinkDefinition> rejected;
};
SinkDirectory load_sink_directory(const std::filesystem::path& dir, const EnvLookup& env,
                                  const SchemaCompiler& compile_schema = {});

}  // namespace picomq::config
