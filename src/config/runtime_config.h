// The runtime config: broker, plugin search path, sink directory, runtime limits
// (see docs/configuration.md). Relative paths are resolved against the config file's folder.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/env.h"
#include "config/error.h"
#include "picomq/kit/units.hpp"

namespace picomq::config {

// A JSON-lines file produced into `topic` when the embedded broker starts.
struct EmbeddedSeed {
  std::string topic;
  std::string file;  // absolute (resolved against the runtime config's folder)
};

enum class GroupProtocol { Auto, Consumer, Classic };
const char* group_protocol_name(GroupProtocol p);
// Properties of librdkafka's classic group protocol that its `consumer` protocol refuses.
bool is_classic_group_property(std::string_view property);

struct RuntimeConfig {
  std::string file;
  // [broker]
  std::string bootstrap_servers;  // required unless embedded
  // In-process librdkafka mock cluster: `embedded = true` in [broker], or a [broker.embedded]
  // table (TOML cannot have both, the table alone switches embedded mode on).
  bool embedded = false;
  std::vector<std::string> embedded_topics;  // [broker.embedded] topics, created at start
  int embedded_partitions = 1;               // [broker.embedded] partitions
  std::vector<EmbeddedSeed> embedded_seeds;  // [[broker.embedded.seed]] topic, file
  // [broker.properties]: librdkafka client properties for every consumer and producer,
  // values as strings, sorted by name; never a property the runtime manages.
  std::vector<std::pair<std::string, std::string>> client_properties;
  // Static group membership (KIP-345): this runtime's consumers join each group as
  // "<id>-<group>", so a restart after a crash gets its partitions back at once instead of
  // after the dead member's session timeout. A second runtime with the same id fences the
  // first (docs/runtime.md, "Restarts and static membership").
  std::optional<std::string> group_instance_id;
  // [broker] group_protocol: how the consumers join their groups (docs/runtime.md, "Group
  // protocols"). Auto: KIP-848's `consumer` protocol where the broker offers it and nothing in
  // this config asks for the classic one, else `classic` with the cooperative-sticky assignor.
  GroupProtocol group_protocol = GroupProtocol::Auto;
  // [plugins] path: a string or an array of strings, absolute. Empty: the runtime's default.
  std::vector<std::filesystem::path> plugin_path;
  // [sinks] dir (required), absolute.
  std::filesystem::path sinks_dir;
  // [runtime]
  std::optional<std::filesystem::path> status_file;  // absolute
  std::size_t max_buffered_records = 100000;         // per [[topics]] block
  std::size_t max_buffered_bytes = 64 << 20;         // per [[topics]] block
  kit::Millis shutdown_timeout{30000};
  std::string log_level = "info";  // trace|debug|info|warn|error
  // Once no sink can make progress (each one in error or invalid), the process exits 1 so a
  // supervisor notices; true keeps it up (for an operator to restart sinks through the API).
  bool keep_running_on_error = false;
  std::string log_format = "text";  // text | json (one JSON object per line: docs/operations.md)
  // [api]: the operations HTTP API, /metrics and the status page (docs/operations.md). Off unless
  // `enabled = true`; bound to 127.0.0.1 unless `listen` says otherwise.
  struct Api {
    bool enabled = false;
    std::string host = "127.0.0.1";
    int port = 8083;                                         // 0: any free port (written to the log and status file)
    std::optional<std::string> token;                        // bearer token, after ${ENV}; never logged
    std::optional<std::filesystem::path> tls_cert, tls_key;  // both or neither: HTTPS
    bool watch_sinks_dir = true;                             // inotify on [sinks] dir: hot reload of changed files
  } api;
};

struct RuntimeConfigResult {
  std::optional<RuntimeConfig> config;  // set only when errors is empty
  std::vector<ConfigError> errors;
};

RuntimeConfigResult load_runtime_config(const std::filesystem::path& file, const EnvLookup& env);
RuntimeConfigResult parse_runtime_config(std::string_view toml_text, const std::string& file_name,
                                         const std::filesystem::path& base_dir, const EnvLookup& env);

}  // namespace picomq::config
