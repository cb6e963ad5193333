#include "config/sink_definition.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "config/file_text.h"
#include "config/names.h"
#include "config/regex.h"
#include "config/toml_reader.h"
#include "picomq/kit/arrow_export.hpp"

namespace picomq::config {

std::string_view to_string(BadRecordPolicy policy) {
  switch (policy) {
    case BadRecordPolicy::Fail: return "fail";
    case BadRecordPolicy::Skip: return "skip";
    case BadRecordPolicy::DeadLetter: return "dead_letter";
  }
  return "?";
}

std::string_view to_string(ChangeEvents changes) {
  switch (changes) {
    case ChangeEvents::None: return "none";
    case ChangeEvents::Keyed: return "keyed";
    case ChangeEvents::Debezium: return "debezium";
  }
  return "?";
}

std::string_view to_string(Schema schema) {
  switch (schema) {
    case Schema::Json: return "json";
    case Schema::Raw: return "raw";
    case Schema::Text: return "text";
    case Schema::Proto: return "proto";
    case Schema::Flatbuffer: return "flatbuffer";
    case Schema::Avro: return "avro";
  }
  return "unknown";
}

std::string_view to_string(OffsetReset reset) {
  switch (reset) {
    case OffsetReset::Earliest: return "earliest";
    case OffsetReset::Latest: return "latest";
  }
  return "unknown";
}

bool TopicsBlock::reads(const std::string& topic) const {
  if (std::find(topics.begin(), topics.end(), topic) != topics.end()) return true;
  return anchored_pattern && std::regex_search(topic, compile_regex(*anchored_pattern));
}

std::string TopicsBlock::group_id(std::string_view sink_key) const {
  if (consumer_group) return *consumer_group;
  // The spec's default names the first block's group; later blocks need groups of their own.
  std::string group = "picomq-connect-sink-" + std::string(sink_key);
  if (index > 0) group += "-" + std::to_string(index);
  return group;
}

ConfigError SinkDefinition::plugin_config_error(std::string_view option, std::string message, bool at_key) const {
  ConfigError error{file, positions.table.line, positions.table.column, "plugin_config", std::move(message)};
  if (option.empty()) return error;
  auto find = [&](std::string_view name) -> const PluginConfigPositions::Key* {
    for (const auto& k : positions.keys)
      if (k.name == name) return &k;
    return nullptr;
  };
  const PluginConfigPositions::Key* key = find(option);
  error.key = detail::child_key("plugin_config", option);
  if (!key) {
    // A path into a table option ("auth.user", "columns[2]"): the position of its top-level key.
    const auto end = option.find_first_of(".[");
    if (end != std::string_view::npos && end > 0 && (key = find(option.substr(0, end))))
      error.key = detail::child_key("plugin_config", option.substr(0, end)) + std::string(option.substr(end));
  }
  if (key) {
    const SourcePosition& at = at_key ? key->key : key->value;
    error.line = at.line;
    error.column = at.column;
  }
  return error;
}

ConfigError SinkDefinition::path_error(std::string message) const {
  return ConfigError{file, positions.path.line, positions.path.column, "path", std::move(message)};
}

namespace {

using detail::Diagnostics;
using detail::TableReader;

constexpr std::array<Schema, 6> kSchemas{Schema::Json,  Schema::Raw,        Schema::Text,
                                         Schema::Proto, Schema::Flatbuffer, Schema::Avro};

// Where things are in the file, for errors found after parsing (duplicates across files).
struct Positions {
  toml::source_region key;
  struct Group {
    toml::source_region where;
    std::string key;  // "topics[1]" or "topics[1].consumer_group"
  };
  std::vector<Group> groups;  // one per [[topics]] block
};

// on_bad_record = "fail" | "skip" | "dead_letter", the last with dead_letter_topic = "<topic>".
void read_bad_record_policy(TableReader& r, const toml::table& table, TopicsBlock& block) {
  if (auto policy = r.string("on_bad_record")) {
    if (*policy == "fail") block.on_bad_record = BadRecordPolicy::Fail;
    else if (*policy == "skip") block.on_bad_record = BadRecordPolicy::Skip;
    else if (*policy == "dead_letter") block.on_bad_record = BadRecordPolicy::DeadLetter;
    else
      r.error(*table.get("on_bad_record"), "on_bad_record",
              "'on_bad_record' must be \"fail\", \"skip\" or \"dead_letter\", got \"" + *policy + "\"");
  }
  auto topic = r.string("dead_letter_topic");
  const bool dead_letter = block.on_bad_record == BadRecordPolicy::DeadLetter;
  if (topic && !dead_letter) {
    r.error(*table.get("dead_letter_topic"), "dead_letter_topic",
            "'dead_letter_topic' is only used with on_bad_record = \"dead_letter\"");
  } else if (topic) {
    if (auto problem = topic_name_problem(*topic))
      r.error(*table.get("dead_letter_topic"), "dead_letter_topic", "invalid dead-letter topic: " + *problem);
    else if (block.reads(*topic))
      // A bad record would come back to this block, fail again and be produced again, forever.
      r.error(*table.get("dead_letter_topic"), "dead_letter_topic",
              "the dead-letter topic '" + *topic + "' is one this block consumes");
    else block.dead_letter_topic = std::move(*topic);
  } else if (dead_letter && table.get("on_bad_record")) {
    r.error(*table.get("on_bad_record"), "on_bad_record",
            "on_bad_record = \"dead_letter\" needs 'dead_letter_topic', the topic bad records are produced to");
  }
  if (auto on_failure = r.string("on_write_failure")) {
    if (*on_failure == "dead_letter" && dead_letter) block.dead_letter_write_failures = true;
    else if (*on_failure == "dead_letter")
      r.error(*table.get("on_write_failure"), "on_write_failure",
              "on_write_failure = \"dead_letter\" needs on_bad_record = \"dead_letter\" and its dead_letter_topic");
    else if (*on_failure != "fail")
      r.error(*table.get("on_write_failure"), "on_write_failure",
              "'on_write_failure' must be \"fail\" or \"dead_letter\", got \"" + *on_failure + "\"");
  }
}

// arrow_schema = [ { name = "id", type = "utf8", nullable = false }, { name = "amount", type = "float64" } ]
// An array, so the declared column order survives (TOML tables have none).
void read_arrow_schema(TableReader& r, const toml::node& node, TopicsBlock& block) {
  const toml::array* columns = node.as_array();
  if (!columns) {
    r.error(node, "arrow_schema",
            "'arrow_schema' must be an array of tables such as { name = \"id\", type = \"utf8\" }");
    return;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < columns->size(); ++i) {
    const toml::node& item = *columns->get(i);
    const toml::table* t = item.as_table();
    if (!t) {
      r.error(item, "arrow_schema",
              "entry " + std::to_string(i) + " must be a table { name = \"...\", type = \"...\" }");
      continue;
    }
    TableReader c(*t, r.key_path("arrow_schema") + "[" + std::to_string(i) + "]", r.diagnostics(), r.env());
    TopicsBlock::ArrowColumn column;
    auto name = c.string("name", true);
    auto type = c.string("type", true);
    if (auto nullable = c.boolean("nullable")) column.nullable = *nullable;
    c.finish();
    if (name) {
      if (name->empty()) c.error(*t->get("name"), "name", "a column name must not be empty");
      else if (name->rfind("pico_", 0) == 0)
        c.error(*t->get("name"), "name", "'" + *name + "' would collide with the metadata columns (pico_*)");
      else if (!names.insert(*name).second)
        c.error(*t->get("name"), "name", "column '" + *name + "' is declared twice");
      column.name = *name;
    }
    if (type) {
      if (!arrow::parse_column_type(*type))
        c.error(*t->get("type"), "type",
                "unknown column type '" + *type + "' (one of bool, int64, float64, utf8, binary, timestamp_ms, json)");
      column.type = *type;
    }
    block.arrow_schema.push_back(std::move(column));
  }
}

// Schema files are named relative to the definition file's folder.
std::string resolve_path(const std::filesystem::path& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative() && !base_dir.empty()) p = base_dir / p;
  return p.lexically_normal().string();
}

// Keys that belong to one schema (docs/decoders.md): any of them with another schema is an error.
struct SchemaKey {
  std::string_view key;
  Schema schema;
};
constexpr SchemaKey kSchemaKeys[] = {
    {"avro_schema_json", Schema::Avro},
    {"avro_schema_path", Schema::Avro},
    {"avro_framing", Schema::Avro},
    {"avro_registry_url", Schema::Avro},
    {"proto_files", Schema::Proto},
    {"proto_include_paths", Schema::Proto},
    {"proto_descriptor_set", Schema::Proto},
    {"proto_message", Schema::Proto},
    {"proto_int64", Schema::Proto},
    {"proto_field_names", Schema::Proto},
    {"flatbuffer_schema", Schema::Flatbuffer},
    {"flatbuffer_root_type", Schema::Flatbuffer},
    {"flatbuffer_include_paths", Schema::Flatbuffer},
};

std::vector<std::string> resolved_list(TableReader& r, std::string_view key, const std::filesystem::path& base_dir) {
  std::vector<std::string> out;
  if (auto list = r.string_list(key))
    for (auto& item : *list) {
      if (item.value.empty()) r.diagnostics().error(item.where, item.key, "a path must not be empty");
      else out.push_back(resolve_path(base_dir, item.value));
    }
  return out;
}

// Reads and validates the schema keys of a block (which are set, with which schema, paths resolved),
// then, when they read without error, has `compile_schema` compile the schema: a problem is an
// error at the key it names (files that do not exist or compile, a message / root type that is not
// there, an Avro schema that does not parse, a registry URL that is not sound).
void read_schema_keys(TableReader& r, const toml::table& table, const toml::node* schema_node, PayloadSchema& block,
                      const std::filesystem::path& base_dir, const SchemaCompiler& compile_schema) {
  const std::size_t errors_before = r.diagnostics().count();
  for (const auto& [key, schema] : kSchemaKeys) {
    const toml::node* n = table.get(key);
    if (!n || schema == block.schema) continue;
    r.node(key);  // known, but not here
    r.error(*n, key,
            "'" + std::string(key) + "' is only valid with schema = \"" + std::string(to_string(schema)) + "\"");
  }
  const toml::node& schema_at = schema_node ? *schema_node : static_cast<const toml::node&>(table);
  auto at = [&](std::string_view key) -> const toml::node& {
    const toml::node* n = table.get(key);
    return n ? *n : schema_at;
  };
  auto non_empty = [&](std::string_view key) -> std::optional<std::string> {
    auto value = r.string(key);
    if (value && value->empty()) {
      r.error(*table.get(key), key, "'" + std::string(key) + "' must not be empty");
      return std::nullopt;
    }
    return value;
  };

  // Once the keys read cleanly: compiled by the decoders' side, the problem placed at its key.
  auto compile = [&] {
    if (r.diagnostics().count() != errors_before || !compile_schema) return;
    if (auto problem = compile_schema(block)) r.error(at(problem->key), problem->key, problem->message);
  };

  switch (block.schema) {
    case Schema::Json:
    case Schema::Raw:
    case Schema::Text: return;

    case Schema::Proto: {
      block.proto_files = resolved_list(r, "proto_files", base_dir);
      block.proto_include_paths = resolved_list(r, "proto_include_paths", base_dir);
      if (auto set = non_empty("proto_descriptor_set")) block.proto_descriptor_set = resolve_path(base_dir, *set);
      if (auto message = non_empty("proto_message")) block.proto_message = *message;
      if (auto v = r.string("proto_int64")) {
        if (*v == "number" || *v == "string") block.proto_int64_as_string = *v == "string";
        else
          r.error(at("proto_int64"), "proto_int64",
                  "'proto_int64' must be \"number\" or \"string\", got \"" + *v + "\"");
      }
      if (auto v = r.string("proto_field_names")) {
        if (*v == "proto" || *v == "json") block.proto_json_names = *v == "json";
        else
          r.error(
              at("proto_field_names"), "proto_field_names",
              "'proto_field_names' must be \"proto\" (names as in the .proto file) or \"json\" (json_name), got \"" +
                  *v + "\"");
      }
      const bool files = table.get("proto_files") != nullptr, set = table.get("proto_descriptor_set") != nullptr;
      if (files && set)
        r.error(at("proto_descriptor_set"), "proto_descriptor_set",
                "set only one of 'proto_files' and 'proto_descriptor_set'");
      else if (!files && !set)
        r.error(schema_at, "schema",
                std::string("schema = \"proto\" needs 'proto_files' (.proto files) or 'proto_descriptor_set' (protoc "
                            "--descriptor_set_out --include_imports)") +
                    (table.get("proto_message") ? "" : ", and 'proto_message' (e.g. \"shop.v1.Order\")"));
      if (set && table.get("proto_include_paths"))
        r.error(at("proto_include_paths"), "proto_include_paths",
                "'proto_include_paths' is only used with 'proto_files'");
      if (!table.get("proto_message") && (files || set))
        r.error(schema_at, "schema",
                "schema = \"proto\" needs 'proto_message', the fully qualified message type (e.g. \"shop.v1.Order\")");
      compile();
      return;
    }

    case Schema::Flatbuffer: {
      if (auto file = non_empty("flatbuffer_schema")) block.flatbuffer_schema = resolve_path(base_dir, *file);
      if (auto root = non_empty("flatbuffer_root_type")) block.flatbuffer_root_type = *root;
      block.flatbuffer_include_paths = resolved_list(r, "flatbuffer_include_paths", base_dir);
      if (!table.get("flatbuffer_schema"))
        r.error(schema_at, "schema", "schema = \"flatbuffer\" needs 'flatbuffer_schema' (a .fbs or .bfbs file)");
      compile();
      return;
    }

    case Schema::Avro: {
      for (std::string_view key : {"avro_schema_json", "avro_schema_path"})
        if (auto value = non_empty(key))
          (key == "avro_schema_json" ? block.avro_schema_json : block.avro_schema_path) =
              key == "avro_schema_path" ? resolve_path(base_dir, *value) : *value;
      if (auto framing = r.string("avro_framing")) {
        if (*framing == "plain") block.avro_framing = PayloadSchema::AvroFraming::Plain;
        else if (*framing == "registry") block.avro_framing = PayloadSchema::AvroFraming::Registry;
        else
          r.error(at("avro_framing"), "avro_framing",
                  "'avro_framing' must be \"plain\" (Avro binary) or \"registry\" (magic byte + schema id), got \"" +
                      *framing + "\"");
      }
      if (auto url = r.string("avro_registry_url")) block.avro_registry_url = *url;
      const bool json = table.get("avro_schema_json") != nullptr, path = table.get("avro_schema_path") != nullptr;
      if (block.avro_framing == PayloadSchema::AvroFraming::Registry) {
        for (std::string_view key : {"avro_schema_json", "avro_schema_path"})
          if (table.get(key))
            r.error(at(key), key,
                    "'" + std::string(key) +
                        "' is not used with avro_framing = \"registry\": each record's writer "
                        "schema comes from the registry");
        if (!table.get("avro_registry_url"))
          r.error(at("avro_framing"), "avro_framing", "avro_framing = \"registry\" needs 'avro_registry_url'");
      } else {
        if (table.get("avro_registry_url"))
          r.error(at("avro_registry_url"), "avro_registry_url",
                  "'avro_registry_url' is only used with avro_framing = \"registry\"");
        if (json && path)
          r.error(at("avro_schema_path"), "avro_schema_path",
                  "set only one of 'avro_schema_json' and 'avro_schema_path'");
        else if (!json && !path)
          r.error(schema_at, "schema", "schema = \"avro\" needs 'avro_schema_json' or 'avro_schema_path'");
      }
      compile();
      return;
    }
  }
}

// `schema` and the keys that go with it: a block's payload, or its [topics.key].
void read_payload_schema(TableReader& r, const toml::table& table, PayloadSchema& out,
                         const std::filesystem::path& base_dir, const SchemaCompiler& compile_schema) {
  const toml::node* schema_node = table.get("schema");
  if (auto schema = r.string("schema")) {
    auto it = std::find_if(kSchemas.begin(), kSchemas.end(), [&](Schema s) { return to_string(s) == *schema; });
    if (it == kSchemas.end()) {
      r.error(*schema_node, "schema",
              "unknown schema '" + *schema + "' (one of json, raw, text, proto, flatbuffer, avro)");
    } else {
      out.schema = *it;
    }
  }
  read_schema_keys(r, table, schema_node, out, base_dir, compile_schema);
}

// changes = "keyed" | "debezium", the record key's schema ([topics.key]) and key_fields
// (docs/changes.md).
void read_changes(TableReader& r, const toml::table& table, TopicsBlock& block, const std::string& path,
                  Diagnostics& diag, const EnvLookup& env, const std::filesystem::path& base_dir,
                  const SchemaCompiler& compile_schema) {
  if (auto changes = r.string("changes")) {
    const toml::node& at = *table.get("changes");
    if (*changes == "none") block.changes = ChangeEvents::None;
    else if (*changes == "keyed") block.changes = ChangeEvents::Keyed;
    else if (*changes == "debezium") block.changes = ChangeEvents::Debezium;
    else
      r.error(at, "changes",
              "'changes' must be \"keyed\" (a record upserts its key, a tombstone deletes it), \"debezium\" "
              "(Debezium's change events) or \"none\", got \"" +
                  *changes + "\"");
    block.changes_line = static_cast<int>(at.source().begin.line);
    block.changes_column = static_cast<int>(at.source().begin.column);
    if (block.changes != ChangeEvents::None && (block.schema == Schema::Raw || block.schema == Schema::Text))
      r.error(at, "changes",
              "change events need payloads decoded to JSON (schema json, avro, proto or flatbuffer), not schema = \"" +
                  std::string(to_string(block.schema)) + "\"");
  }
  if (const toml::node* key = r.node("key")) {
    if (!key->is_table()) {
      r.error(*key, "key", "'key' is how record keys are decoded, a table such as key = { schema = \"json\" }");
    } else {
      TableReader kr(*key->as_table(), path + ".key", diag, env);
      PayloadSchema schema;
      read_payload_schema(kr, *key->as_table(), schema, base_dir, compile_schema);
      kr.finish();
      if (schema.schema == Schema::Raw)
        r.error(*key, "key",
                "schema = \"raw\" leaves keys as they are, which they are without a key table: decode them (schema = "
                "\"text\", \"json\", \"avro\", ...)");
      block.key_schema = std::move(schema);
    }
  }
  if (auto fields = r.string_list("key_fields")) {
    std::set<std::string> seen;
    for (auto& field : *fields) {
      if (field.value.empty()) diag.error(field.where, field.key, "a key field name must not be empty");
      else if (!seen.insert(field.value).second)
        diag.error(field.where, field.key, "key field '" + field.value + "' is listed twice");
      else block.key_fields.push_back(std::move(field.value));
    }
    if (block.changes == ChangeEvents::None)
      r.error(*table.get("key_fields"), "key_fields",
              "'key_fields' name the key of change events: set 'changes' too (\"keyed\" or \"debezium\")");
  }
  // Debezium's default converter writes JSON keys.
  if (block.changes != ChangeEvents::None && !block.key_schema && block.key_fields.empty())
    block.key_schema = PayloadSchema{};
}

TopicsBlock parse_topics_block(const toml::table& table, int index, const std::string& path, Diagnostics& diag,
                               const EnvLookup& env, const std::filesystem::path& base_dir,
                               const SchemaCompiler& compile_schema) {
  TableReader r(table, path, diag, env);
  TopicsBlock block;
  block.index = index;
  block.line = static_cast<int>(table.source().begin.line);

  if (auto topics = r.string_array("topics")) {
    std::set<std::string> seen;
    for (auto& topic : *topics) {
      if (auto problem = topic_name_problem(topic.value)) {
        diag.error(topic.where, topic.key, "bad topic '" + topic.value + "': " + *problem);
      } else if (!seen.insert(topic.value).second) {
        diag.error(topic.where, topic.key, "topic '" + topic.value + "' is listed twice");
      } else {
        block.topics.push_back(std::move(topic.value));
      }
    }
  }
  const toml::node* pattern_node = table.get("pattern");
  if (auto pattern = r.string("pattern")) {
    if (pattern->empty()) {
      r.error(*pattern_node, "pattern", "'pattern' must not be empty (leave it out to use only 'topics')");
    } else {
      std::string anchored = pattern->front() == '^' ? *pattern : "^" + *pattern;
      try {
        (void)compile_regex(anchored);
        block.pattern = std::move(*pattern);
        block.anchored_pattern = std::move(anchored);
      } catch (const std::invalid_argument& e) {
        r.error(*pattern_node, "pattern", "invalid regular expression '" + *pattern + "': " + e.what());
      }
    }
  }
  const toml::node* topics_node = table.get("topics");
  const bool topics_empty = !topics_node || (topics_node->is_array() && topics_node->as_array()->empty());
  if (topics_empty && !pattern_node)
    r.error_here(
        "a [[topics]] block needs 'topics' (a list of topic names) or 'pattern' (a regular expression), or both");

  read_payload_schema(r, table, block, base_dir, compile_schema);
  read_changes(r, table, block, path, diag, env, base_dir, compile_schema);

  if (auto n = r.integer("batch_length")) {
    if (*n < 1)
      r.error(*table.get("batch_length"), "batch_length",
              "'batch_length' must be at least 1, got " + std::to_string(*n));
    else block.batch_length = static_cast<std::size_t>(*n);
  }
  if (auto interval = r.duration("poll_interval")) {
    if (interval->count() < 1)
      r.error(*table.get("poll_interval"), "poll_interval", "'poll_interval' must be at least 1ms");
    else block.poll_interval = *interval;
  }
  if (auto interval = r.duration("offset_commit_interval")) block.offset_commit_interval = *interval;
  if (auto group = r.string("consumer_group")) {
    if (group->empty())
      r.error(*table.get("consumer_group"), "consumer_group",
              "'consumer_group' must not be empty (leave it out for the default group)");
    else block.consumer_group = std::move(*group);
  }
  if (auto reset = r.string("auto_offset_reset")) {
    if (*reset == "earliest") block.auto_offset_reset = OffsetReset::Earliest;
    else if (*reset == "latest") block.auto_offset_reset = OffsetReset::Latest;
    else
      r.error(*table.get("auto_offset_reset"), "auto_offset_reset",
              "'auto_offset_reset' must be \"earliest\" or \"latest\", got \"" + *reset + "\"");
  }
  read_bad_record_policy(r, table, block);
  if (auto properties = r.properties("properties")) block.properties = std::move(*properties);
  if (const toml::node* schema = r.node("arrow_schema")) read_arrow_schema(r, *schema, block);
  r.finish();
  return block;
}

SinkDefinitionResult parse_impl(std::string_view toml_text, const std::string& file_name, const EnvLookup& env,
                                const SchemaCompiler& compile_schema, Positions* positions) {
  SinkDefinitionResult result;
  Diagnostics diag(file_name, result.errors);
  const std::filesystem::path base_dir = std::filesystem::path(file_name).parent_path();
  auto parsed = detail::parse_document(toml_text, file_name, diag);
  if (!parsed) return result;
  const toml::table& root = *parsed;

  TableReader r(root, "", diag, env);
  SinkDefinition def;
  def.file = file_name;

  if (auto type = r.string("type", true)) {
    if (*type != "sink") r.error(*root.get("type"), "type", "'type' must be \"sink\", got \"" + *type + "\"");
    def.type = std::move(*type);
  }
  if (auto key = r.string("key", true)) {
    if (!is_valid_sink_key(*key))
      r.error(*root.get("key"), "key",
              key->empty() ? std::string("'key' must not be empty")
                           : "'key' must use only A-Z a-z 0-9 _ . - (it becomes part of a consumer "
                             "group id), got \"" +
                                 *key + "\"");
    def.key = std::move(*key);
    if (positions) positions->key = root.get("key")->source();
  }
  if (auto enabled = r.boolean("enabled")) def.enabled = *enabled;
  if (auto version = r.integer("version")) {
    if (*version < 0) r.error(*root.get("version"), "version", "'version' must not be negative");
    def.version = *version;
  }
  if (auto name = r.string("name")) {
    if (name->empty()) r.error(*root.get("name"), "name", "'name' must not be empty (leave it out to use the key)");
    def.name = std::move(*name);
  } else {
    def.name = def.key;
  }
  const std::size_t errors_before_path = diag.count();
  if (auto path = r.string("path", true)) {
    if (path->empty()) r.error(*root.get("path"), "path", "'path' must not be empty");
    else if (path->find_first_of("/\\") != std::string::npos)
      r.error(*root.get("path"), "path",
              "'path' is a plugin library name such as \"libpicomq_connector_stdout_sink\", not a file "
              "path (no '/'); the runtime looks it up in the [plugins] path");
    def.path = std::move(*path);
  }
  const bool path_ok = diag.count() == errors_before_path && !def.path.empty();

  if (const toml::node* topics = r.node("topics")) {
    const toml::array* blocks = topics->as_array();
    if (!blocks || !blocks->is_array_of_tables() || blocks->empty()) {
      if (blocks && blocks->empty()) r.error(*topics, "topics", "at least one [[topics]] block is required");
      else
        r.error(*topics, "topics",
                "'topics' must be an array of tables ([[topics]] blocks), got " +
                    std::string(detail::type_name(topics->type())));
    } else {
      for (std::size_t i = 0; i < blocks->size(); ++i) {
        const toml::table& table = *blocks->get(i)->as_table();
        std::string path = detail::index_key("topics", i);
        def.topics.push_back(parse_topics_block(table, static_cast<int>(i), path, diag, env, base_dir, compile_schema));
        if (positions) {
          if (const toml::node* group = table.get("consumer_group"))
            positions->groups.push_back({group->source(), path + ".consumer_group"});
          else positions->groups.push_back({table.source(), path});
        }
      }
    }
  } else {
    r.missing("topics", "at least one [[topics]] block");
  }

  auto position = [](const toml::source_region& where) {
    return SourcePosition{static_cast<int>(where.begin.line), static_cast<int>(where.begin.column)};
  };
  if (const toml::node* path = root.get("path")) def.positions.path = position(path->source());
  def.positions.table = position(root.source());
  if (def.positions.table.line == 0) def.positions.table = {1, 1};
  if (const toml::node* n = root.get("plugin_config"); n && n->is_table()) {
    def.positions.table = position(n->source());
    for (auto&& [k, v] : *n->as_table())
      def.positions.keys.push_back({std::string(k.str()), position(k.source()), position(v.source())});
    std::stable_sort(def.positions.keys.begin(), def.positions.keys.end(), [](const auto& a, const auto& b) {
      return a.key.line != b.key.line ? a.key.line < b.key.line : a.key.column < b.key.column;
    });
  }
  const std::size_t errors_before_plugin_config = diag.count();
  if (const toml::table* plugin_config = r.table("plugin_config")) {
    nlohmann::json json = detail::to_json(*plugin_config, "plugin_config", diag, env);
    try {
      def.plugin_config_json = json.dump();
    } catch (const nlohmann::json::exception& e) {
      diag.error(plugin_config->source(), "plugin_config", std::string("cannot convert to JSON: ") + e.what());
    }
  }
  const bool plugin_config_ok = diag.count() == errors_before_plugin_config;
  parse_transforms(r, def.topics, def.transforms);
  r.finish();

  // Each block must end up in its own consumer group.
  if (is_valid_sink_key(def.key)) {
    std::map<std::string, int> owner;
    for (const auto& block : def.topics) {
      std::string group = block.group_id(def.key);
      auto [it, inserted] = owner.emplace(group, block.index);
      if (inserted) continue;
      const toml::table& table = *root["topics"].as_array()->get(block.index)->as_table();
      const toml::node* at = table.get("consumer_group");
      std::string where = detail::index_key("topics", block.index);
      diag.error(at ? at->source() : table.source(), at ? where + ".consumer_group" : where,
                 "consumer group '" + group + "' is already used by topics[" + std::to_string(it->second) +
                     "]; every [[topics]] block needs its own group, set a distinct 'consumer_group'");
    }
  }

  detail::sort_by_position(result.errors);
  if (result.errors.empty()) result.definition = std::move(def);
  else if (path_ok && plugin_config_ok) result.partial = std::move(def);
  return result;
}

SinkDefinitionResult load_impl(const std::filesystem::path& file, const EnvLookup& env,
                               const SchemaCompiler& compile_schema, Positions* positions) {
  std::string problem;
  auto text = detail::read_file_text(file, &problem);
  if (!text) {
    SinkDefinitionResult result;
    result.errors.push_back(ConfigError{file.string(), 0, 0, "", problem});
    return result;
  }
  return parse_impl(*text, file.string(), env, compile_schema, positions);
}

}  // namespace

