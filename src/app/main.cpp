// picomq-connect: runs the sink definitions of a runtime config until SIGINT/SIGTERM.
#include <librdkafka/rdkafka.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "authoring/definition_test.h"
#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "decoders/payload_decoder.h"
#include "picomq/kit/plugin_options.hpp"
#include "runtime/config_check.h"
#include "runtime/ops/ops_module.h"
#include "runtime/plugin_host/sink_instance.h"
#include "runtime/runtime.h"
#include "version_info.h"

namespace {

// --version: what a bug report needs, one "name: value" line each after the first.
int print_version() {
  std::cout << "picomq-connect " << PICOMQ_VERSION << "\n"
            << "commit: " << PICOMQ_GIT_COMMIT << "\n"
            << "build type: " << PICOMQ_BUILD_TYPE << "\n"
            << "sink ABI: " << PMQ_SINK_ABI_VERSION_MAJOR << "." << PMQ_SINK_ABI_VERSION_MINOR << "\n"
            << "librdkafka: " << rd_kafka_version_str() << "\n"
            << "plugin directory: " << picomq::runtime::default_plugin_dir().string()
            << " (searched after the runtime config's [plugins] path)\n";
  return 0;
}

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
            << "\n\nNative data planes: " << planes
            << "; the runtime delivers on: " << pmq_plane_name(lib->planes().best_plane)
            << (planes.find(',') != std::string::npos ? " (unless an instance names another of them at open)" : "")
            << ".\n\n"
            << picomq::kit::PluginOptions::markdown_table(d);
  return 0;
}

// --check: every sink definition as loading it at start would, and for each enabled one what
// starting it would refuse before consuming anything: the plugin, and its [plugin_config]
// against the plugin's option table and validate(). Nothing connects anywhere.
int check(const picomq::config::RuntimeConfig& config, const picomq::config::EnvLookup& env) {
  auto dir = picomq::config::load_sink_directory(config.sinks_dir, env, picomq::decoders::compile_block_schema);
  std::vector<picomq::config::ConfigError> errors = std::move(dir.errors);
  std::vector<std::string> ok;
  for (const auto& d : dir.definitions) {
    if (!d.enabled) {
      ok.push_back("ok: " + d.file + " (sink '" + d.key + "', disabled: its plugin is not checked)");
      continue;
    }
    auto problems = picomq::runtime::check_sink_plugin(d, config.plugin_path);
    if (problems.empty()) ok.push_back("ok: " + d.file + " (sink '" + d.key + "')");
    errors.insert(errors.end(), problems.begin(), problems.end());
  }
  // Definitions with errors of their own: their plugin problems too, so one pass shows them all.
  for (const auto& d : dir.rejected) {
    if (!d.enabled) continue;
    auto problems = picomq::runtime::check_sink_plugin(d, config.plugin_path);
    errors.insert(errors.end(), problems.begin(), problems.end());
  }
  // File by file (the directory's name order), each file's in line order.
  std::stable_sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
    if (a.file != b.file) return std::filesystem::path(a.file) < std::filesystem::path(b.file);
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  for (const auto& e : errors) std::cerr << "error: " << e.to_string() << '\n';
  for (const auto& line : ok) std::cout << line << '\n';
  return errors.empty() ? 0 : 1;
}

