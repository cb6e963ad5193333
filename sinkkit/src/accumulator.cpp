#include "picomq/kit/accumulator.hpp"

#include <algorithm>
#include <exception>

namespace picomq::kit {
namespace {

// A segment's failure as the writes get it: the SDK outcome of the exception, and its message.
struct Failure {
  enum class Kind { Retry, Partial, Fatal } kind = Kind::Partial;
  std::string message;
};

Failure failure_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const sdk::RetryableError& e) {
    return {Failure::Kind::Retry, e.what()};
  } catch (const sdk::FatalError& e) {
    return {Failure::Kind::Fatal, e.what()};
  } catch (const std::exception& e) {  // PartialWriteError and anything unknown: maybe written
    return {Failure::Kind::Partial, e.what()};
  } catch (...) {
    return {Failure::Kind::Partial, "the segment threw a non-standard exception"};
  }
}

void fail_writes(std::vector<sdk::Pending>& writes, const Failure& f) {
  for (auto& w : writes) {
    switch (f.kind) {
      case Failure::Kind::Retry: w.retry(f.message); break;
      case Failure::Kind::Fatal: w.fatal(f.message); break;
      case Failure::Kind::Partial: w.partial(f.message); break;
    }
  }
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from);
}

}  // namespace

Accumulator::Accumulator(AccumulatorLimits limits, std::function<void(const CommitReport&)> on_commit)
    : limits_(limits), on_commit_(std::move(on_commit)) {
  limits_.max_open = std::max<size_t>(limits_.max_open, 1);
  limits_.max_batches = std::max<size_t>(limits_.max_batches, 1);
  timer_ = std::thread([this] { timer_main(); });
  limits_.committers = std::max<size_t>(limits_.committers, 1);
  if (limits_.background_commits)
    for (size_t i = 0; i < limits_.committers; ++i) committers_.emplace_back([this] { committer_main(); });
}

Accumulator::~Accumulator() { close(); }

bool Accumulator::full(const Entry& e) const {
  return e.writes.size() >= limits_.max_batches || (limits_.max_records && e.size.records >= limits_.max_records) ||
         (limits_.max_bytes && e.size.bytes >= limits_.max_bytes) || limits_.commit_interval.count() <= 0;
}

std::shared_ptr<Accumulator::Entry> Accumulator::take(const std::string& key) {
  auto it = open_.find(key);
  if (it == open_.end()) return nullptr;
  auto entry = std::move(it->second);
  open_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), key));
  return entry;
}

void Accumulator::append(const std::string& key, sdk::Pending write, AppendSize size, const Opener& open,
                         const Filler& fill) {
  for (;;) {
    std::shared_ptr<Entry> entry;
    std::vector<std::shared_ptr<Entry>> evicted;
    {
      std::lock_guard lock(mutex_);
      if (closing_) {
        write.fatal("the sink is closing: no batch can be accumulated");
        return;
      }
      if (auto it = open_.find(key); it != open_.end()) {
        entry = it->second;
      } else {
        while (open_.size() >= limits_.max_open) evicted.push_back(take(order_.front()));
        entry = std::make_shared<Entry>();
        entry->key = key;
        entry->opened = entry->last_append = Clock::now();
        open_.emplace(key, entry);
        order_.push_back(key);
      }
    }
    for (auto& e : evicted) commit_sealed(std::move(e), "max_open");

    bool now_full = false, wake_timer = false;
    {
      std::lock_guard fill_lock(entry->mutex);
      if (entry->done) continue;  // committed between the lookup and here: append to a new one
      if (!entry->segment) {
        try {
          entry->segment = open();
        } catch (...) {
          entry->done = true;
          {
            std::lock_guard lock(mutex_);
            if (auto it = open_.find(key); it != open_.end() && it->second == entry) take(key);
          }
          std::vector<sdk::Pending> one{write};
          fail_writes(one, failure_of(std::current_exception()));
          return;
        }
      }
      try {
        fill(*entry->segment);
      } catch (...) {
        // The segment cannot commit any more (its transaction or stream broke): this write fails
        // with the thrown outcome, the earlier ones are retried.
        entry->done = true;
        {
          std::lock_guard lock(mutex_);
          if (auto it = open_.find(key); it != open_.end() && it->second == entry) take(key);
        }
        entry->segment->abandon();
        const Failure failure = failure_of(std::current_exception());
        if (on_commit_)
          on_commit_(CommitReport{key, entry->writes.size(), entry->size.records, entry->size.bytes,
                                  since(entry->opened, Clock::now()), std::chrono::milliseconds(0), "append failed",
                                  false, failure.message});
        std::vector<sdk::Pending> one{write};
        fail_writes(one, failure);
        for (auto& w : entry->writes) w.retry("the segment it was in broke: " + failure.message);
        entry->writes.clear();
        return;
      }
      entry->writes.push_back(std::move(write));
      entry->size.bytes += size.bytes;
      entry->size.records += size.records;
      entry->last_append = Clock::now();
      now_full = full(*entry);
      // The segment has deadlines now. The timer needs to hear of them only when they come
      // before the one it sleeps towards: a later deadline it finds when it wakes anyway.
      if (entry->writes.size() == 1 && !now_full) {
        const auto deadline = std::min(entry->opened + limits_.commit_interval, entry->last_append + limits_.idle);
        std::lock_guard lock(mutex_);
        if (deadline < timer_deadline_) {
          ++changes_;
          wake_timer = true;
        }
      }
    }
    if (wake_timer) wake_.notify_all();
    if (now_full) {
      std::shared_ptr<Entry> sealed;
      {
        std::lock_guard lock(mutex_);
        // Only the segment this batch filled (a timer or another writer may have sealed it).
        if (auto it = open_.find(key); it != open_.end() && it->second == entry) sealed = take(key);
      }
      if (sealed)
        commit_sealed(std::move(sealed), limits_.commit_interval.count() <= 0 ? "commit_interval 0" : "limit");
    }
    return;
  }
}

