#pragma once
// One write of one batch into a plugin, from the call until its outcome is known, and the
// outcome as the delivery window reads it.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"

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
  WriteOutcome outcome;  // read it after wait()

  // Host side: the final status of the write (checked for plugin bugs).
  void complete(pmq_write_status status);

  // ABI 2.3 release(), from any thread: the plugin reads the batch no more. Runs on_released.
  void request_release();
  std::function<void()> on_released;
  // Whether the plugin released the batch (before or after its outcome), and how many records
  // it had rejected by then (a batch with rejections is kept: its records go to the bad-record
  // policy).
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
};

// A plugin's answer, checked: unknown statuses and unnamed rejections are plugin bugs (FATAL).
void check_outcome(WriteOutcome& outcome);

}  // namespace picomq::runtime
