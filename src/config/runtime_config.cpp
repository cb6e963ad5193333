#include "config/runtime_config.h"

#include <algorithm>
#include <array>
#include <set>

#include "config/file_text.h"
#include "config/names.h"
#include "config/toml_reader.h"

namespace picomq::config {
namespace {

using detail::Diagnostics;
using detail::TableReader;

std::filesystem::path resolve(const std::filesystem::path& base_dir, const std::filesystem::path& p) {
  if (p.is_absolute()) return p.lexically_normal();
  return std::filesystem::absolute(base_dir / p).lexically_normal();
}

void parse_embedded(const toml::table& table, const std::filesystem::path& base_dir, Diagnostics& diag,
                    const EnvLookup& env, RuntimeConfig& config) {
  TableReader r(table, "broker.embedded", diag, env);
  std::set<std::string> topics;
  if (auto list = r.string_array("topics")) {
    for (auto& topic : *list) {
      if (auto problem = topic_name_problem(topic.value)) {
        diag.error(topic.where, topic.key, "bad topic '" + topic.value + "': " + *problem);
      } else if (!topics.insert(topic.value).second) {
        diag.error(topic.where, topic.key, "topic '" + topic.value + "' is listed twice");
      } else {
        config.embedded_topics.push_back(std::move(topic.value));
      }
    }
  }
  if (auto partitions = r.integer("partitions")) {
    if (*partitions < 1 || *partitions > 1000)
      r.error(*table.get("partitions"), "partitions",
              "'partitions' must be between 1 and 1000, got " + std::to_string(*partitions));
    else config.embedded_partitions = static_cast<int>(*partitions);
  }
  if (const toml::node* seeds = r.node("seed")) {
    const toml::array* array = seeds->as_array();
    if (!array || !array->is_array_of_tables()) {
      r.error(*seeds, "seed",
              "'seed' must be an array of tables ([[broker.embedded.seed]]), got " +
                  std::string(detail::type_name(seeds->type())));
    } else {
      for (std::size_t i = 0; i < array->size(); ++i) {
        const toml::table& seed_table = *array->get(i)->as_table();
        TableReader s(seed_table, detail::index_key("broker.embedded.seed", i), diag, env);
        auto topic = s.string("topic", true);
        auto file = s.string("file", true);
        if (topic && !topics.count(*topic))
          s.error(*seed_table.get("topic"), "topic", "seed topic '" + *topic + "' is not in [broker.embedded] topics");
        if (file && file->empty()) s.error(*seed_table.get("file"), "file", "'file' must not be empty");
        s.finish();
        if (topic && file && !file->empty())
          config.embedded_seeds.push_back({*topic, resolve(base_dir, *file).string()});
      }
    }
  }
  r.finish();
}

}  // namespace

RuntimeConfigResult parse_runtime_config(std::string_view toml_text, const std::string& file_name,
                                         const std::filesystem::path& base_dir, const EnvLookup& env) {
  RuntimeConfigResult result;
  Diagnostics diag(file_name, result.errors);
  auto parsed = detail::parse_document(toml_text, file_name, diag);
  if (!parsed) return result;
  const toml::table& root = *parsed;
  RuntimeConfig config;
  config.file = file_name;
  TableReader r(root, "", diag, env);

  // [broker]
  if (const toml::table* broker = r.table("broker", true)) {
    TableReader b(*broker, "broker", diag, env);
    const toml::node* servers_node = broker->get("bootstrap_servers");
    auto servers = b.string("bootstrap_servers");
    if (servers && servers->empty())
      b.error(*servers_node, "bootstrap_servers", "'bootstrap_servers' must not be empty");
    const toml::node* embedded_node = b.node("embedded");
    if (embedded_node && embedded_node->is_boolean()) {
      config.embedded = embedded_node->as_boolean()->get();
    } else if (embedded_node && embedded_node->is_table()) {
      config.embedded = true;
      parse_embedded(*embedded_node->as_table(), base_dir, diag, env, config);
    } else if (embedded_node) {
      b.error(*embedded_node, "embedded",
              "'embedded' must be a boolean or a [broker.embedded] table, got " +
                  std::string(detail::type_name(embedded_node->type())));
    }
    if (config.embedded && servers_node) {
      b.error(*servers_node, "bootstrap_servers",
              "'bootstrap_servers' cannot be combined with the embedded broker; remove one of them");
    } else if (!config.embedded && !servers_node && (!embedded_node || embedded_node->is_boolean())) {
      b.missing("bootstrap_servers", "or set embedded = true");
    }
    if (servers) config.bootstrap_servers = std::move(*servers);
    if (auto properties = b.properties("properties")) config.client_properties = std::move(*properties);
    if (auto id = b.string("group_instance_id")) {
      if (id->empty() || id->size() > 200)
        b.error(*broker->get("group_instance_id"), "group_instance_id",
                "'group_instance_id' must be 1 to 200 characters");
      else config.group_instance_id = std::move(*id);
    }
    if (auto protocol = b.string("group_protocol")) {
      const toml::node& where = *broker->get("group_protocol");
      if (*protocol == "auto") {
        config.group_protocol = GroupProtocol::Auto;
      } else if (*protocol == "consumer") {
        config.group_protocol = GroupProtocol::Consumer;
        for (const auto& [name, value] : config.client_properties)
          if (is_classic_group_property(name))
            b.error(
                where, "group_protocol",
                "group_protocol = \"consumer\" (KIP-848) cannot take [broker.properties] '" + name +
                    "', a property of the classic protocol (the broker decides it under KIP-848); remove one of them");
        if (config.group_instance_id)
          b.error(
              where, "group_protocol",
              "group_protocol = \"consumer\" (KIP-848) cannot be combined with group_instance_id: under KIP-848 a "
              "runtime restarted after a crash is fenced (UNRELEASED_INSTANCE_ID) until the broker's session timeout, "
              "where the classic protocol gives it its partitions back at once; use \"auto\" or \"classic\"");
      } else if (*protocol == "classic") {
        config.group_protocol = GroupProtocol::Classic;
      } else {
        b.error(where, "group_protocol",
                "'group_protocol' must be \"auto\", \"consumer\" or \"classic\", got \"" + *protocol + "\"");
      }
    }
    b.finish();
  }

  // [plugins]
  if (const toml::table* plugins = r.table("plugins")) {
    TableReader p(*plugins, "plugins", diag, env);
    if (auto entries = p.string_list("path")) {
      for (auto& entry : *entries) {
        if (entry.value.empty()) diag.error(entry.where, entry.key, "a plugin path entry must not be empty");
        else config.plugin_path.push_back(resolve(base_dir, entry.value));
      }
    }
    p.finish();
  }

  // [sinks]
  if (const toml::table* sinks = r.table("sinks", true)) {
    TableReader s(*sinks, "sinks", diag, env);
    if (auto dir = s.string("dir", true)) {
      if (dir->empty()) s.error(*sinks->get("dir"), "dir", "'dir' must not be empty");
      else config.sinks_dir = resolve(base_dir, *dir);
    }
    s.finish();
  }

  // [runtime]
  if (const toml::table* runtime = r.table("runtime")) {
    TableReader t(*runtime, "runtime", diag, env);
    if (auto status = t.string("status_file")) {
      if (status->empty()) t.error(*runtime->get("status_file"), "status_file", "'status_file' must not be empty");
      else config.status_file = resolve(base_dir, *status);
    }
    if (auto records = t.integer("max_buffered_records")) {
      if (*records < 1)
        t.error(*runtime->get("max_buffered_records"), "max_buffered_records",
                "'max_buffered_records' must be at least 1, got " + std::to_string(*records));
      else config.max_buffered_records = static_cast<std::size_t>(*records);
    }
    if (const toml::node* bytes = t.node("max_buffered_bytes")) {
      std::optional<std::int64_t> value;
      if (bytes->is_integer()) {
        value = bytes->as_integer()->get();
      } else if (bytes->is_string()) {
        if (auto text = detail::interpolate(*bytes, "runtime.max_buffered_bytes", diag, env)) {
          std::string problem;
          if (auto size = kit::parse_byte_size(*text, &problem))
            value = static_cast<std::int64_t>(std::min<std::size_t>(*size, INT64_MAX));
          else t.error(*bytes, "max_buffered_bytes", problem);
        }
      } else {
        t.error(*bytes, "max_buffered_bytes",
                "'max_buffered_bytes' must be an integer (bytes) or a size string such as \"64MiB\", got " +
                    std::string(detail::type_name(bytes->type())));
      }
      if (value && *value < 1) t.error(*bytes, "max_buffered_bytes", "'max_buffered_bytes' must be at least 1 byte");
      else if (value) config.max_buffered_bytes = static_cast<std::size_t>(*value);
    }
    if (auto timeout = t.duration("shutdown_timeout")) config.shutdown_timeout = *timeout;
    if (auto keep = t.boolean("keep_running_on_error")) config.keep_running_on_error = *keep;
    if (auto level = t.string("log_level")) {
      static constexpr std::array<std::string_view, 5> kLevels{"trace", "debug", "info", "warn", "error"};
      if (std::find(kLevels.begin(), kLevels.end(), *level) == kLevels.end())
        t.error(*runtime->get("log_level"), "log_level",
                "'log_level' must be one of trace, debug, info, warn, error, got \"" + *level + "\"");
      else config.log_level = std::move(*level);
    }
    if (auto format = t.string("log_format")) {
      if (*format != "text" && *format != "json")
        t.error(*runtime->get("log_format"), "log_format",
                "'log_format' must be \"text\" or \"json\", got \"" + *format + "\"");
      else config.log_format = std::move(*format);
    }
    t.finish();
  }

  // [api]
  if (const toml::table* api = r.table("api")) {
    TableReader a(*api, "api", diag, env);
    if (auto enabled = a.boolean("enabled")) config.api.enabled = *enabled;
    if (auto listen = a.string("listen")) {
      const auto colon = listen->rfind(':');
      int port = -1;
      if (colon != std::string::npos && colon + 1 < listen->size() && listen->size() - colon <= 6 &&
          std::all_of(listen->begin() + colon + 1, listen->end(), [](char c) { return c >= '0' && c <= '9'; }))
        port = std::stoi(listen->substr(colon + 1));
      if (colon == 0 || colon == std::string::npos || port < 0 || port > 65535)
        a.error(*api->get("listen"), "listen", "'listen' must be host:port (port 0-65535), got \"" + *listen + "\"");
      else {
        config.api.host = listen->substr(0, colon);
        config.api.port = port;
      }
    }
    if (auto token = a.string("token")) {
      if (token->empty())
        a.error(*api->get("token"), "token",
                "'token' must not be empty (it is the bearer token every request must carry)");
      else config.api.token = std::move(*token);
    }
    if (auto cert = a.string("tls_cert")) config.api.tls_cert = resolve(base_dir, *cert);
    if (auto key = a.string("tls_key")) config.api.tls_key = resolve(base_dir, *key);
    if (config.api.tls_cert.has_value() != config.api.tls_key.has_value())
      a.error_here("'tls_cert' and 'tls_key' go together: give both for HTTPS, or neither");
    if (auto watch = a.boolean("watch_sinks_dir")) config.api.watch_sinks_dir = *watch;
    a.finish();
  }
  r.finish();

  detail::sort_by_position(result.errors);
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

RuntimeConfigResult load_runtime_config(const std::filesystem::path& file, const EnvLookup& env) {
  std::string problem;
  auto text = detail::read_file_text(file, &problem);
  if (!text) {
    RuntimeConfigResult result;
    result.errors.push_back(ConfigError{file.string(), 0, 0, "", problem});
    return result;
  }
  std::filesystem::path base_dir = std::filesystem::absolute(file).parent_path();
  return parse_runtime_config(*text, file.string(), base_dir, env);
}

const char* group_protocol_name(GroupProtocol p) {
  switch (p) {
    case GroupProtocol::Consumer: return "consumer";
    case GroupProtocol::Classic: return "classic";
    case GroupProtocol::Auto: break;
  }
  return "auto";
}

bool is_classic_group_property(std::string_view property) {
  return property == "session.timeout.ms" || property == "heartbeat.interval.ms" ||
         property == "partition.assignment.strategy" || property == "group.protocol.type";
}

}  // namespace picomq::config
