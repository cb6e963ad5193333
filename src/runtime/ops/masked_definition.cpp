// GET /sinks/{key}'s view of a definition (api_server.h): what a plugin declares secret, and what
// looks like a credential by its name or in a URL, replaced by "***".
#include <nlohmann/json.hpp>
#include <regex>

#include "runtime/ops/api_server.h"
#include "runtime/plugin_host/library.h"

namespace picomq::runtime {

using nlohmann::json;

namespace {

constexpr const char* kMask = "***";

bool secret_property(const std::string& name) {
  static const std::regex re(
      "password|secret|token|credential|private|sasl\\.oauthbearer\\.config|ssl\\.key\\.pem|"
      "ssl\\.keystore|ssl_key|api[._-]?key",
      std::regex::icase);
  return std::regex_search(name, re);
}

// "https://user:pass@host/x" -> "https://***@host/x"
std::string mask_url_credentials(const std::string& url) {
  static const std::regex re("^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@");
  return std::regex_replace(url, re, "$1***@");
}

// Masks `dotted` ("auth.password") in a JSON object.
void mask_path(json& j, const std::string& dotted) {
  const auto dot = dotted.find('.');
  const std::string head = dotted.substr(0, dot);
  auto it = j.find(head);
  if (it == j.end()) return;
  if (dot == std::string::npos) *it = kMask;
  else if (it->is_object()) mask_path(*it, dotted.substr(dot + 1));
}

// Values under names that look like credentials, at any depth (options the plugin does not
// declare secret, such as a table passed through as JSON).
void mask_by_name(json& j) {
  if (!j.is_object()) return;
  for (auto& [k, v] : j.items()) {
    if (secret_property(k) && !v.is_object()) v = kMask;
    else if (v.is_string()) v = mask_url_credentials(v.get<std::string>());
    else mask_by_name(v);
  }
}

}  // namespace

std::string masked_definition_json(const config::SinkDefinition& d,
                                   const std::vector<std::filesystem::path>& plugin_path) {
  json plugin_config = json::parse(d.plugin_config_json, nullptr, false);
  if (plugin_config.is_discarded()) plugin_config = json::object();
  std::string error;
  if (auto lib = PluginLibrary::load(d.path, plugin_path, error)) {
    const auto& desc = lib->descriptor();
    for (size_t i = 0; i < desc.option_count; ++i) {
      const pmq_option* o = pmq_plugin_option(&desc, i);
      if (o->flags & PMQ_OPTION_SECRET) mask_path(plugin_config, o->name);
    }
  }
  mask_by_name(plugin_config);
  json topics = json::array();
  for (const auto& b : d.topics) {
    json props = json::object();
    for (const auto& [k, v] : b.properties) props[k] = secret_property(k) ? kMask : v;
    json t{{"topics", b.topics},
           {"group_id", b.group_id(d.key)},
           {"schema", config::to_string(b.schema)},
           {"batch_length", b.batch_length},
           {"poll_interval_ms", b.poll_interval.count()},
           {"offset_commit_interval_ms", b.offset_commit_interval.count()},
           {"auto_offset_reset", config::to_string(b.auto_offset_reset)},
           {"on_bad_record", config::to_string(b.on_bad_record)},
           {"properties", props}};
    if (b.pattern) t["pattern"] = *b.pattern;
    if (b.dead_letter_topic) t["dead_letter_topic"] = *b.dead_letter_topic;
    if (b.avro_registry_url) t["avro_registry_url"] = mask_url_credentials(*b.avro_registry_url);
    if (b.changes != config::ChangeEvents::None) t["changes"] = config::to_string(b.changes);
    if (!b.key_fields.empty()) t["key_fields"] = b.key_fields;
    if (b.key_schema) {
      json key{{"schema", config::to_string(b.key_schema->schema)}};
      if (b.key_schema->avro_registry_url)
        key["avro_registry_url"] = mask_url_credentials(*b.key_schema->avro_registry_url);
      t["key"] = std::move(key);
    }
    topics.push_back(std::move(t));
  }
  json out{{"key", d.key},         {"name", d.name},       {"file", d.file},   {"path", d.path},
           {"enabled", d.enabled}, {"version", d.version}, {"topics", topics}, {"plugin_config", plugin_config}};
  return out.dump();
}

}  // namespace picomq::runtime
