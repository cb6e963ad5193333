#include "runtime/plugin_host/write_call.h"

#include <spdlog/spdlog.h>

#include "runtime/plugin_host/host_api.h"  // pmq_write_result

namespace picomq::runtime {

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

}  // namespace picomq::runtime
