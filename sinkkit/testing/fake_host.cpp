#include "picomq/kit/testing/fake_host.hpp"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/plugin_options.hpp"

namespace picomq::kit::testing {

// ---------------------------------------------------------------- TestBatch

TestBatch::TestBatch(std::string topic, int32_t partition, std::vector<TestRecord> records, int32_t payload_format,
                     std::string schema, uint32_t block_index)
    : topic_(std::move(topic)), schema_(std::move(schema)), records_(std::move(records)) {
  raw_.partition = partition;
  raw_.payload_format = payload_format;
  raw_.block_index = block_index;
  build();
}

TestBatch TestBatch::json(std::string topic, int32_t partition, int64_t first_offset,
                          std::vector<std::string> payloads) {
  std::vector<TestRecord> records;
  records.reserve(payloads.size());
  for (auto& p : payloads) records.push_back(TestRecord{.offset = first_offset++, .payload = std::move(p)});
  return TestBatch(std::move(topic), partition, std::move(records));
}

void TestBatch::build() {
  auto bytes = [](const std::optional<std::string>& s) {
    // An empty but present value must not read as absent (data == NULL): point at the string.
    return s ? pmq_bytes{reinterpret_cast<const uint8_t*>(s->data()), s->size()} : pmq_bytes{nullptr, 0};
  };
  headers_.clear();
  pmq_records_.clear();
  headers_.reserve(records_.size());
  for (const TestRecord& r : records_) {
    auto& hs = headers_.emplace_back();
    for (const TestHeader& h : r.headers)
      hs.push_back(pmq_header{{reinterpret_cast<const uint8_t*>(h.name.data()), h.name.size()}, bytes(h.value)});
    pmq_record record{};
    record.offset = r.offset;
    record.timestamp_ms = r.timestamp_ms;
    record.key = bytes(r.key);
    record.headers = hs.empty() ? nullptr : hs.data();
    record.header_count = hs.size();
    record.payload = bytes(r.payload);
    record.op = r.op;
    record.key_json = bytes(r.key_json);
    if (r.op != PMQ_OP_APPEND) raw_.changes = 1;
    pmq_records_.push_back(record);
  }
  raw_.struct_size = sizeof raw_;
  raw_.topic = topic_.c_str();
  raw_.schema = schema_.c_str();
  raw_.records = pmq_records_.data();
  raw_.record_count = pmq_records_.size();
  raw_.record_size = sizeof(pmq_record);
  writer_schemas_.clear();
  for (const TestRecord& r : records_)
    if (r.writer_schema) {
      for (const TestRecord& each : records_)
        writer_schemas_.push_back(each.writer_schema ? each.writer_schema->c_str() : nullptr);
      break;
    }
  raw_.writer_schemas = writer_schemas_.empty() ? nullptr : writer_schemas_.data();
}

// ---------------------------------------------------------------- Write

WriteOutcome Write::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!done_.wait_for(lock, timeout, [&] { return finished_; }))
    return WriteOutcome{PMQ_WRITE_PENDING, "timed out", {}};
  return outcome_;
}
bool Write::completed() const {
  std::lock_guard lock(mutex_);
  return finished_;
}
int Write::completions() const {
  std::lock_guard lock(mutex_);
  return completions_;
}
bool Write::released() const {
  std::lock_guard lock(mutex_);
  return releases_ > 0;
}
bool Write::misreleased() const {
  std::lock_guard lock(mutex_);
  return releases_ > 1 || released_late_;
}

// ---------------------------------------------------------------- host callbacks

struct FakeHost::Options {
  kit::PluginOptions values;
};

namespace {
Write* write_of(pmq_write_result* result) { return reinterpret_cast<Write*>(result); }
}  // namespace

struct HostCallbacks {
  static FakeHost& host(void* ctx) { return *static_cast<FakeHost*>(ctx); }
  static const kit::PluginOptions& values(void* ctx) { return host(ctx).options_->values; }

