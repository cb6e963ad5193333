#pragma once
// Work to run later, on a thread of its own: a resend after a back-off or a Retry-After, a token
// refresh before it expires. A callback thread (the HTTP client's I/O thread) must never sleep;
// it hands the wait to a scheduler.
//
//   scheduler.after(backoff.next(), [=](bool run) {
//     if (run) client.send_async(request, on_response);
//     else pending.retry("closing before the resend");   // close() came first
//   });
//
// Every task runs exactly once: with run = true when its time comes, or with run = false from
// close() (at once, on close()'s thread), so a task that holds a write can always complete it.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace picomq::kit {

class Scheduler {
 public:
  using Task = std::function<void(bool run)>;
  Scheduler();
  ~Scheduler();  // close()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // After close(), the task runs at once with run = false.
  void after(std::chrono::milliseconds delay, Task task);
  // Cancels what waits (each task runs with run = false), then joins the thread. Idempotent.
  void close();
  size_t waiting() const;

 private:
  using Clock = std::chrono::steady_clock;
  void main();
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, Task> tasks_;
  bool closing_ = false;
  std::thread thread_;
};

}  // namespace picomq::kit