SinkDefinitionResult parse_sink_definition(std::string_view toml_text, const std::string& file_name,
                                           const EnvLookup& env, const SchemaCompiler& compile_schema) {
  return parse_impl(toml_text, file_name, env, compile_schema, nullptr);
}

SinkDefinitionResult load_sink_definition(const std::filesystem::path& file, const EnvLookup& env,
                                          const SchemaCompiler& compile_schema) {
  return load_impl(file, env, compile_schema, nullptr);
}

SinkDirectory load_sink_directory(const std::filesystem::path& dir, const EnvLookup& env,
                                  const SchemaCompiler& compile_schema) {
  SinkDirectory out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    out.errors.push_back(
        ConfigError{dir.string(), 0, 0, "", "sink definition directory does not exist or is not a directory"});
    return out;
  }
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& path = it->path();
    std::string name = path.filename().string();
    if (name.empty() || name.front() == '.' || path.extension() != ".toml") continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    files.push_back(path);
  }
  if (ec) {
    out.errors.push_back(ConfigError{dir.string(), 0, 0, "", "cannot list directory: " + ec.message()});
    return out;
  }
  std::sort(files.begin(), files.end());

  std::map<std::string, std::string> key_owner;    // sink key -> file
  std::map<std::string, std::string> group_owner;  // group id -> "file (key 'k')"
  for (const auto& file : files) {
    Positions positions;
    auto result = load_impl(file, env, compile_schema, &positions);
    out.errors.insert(out.errors.end(), result.errors.begin(), result.errors.end());
    if (result.partial) out.rejected.push_back(std::move(*result.partial));
    if (!result.definition) continue;
    SinkDefinition& def = *result.definition;
    Diagnostics diag(def.file, out.errors);
    const std::size_t before = out.errors.size();
    if (auto it = key_owner.find(def.key); it != key_owner.end()) {
      diag.error(positions.key, "key",
                 "sink key '" + def.key + "' is already used by " + it->second + "; this sink does not start");
    } else {
      for (const auto& block : def.topics) {
        std::string group = block.group_id(def.key);
        if (auto g = group_owner.find(group); g != group_owner.end()) {
          const auto& where = positions.groups[static_cast<std::size_t>(block.index)];
          diag.error(where.where, where.key,
                     "consumer group '" + group + "' is already used by " + g->second + "; this sink does not start");
        }
      }
    }
    if (out.errors.size() != before) {
      out.rejected.push_back(std::move(def));
      continue;
    }
    key_owner.emplace(def.key, def.file);
    for (const auto& block : def.topics)
      group_owner.emplace(block.group_id(def.key), def.file + " (sink '" + def.key + "')");
    out.definitions.push_back(std::move(def));
  }
  return out;
}

}  // namespace picomq::config
