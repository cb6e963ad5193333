// picomq-connect: runs the sink definitions of a runtime config until SIGINT/SIGTERM.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>
#include <iostream>

#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "runtime/plugin_host.h"
#include "runtime/plugin_options.h"
#include "runtime/runtime.h"

namespace {

// Prints what a plugin declares: the generated part of its docs (docs/sinks/<name>.md).
int describe_plugin(const std::filesystem::path& file) {
  std::string error;
  auto lib = picomq::runtime::PluginLibrary::load(file.stem().string(), {file.parent_path()}, error);
  if (!lib) {
    std::cerr << "error: " << error << '\n';
    return 1;
  }
  const pmq_sink_plugin& d = lib->descriptor();
  std::string planes;
  for (uint32_t p = PMQ_PLANE_ROWS; p <= PMQ_PLANE_ARROW; p <<= 1)
    if (lib->planes().native_planes & p) planes += std::string(planes.empty() ? "" : ", ") + pmq_plane_name(p);
  std::cout << "Sink `" << d.name << "` " << d.version << (d.description ? std::string(": ") + d.description : "")
            << "\n\nNative data planes: " << planes << "; the runtime delivers on: "
            << pmq_plane_name(lib->planes().best_plane) << ".\n\n"
            << picomq::runtime::PluginOptions::markdown_table(d);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  picomq::runtime::block_stop_signals();
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout is a failed write, not a dead process

  CLI::App app{"picomq-connect: Kafka-protocol topics into writes against other systems"};
  std::string config_file;
  std::string stop_after;
  bool check_only = false;
  std::string log_level;
  std::string describe;
  auto* config_opt = app.add_option("-c,--config", config_file, "runtime config (TOML)");
  app.add_option("--describe-plugin", describe, "print a plugin's planes and option table (Markdown) and exit")
      ->excludes(config_opt);
  app.add_option("--stop-after", stop_after, "stop by itself after this long (e.g. 10s), flushing and committing");
  app.add_flag("--check", check_only, "validate the runtime config and every sink definition, then exit");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error (overrides [runtime] log_level)");
  CLI11_PARSE(app, argc, argv);
  if (!describe.empty()) return describe_plugin(describe);
  if (config_file.empty()) {
    std::cerr << "error: --config is required\n" << app.help();
    return 2;
  }

  // Logs go to stderr: stdout belongs to sinks such as stdout.
  auto logger = spdlog::stderr_color_mt("picomq");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);

  const auto env = picomq::config::process_env();
  auto loaded = picomq::config::load_runtime_config(config_file, env);
  if (!loaded.config) {
    for (const auto& e : loaded.errors) std::cerr << "error: " << e.to_string() << '\n';
    return 2;
  }
  const auto& config = *loaded.config;
  spdlog::set_level(spdlog::level::from_str(log_level.empty() ? config.log_level : log_level));

  if (check_only) {
    auto dir = picomq::config::load_sink_directory(config.sinks_dir, env);
    for (const auto& e : dir.errors) std::cerr << "error: " << e.to_string() << '\n';
    for (const auto& d : dir.definitions) std::cout << "ok: " << d.file << " (sink '" << d.key << "')\n";
    return dir.errors.empty() ? 0 : 1;
  }

  picomq::runtime::RunOptions options;
  if (!stop_after.empty()) {
    std::string error;
    auto d = picomq::config::parse_duration(stop_after, &error);
    if (!d) {
      std::cerr << "error: --stop-after '" << stop_after << "': " << error << '\n';
      return 2;
    }
    options.stop_after = *d;
  }
  return picomq::runtime::run(config, options);
}
