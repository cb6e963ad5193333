#include "runtime/plugin_host.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <utility>

// The host side of the opaque result type plugins fill through pmq_host_api.
struct pmq_write_result {
  picomq::runtime::WriteOutcome* outcome;
  picomq::runtime::WriteCall* call;  // set for batch and Arrow writes, which may complete later
};

namespace picomq::runtime {
namespace {

using HostContext = SinkInstance::HostContext;
const kit::PluginOptions& options_of(void* host_ctx) { return static_cast<HostContext*>(host_ctx)->options; }

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

void host_complete(pmq_write_result* result, pmq_write_status status) {
  if (!result || !result->call) {
    spdlog::error("a plugin completed a write that cannot be pending (rows plane); ignored");
    return;
  }
  result->call->complete(status);
}

void host_release(pmq_write_result* result) {
  if (!result || !result->call) {
    spdlog::error("a plugin released a write that cannot be pending (rows plane); ignored");
    return;
  }
  result->call->request_release();
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

// The instance's context for a declaration, which only open() may make: the consumers read
// declarations without a lock, as they are fixed once open() returns. Null (and a warning) after.
HostContext* declaring(void* host_ctx, const char* call) {
  auto* ctx = static_cast<HostContext*>(host_ctx);
  if (ctx->opening) return ctx;
  spdlog::warn("sink '{}': {} called after open(); ignored", ctx->sink_key, call);
  return nullptr;
}

void host_set_unread_fields(void* host_ctx, uint32_t fields) {
  if (auto* ctx = declaring(host_ctx, "set_unread_fields")) ctx->unread_fields = fields;
}

void host_set_max_in_flight(void* host_ctx, uint32_t n) {
  if (auto* ctx = declaring(host_ctx, "set_max_in_flight")) ctx->max_in_flight = std::max<uint32_t>(n, 1);
}

// Checked against the native planes once open() returns (a plane that is not native fails it).
void host_set_plane(void* host_ctx, uint32_t plane) {
  if (auto* ctx = declaring(host_ctx, "set_plane")) ctx->plane = plane;
}

bool valid_counter_name(const char* name) {
  if (!name || !*name) return false;
  for (const char* c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

void host_count(void* host_ctx, const char* name, uint64_t n) {
  auto* ctx = static_cast<HostContext*>(host_ctx);
  if (!valid_counter_name(name)) {
    spdlog::warn("sink '{}': count() with an invalid counter name '{}' (want [a-z0-9_]+); ignored", ctx->sink_key,
                 name ? name : "(null)");
    return;
  }
  std::lock_guard lock(ctx->counters_mutex);
  auto it = ctx->counters.find(std::string_view(name));
  if (it == ctx->counters.end()) it = ctx->counters.emplace(name, 0).first;
  it->second += n;
}

// The host API as an instance (or validate()) sees it: every function set, the config
// accessors over `ctx`'s options.
pmq_host_api make_host_api(HostContext* ctx) {
  pmq_host_api host{};
  host.struct_size = sizeof(pmq_host_api);
  host.abi_version = PMQ_SINK_ABI_VERSION;
  host.host_ctx = ctx;
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
  host.complete = host_complete;
  host.set_unread_fields = host_set_unread_fields;
  host.set_max_in_flight = host_set_max_in_flight;
  host.sink_key = ctx->sink_key.c_str();
  host.count = host_count;
  host.release = host_release;
  host.set_plane = host_set_plane;
  host.subscriptions = ctx->subscriptions.empty() ? nullptr : ctx->subscriptions.c_str();
  return host;
}

// Whether a descriptor built for an older minor ABI has `member` (its struct_size covers it).
template <class T>
bool descriptor_has(const pmq_sink_plugin& d, T pmq_sink_plugin::*member) {
  static const pmq_sink_plugin layout{};
  const auto offset =
      static_cast<size_t>(reinterpret_cast<const char*>(&(layout.*member)) - reinterpret_cast<const char*>(&layout));
  return offset + sizeof(T) <= d.struct_size && d.*member != nullptr;
}

}  // namespace

std::string_view to_string(pmq_write_status status) {
  switch (status) {
    case PMQ_WRITE_OK: return "ok";
    case PMQ_WRITE_RETRY: return "retryable failure";
    case PMQ_WRITE_PARTIAL: return "failure, possibly partly written";
    case PMQ_WRITE_FATAL: return "permanent failure";
    case PMQ_WRITE_REJECTED: return "records rejected";
    case PMQ_WRITE_PENDING: return "pending";
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

std::unique_ptr<SinkInstance> SinkInstance::open(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                                 const std::string& config_json, std::string& error) {
  const pmq_sink_plugin& d = library->descriptor();
  std::vector<std::string> problems;
  auto options = kit::PluginOptions::validate(d, config_json, problems);
  if (!options) {
    error = "[plugin_config] does not fit the " + std::string(d.name) + " sink:";
    for (const auto& p : problems) error += "\n  " + p;
    return nullptr;
  }
  if (auto problem = validate_with_plugin(d, sink_key, *options); !problem.empty()) {
    error = "[plugin_config] does not fit the " + std::string(d.name) + " sink:\n  " + problem;
    return nullptr;
  }
  return open_validated(std::move(library), std::move(sink_key), std::move(*options), error);
}

std::unique_ptr<SinkInstance> SinkInstance::open_validated(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                                           kit::PluginOptions options, std::string& error,
                                                           std::string subscriptions) {
  const pmq_sink_plugin& d = library->descriptor();
  std::unique_ptr<SinkInstance> sink(new SinkInstance());
  sink->library_ = std::move(library);
  sink->sink_key_ = std::move(sink_key);
  sink->context_ = std::make_unique<HostContext>();
  sink->context_->sink_key = sink->sink_key_;
  sink->context_->subscriptions = std::move(subscriptions);
  sink->context_->options = std::move(options);
  sink->host_ = make_host_api(sink->context_.get());
  const pmq_host_api& host = sink->host_;
  char errbuf[1024] = {0};
  sink->context_->opening = true;
  sink->instance_ = d.open(&host, sink->context_->options.json().c_str(), errbuf, sizeof errbuf);
  sink->context_->opening = false;
  if (!sink->instance_) {
    error = std::string("plugin ") + d.name + " failed to open: " + (errbuf[0] ? errbuf : "no reason given");
    return nullptr;
  }
  const uint32_t chosen = sink->context_->plane;
  if (chosen && !pmq_plane_choice_valid(&sink->library_->planes(), chosen, errbuf, sizeof errbuf)) {
    error = std::string("plugin ") + d.name + " " + errbuf;
    sink->close();
    return nullptr;
  }
  return sink;
}

std::string validate_with_plugin(const pmq_sink_plugin& d, const std::string& sink_key,
                                 const kit::PluginOptions& options, const std::string& subscriptions) {
  if (!descriptor_has(d, &pmq_sink_plugin::validate)) return {};
  HostContext ctx;
  ctx.sink_key = sink_key;
  ctx.subscriptions = subscriptions;
  ctx.options = options;
  const pmq_host_api host = make_host_api(&ctx);
  char errbuf[2048] = {0};
  if (d.validate(&host, ctx.options.json().c_str(), errbuf, sizeof errbuf)) return {};
  std::string problems = errbuf[0] ? errbuf : "the sink's validate() refused the configuration without a reason";
  while (!problems.empty() && problems.back() == '\n') problems.pop_back();
  // One problem per line, indented like the option table's.
  for (size_t at = problems.find('\n'); at != std::string::npos; at = problems.find('\n', at + 4))
    problems.replace(at, 1, "\n  ");
  return problems;
}

void SinkInstance::flush(std::chrono::milliseconds timeout) {
  const pmq_sink_plugin& d = library_->descriptor();
  if (!descriptor_has(d, &pmq_sink_plugin::flush)) return;
  std::lock_guard lock(call_mutex_);
  if (instance_) d.flush(instance_, timeout.count());
}

void SinkInstance::notify_partitions(bool assigned, uint32_t block_index,
                                     const std::vector<TopicPartition>& partitions) {
  const pmq_sink_plugin& d = library_->descriptor();
  auto fn = assigned ? &pmq_sink_plugin::partitions_assigned : &pmq_sink_plugin::partitions_revoked;
  if (partitions.empty() || !descriptor_has(d, fn)) return;
  std::vector<pmq_topic_partition> list;
  list.reserve(partitions.size());
  for (const auto& tp : partitions) list.push_back({tp.topic.c_str(), tp.partition});
  std::lock_guard lock(call_mutex_);
  if (instance_) (d.*fn)(instance_, block_index, list.data(), list.size());
}

std::map<std::string, uint64_t> SinkInstance::counters() const {
  std::lock_guard lock(context_->counters_mutex);
  return {context_->counters.begin(), context_->counters.end()};
}

namespace {
// A plugin's answer, checked: unknown statuses and unnamed rejections are plugin bugs.
void check_outcome(WriteOutcome& outcome) {
  if (outcome.status < PMQ_WRITE_OK || outcome.status > PMQ_WRITE_REJECTED) {
    outcome.message = "plugin returned an unknown status " + std::to_string(int(outcome.status)) +
                      (outcome.message.empty() ? "" : ": " + outcome.message);
    outcome.status = PMQ_WRITE_FATAL;
  }
  if (outcome.status == PMQ_WRITE_REJECTED && outcome.rejections.empty()) {
    outcome.status = PMQ_WRITE_FATAL;
    outcome.message =
        "plugin reported rejected records without naming any" + (outcome.message.empty() ? "" : ": " + outcome.message);
  }
}
}  // namespace

WriteCall::~WriteCall() {
  delete result_;
  if (schema_.release) schema_.release(&schema_);
  if (array_.release) array_.release(&array_);
}

void WriteCall::complete(pmq_write_status status) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    if (done_) {
      spdlog::error("a plugin completed the same write twice; the second outcome ({}) is ignored", int(status));
      return;
    }
    outcome.status = status;
    if (!kept_index_.empty())
      for (auto& r : outcome.rejections)
        if (r.first < kept_index_.size()) r.first = kept_index_[r.first];
    if ((status == PMQ_WRITE_OK || status == PMQ_WRITE_REJECTED) && !export_rejections_.empty()) {
      outcome.status = PMQ_WRITE_REJECTED;
      outcome.rejections.insert(outcome.rejections.end(), export_rejections_.begin(), export_rejections_.end());
      export_rejections_.clear();
    }
    if (status == PMQ_WRITE_PENDING) {
      outcome.status = PMQ_WRITE_FATAL;
      outcome.message = "plugin completed a write with PMQ_WRITE_PENDING";
    }
    check_outcome(outcome);
    done_ = true;
    notify = on_done;
    // Under the lock: once it is released, the waiter may destroy this call (TSan found the
    // notify after the unlock touching a freed condition variable).
    cv_.notify_all();
  }
  if (notify) notify();  // a copy: the call may be gone by now
}

void WriteCall::request_release() {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    if (done_) return;  // completed first: nothing to free early
    if (release_requested_) {
      spdlog::error("a plugin released the same write twice; the second release is ignored");
      return;
    }
    release_requested_ = true;
    rejections_at_release_ = outcome.rejections.size();
    notify = on_released;
  }
  if (notify) notify();
}

bool WriteCall::release_requested() {
  std::lock_guard lock(mutex_);
  return release_requested_;
}

size_t WriteCall::rejections_at_release() {
  std::lock_guard lock(mutex_);
  return rejections_at_release_;
}

void WriteCall::drop_batch() {
  std::lock_guard lock(mutex_);
  view_ = pmq_batch{};
  arrow_batch_.arrow_schema = nullptr;
  arrow_batch_.arrow_array = nullptr;
  if (schema_.release) schema_.release(&schema_);
  if (array_.release) array_.release(&array_);
  std::vector<pmq_record>().swap(kept_);
  std::vector<int64_t>().swap(offsets_);
}

void WriteCall::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool WriteCall::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

bool WriteCall::done() {
  std::lock_guard lock(mutex_);
  return done_;
}

uint32_t SinkInstance::max_in_flight() const {
  const pmq_sink_plugin& d = library_->descriptor();
  if (d.struct_size < offsetof(pmq_sink_plugin, max_in_flight) + sizeof(d.max_in_flight)) return 1;
  const uint32_t declared = std::max<uint32_t>(1, d.max_in_flight);
  return context_->max_in_flight ? std::min(declared, context_->max_in_flight) : declared;
}

WriteOutcome SinkInstance::write(const DecodedBatch& batch, const arrow::ExportOptions& arrow,
                                 bool write_past_rejections) {
  WriteCall call;
  call.write_past_rejections = write_past_rejections;
  start(batch, arrow, call);
  call.wait();
  return std::move(call.outcome);
}

void SinkInstance::start(const DecodedBatch& batch, const arrow::ExportOptions& arrow, WriteCall& call) {
  call.view_ = batch.abi_view();
  const uint32_t plane = this->plane();
  if (plane == PMQ_PLANE_ARROW) return start_arrow(batch, arrow, call);
  if (plane == PMQ_PLANE_ROWS) {
    {
      std::lock_guard lock(call_mutex_);
      call.outcome = write_rows(call.view_);
    }
    call.complete(call.outcome.status);  // each record's outcome was checked; this notifies
    return;
  }
  call_plugin(call, [&](void* instance, pmq_write_result* result) {
    return library_->descriptor().write_batch(instance, &call.view_, result);
  });
}

// One batch or Arrow call into the instance, serialised; its outcome completes `call` at once
// unless the plugin answered PENDING (it completes later through the host API).
template <class Write>
void SinkInstance::call_plugin(WriteCall& call, Write&& write) {
  pmq_write_status status;
  call.result_ = new pmq_write_result{&call.outcome, &call};
  {
    std::lock_guard lock(call_mutex_);
    if (!instance_) {
      call.outcome.message = "the sink is closed";
      status = PMQ_WRITE_FATAL;
    } else {
      status = write(instance_, call.result_);
    }
  }
  if (status != PMQ_WRITE_PENDING) call.complete(status);
}

// The arrow plane: the batch is exported through the C Data Interface first. Records the
// declared columns cannot hold are rejections (the bad-record policy applies); the structs are
// released when the write is done unless the plugin moved them out.
void SinkInstance::start_arrow(const DecodedBatch& batch, const arrow::ExportOptions& options, WriteCall& call) {
  arrow::ExportResult exported;
  if (std::unique_ptr<arrow::HeldExport> held = std::move(batch.arrow_export)) {
    exported = std::move(held->result);  // exported when the batch was prepared
    call.schema_ = std::exchange(held->schema, ArrowSchema{});
    call.array_ = std::exchange(held->array, ArrowArray{});
  } else {
    exported = arrow::export_batch(call.view_, options, &call.schema_, &call.array_);
  }
  if (!exported.ok && !exported.rejected.empty()) {
    // The refused records go to the bad-record policy. Under `fail`, as with an undecodable
    // record, the records before the first refused one are written (and then committed);
    // otherwise all the others are.
    size_t first = exported.rejected.front().record_index;
    for (const auto& r : exported.rejected) {
      first = std::min(first, r.record_index);
      call.export_rejections_.emplace_back(r.record_index, "arrow export: " + r.reason);
    }
    if (call.write_past_rejections) {
      std::vector<bool> refused(batch.records.size());
      for (const auto& r : exported.rejected) refused.at(r.record_index) = true;
      for (size_t i = 0; i < batch.records.size(); ++i) {
        if (refused[i]) continue;
        call.kept_.push_back(batch.records[i]);
        call.kept_index_.push_back(i);
      }
      call.view_.records = call.kept_.data();
      call.view_.record_count = call.kept_.size();
      call.view_.writer_schemas = nullptr;  // not parallel to kept_ (the Arrow export does not read them)
    } else {
      call.view_.record_count = first;
    }
    if (call.view_.record_count == 0) {
      call.complete(PMQ_WRITE_OK);  // nothing to write: becomes REJECTED
      return;
    }
    exported = arrow::export_batch(call.view_, options, &call.schema_, &call.array_);
  }
  if (!exported.ok) {
    call.export_rejections_.clear();
    call.outcome.message = "cannot export the batch as Arrow: " +
                           (exported.error.empty() ? exported.rejected.at(0).reason : exported.error);
    call.complete(PMQ_WRITE_FATAL);
    return;
  }
  call.offsets_.reserve(call.view_.record_count);
  for (size_t i = 0; i < call.view_.record_count; ++i) call.offsets_.push_back(call.view_.records[i].offset);
  pmq_arrow_batch& ab = call.arrow_batch_;
  ab.struct_size = sizeof ab;
  ab.topic = call.view_.topic;
  ab.partition = call.view_.partition;
  ab.payload_format = call.view_.payload_format;
  ab.schema = call.view_.schema;
  ab.arrow_schema = &call.schema_;
  ab.arrow_array = &call.array_;
  ab.offsets = call.offsets_.data();
  ab.record_count = call.offsets_.size();
  ab.block_index = call.view_.block_index;
  call_plugin(call, [&](void* instance, pmq_write_result* result) {
    return library_->descriptor().write_arrow(instance, &ab, result);
  });
}

// The rows plane: one call per record, in order. A rejected record is collected and the rest
// still written; any other failure stops the batch there, so what was written is a prefix.
WriteOutcome SinkInstance::write_rows(const pmq_batch& view) {
  WriteOutcome batch_outcome;
  for (size_t i = 0; i < view.record_count; ++i) {
    WriteOutcome one;
    pmq_write_result result{&one, nullptr};
    one.status = instance_ ? library_->descriptor().write_record(instance_, &view, i, &result) : PMQ_WRITE_FATAL;
    if (!instance_) one.message = "the sink is closed";
    if (one.status == PMQ_WRITE_PENDING) {
      one.status = PMQ_WRITE_FATAL;
      one.message = "write_record returned PMQ_WRITE_PENDING: only batch and Arrow writes may be pending";
    }
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

void SinkInstance::stop() {
  std::lock_guard lock(lifetime_mutex_);
  const pmq_sink_plugin& d = library_->descriptor();
  if (instance_ && d.struct_size >= offsetof(pmq_sink_plugin, stop) + sizeof(d.stop) && d.stop) d.stop(instance_);
}

void SinkInstance::close() {
  std::lock_guard lock(call_mutex_);
  void* instance = nullptr;
  {
    std::lock_guard life(lifetime_mutex_);
    std::swap(instance, instance_);
  }
  if (instance) library_->descriptor().close(instance);
}

SinkInstance::~SinkInstance() { close(); }

}  // namespace picomq::runtime