  static void log(void* ctx, int32_t level, const char* message) {
    static const char* names[] = {"debug", "info", "warn", "error"};
    std::lock_guard lock(host(ctx).mutex_);
    host(ctx).logs_.push_back(std::string(names[std::min(std::max(level, 0), 3)]) + ": " + (message ? message : ""));
  }
  static void set_error(pmq_write_result* result, const char* message) {
    Write* w = write_of(result);
    std::lock_guard lock(w->mutex_);
    if (message) w->outcome_.error = message;
  }
  static void reject_record(pmq_write_result* result, size_t index, const char* reason) {
    Write* w = write_of(result);
    std::lock_guard lock(w->mutex_);
    w->outcome_.rejected.push_back({index, reason ? reason : ""});
  }
  static void complete(pmq_write_result* result, pmq_write_status status) { finish(write_of(result), status); }
  static void finish(Write* w, pmq_write_status status) {
    {
      std::lock_guard lock(w->mutex_);
      ++w->completions_;
      if (w->finished_) return;  // a second completion is a sink bug: completions() shows it
      w->outcome_.status = status == PMQ_WRITE_OK && !w->outcome_.rejected.empty() ? PMQ_WRITE_REJECTED : status;
      w->finished_ = true;
    }
    w->done_.notify_all();
  }
  static void release(pmq_write_result* result) {
    Write* w = write_of(result);
    std::lock_guard lock(w->mutex_);
    ++w->releases_;
    if (w->finished_) w->released_late_ = true;
  }
  static int has(void* ctx, const char* name) { return name && values(ctx).has(name); }
  static const char* string(void* ctx, const char* name) { return name ? values(ctx).string(name) : nullptr; }
  static int64_t integer(void* ctx, const char* name) { return name ? values(ctx).integer(name) : 0; }
  static double number(void* ctx, const char* name) { return name ? values(ctx).number(name) : 0; }
  static int boolean(void* ctx, const char* name) { return name && values(ctx).boolean(name); }
  static size_t list_size(void* ctx, const char* name) { return name ? values(ctx).list_size(name) : 0; }
  static const char* list_item(void* ctx, const char* name, size_t i) {
    return name ? values(ctx).list_item(name, i) : nullptr;
  }
  static const char* json(void* ctx, const char* name) { return name ? values(ctx).json(name) : nullptr; }
  static void set_unread_fields(void* ctx, uint32_t fields) { host(ctx).unread_fields_ = fields; }
  static void set_max_in_flight(void* ctx, uint32_t n) {
    FakeHost& h = host(ctx);
    h.max_in_flight_ = std::min(std::max<uint32_t>(n, 1), std::max<uint32_t>(h.plugin_->max_in_flight, 1));
  }
  static void count(void* ctx, const char* name, uint64_t n) {
    std::lock_guard lock(host(ctx).mutex_);
    host(ctx).counters_[name ? name : "?"] += n;
  }
  static void set_plane(void* ctx, uint32_t plane) {
    FakeHost& h = host(ctx);
    pmq_plane_spec spec{};
    char error[256] = {0};
    (void)pmq_sink_plane_spec(h.plugin_, &spec, error, sizeof error);  // checked at load
    if (pmq_plane_choice_valid(&spec, plane, error, sizeof error)) {
      h.plane_ = plane;
    } else {
      h.plane_error_ = std::string("the plugin ") + error;  // the runtime's rule and words
    }
  }
};

// ---------------------------------------------------------------- FakeHost

FakeHost::FakeHost(const pmq_sink_plugin& plugin) : plugin_(&plugin), options_(std::make_unique<Options>()) {
  if (auto problem = kit::PluginOptions::check_table(plugin); !problem.empty())
    throw std::runtime_error("the sink's option table is unsound: " + problem);
  pmq_plane_spec spec{};
  char error[256] = {0};
  if (!pmq_sink_plane_spec(&plugin, &spec, error, sizeof error))
    throw std::runtime_error(std::string("the runtime would refuse the plugin: ") + error);
  plane_ = spec.best_plane;
  max_in_flight_ = std::max<uint32_t>(plugin.max_in_flight, 1);
  api_ = pmq_host_api{.struct_size = sizeof(pmq_host_api),
                      .abi_version = PMQ_SINK_ABI_VERSION,
                      .host_ctx = this,
                      .log = &HostCallbacks::log,
                      .set_error = &HostCallbacks::set_error,
                      .reject_record = &HostCallbacks::reject_record,
                      .config_has = &HostCallbacks::has,
                      .config_string = &HostCallbacks::string,
                      .config_int = &HostCallbacks::integer,
                      .config_float = &HostCallbacks::number,
                      .config_bool = &HostCallbacks::boolean,
                      .config_list_size = &HostCallbacks::list_size,
                      .config_list_item = &HostCallbacks::list_item,
                      .config_json = &HostCallbacks::json,
                      .complete = &HostCallbacks::complete,
                      .set_unread_fields = &HostCallbacks::set_unread_fields,
                      .set_max_in_flight = &HostCallbacks::set_max_in_flight,
                      .sink_key = nullptr,
                      .count = &HostCallbacks::count,
                      .release = &HostCallbacks::release,
                      .set_plane = &HostCallbacks::set_plane,
                      .subscriptions = nullptr};
}

