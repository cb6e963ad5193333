#include "runtime/plugin_host.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstring>

// The host side of the opaque result type plugins fill through pmq_host_api.
struct pmq_write_result {
  picomq::runtime::WriteOutcome* outcome;
};

namespace picomq::runtime {
namespace {

void host_log(void* host_ctx, int32_t level, const char* message) {
  const auto* sink_key = static_cast<const std::string*>(host_ctx);
  auto lvl = level <= PMQ_LOG_DEBUG  ? spdlog::level::debug
             : level == PMQ_LOG_INFO ? spdlog::level::info
             : level == PMQ_LOG_WARN ? spdlog::level::warn
                                     : spdlog::level::err;
  spdlog::log(lvl, "sink '{}': {}", sink_key ? *sink_key : "?", message ? message : "");
}

void host_set_error(pmq_write_result* result, const char* message) {
  if (result && message) result->outcome->message = message;
}

void host_reject_record(pmq_write_result* result, size_t index, const char* reason) {
  if (result) result->outcome->rejections.emplace_back(index, reason ? reason : "rejected by the sink");
}

}  // namespace

std::string_view to_string(pmq_write_status status) {
  switch (status) {
    case PMQ_WRITE_OK: return "ok";
    case PMQ_WRITE_RETRY: return "retryable failure";
    case PMQ_WRITE_PARTIAL: return "failure, possibly partly written";
    case PMQ_WRITE_FATAL: return "permanent failure";
    case PMQ_WRITE_REJECTED: return "records rejected";
  }
  return "unknown status";
}

std::string check_plugin_descriptor(const pmq_sink_plugin* d) {
  if (!d) return "the plugin's entry point returned no descriptor";
  if (d->struct_size < offsetof(pmq_sink_plugin, close) + sizeof(d->close))
    return "the plugin's descriptor is too small (struct_size " + std::to_string(d->struct_size) + ")";
  const uint32_t major = PMQ_SINK_ABI_MAJOR(d->abi_version), minor = PMQ_SINK_ABI_MINOR(d->abi_version);
  if (major != PMQ_SINK_ABI_VERSION_MAJOR || minor > PMQ_SINK_ABI_VERSION_MINOR)
    return "the plugin was built for sink ABI " + std::to_string(major) + "." + std::to_string(minor) +
           ", this runtime speaks " + std::to_string(PMQ_SINK_ABI_VERSION_MAJOR) + "." +
           std::to_string(PMQ_SINK_ABI_VERSION_MINOR) + " (same major, minor up to ours)";
  if (!d->name || !d->open || !d->write_batch || !d->close)
    return "the plugin's descriptor lacks a name, open, write_batch or close";
  return {};
}

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::string& path_name,
                                                   const std::vector<std::filesystem::path>& search_path,
                                                   std::string& error) {
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
      error = "plugin " + candidate.string() + " does not export " PMQ_SINK_ENTRY_SYMBOL " (not a picomq-connect sink?)";
      return nullptr;
    }
    const pmq_sink_plugin* descriptor = entry(PMQ_SINK_ABI_VERSION);
    if (auto refusal = check_plugin_descriptor(descriptor); !refusal.empty()) {
      dlclose(handle);
      error = "plugin " + candidate.string() + " refused: " + refusal;
      return nullptr;
    }
    std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
    lib->handle_ = handle;
    lib->descriptor_ = descriptor;
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

std::unique_ptr<SinkPlugin> SinkPlugin::open(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                             const std::string& config_json, std::string& error) {
  std::unique_ptr<SinkPlugin> sink(new SinkPlugin());
  sink->library_ = std::move(library);
  sink->sink_key_ = std::move(sink_key);
  sink->host_.struct_size = sizeof(pmq_host_api);
  sink->host_.abi_version = PMQ_SINK_ABI_VERSION;
  sink->host_.host_ctx = &sink->sink_key_;
  sink->host_.log = host_log;
  sink->host_.set_error = host_set_error;
  sink->host_.reject_record = host_reject_record;
  char errbuf[1024] = {0};
  sink->instance_ = sink->library_->descriptor().open(&sink->host_, config_json.c_str(), errbuf, sizeof errbuf);
  if (!sink->instance_) {
    error = std::string("plugin ") + sink->library_->descriptor().name + " failed to open: " +
            (errbuf[0] ? errbuf : "no reason given");
    return nullptr;
  }
  return sink;
}

WriteOutcome SinkPlugin::write(const DecodedBatch& batch) {
  WriteOutcome outcome;
  pmq_write_result result{&outcome};
  const pmq_batch view = batch.abi_view();
  std::lock_guard lock(call_mutex_);
  if (!instance_) {
    outcome.status = PMQ_WRITE_FATAL;
    outcome.message = "the sink is closed";
    return outcome;
  }
  outcome.status = library_->descriptor().write_batch(instance_, &view, &result);
  if (outcome.status < PMQ_WRITE_OK || outcome.status > PMQ_WRITE_REJECTED) {
    outcome.message = "plugin returned an unknown status " + std::to_string(int(outcome.status));
    outcome.status = PMQ_WRITE_FATAL;
  }
  if (outcome.status == PMQ_WRITE_REJECTED && outcome.rejections.empty()) {
    outcome.status = PMQ_WRITE_FATAL;
    outcome.message = "plugin reported rejected records without naming any" +
                      (outcome.message.empty() ? "" : ": " + outcome.message);
  }
  return outcome;
}

void SinkPlugin::close() {
  std::lock_guard lock(call_mutex_);
  if (instance_) {
    library_->descriptor().close(instance_);
    instance_ = nullptr;
  }
}

SinkPlugin::~SinkPlugin() { close(); }

}  // namespace picomq::runtime