void Accumulator::seal(const std::string& key, std::string_view trigger) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mutex_);
    entry = take(key);
  }
  if (entry) commit(entry, trigger);
}

void Accumulator::flush(std::string_view trigger) {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard lock(mutex_);
    while (!order_.empty()) all.push_back(take(order_.front()));
  }
  for (auto& e : all) commit(e, trigger);
  // Those handed to the committers before now; not the ones writers go on sealing meanwhile, or
  // a flush under load might wait for ever.
  std::unique_lock lock(mutex_);
  const uint64_t upto = handed_off_;
  sealed_done_.wait(lock, [&] { return unfinished_.empty() || *unfinished_.begin() > upto; });
}

void Accumulator::seal_all(std::string_view trigger) {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard lock(mutex_);
    while (!order_.empty()) all.push_back(take(order_.front()));
  }
  for (auto& e : all) commit_sealed(std::move(e), trigger);
}

void Accumulator::commit_sealed(std::shared_ptr<Entry> entry, std::string_view trigger) {
  if (limits_.background_commits) {
    std::unique_lock lock(mutex_);
    if (!committer_stopped_) {
      entry->handoff = ++handed_off_;
      unfinished_.insert(entry->handoff);
      sealed_.emplace_back(std::move(entry), std::string(trigger));
      lock.unlock();
      sealed_wake_.notify_one();
      return;
    }
  }
  commit(entry, trigger);
}

std::deque<std::pair<std::shared_ptr<Accumulator::Entry>, std::string>>::iterator Accumulator::next_ready() {
  if (!limits_.ordered_per_key) return sealed_.begin();
  // The oldest of a key that no committer holds is also the oldest sealed segment of its key.
  return std::find_if(sealed_.begin(), sealed_.end(),
                      [&](const auto& s) { return !committing_keys_.contains(s.first->key); });
}

// background_commits: one committer thread; each takes the oldest sealed segment it may commit.
void Accumulator::committer_main() {
  std::unique_lock lock(mutex_);
  for (;;) {
    auto ready = sealed_.end();
    sealed_wake_.wait(lock, [&] {
      ready = next_ready();
      return ready != sealed_.end() || (committer_stopped_ && sealed_.empty());
    });
    if (ready == sealed_.end()) return;  // stopped, and nothing left
    auto [entry, trigger] = std::move(*ready);
    sealed_.erase(ready);
    const uint64_t handoff = entry->handoff;
    const std::string key = entry->key;
    if (limits_.ordered_per_key) committing_keys_.insert(key);
    lock.unlock();
    commit(entry, trigger);
    entry.reset();
    lock.lock();
    if (limits_.ordered_per_key) committing_keys_.erase(key);
    unfinished_.erase(handoff);
    sealed_done_.notify_all();
    if (limits_.committers > 1) sealed_wake_.notify_all();  // a segment of `key` may be waiting
  }
}

