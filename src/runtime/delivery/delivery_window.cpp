#include "runtime/delivery/delivery_window.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace picomq::runtime {

namespace {
std::string offsets_of(const DecodedBatch& batch) {
  return batch.tp.to_string() + " offsets " + std::to_string(batch.records.front().offset) + ".." +
         std::to_string(batch.records.back().offset);
}
}  // namespace

DeliveryWindow::DeliveryWindow(Settings settings, Dependencies deps)
    : settings_(std::move(settings)), deps_(deps), capacity_(std::max<size_t>(1, deps_.writer.max_in_flight())) {}

void DeliveryWindow::start(PreparedJob job) {
  auto entry = std::make_unique<Entry>();
  entry->job = std::move(job);
  entry->started = std::chrono::steady_clock::now();
  PreparedJob& j = entry->job;
  if (accepts(j) && !j.out.batch.records.empty()) {
    entry->call = std::make_unique<WriteCall>();
    entry->call->on_done = [&host = deps_.host] { host.write_done(); };
    entry->call->on_released = [this] {
      release_signals_.fetch_add(1);
      deps_.host.write_done();
    };
    deps_.writer.start(j.out.batch, *entry->call);
  }
  pending_.push_back(std::move(entry));
}

bool DeliveryWindow::oldest_done() const {
  const Entry& e = *pending_.front();
  return !e.call || e.call->done();
}

PreparedJob DeliveryWindow::finish_oldest() {
  std::unique_ptr<Entry> entry = std::move(pending_.front());
  pending_.pop_front();
  PreparedJob& job = entry->job;
  if (entry->call) entry->call->wait();
  if (failed_.count(job.tp)) {
    if (entry->call && entry->call->outcome.status == PMQ_WRITE_OK)
      spdlog::warn(
          "{}: a batch of {} completed after an earlier one failed; it is not committed and is written "
          "again on restart",
          settings_.log_prefix, job.tp.to_string());
    return std::move(job);
  }
  // A rewind reads these records again: whatever this write came to counts for nothing.
  if (stale(job)) return std::move(job);
  PreparedBatch& p = job.out;
  const auto refused_by_export = static_cast<uint64_t>(
      std::count_if(p.bad.begin(), p.bad.end(), [](const BadRecord& b) { return b.stage == BadRecordStage::Sink; }));
  if (entry->call) {
    std::vector<std::pair<int64_t, std::string>> rejected;
    const bool written =
        job.released ? finish_released(*entry) : retry_write(job, std::move(entry->call->outcome), rejected);
    deps_.host.counters().write_latency.observe(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entry->started));
    if (!written) return std::move(job);
    rewind_attempts_.erase(job.tp);
    if (!job.released) {
      // The sink wrote the rest; the refused records join the batch's bad records.
      for (auto& [offset, reason] : rejected)
        if (size_t index = job.records->index_of(offset); index < job.records->size())
          p.bad.push_back({index, BadRecordStage::Sink, std::move(reason)});
      std::sort(p.bad.begin(), p.bad.end(), [](const BadRecord& a, const BadRecord& b) { return a.index < b.index; });
      deps_.host.counters().delivered += p.batch.records.size() - rejected.size();
      deps_.host.written(p.batch, rejected);
      if (!rejected.empty()) deps_.host.counters().rejected += rejected.size();
    }
  }
  if (p.filtered) deps_.host.counters().filtered += p.filtered;
  // The records the Arrow export refused as the batch was prepared count as the sink's refusals.
  deps_.host.counters().rejected += refused_by_export;
  if (!p.bad.empty() && !route_bad_records(job)) return std::move(job);
  if (!job.records->empty() && p.commit_to > job.records->first_offset()) {
    deps_.offsets.store(job.tp, p.commit_to);
    if (const int64_t ts = job.records->at(0).timestamp_ms; ts > 0) {
      const auto now_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      deps_.host.counters().end_to_end_latency.observe(
          std::chrono::microseconds(std::max<int64_t>(0, now_ms - ts) * 1000));
    }
  }
  if (!p.failure.empty()) fail(job.tp, p.failure);
  return std::move(job);
}

DeliveryWindow::Freed DeliveryWindow::collect_released() {
  Freed freed;
  if (!release_waiting()) return freed;
  releases_seen_ = release_signals_.load();
  for (auto& e : pending_) {
    if (!e->call || e->release_checked || !e->call->release_requested()) continue;
    e->release_checked = true;
    PreparedJob& j = e->job;
    // Kept when some of its records go to the bad-record policy (their bytes are needed) or the
    // plugin rejected records before releasing: a failure then resends the batch as usual.
    if (!deps_.host.can_rewind() || !j.out.bad.empty() || e->call->rejections_at_release() > 0 || j.records->empty())
      continue;
    e->where = offsets_of(j.out.batch);
    e->batch_records = j.out.batch.records.size();
    freed.records += j.records->size();
    freed.bytes += j.bytes;
    e->call->drop_batch();
    DecodedBatch& b = j.out.batch;
    std::vector<pmq_record>().swap(b.records);
    std::vector<pmq_header>().swap(b.headers);
    std::deque<std::string>().swap(b.owned);
    b.arrow_export.reset();
    j.records = std::make_unique<ReleasedRecords>(*j.records);  // the broker's messages go
    j.bytes = 0;
    j.released = true;
  }
  return freed;
}