std::unique_ptr<FakeHost> FakeHost::load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto entry = reinterpret_cast<pmq_sink_entry_fn>(dlsym(handle, PMQ_SINK_ENTRY_SYMBOL));
  const pmq_sink_plugin* plugin = entry ? entry(PMQ_SINK_ABI_VERSION) : nullptr;
  if (!plugin) {
    dlclose(handle);
    throw std::runtime_error(path + " has no " PMQ_SINK_ENTRY_SYMBOL " (or it returned no descriptor)");
  }
  auto host = std::make_unique<FakeHost>(*plugin);
  host->dl_handle_ = handle;
  return host;
}

FakeHost::~FakeHost() {
  close();
  if (dl_handle_) dlclose(dl_handle_);
}

std::vector<std::string> FakeHost::check(std::string_view config_json) const {
  return validate_config(config_json, nullptr);
}

std::vector<std::string> FakeHost::validate_config(std::string_view config_json, Options* accepted) const {
  std::vector<std::string> errors;
  auto values = kit::PluginOptions::validate(*plugin_, config_json, errors);
  if (!values) return errors;
  if (plugin_->validate) {
    // The sink's validate() reads the validated values through a host of its own.
    FakeHost probe(*plugin_);
    probe.options_->values = *values;
    if (api_.subscriptions) probe.subscriptions(subscriptions_);
    char buffer[4096] = {0};
    if (!plugin_->validate(&probe.api_, "{}", buffer, sizeof buffer))
      for (const auto& p : kit::PluginOptions::plugin_problems(*plugin_, buffer)) errors.push_back(p.to_string());
  }
  if (errors.empty() && accepted) accepted->values = std::move(*values);
  return errors;
}

void FakeHost::open(std::string_view config_json, std::string sink_key) {
  if (instance_) throw std::logic_error("FakeHost::open: already open");
  std::vector<std::string> errors = validate_config(config_json, options_.get());
  if (!errors.empty()) {
    std::string text;
    for (const auto& e : errors) text += (text.empty() ? "" : "\n") + e;
    throw std::runtime_error(text);
  }
  sink_key_ = std::move(sink_key);
  api_.sink_key = sink_key_.c_str();
  char buffer[1024] = {0};
  instance_ = plugin_->open(&api_, options_->values.json().c_str(), buffer, sizeof buffer);
  if (!instance_) throw std::runtime_error(std::string("open() failed: ") + buffer);
  if (!plane_error_.empty()) {
    plugin_->close(instance_);
    instance_ = nullptr;
    throw std::runtime_error("open(): " + plane_error_);
  }
}