// log_format = "json": one object per line — time, level, message, and the sink, block, topic,
// partition and offset the message is about where it names them (the runtime's messages say
// "sink 'key' topics[0]: ... orders[2] ... offset 41"). Messages never carry secrets.
class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[96];  // room for any int in every field: GCC's -Wformat-truncation counts that way
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    nlohmann::ordered_json j;
    j["time"] = ts;
    const auto level = spdlog::level::to_string_view(msg.level);
    j["level"] = std::string(level.data(), level.size());
    j["message"] = text;
    static const std::regex sink_re("sink '([^']+)'"), block_re("topics\\[(\\d+)\\]"),
        tp_re("(?:^|[\\s(])([A-Za-z0-9._-]+)\\[(\\d+)\\]"), offset_re("offset (\\d+)");
    std::smatch m;
    if (std::regex_search(text, m, sink_re)) j["sink"] = m[1].str();
    if (std::regex_search(text, m, block_re)) j["block"] = std::stoi(m[1].str());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), tp_re); it != std::sregex_iterator(); ++it)
      if ((*it)[1].str() != "topics") {
        j["topic"] = (*it)[1].str();
        j["partition"] = std::stoi((*it)[2].str());
        break;
      }
    if (std::regex_search(text, m, offset_re)) j["offset"] = std::stoll(m[1].str());
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLogFormatter>(); }
};

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
  app.add_flag("--check", check_only,
               "validate the runtime config, every sink definition and each enabled sink's plugin and "
               "[plugin_config], then exit (connects nowhere)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error (overrides [runtime] log_level)");
  bool version = false;
  app.add_flag(
      "--version", version,
      "print the version, git commit, build type, sink ABI, librdkafka version and the default plugin directory, "
      "then exit");
  std::string health;
  app.add_option("--health", health,
                 "GET this operations API URL (e.g. http://127.0.0.1:8083/health/ready, with the bearer token "
                 "of PICOMQ_API_TOKEN when set) and exit 0 on 200, else 1: the image's HEALTHCHECK")
      ->excludes(config_opt);
  // `picomq-connect test FIXTURE|DIR...`: a definition's fixtures, with no broker or destination.
  auto* test = app.add_subcommand(
      "test", "run sink definitions' test fixtures: records in, what the sink is called with out (docs/testing.md)");
  std::vector<std::string> test_paths;
  std::string test_definition, test_config;
  std::vector<std::string> test_plugin_dirs;
  bool test_show = false, test_no_plugin = false;
  test->add_option("fixtures", test_paths, "fixture files, or directories of them (*.toml)")->required();
  test->add_option("--definition", test_definition, "test this definition instead of the one each fixture names");
  test->add_option("-c,--config", test_config, "a runtime config whose [plugins] path finds the sinks' plugins");
  test->add_option("--plugins", test_plugin_dirs, "a directory of plugins, searched first (repeatable)");
  test->add_flag("--no-plugin", test_no_plugin,
                 "do not load the definition's plugin (its [plugin_config] is not checked)");
  test->add_flag("--show", test_show, "print what the sink is called with in every test, passed or not");
  // `picomq-connect ctl ...`: the operations API's command line, in the ops module (ops/ctl.h).
  auto* ctl = app.add_subcommand("ctl",
                                 "a running picomq-connect through its operations API: status, lag, "
                                 "stop/start/..., offsets, validate, apply, dead-letters (ctl --help)");
  ctl->prefix_command();
  ctl->set_help_flag();  // ctl's own --help, in the module
  CLI11_PARSE(app, argc, argv);
  if (*ctl) {
    std::string error;
    const auto* ops = picomq::runtime::ops_module(error);
    if (!ops) {
      std::cerr << "ctl: " << error << '\n';
      return 2;
    }
    return ops->run_ctl(ctl->remaining());
  }
  if (*test) {
    picomq::authoring::TestOptions options;
    options.show = test_show;
    options.without_plugin = test_no_plugin;
    if (!test_definition.empty()) options.definition = test_definition;
    for (const auto& d : test_plugin_dirs) options.plugin_path.emplace_back(d);
    const auto env = picomq::config::process_env();
    if (!test_config.empty()) {
      auto loaded = picomq::config::load_runtime_config(test_config, env);
      if (!loaded.config) {
        for (const auto& e : loaded.errors) std::cerr << "error: " << e.to_string() << '\n';
        return 2;
      }
      for (const auto& d : loaded.config->plugin_path) options.plugin_path.push_back(d);
    }
    spdlog::set_level(spdlog::level::warn);  // the decoders' and plugins' logs stay out of the report
    std::vector<std::filesystem::path> paths(test_paths.begin(), test_paths.end());
    return picomq::authoring::run_tests(paths, options, env, std::cout);
  }
  if (version) return print_version();
  if (!health.empty()) {
    const char* token = std::getenv("PICOMQ_API_TOKEN");
    std::string error;
    const auto* ops = picomq::runtime::ops_module(error);
    if (!ops) {
      std::cerr << "health: " << error << '\n';
      return 1;
    }
    return ops->probe_health(health, token ? token : "");
  }
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
  if (config.log_format == "json") logger->set_formatter(std::make_unique<JsonLogFormatter>());

  if (check_only) return check(config, env);

  picomq::runtime::RunOptions options;
  if (!stop_after.empty()) {
    std::string error;
    auto d = picomq::kit::parse_duration(stop_after, &error);
    if (!d) {
      std::cerr << "error: --stop-after '" << stop_after << "': " << error << '\n';
      return 2;
    }
    options.stop_after = *d;
  }
  return picomq::runtime::run(config, options);
}