void Accumulator::abandon_all(const std::string& reason) {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard lock(mutex_);
    while (!order_.empty()) all.push_back(take(order_.front()));
  }
  for (auto& e : all) abandon(e, reason);
}

void Accumulator::commit(const std::shared_ptr<Entry>& entry, std::string_view trigger) {
  std::lock_guard fill_lock(entry->mutex);
  if (entry->done) return;
  entry->done = true;
  if (!entry->segment) return;  // its open() failed: nothing in it
  const auto started = Clock::now();
  CommitReport report{entry->key,
                      entry->writes.size(),
                      entry->size.records,
                      entry->size.bytes,
                      since(entry->opened, started),
                      {},
                      std::string(trigger),
                      true,
                      {}};
  std::exception_ptr error;
  try {
    entry->segment->commit();
  } catch (...) {
    error = std::current_exception();
    report.ok = false;
    entry->segment->abandon();
  }
  report.took = since(started, Clock::now());
  std::vector<sdk::Pending> writes = std::move(entry->writes);
  entry->writes.clear();
  entry->segment.reset();
  Failure failure;
  if (error) report.error = (failure = failure_of(error)).message;
  // The report goes out before the writes complete, so whoever sees a write completed also sees
  // the commit that completed it counted.
  if (on_commit_) on_commit_(report);
  if (error) fail_writes(writes, failure);
  else
    for (auto& w : writes) w.done();
}

void Accumulator::abandon(const std::shared_ptr<Entry>& entry, const std::string& reason) {
  std::lock_guard fill_lock(entry->mutex);
  if (entry->done) return;
  entry->done = true;
  if (entry->segment) entry->segment->abandon();
  for (auto& w : entry->writes) w.retry(reason);
  entry->writes.clear();
  entry->segment.reset();
}

void Accumulator::close() {
  {
    std::lock_guard lock(mutex_);
    if (closing_) return;
    closing_ = true;
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
  flush("close");
  {
    std::lock_guard lock(mutex_);
    committer_stopped_ = true;
  }
  sealed_wake_.notify_all();
  for (auto& t : committers_)
    if (t.joinable()) t.join();
}

void Accumulator::begin_preparing() {
  std::lock_guard lock(mutex_);
  ++preparing_;
}

void Accumulator::end_preparing() {
  {
    std::lock_guard lock(mutex_);
    if (--preparing_ > 0) return;
    ++changes_;  // the idle deadlines it held back count again
  }
  wake_.notify_all();
}

size_t Accumulator::open_segments() const {
  std::lock_guard lock(mutex_);
  return open_.size();
}

// Commits segments whose commit_interval or idle time is up. The deadlines are read under the
// segment's own lock, never held together with mutex_ in the other order (append takes mutex_,
// releases it, then the segment's lock).
void Accumulator::timer_main() {
  std::unique_lock lock(mutex_);
  while (!closing_) {
    timer_deadline_ = Clock::time_point::max();  // while it looks, every new segment counts
    std::vector<std::shared_ptr<Entry>> entries;
    for (const auto& key : order_) entries.push_back(open_.at(key));
    const uint64_t seen = changes_;
    const bool batch_on_its_way = preparing_ > 0;  // no idle commits (end_preparing() wakes us)
    lock.unlock();
    const auto now = Clock::now();
    auto next = now + std::chrono::hours(1);
    std::vector<std::pair<std::shared_ptr<Entry>, const char*>> due;
    for (const auto& e : entries) {
      std::lock_guard fill_lock(e->mutex);
      if (e->done || e->writes.empty()) continue;  // being opened: no deadline before its first batch
      const auto interval_due = e->opened + limits_.commit_interval;
      const auto idle_due = batch_on_its_way ? Clock::time_point::max() : e->last_append + limits_.idle;
      const auto when = std::min(interval_due, idle_due);
      if (when <= now) due.emplace_back(e, interval_due <= idle_due ? "commit_interval" : "idle");
      else next = std::min(next, when);
    }
    for (auto& [e, trigger] : due) {
      {
        std::lock_guard map_lock(mutex_);
        auto it = open_.find(e->key);
        if (it == open_.end() || it->second != e) continue;  // sealed meanwhile
        take(e->key);
      }
      commit_sealed(std::move(e), trigger);
    }
    lock.lock();
    if (!due.empty()) continue;  // look again: new segments may have come during the commits
    timer_deadline_ = next;
    wake_.wait_until(lock, next, [&] { return closing_ || changes_ != seen; });
  }
}

}  // namespace picomq::kit
