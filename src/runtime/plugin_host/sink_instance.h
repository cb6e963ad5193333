#pragma once
// One open instance of a sink plugin: the calls into it (serialised, as the ABI promises
// plugins), and the planes a batch goes out on (batch, Arrow, rows).
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "picomq/kit/plugin_options.hpp"
#include "picomq/sink_abi.h"
#include "runtime/decoded_batch.h"
#include "runtime/plugin_host/host_api.h"
#include "runtime/plugin_host/library.h"
#include "runtime/plugin_host/write_call.h"

namespace picomq::runtime {

// The plugin's own cross-option checks (ABI 2.2 validate(), pure) on options the option table
// accepted: empty when it has none or they pass, else its problems, one per line.
// `subscriptions`: the definition's [[topics]] blocks as JSON (subscriptions_json), empty when unknown.
std::string validate_with_plugin(const pmq_sink_plugin& descriptor, const std::string& sink_key,
                                 const kit::PluginOptions& options, const std::string& subscriptions = {});

// One open instance of a plugin, shared by the [[topics]] blocks of a sink. Calls are
// serialised, as the ABI promises plugins. Each batch goes out on the plugin's best native
// plane; a rows-only plugin gets one write_record() per record, and the first failure stops
// the batch (the records before it are written, `WriteOutcome::written` says how many).
class SinkInstance {
 public:
  // Validates `config_json` against the plugin's option table and its validate() first; `error`
  // lists every problem.
  static std::unique_ptr<SinkInstance> open(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                            const std::string& config_json, std::string& error);
  // Opens on options that passed both already (kit::PluginOptions::validate, then
  // validate_with_plugin): no check runs again. `error` is open()'s failure.
  static std::unique_ptr<SinkInstance> open_validated(std::shared_ptr<PluginLibrary> library, std::string sink_key,
                                                      kit::PluginOptions options, std::string& error,
                                                      std::string subscriptions = {});
  ~SinkInstance();
  // Starts writing `batch` (which must stay alive until `call` is done). On the arrow plane the
  // batch carries its Arrow export (DecodedBatch::arrow_export, made as it was prepared).
  void start(const DecodedBatch& batch, WriteCall& call);
  // start() and wait.
  WriteOutcome write(const DecodedBatch& batch);
  // How many writes per block may be pending at once (the plugin's max_in_flight, at least 1).
  uint32_t max_in_flight() const;
  // ABI 2.6: tells the instance the host is stopping it, now, beside a call in progress (not
  // serialised with the calls): its waits end and the writes in them complete as retries. A
  // no-op for an older plugin or once closed.
  void stop();
  void close();
  const std::string& sink_key() const { return sink_key_; }
  // The plane batches go out on: the one open() chose (ABI 2.5 set_plane), else the best native.
  uint32_t plane() const { return context_->plane ? context_->plane : library_->planes().best_plane; }
  // ABI 2.8: the change operations the sink applies (PMQ_CHANGE_OP_BIT bits).
  uint32_t change_ops() const { return runtime::change_ops(library_->descriptor()); }
  // False when the instance declared at open() that it never reads record headers.
  bool reads_headers() const { return (context_->unread_fields & PMQ_FIELD_HEADERS) == 0; }
  // ABI 2.2: asks the instance to complete every pending write (no-op for a plugin without flush).
  void flush(std::chrono::milliseconds timeout);
  // ABI 2.2 ownership notifications of one block (no-op without them or for an empty list).
  void notify_partitions(bool assigned, uint32_t block_index, const std::vector<TopicPartition>& partitions);
  // The instance's count() counters.
  std::map<std::string, uint64_t> counters() const;

 private:
  SinkInstance() = default;
  WriteOutcome write_rows(const pmq_batch& view);
  void start_arrow(const DecodedBatch& batch, WriteCall& call);
  template <class Write>
  void call_plugin(WriteCall& call, Write&& write);
  std::shared_ptr<PluginLibrary> library_;
  std::string sink_key_;
  std::unique_ptr<HostContext> context_;
  pmq_host_api host_{};
  void* instance_ = nullptr;
  std::mutex call_mutex_;
  std::mutex lifetime_mutex_;  // stop() against close(): never a stop into a closed instance
};

}  // namespace picomq::runtime
