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

using HostContext = SinkPlugin::HostContext;
const PluginOptions& options_of(void* host_ctx) { return static_cast<HostContext*>(host_ctx)->options; }

void host_log(void* host_ctx, int32_t level, const char* message) {
  const auto* ctx = static_cast<const HostContext*>(host_ctx);
  auto lvl = level <= PMQ_LOG_DEBUG  ? spdlog::level::debug
             : level == PMQ_LOG_INFO ? spdlog::level::info
             : level == PMQ_LOG_WARN ? spdlog::level::warn
                                     : spdlog::level::err;
  spdlog::log(lvl, "sink '{}': {}", ctx ? ctx->sink_key : "?", message ? message : "");
}

void host_set_error(pmq_write_result* result, const char* message) {
  if (result && message) result->outcome->message = message;
}

void host_reject_record(pmq_write_result* result, size_t index, const char* reason) {
  if (result) result->outcome->rejections.emplace_back(index, reason ? reason : "rejected by the sink");
}

int host_config_has(void* ctx, const char* name) { return name && options_of(ctx).has(name); }
const char* host_config_string(void* ctx, const char* name) { return name ? options_of(ctx).string(name) : nullptr; }
int64_t host_config_int(void* ctx, const char* name) { return name ? options_of(ctx).integer(name) : 0; }
double host_config_float(void* ctx, const char* name) { return name ? options_of(ctx).number(name) : 0; }
int host_config_bool(void* ctx, const char* name) { return name && options_of(ctx).boolean(name); }
size_t host_config_list_size(void* ctx, const char* name) { return name ? options_of(ctx).list_size(name) : 0; }
const char* host_config_list_item(void* ctx, const char* name, size_t index) {
  return name ? options_of(ctx).list_item(name, index) : nullptr;
}
const char* host_config_json(void* ctx, const char* name) { return name ? options_of(ctx).json(name) : nullptr; }

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
  if (auto problem = PluginOptions::check_table(*d); !problem.empty()) return "the sink's " + problem;
  if (planes) *planes = spec;
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

std::unique_ptr<SinkPlugin> SinkPlugin::open(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                             const std::string& config_json, std::string& error) {
  const pmq_sink_plugin& d = library->descriptor();
  std::vector<std::string> problems;
  auto options = PluginOptions::validate(d, config_json, problems);
  if (!options) {
    error = "[plugin_config] does not fit the " + std::string(d.name) + " sink:";
    for (const auto& p : problems) error += "\n  " + p;
    return nullptr;
  }
  std::unique_ptr<SinkPlugin> sink(new SinkPlugin());
  sink->library_ = std::move(library);
  sink->sink_key_ = std::move(sink_key);
  sink->context_ = std::make_unique<HostContext>(HostContext{sink->sink_key_, std::move(*options)});
  pmq_host_api& host = sink->host_;
  host.struct_size = sizeof(pmq_host_api);
  host.abi_version = PMQ_SINK_ABI_VERSION;
  host.host_ctx = sink->context_.get();
  host.log = host_log;
  host.set_error = host_set_error;
  host.reject_record = host_reject_record;
  host.config_has = host_config_has;
  host.config_string = host_config_string;
  host.config_int = host_config_int;
  host.config_float = host_config_float;
  host.config_bool = host_config_bool;
  host.config_list_size = host_config_list_size;
  host.config_list_item = host_config_list_item;
  host.config_json = host_config_json;
  char errbuf[1024] = {0};
  sink->instance_ = d.open(&host, sink->context_->options.json().c_str(), errbuf, sizeof errbuf);
  if (!sink->instance_) {
    error = std::string("plugin ") + d.name + " failed to open: " + (errbuf[0] ? errbuf : "no reason given");
    return nullptr;
  }
  return sink;
}

namespace {
// A plugin's answer, checked: unknown statuses and unnamed rejections are plugin bugs.
void check_outcome(WriteOutcome& outcome) {
  if (outcome.status < PMQ_WRITE_OK || outcome.status > PMQ_WRITE_REJECTED) {
    outcome.message = "plugin returned an unknown status " + std::to_string(int(outcome.status));
    outcome.status = PMQ_WRITE_FATAL;
  }
  if (outcome.status == PMQ_WRITE_REJECTED && outcome.rejections.empty()) {
    outcome.status = PMQ_WRITE_FATAL;
    outcome.message = "plugin reported rejected records without naming any" +
                      (outcome.message.empty() ? "" : ": " + outcome.message);
  }
}
}  // namespace