void DeliveryWindow::count_attempt(pmq_write_status status) {
  if (status >= 0 && status < static_cast<int>(deps_.host.counters().attempts.size()))
    deps_.host.counters().attempts[status].fetch_add(1, std::memory_order_relaxed);
}

bool DeliveryWindow::stale(const Job& job) const {
  const auto it = valid_generation_.find(job.tp);
  return it != valid_generation_.end() && job.generation < it->second;
}

bool DeliveryWindow::finish_released(Entry& entry) {
  PreparedJob& job = entry.job;
  const WriteOutcome& out = entry.call->outcome;
  count_attempt(out.status);
  if (out.status == PMQ_WRITE_OK) {
    deps_.host.counters().delivered += entry.batch_records;
    return true;
  }
  std::string reason = std::string(to_string(out.status)) + (out.message.empty() ? "" : ": " + out.message);
  if (out.status == PMQ_WRITE_REJECTED) reason = "the sink rejected records after releasing the batch (" + reason + ")";
  if (out.status == PMQ_WRITE_FATAL) {
    fail(job.tp, "write of " + entry.where + " failed permanently: " + reason);
    return false;
  }
  const int attempt = ++rewind_attempts_[job.tp];
  if (settings_.retry.max_attempts > 0 && attempt >= settings_.retry.max_attempts) {
    fail(job.tp, "write of " + entry.where + " failed " + std::to_string(attempt) + " times; last error: " + reason);
    return false;
  }
  // Every write of the partition under way from here on is stale, whatever its outcome.
  const uint64_t next = job.generation + 1;
  valid_generation_[job.tp] = std::max(valid_generation_[job.tp], next);
  const auto delay = settings_.retry.delay_before(attempt + 1);
  const int64_t from = job.records->first_offset();
  spdlog::warn(
      "{}: write of {} failed (attempt {}/{}): {}; the sink had released the batch, so its records are "
      "read again from offset {} in {} ms",
      settings_.log_prefix, entry.where, attempt, settings_.retry.max_attempts, reason, from, delay.count());
  if (!deps_.host.waiter().wait(delay)) {
    failed_.insert(job.tp);
    spdlog::warn(
        "{}: stopping while the write of {} waits to be read again: it stays uncommitted and is delivered "
        "again on restart",
        settings_.log_prefix, entry.where);
    return false;
  }
  deps_.host.rewind(job.tp, from, next);
  return false;
}

