#include "runtime/sink_runner.h"

#include <spdlog/spdlog.h>

#include <future>
#include <thread>

#include "runtime/config_check.h"

namespace picomq::runtime {

namespace {
// "[plugin_config] does not fit the testkit sink:\n  fail_tmies: unknown option ... (file:12:1)"
std::string describe_plugin_config_problems(const pmq_sink_plugin& descriptor,
                                            const std::vector<config::ConfigError>& problems) {
  static constexpr std::string_view kPrefix = "plugin_config.";
  std::string out = "[plugin_config] does not fit the " + std::string(descriptor.name) + " sink:";
  for (const auto& p : problems) {
    std::string_view key = p.key;
    if (key.rfind(kPrefix, 0) == 0) key.remove_prefix(kPrefix.size());
    out += "\n  ";
    if (!key.empty() && key != "plugin_config") out.append(key).append(": ");
    out += p.message + " (" + p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ")";
  }
  return out;
}
}  // namespace

std::unique_ptr<SinkInstance> open_sink_instance(const config::SinkDefinition& definition,
                                                 std::shared_ptr<PluginLibrary> library, std::string& error) {
  // The checks --check makes, with the positions the definition file has; open() trusts them.
  auto check = check_plugin_config(definition, library->descriptor());
  if (!check.options) {
    error = describe_plugin_config_problems(library->descriptor(), check.errors);
    return nullptr;
  }
  return SinkInstance::open_validated(std::move(library), definition.key, std::move(*check.options), error,
                                      subscriptions_json(definition));
}

SinkRunner::SinkRunner(config::SinkDefinition definition, const config::RuntimeConfig& runtime_config,
                       std::string bootstrap_servers, StatusBoard& status)
    : definition_(std::move(definition)),
      runtime_config_(runtime_config),
      bootstrap_servers_(std::move(bootstrap_servers)),
      status_(status) {}

SinkRunner::~SinkRunner() {
  request_stop();
  join();
}

bool SinkRunner::start() {
  status_.set_state(definition_.key, definition_.file, SinkState::Starting);
  std::string error;
  auto library = PluginLibrary::load(definition_.path, runtime_config_.plugin_path, error);
  if (library) plugin_ = open_sink_instance(definition_, library, error);
  if (!plugin_) {
    spdlog::error("sink '{}' ({}): {}", definition_.key, definition_.file, error);
    status_.set_state(definition_.key, definition_.file, SinkState::Error, error);
    return false;
  }
  spdlog::info("sink '{}': plugin {} {} from {}", definition_.key, library->descriptor().name,
               library->descriptor().version ? library->descriptor().version : "?", library->file().string());
  // The Arrow plane carries neither a change's operation nor its key: a sink that applies
  // changes takes them on the batches (or rows) plane, or they would be written as plain rows.
  for (size_t i = 0; i < definition_.topics.size(); ++i) {
    if (definition_.topics[i].changes == config::ChangeEvents::None || plugin_->plane() != PMQ_PLANE_ARROW) continue;
    error = "topics[" + std::to_string(i) +
            "]: the sink delivers on the Arrow plane, which carries neither a change's operation nor its key; a sink "
            "that applies change events takes them on the batches plane (docs/changes.md)";
    spdlog::error("sink '{}' ({}): {}", definition_.key, definition_.file, error);
    if (close_plugin()) plugin_.reset();
    else (void)plugin_.release();  // its close() hangs: leave it
    status_.set_state(definition_.key, definition_.file, SinkState::Error, error);
    return false;
  }
  for (size_t i = 0; i < definition_.topics.size(); ++i) {
    BlockSettings s;
    s.sink_key = definition_.key;
    s.block_index = i;
    s.block = definition_.topics[i];
    s.bootstrap_servers = bootstrap_servers_;
    s.client_properties = runtime_config_.client_properties;
    s.group_instance_id = runtime_config_.group_instance_id;
    s.group_protocol = runtime_config_.group_protocol;
    s.max_buffered_records = runtime_config_.max_buffered_records;
    s.max_buffered_bytes = runtime_config_.max_buffered_bytes;
    s.shutdown_timeout = runtime_config_.shutdown_timeout;
    s.transforms = definition_.transforms;
    s.tap = tap_.get();
    blocks_.push_back(std::make_unique<BlockPipeline>(std::move(s), *plugin_, status_,
                                                      [this, i](const std::string& m) { on_block_error(i, m); }));
  }
  for (auto& b : blocks_) b->start();
  status_.set_state(definition_.key, definition_.file, SinkState::Running);
  return true;
}

void SinkRunner::on_block_error(size_t index, const std::string& message) {
  if (errored_.exchange(true)) return;
  status_.set_state(definition_.key, definition_.file, SinkState::Error,
                    "topics[" + std::to_string(index) + "]: " + message);
  for (auto& b : blocks_) b->request_stop();
}

void SinkRunner::set_paused(bool paused) {
  for (auto& b : blocks_) b->set_operator_paused(paused);
}

void SinkRunner::request_stop() {
  for (auto& b : blocks_) b->request_stop();
  // A write waiting to resend (a destination down, a Retry-After) would hold the stop up to its
  // retry budget: the plugin ends its waits, and those writes come again on the next start.
  if (plugin_) plugin_->stop();
}

bool SinkRunner::join() {
  if (blocks_.empty() && !plugin_) return true;
  status_.set_state(definition_.key, {}, SinkState::Stopping);
  bool clean = true;
  for (auto& b : blocks_) clean = b->join() && clean;
  if (clean && plugin_) clean = close_plugin();
  if (clean) {
    blocks_.clear();
  } else {
    // A block's delivery thread is stuck inside the plugin: leave plugin and blocks alone.
    for (auto& b : blocks_) (void)b.release();
    (void)plugin_.release();
  }
  plugin_.reset();
  status_.set_state(definition_.key, {}, SinkState::Stopped);
  return clean;
}

// close() gets shutdown_timeout, like the writes before it: a plugin that hangs in it is left
// where it is (the process then exits without cleanup) rather than keep the process up.
bool SinkRunner::close_plugin() {
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> done = closed->get_future();
  std::thread([plugin = plugin_.get(), closed] {
    plugin->close();
    closed->set_value();
  }).detach();
  if (done.wait_for(runtime_config_.shutdown_timeout) == std::future_status::ready) return true;
  spdlog::error("sink '{}': the plugin's close() did not return within shutdown_timeout ({} ms); leaving it",
                definition_.key, runtime_config_.shutdown_timeout.count());
  return false;
}

}  // namespace picomq::runtime
