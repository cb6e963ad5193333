#pragma once
// Finding and loading a sink plugin (a shared library) and checking its descriptor against this
// host's ABI, its data planes and its option table.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::runtime {

// Where the runtime looks for plugins after the configured [plugins] path: the installed
// plugins beside the running executable, <its directory>/../lib/picomq-connect/plugins
// (/usr/bin/picomq-connect: /usr/lib/picomq-connect/plugins; any other prefix alike).
std::filesystem::path default_plugin_dir();

// The change operations a plugin applies (ABI 2.8 change_ops; 0 from an older descriptor).
inline uint32_t change_ops(const pmq_sink_plugin& d) {
  return d.struct_size >= offsetof(pmq_sink_plugin, change_ops) + sizeof(d.change_ops) ? d.change_ops : 0;
}
// Whether a plugin takes a redrive of dead letters (ABI 2.9 takes_redrives). By the plugin's
// minor version, not its struct_size: the field sits where a 2.8 descriptor had padding.
inline bool takes_redrives(const pmq_sink_plugin& d) {
  return PMQ_SINK_ABI_MINOR(d.abi_version) >= 9 &&
         d.struct_size >= offsetof(pmq_sink_plugin, takes_redrives) + sizeof(d.takes_redrives) && d.takes_redrives != 0;
}

// A dlopen()ed plugin library whose ABI version the host accepts.
class PluginLibrary {
 public:
  // `path_name` is the definition's `path` (e.g. "libpicomq_connector_stdout_sink"); the library
  // is `<dir>/<path_name>.so` in the first search directory that has it, the directories of
  // `search_path` first, then default_plugin_dir().
  static std::shared_ptr<PluginLibrary> load(const std::string& path_name,
                                             const std::vector<std::filesystem::path>& search_path, std::string& error);
  ~PluginLibrary();
  const pmq_sink_plugin& descriptor() const { return *descriptor_; }
  const pmq_plane_spec& planes() const { return planes_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  PluginLibrary() = default;
  void* handle_ = nullptr;
  const pmq_sink_plugin* descriptor_ = nullptr;
  pmq_plane_spec planes_{};
  std::filesystem::path file_;
};

// Checks a descriptor against this host's ABI, its data planes and its option table; returns
// the refusal reason or empty. Fills `planes` when it accepts.
std::string check_plugin_descriptor(const pmq_sink_plugin* descriptor, pmq_plane_spec* planes = nullptr);

// Whether a descriptor built for an older minor ABI has `member` (its struct_size covers it).
template <class T>
bool descriptor_has(const pmq_sink_plugin& d, T pmq_sink_plugin::*member) {
  static const pmq_sink_plugin layout{};
  const auto offset =
      static_cast<size_t>(reinterpret_cast<const char*>(&(layout.*member)) - reinterpret_cast<const char*>(&layout));
  return offset + sizeof(T) <= d.struct_size && d.*member != nullptr;
}

}  // namespace picomq::runtime