WriteOutcome SinkPlugin::write(const DecodedBatch& batch, const arrow::ExportOptions& arrow) {
  WriteOutcome outcome;
  const pmq_batch view = batch.abi_view();
  if (library_->planes().best_plane == PMQ_PLANE_ARROW) return write_arrow(batch, view, arrow);
  std::lock_guard lock(call_mutex_);
  if (!instance_) {
    outcome.status = PMQ_WRITE_FATAL;
    outcome.message = "the sink is closed";
    return outcome;
  }
  switch (library_->planes().best_plane) {
    case PMQ_PLANE_BATCHES: {
      pmq_write_result result{&outcome};
      outcome.status = library_->descriptor().write_batch(instance_, &view, &result);
      check_outcome(outcome);
      return outcome;
    }
    case PMQ_PLANE_ROWS: return write_rows(view);
    default:
      outcome.status = PMQ_WRITE_FATAL;
      outcome.message = std::string("this runtime cannot deliver on the ") + pmq_plane_name(library_->planes().best_plane) +
                        " plane yet";
      return outcome;
  }
}

// The arrow plane: the batch is exported through the C Data Interface first. Records the
// declared columns cannot hold are rejections (the bad-record policy applies); the structs are
// released after the call unless the plugin moved them out.
WriteOutcome SinkPlugin::write_arrow(const DecodedBatch& batch, const pmq_batch& view,
                                     const arrow::ExportOptions& options) {
  WriteOutcome outcome;
  ArrowSchema schema{};
  ArrowArray array{};
  auto exported = arrow::export_batch(view, options, &schema, &array);
  if (!exported.ok) {
    if (!exported.rejected.empty()) {
      outcome.status = PMQ_WRITE_REJECTED;
      for (auto& r : exported.rejected) outcome.rejections.emplace_back(r.record_index, "arrow export: " + r.reason);
    } else {
      outcome.status = PMQ_WRITE_FATAL;
      outcome.message = "cannot export the batch as Arrow: " + exported.error;
    }
    return outcome;
  }
  std::vector<int64_t> offsets;
  offsets.reserve(batch.records.size());
  for (const auto& r : batch.records) offsets.push_back(r.offset);
  pmq_arrow_batch arrow_batch{};
  arrow_batch.struct_size = sizeof arrow_batch;
  arrow_batch.topic = view.topic;
  arrow_batch.partition = view.partition;
  arrow_batch.payload_format = view.payload_format;
  arrow_batch.schema = view.schema;
  arrow_batch.arrow_schema = &schema;
  arrow_batch.arrow_array = &array;
  arrow_batch.offsets = offsets.data();
  arrow_batch.record_count = offsets.size();
  {
    std::lock_guard lock(call_mutex_);
    if (!instance_) {
      outcome.status = PMQ_WRITE_FATAL;
      outcome.message = "the sink is closed";
    } else {
      pmq_write_result result{&outcome};
      outcome.status = library_->descriptor().write_arrow(instance_, &arrow_batch, &result);
      check_outcome(outcome);
    }
  }
  if (schema.release) schema.release(&schema);
  if (array.release) array.release(&array);
  return outcome;
}

// The rows plane: one call per record, in order. A rejected record is collected and the rest
// still written; any other failure stops the batch there, so what was written is a prefix.
WriteOutcome SinkPlugin::write_rows(const pmq_batch& view) {
  WriteOutcome batch_outcome;
  for (size_t i = 0; i < view.record_count; ++i) {
    WriteOutcome one;
    pmq_write_result result{&one};
    one.status = library_->descriptor().write_record(instance_, &view, i, &result);
    if (one.status == PMQ_WRITE_REJECTED && one.rejections.empty()) one.rejections.emplace_back(i, one.message);
    for (auto& r : one.rejections) r.first = i;  // a row call can only refuse its own record
    check_outcome(one);
    if (one.status == PMQ_WRITE_OK) continue;
    if (one.status == PMQ_WRITE_REJECTED) {
      batch_outcome.status = PMQ_WRITE_REJECTED;
      batch_outcome.rejections.push_back(std::move(one.rejections.front()));
      continue;
    }
    one.written = i;
    one.rejections = std::move(batch_outcome.rejections);
    return one;
  }
  return batch_outcome;
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
