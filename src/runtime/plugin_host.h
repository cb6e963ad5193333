#pragma once
// Loads sink plugins (shared libraries) through the C ABI in picomq/sink_abi.h and calls them.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/plugin_options.hpp"
#include "picomq/sink_abi.h"
#include "runtime/decoded_batch.h"

namespace picomq::runtime {

struct WriteOutcome {
  pmq_write_status status = PMQ_WRITE_OK;
  std::string message;
  std::vector<std::pair<size_t, std::string>> rejections;  // record index in the batch, reason
  size_t written = 0;  // on failure: how many leading records are known written (rows plane)
};

std::string_view to_string(pmq_write_status status);

// One write of one batch, from the call until its outcome is known: at once for a plugin that
// returns a final status, later for one that returns PMQ_WRITE_PENDING and completes through
// the host API. Owns what must outlive the call (the Arrow export, the ABI views).
class WriteCall {
 public:
  WriteCall() = default;
  WriteCall(const WriteCall&) = delete;
  WriteCall& operator=(const WriteCall&) = delete;
  ~WriteCall();

  void wait();
  // Waits up to `timeout`; true when the outcome is known.
  bool wait_for(std::chrono::milliseconds timeout);
  bool done();
  // Called (from any thread) when this write's outcome is known.
  std::function<void()> on_done;
  // Set before start(). Records the Arrow export refuses end the batch there when false (the
  // `fail` bad-record policy: nothing past a bad record is of use); when true the plugin gets
  // every other record, as a batch-plane sink that rejects records writes the rest.
  bool write_past_rejections = false;
  WriteOutcome outcome;  // read it after wait()

  // Host side: the final status of the write (checked for plugin bugs).
  void complete(pmq_write_status status);

  // ABI 2.3 release(), from any thread: the plugin reads the batch no more. Runs on_released.
  void request_release();
  std::function<void()> on_released;
  // Whether the plugin released the batch (before or after its outcome), and how many records
  // it had rejected by then (a rejection after the release cannot be mapped to kept records).
  bool release_requested();
  size_t rejections_at_release();
  // The owner freed the batch the write was handed: the Arrow structs go too.
  void drop_batch();

 private:
  friend class SinkInstance;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  bool release_requested_ = false;
  size_t rejections_at_release_ = 0;
  pmq_batch view_{};
  ArrowSchema schema_{};
  ArrowArray array_{};
  std::vector<int64_t> offsets_;
  pmq_arrow_batch arrow_batch_{};
  pmq_write_result* result_ = nullptr;  // what the plugin reports through; owned, lives as long as the call
  // Records the Arrow export refused: the plugin got the records before the first of them, and
  // a successful write of those becomes REJECTED with these.
  std::vector<std::pair<size_t, std::string>> export_rejections_;
  // With write_past_rejections: the records exported (the batch minus the refused ones) and
  // their indices in the batch, to map the plugin's own rejections back.
  std::vector<pmq_record> kept_;
  std::vector<size_t> kept_index_;
};

// Where the runtime looks for plugins after the configured [plugins] path: the installed
// plugins beside the running executable, <its directory>/../lib/picomq-connect/plugins
// (/usr/bin/picomq-connect: /usr/lib/picomq-connect/plugins; any other prefix alike).
std::filesystem::path default_plugin_dir();

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
  // Starts writing `batch` (which must stay alive until `call` is done). `arrow` shapes the
  // Arrow batch when the plugin's best plane is arrow (declared columns of the batch's
  // [[topics]] block); the export runs before the call, outside the call lock.
  void start(const DecodedBatch& batch, const arrow::ExportOptions& arrow, WriteCall& call);
  // start() and wait.
  WriteOutcome write(const DecodedBatch& batch, const arrow::ExportOptions& arrow = {},
                     bool write_past_rejections = false);
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
  // False when the instance declared at open() that it never reads record headers.
  bool reads_headers() const { return (context_->unread_fields & PMQ_FIELD_HEADERS) == 0; }
  // ABI 2.2: asks the instance to complete every pending write (no-op for a plugin without flush).
  void flush(std::chrono::milliseconds timeout);
  // ABI 2.2 ownership notifications of one block (no-op without them or for an empty list).
  void notify_partitions(bool assigned, uint32_t block_index, const std::vector<TopicPartition>& partitions);
  // The instance's count() counters.
  std::map<std::string, uint64_t> counters() const;

  // What host_ctx points to: the instance's identity, its validated options, and what it
  // declared during open().
  struct HostContext {
    std::string sink_key;
    std::string subscriptions;  // ABI 2.7: the [[topics]] blocks as JSON; empty: not offered
    kit::PluginOptions options;
    bool opening = false;
    uint32_t unread_fields = 0;  // PMQ_FIELD_* bits
    uint32_t max_in_flight = 0;  // set_max_in_flight(); 0: the descriptor's
    uint32_t plane = 0;          // set_plane(); 0: the best native plane
    mutable std::mutex counters_mutex;
    std::map<std::string, uint64_t, std::less<>> counters;  // count(), any thread
  };

 private:
  SinkInstance() = default;
  WriteOutcome write_rows(const pmq_batch& view);
  void start_arrow(const DecodedBatch& batch, const arrow::ExportOptions& options, WriteCall& call);
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
