#include "runtime/plugin_host/library.h"

#include <dlfcn.h>

#include <algorithm>

#include "picomq/kit/plugin_options.hpp"

namespace picomq::runtime {

std::string check_plugin_descriptor(const pmq_sink_plugin* d, pmq_plane_spec* planes) {
  if (!d) return "the plugin's entry point returned no descriptor";
  if (d->struct_size < sizeof(d->struct_size) + sizeof(d->abi_version) + sizeof(void*))
    return "the plugin's descriptor is too small (struct_size " + std::to_string(d->struct_size) + ")";
  const uint32_t major = PMQ_SINK_ABI_MAJOR(d->abi_version), minor = PMQ_SINK_ABI_MINOR(d->abi_version);
  if (major != PMQ_SINK_ABI_VERSION_MAJOR || minor > PMQ_SINK_ABI_VERSION_MINOR)
    return "the plugin was built for sink ABI " + std::to_string(major) + "." + std::to_string(minor) +
           ", this runtime speaks " + std::to_string(PMQ_SINK_ABI_VERSION_MAJOR) + "." +
           std::to_string(PMQ_SINK_ABI_VERSION_MINOR) + " (same major, minor up to ours)";
  if (d->struct_size < offsetof(pmq_sink_plugin, close) + sizeof(d->close))
    return "the plugin's descriptor is too small for ABI " + std::to_string(major) + "." + std::to_string(minor) +
           " (struct_size " + std::to_string(d->struct_size) + ")";
  if (!d->name || !d->open || !d->close) return "the plugin's descriptor lacks a name, open or close";
  pmq_plane_spec spec{};
  char reason[256] = {0};
  if (!pmq_sink_plane_spec(d, &spec, reason, sizeof reason)) return std::string("the sink ") + reason;
  if (auto problem = kit::PluginOptions::check_table(*d); !problem.empty()) return "the sink's " + problem;
  if (planes) *planes = spec;
  return {};
}

std::filesystem::path default_plugin_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path() / ".." / "lib" / "picomq-connect" / "plugins").lexically_normal();
}

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::string& path_name,
                                                   const std::vector<std::filesystem::path>& configured,
                                                   std::string& error) {
  std::vector<std::filesystem::path> search_path = configured;
  if (const auto fallback = default_plugin_dir();
      !fallback.empty() && std::find(search_path.begin(), search_path.end(), fallback) == search_path.end())
    search_path.push_back(fallback);
  std::vector<std::string> tried;
  for (const auto& dir : search_path) {
    auto candidate = dir / (path_name + ".so");
    tried.push_back(candidate.string());
    if (!std::filesystem::exists(candidate)) continue;
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error = "cannot load plugin " + candidate.string() + ": " + dlerror();
      return nullptr;
    }
    auto entry = reinterpret_cast<pmq_sink_entry_fn>(dlsym(handle, PMQ_SINK_ENTRY_SYMBOL));
    if (!entry) {
      dlclose(handle);
      error =
          "plugin " + candidate.string() + " does not export " PMQ_SINK_ENTRY_SYMBOL " (not a picomq-connect sink?)";
      return nullptr;
    }
    const pmq_sink_plugin* descriptor = entry(PMQ_SINK_ABI_VERSION);
    pmq_plane_spec planes{};
    if (auto refusal = check_plugin_descriptor(descriptor, &planes); !refusal.empty()) {
      dlclose(handle);
      error = "plugin " + candidate.string() + " refused: " + refusal;
      return nullptr;
    }
    std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
    lib->handle_ = handle;
    lib->descriptor_ = descriptor;
    lib->planes_ = planes;
    lib->file_ = candidate;
    return lib;
  }
  error = "plugin '" + path_name + "' not found; looked for:";
  for (const auto& t : tried) error += " " + t;
  if (tried.empty()) error += " (the plugin search path is empty)";
  return nullptr;
}

PluginLibrary::~PluginLibrary() {
  if (handle_) dlclose(handle_);
}

}  // namespace picomq::runtime