// The spec's rule: the same batch up to max_attempts times with a doubling back-off; a
// permanent failure or rejected records end it at once.
bool DeliveryWindow::retry_write(PreparedJob& job, WriteOutcome first,
                                 std::vector<std::pair<int64_t, std::string>>& rejected) {
  DecodedBatch& batch = job.out.batch;
  const std::string where = offsets_of(batch);
  const bool fail_policy = settings_.on_bad_record == config::BadRecordPolicy::Fail;
  std::string reason, error;
  size_t written_prefix = 0;  // with rejections: leading records known written
  const RetryEnd end = run_with_retries(
      settings_.retry, deps_.host.waiter(),
      [&](int attempt) {
        WriteOutcome out;
        if (attempt == 1) {
          out = std::move(first);
        } else {
          auto call = std::make_unique<WriteCall>();
          deps_.writer.start(batch, *call);
          if (!call->wait_for(settings_.seal_retry_after)) {
            deps_.writer.flush();
            call->wait();
          }
          out = std::move(call->outcome);
        }
        count_attempt(out.status);
        if (out.status == PMQ_WRITE_OK) return Attempt::Done;
        if (out.status == PMQ_WRITE_REJECTED) {
          const auto first_rejected = *std::min_element(out.rejections.begin(), out.rejections.end());
          const size_t index = first_rejected.first;
          written_prefix = std::min(index, batch.records.size());
          for (const auto& [i, why] : out.rejections)
            if (i < batch.records.size()) rejected.emplace_back(batch.records[i].offset, why);
          error = "the sink rejected record " + batch.tp.to_string() + " at offset " +
                  (index < batch.records.size() ? std::to_string(batch.records[index].offset) : "?") + ": " +
                  first_rejected.second +
                  (out.rejections.size() > 1 ? " (and " + std::to_string(out.rejections.size() - 1) + " more)" : "");
          return Attempt::GiveUp;
        }
        if (out.written > 0 && out.written < batch.records.size()) {
          // Rows plane: the records before the failed one are written; commit them, retry the rest.
          deps_.offsets.store(batch.tp, batch.records[out.written - 1].offset + 1);
          deps_.host.counters().delivered += out.written;
          batch.records.erase(batch.records.begin(), batch.records.begin() + static_cast<std::ptrdiff_t>(out.written));
        }
        reason = std::string(to_string(out.status)) + (out.message.empty() ? "" : ": " + out.message);
        if (out.status == PMQ_WRITE_FATAL) {
          error = "write of " + where + " failed permanently: " + reason;
          return Attempt::GiveUp;
        }
        return Attempt::Retry;
      },
      [&](int attempt, std::chrono::milliseconds delay) {
        spdlog::warn("{}: write of {} failed (attempt {}/{}): {}; retrying in {} ms", settings_.log_prefix, where,
                     attempt, settings_.retry.max_attempts, reason, delay.count());
      });
  if (end.done()) {
    if (end.attempts > 1) spdlog::info("{}: batch {} written on attempt {}", settings_.log_prefix, where, end.attempts);
    return true;
  }
  if (end.stopped) {
    // Stopping: the batch stays uncommitted and is the first delivered on restart; nothing
    // later of this partition may be committed before it.
    failed_.insert(job.tp);
    spdlog::warn(
        "{}: stopping while the write of {} waits for a retry: it stays uncommitted and is delivered "
        "again on restart",
        settings_.log_prefix, where);
    return false;
  }
  if (!rejected.empty() && !fail_policy) return true;
  if (end.exhausted(settings_.retry))
    error = "write of " + where + " failed " + std::to_string(end.attempts) + " times; last error: " + reason;
  if (settings_.dead_letter_write_failures && end.exhausted(settings_.retry) && rejected.empty()) {
    // The batch's records (those not known written) go to the dead-letter topic as refused by
    // the sink; the partition goes on after them.
    spdlog::warn("{}: {}: its {} record(s) go to the dead-letter topic (on_write_failure = \"dead_letter\")",
                 settings_.log_prefix, error, batch.records.size());
    const std::string why = "write failed " + std::to_string(end.attempts) + " times; last error: " + reason;
    for (const auto& r : batch.records) rejected.emplace_back(r.offset, why);
    return true;
  }
  if (written_prefix > 0) deps_.offsets.store(batch.tp, batch.records[written_prefix - 1].offset + 1);
  fail(job.tp, error);
  return false;
}

std::string DeliveryWindow::describe(const PreparedJob& job, const BadRecord& b) const {
  return job.tp.to_string() + " at offset " + std::to_string(job.records->at(b.index).offset) + " (" +
         std::string(to_string(b.stage)) + ")";
}

// Skips or dead-letters the job's bad records. False when the dead-letter write failed: the
// offset is then left at the first of them (the block fails, or is stopping).
bool DeliveryWindow::route_bad_records(PreparedJob& job) {
  const auto& bad = job.out.bad;
  if (settings_.on_bad_record == config::BadRecordPolicy::Skip) {
    for (const auto& b : bad)
      spdlog::warn("{}: skipped bad record {}: {}", settings_.log_prefix, describe(job, b), b.reason);
    deps_.host.counters().skipped += bad.size();
    return true;
  }
  std::string error;
  DeadLetters* letters = deps_.host.dead_letters(error);
  RetryEnd end;
  if (letters) {
    end = run_with_retries(
        settings_.retry, deps_.host.waiter(),
        [&](int) { return letters->send(job, bad, error) ? Attempt::Done : Attempt::Retry; },
        [&](int attempt, std::chrono::milliseconds delay) {
          spdlog::warn("{}: {} (attempt {}/{}); retrying in {} ms", settings_.log_prefix, error, attempt,
                       settings_.retry.max_attempts, delay.count());
        });
    if (end.done()) {
      for (const auto& b : bad)
        spdlog::warn("{}: bad record {} produced to dead-letter topic '{}'; reason: {}", settings_.log_prefix,
                     describe(job, b), letters->topic(), b.reason);
      deps_.host.counters().dead_lettered += bad.size();
      return true;
    }
  }
  // Everything before the first bad record is written; nothing from it on may be committed.
  const int64_t first_bad = job.records->at(bad.front().index).offset;
  if (first_bad > job.records->first_offset()) deps_.offsets.store(job.tp, first_bad);
  if (end.stopped) {
    failed_.insert(job.tp);
    spdlog::warn("{}: stopping while the dead-letter write of {} waits for a retry: it is read again on restart",
                 settings_.log_prefix, describe(job, bad.front()));
  } else {
    fail(job.tp, error);
  }
  return false;
}

void DeliveryWindow::fail(const TopicPartition& tp, const std::string& message) {
  failed_.insert(tp);
  deps_.host.partition_failed(tp, message);
}

}  // namespace picomq::runtime
