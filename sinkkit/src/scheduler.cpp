#include "picomq/kit/scheduler.hpp"

#include <vector>

namespace picomq::kit {

Scheduler::Scheduler() : thread_([this] { main(); }) {}

Scheduler::~Scheduler() { close(); }

void Scheduler::after(std::chrono::milliseconds delay, Task task) {
  {
    std::lock_guard lock(mutex_);
    if (!closing_) {
      tasks_.emplace(Clock::now() + delay, std::move(task));
      wake_.notify_all();
      return;
    }
  }
  task(false);
}

void Scheduler::close() {
  std::multimap<Clock::time_point, Task> cancelled;
  {
    std::lock_guard lock(mutex_);
    if (closing_ && !thread_.joinable()) return;
    closing_ = true;
    cancelled.swap(tasks_);
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  for (auto& [when, task] : cancelled) task(false);
}

size_t Scheduler::waiting() const {
  std::lock_guard lock(mutex_);
  return tasks_.size();
}

void Scheduler::main() {
  std::unique_lock lock(mutex_);
  while (!closing_) {
    if (tasks_.empty()) {
      wake_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
      continue;
    }
    const auto due = tasks_.begin()->first;
    if (Clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    Task task = std::move(tasks_.begin()->second);
    tasks_.erase(tasks_.begin());
    lock.unlock();
    task(true);  // outside the lock: a task may schedule another
    lock.lock();
  }
}

}  // namespace picomq::kit