std::shared_ptr<Write> FakeHost::start_write(const TestBatch& batch) {
  if (!instance_) throw std::logic_error("FakeHost: write before open()");
  auto w = std::make_shared<Write>();
  w->batch_ = std::make_shared<TestBatch>(batch);
  {
    std::lock_guard lock(mutex_);
    writes_.push_back(w);
  }
  // The runtime makes one write call into an instance at a time (completions may overlap).
  std::lock_guard call_lock(call_mutex_);
  const pmq_batch& raw = w->batch_->raw();
  auto* result = reinterpret_cast<pmq_write_result*>(w.get());
  pmq_write_status status = PMQ_WRITE_FATAL;
  if (plane_ == PMQ_PLANE_BATCHES) {
    status = plugin_->write_batch(instance_, &raw, result);
  } else if (plane_ == PMQ_PLANE_ROWS) {
    // One call per record, in order, as the runtime makes them: a refused record is noted and
    // the rest written; any other failure ends the batch there.
    status = PMQ_WRITE_OK;
    for (size_t i = 0; i < raw.record_count; ++i) {
      Write one;
      const pmq_write_status s = plugin_->write_record(instance_, &raw, i, reinterpret_cast<pmq_write_result*>(&one));
      std::lock_guard lock(w->mutex_);
      if (s == PMQ_WRITE_REJECTED) {
        w->outcome_.rejected.push_back(
            {i, one.outcome_.rejected.empty() ? one.outcome_.error : one.outcome_.rejected[0].reason});
        continue;
      }
      if (s == PMQ_WRITE_OK) continue;
      w->outcome_.error = s == PMQ_WRITE_PENDING ? "write_record returned PMQ_WRITE_PENDING" : one.outcome_.error;
      status = s == PMQ_WRITE_PENDING ? PMQ_WRITE_FATAL : s;
      break;
    }
  } else {
    ArrowSchema schema{};
    ArrowArray array{};
    auto exported = arrow::export_batch(raw, arrow::ExportOptions{}, &schema, &array);
    if (!exported.ok) {
      std::lock_guard lock(w->mutex_);
      w->outcome_.error = "arrow export: " + (exported.error.empty() ? exported.rejected.at(0).reason : exported.error);
    } else {
      std::vector<int64_t> offsets;
      for (size_t i = 0; i < raw.record_count; ++i) offsets.push_back(pmq_batch_record(&raw, i)->offset);
      pmq_arrow_batch ab{};
      ab.struct_size = sizeof ab;
      ab.topic = raw.topic;
      ab.partition = raw.partition;
      ab.payload_format = raw.payload_format;
      ab.schema = raw.schema;
      ab.arrow_schema = &schema;
      ab.arrow_array = &array;
      ab.offsets = offsets.data();
      ab.record_count = offsets.size();
      ab.block_index = raw.block_index;
      status = plugin_->write_arrow(instance_, &ab, result);
      // A sink that keeps the structs past the call moves them out (release set to NULL).
      if (status != PMQ_WRITE_PENDING) {
        if (schema.release) schema.release(&schema);
        if (array.release) array.release(&array);
      } else if (schema.release || array.release) {
        std::lock_guard lock(w->mutex_);
        w->outcome_.error =
            "a pending Arrow write must move the structs out (the host releases them when the call returns)";
        if (schema.release) schema.release(&schema);
        if (array.release) array.release(&array);
      }
    }
  }
  if (status != PMQ_WRITE_PENDING) HostCallbacks::finish(w.get(), status);
  return w;
}

WriteOutcome FakeHost::write(const TestBatch& batch, std::chrono::milliseconds timeout) {
  return start_write(batch)->wait(timeout);
}

void FakeHost::flush(std::chrono::milliseconds timeout) {
  if (instance_ && plugin_->flush) plugin_->flush(instance_, timeout.count());
}

namespace {
std::vector<pmq_topic_partition> partition_list(const std::vector<std::pair<std::string, int32_t>>& partitions) {
  std::vector<pmq_topic_partition> out;
  out.reserve(partitions.size());
  for (const auto& [topic, partition] : partitions) out.push_back({topic.c_str(), partition});
  return out;
}
}  // namespace

void FakeHost::assign(uint32_t block_index, const std::vector<std::pair<std::string, int32_t>>& partitions) {
  auto list = partition_list(partitions);
  if (instance_ && plugin_->partitions_assigned)
    plugin_->partitions_assigned(instance_, block_index, list.data(), list.size());
}

void FakeHost::revoke(uint32_t block_index, const std::vector<std::pair<std::string, int32_t>>& partitions) {
  auto list = partition_list(partitions);
  if (instance_ && plugin_->partitions_revoked)
    plugin_->partitions_revoked(instance_, block_index, list.data(), list.size());
}

void FakeHost::stop() {
  if (!instance_ || plugin_->struct_size < offsetof(pmq_sink_plugin, stop) + sizeof(plugin_->stop) || !plugin_->stop)
    return;
  plugin_->stop(instance_);
}

void FakeHost::close() {
  if (!instance_) return;
  plugin_->close(instance_);
  instance_ = nullptr;
}

std::vector<std::string> FakeHost::logs() const {
  std::lock_guard lock(mutex_);
  return logs_;
}

bool FakeHost::logged(std::string_view fragment) const {
  std::lock_guard lock(mutex_);
  for (const auto& line : logs_)
    if (line.find(fragment) != std::string::npos) return true;
  return false;
}

uint64_t FakeHost::counter(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}

}  // namespace picomq::kit::testing
