#include "runtime/plugin_host/sink_instance.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "picomq/kit/arrow_export.hpp"  // lend_export

namespace picomq::runtime {

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

uint32_t SinkInstance::max_in_flight() const {
  const pmq_sink_plugin& d = library_->descriptor();
  if (d.struct_size < offsetof(pmq_sink_plugin, max_in_flight) + sizeof(d.max_in_flight)) return 1;
  const uint32_t declared = std::max<uint32_t>(1, d.max_in_flight);
  return context_->max_in_flight ? std::min(declared, context_->max_in_flight) : declared;
}

WriteOutcome SinkInstance::write(const DecodedBatch& batch) {
  WriteCall call;
  start(batch, call);
  call.wait();
  return std::move(call.outcome);
}

void SinkInstance::start(const DecodedBatch& batch, WriteCall& call) {
  call.view_ = batch.abi_view();
  const uint32_t plane = this->plane();
  if (plane == PMQ_PLANE_ARROW) return start_arrow(batch, call);
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

// The arrow plane: the sink gets the export made as the batch was prepared (BatchPreparer: the
// records the declared columns cannot hold were sorted out there), lent to this write; the
// structs are released when the write is done unless the plugin moved them out.
void SinkInstance::start_arrow(const DecodedBatch& batch, WriteCall& call) {
  if (!batch.arrow_export || !batch.arrow_export->result.ok) {
    call.outcome.message = "the batch reached an Arrow-plane sink without its Arrow export";
    call.complete(PMQ_WRITE_FATAL);
    return;
  }
  arrow::lend_export(batch.arrow_export, &call.schema_, &call.array_);
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
