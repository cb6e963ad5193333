#pragma once
// One sink definition at run time: its plugin instance and one BlockPipeline per [[topics]]
// block. A block that fails stops the whole sink (flush + commit) and marks it Error.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "runtime/block_pipeline.h"
#include "runtime/plugin_host/sink_instance.h"
#include "runtime/status.h"
#include "runtime/tap.h"

namespace picomq::runtime {

// What start() does with the loaded plugin: [plugin_config] is checked once (option table, then
// the plugin's validate()) and the instance opens on the options that passed. On a problem
// `error` lists them, each with its position in the definition file, and nothing is opened.
std::unique_ptr<SinkInstance> open_sink_instance(const config::SinkDefinition& definition,
                                                 std::shared_ptr<PluginLibrary> library, std::string& error);

class SinkRunner {
 public:
  SinkRunner(config::SinkDefinition definition, const config::RuntimeConfig& runtime_config,
             std::string bootstrap_servers, StatusBoard& status);
  ~SinkRunner();
  // Loads and opens the plugin, starts the consumers. False (and status Error) when it cannot.
  bool start();
  void request_stop();
  // Waits for every block, then closes the plugin; false when a block or close() had to be
  // abandoned (the plugin stuck past shutdown_timeout).
  bool join();
  const std::string& key() const { return definition_.key; }
  const config::SinkDefinition& definition() const { return definition_; }
  // The operator's pause / resume of every block (see BlockPipeline::set_operator_paused).
  void set_paused(bool paused);
  // Samples of the records passing its stages (GET /sinks/{key}/tap).
  const std::shared_ptr<Tap>& tap() const { return tap_; }

 private:
  void on_block_error(size_t index, const std::string& message);
  bool close_plugin();

  config::SinkDefinition definition_;
  const config::RuntimeConfig& runtime_config_;
  std::string bootstrap_servers_;
  StatusBoard& status_;
  std::unique_ptr<SinkInstance> plugin_;
  std::vector<std::unique_ptr<BlockPipeline>> blocks_;
  std::atomic<bool> errored_{false};
  std::shared_ptr<Tap> tap_ = std::make_shared<Tap>();
};

}  // namespace picomq::runtime
