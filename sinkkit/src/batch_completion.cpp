#include "picomq/kit/batch_completion.hpp"

namespace picomq::kit {

void BatchCompletion::add(size_t requests) {
  std::lock_guard lock(mutex_);
  outstanding_ += requests;
}

void BatchCompletion::reject(size_t record_index, std::string reason) {
  std::lock_guard lock(mutex_);
  rejected_.emplace_back(record_index, std::move(reason));
}

void BatchCompletion::written() {
  std::lock_guard lock(mutex_);
  written_ = true;
}

void BatchCompletion::fail(const Classification& c) {
  if (c.outcome == Outcome::Written || c.outcome == Outcome::Rejected || c.outcome == Outcome::TooLarge) return;
  std::lock_guard lock(mutex_);
  if (!failed_ || (c.outcome == Outcome::Fatal && failed_->outcome != Outcome::Fatal)) failed_ = c;
}

size_t BatchCompletion::rejected() const {
  std::lock_guard lock(mutex_);
  return rejected_.size();
}

bool BatchCompletion::finish_one() {
  {
    std::lock_guard lock(mutex_);
    if (outstanding_ == 0 || --outstanding_ > 0) return false;
  }
  // The last request: nothing else touches the state now.
  if (failed_) {
    const Classification& c = *failed_;
    if (c.outcome == Outcome::Fatal) pending_.fatal(c.reason);
    else if (written_ || c.outcome == Outcome::MaybeWritten) pending_.partial(c.reason);
    else pending_.retry(c.reason);
    return true;
  }
  if (on_success_) on_success_(rejected_.size());
  for (const auto& [index, reason] : rejected_) pending_.reject(index, reason);
  pending_.done();
  return true;
}

}  // namespace picomq::kit
