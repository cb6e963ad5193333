#pragma once
// Loads sink plugins (shared libraries) through the C ABI in picomq/sink_abi.h and calls them.
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"
#include "runtime/decoded_batch.h"

namespace picomq::runtime {

struct WriteOutcome {
  pmq_write_status status = PMQ_WRITE_OK;
  std::string message;
  std::vector<std::pair<size_t, std::string>> rejections;  // record index in the batch, reason
};

std::string_view to_string(pmq_write_status status);

// A dlopen()ed plugin library whose ABI version the host accepts.
class PluginLibrary {
 public:
  // `path_name` is the definition's `path` (e.g. "libpicomq_connector_stdout_sink"); the library
  // is `<dir>/<path_name>.so` in the first search directory that has it.
  static std::shared_ptr<PluginLibrary> load(const std::string& path_name,
                                             const std::vector<std::filesystem::path>& search_path,
                                             std::string& error);
  ~PluginLibrary();
  const pmq_sink_plugin& descriptor() const { return *descriptor_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  PluginLibrary() = default;
  void* handle_ = nullptr;
  const pmq_sink_plugin* descriptor_ = nullptr;
  std::filesystem::path file_;
};

// Checks a descriptor against this host's ABI; returns the refusal reason or empty.
std::string check_plugin_descriptor(const pmq_sink_plugin* descriptor);

// One open instance of a plugin, shared by the [[topics]] blocks of a sink. Calls are
// serialised, as the ABI promises plugins.
class SinkPlugin {
 public:
  static std::unique_ptr<SinkPlugin> open(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                          const std::string& config_json, std::string& error);
  ~SinkPlugin();
  WriteOutcome write(const DecodedBatch& batch);
  void close();
  const std::string& sink_key() const { return sink_key_; }

 private:
  SinkPlugin() = default;
  std::shared_ptr<PluginLibrary> library_;
  std::string sink_key_;
  pmq_host_api host_{};
  void* instance_ = nullptr;
  std::mutex call_mutex_;
};

}  // namespace picomq::runtime
