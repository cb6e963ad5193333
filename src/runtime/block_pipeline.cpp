// One [[topics]] block at run time (block_pipeline.h): its consumer thread and its delivery thread.
// Past the ~350 lines of the runtime's other files because the two threads share one lock, one
// buffer bound and one stop sequence: split apart, each half would have to explain the other.
#include "runtime/block_pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/tap.h"

namespace picomq::runtime {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t kPollBatch = 4096;
constexpr milliseconds kMaxPollWait{50};
constexpr milliseconds kCommitFollowUpWait{2};
constexpr milliseconds kStatusEvery{1000};
constexpr size_t kPrepareAheadQueue = 2;  // jobs waiting for the delivery thread before the consumer decodes
// Jobs waiting for the delivery thread before the consumer waits (wait_while_sink_behind).
constexpr size_t kJobsAhead = 2;
// Batches' worth of records read and not yet written beyond which a new batch is copied out of
// librdkafka's messages (enqueue): a sink that keeps up holds fewer (the bucket, kJobsAhead, its
// writes in flight).
constexpr size_t kCopyBeyondBatches = 8;

kafka::ConsumerSettings consumer_settings(const BlockSettings& s, std::string group_id) {
  kafka::ConsumerSettings c;
  c.sink_key = s.sink_key;
  c.block_index = s.block_index;
  c.group_id = std::move(group_id);
  c.bootstrap_servers = s.bootstrap_servers;
  c.client_properties = s.client_properties;
  // Unique per group: each block has a group of its own, so the group name makes it so.
  if (s.group_instance_id)
    c.client_properties.emplace_back("group.instance.id", *s.group_instance_id + "-" + c.group_id);
  c.static_membership = s.group_instance_id.has_value();
  c.group_protocol = s.group_protocol;
  c.block_properties = s.block.properties;
  c.auto_offset_reset = s.block.auto_offset_reset;
  c.topics = s.block.topics;
  c.pattern = s.block.pattern;
  c.anchored_pattern = s.block.anchored_pattern;
  c.pattern_refresh = s.pattern_refresh;
  c.close_timeout = std::min(s.shutdown_timeout, milliseconds(10000));
  // Within the block's memory bound: a quarter of it at most (the rest is for the sink's batches).
  c.read_ahead_bytes = std::min(c.read_ahead_bytes, s.max_buffered_bytes / 4);
  return c;
}

std::string block_log_prefix(const BlockSettings& s) {
  return "sink '" + s.sink_key + "' topics[" + std::to_string(s.block_index) + "]";
}

}  // namespace

BlockPipeline::BlockPipeline(BlockSettings settings, SinkInstance& sink, StatusBoard& status, ErrorCallback on_error)
    : settings_(std::move(settings)),
      sink_(sink),
      status_(status),
      on_error_(std::move(on_error)),
      group_id_(settings_.block.group_id(settings_.sink_key)),
      log_prefix_(block_log_prefix(settings_)),
      client_(consumer_settings(settings_, group_id_), log_prefix_, *this),
      committer_(client_, log_prefix_, settings_.block.offset_commit_interval) {
  client_.set_commit_listener(&committer_);
  buckets_ = std::make_unique<Bucketer<kafka::MessagePtr>>(settings_.block.batch_length, settings_.block.poll_interval);
  if (!settings_.transforms.empty()) transforms_ = std::make_unique<const transform::Chain>(settings_.transforms);
  const auto decoders =
      decoders::make_decoder_factory(settings_.block);  // schema compiled once, shared by both threads
  arrow_options_ = arrow_export_options(settings_.block);
  // An arrow-plane sink's batches are exported as they are prepared: the export, the costliest
  // step of that plane, is then shared between the two threads like decoding.
  PreparationStage::Settings prep;
  prep.preparer = {settings_.block.schema, settings_.block.on_bad_record, static_cast<uint32_t>(settings_.block_index),
                   sink_.plane() == PMQ_PLANE_ARROW ? &arrow_options_ : nullptr};
  prep.preparer.changes = settings_.block.changes;
  prep.preparer.key_fields = settings_.block.key_fields;
  prep.preparer.change_ops = sink_.change_ops();
  prep.preparer.tap = settings_.tap;
  prep.reads_headers = sink_.reads_headers();
  prep.log_prefix = log_prefix_;
  const auto key_decoders =
      settings_.block.key_schema ? decoders::make_decoder_factory(*settings_.block.key_schema) : nullptr;
  preparation_ =
      std::make_unique<PreparationStage>(std::move(prep), *decoders, key_decoders.get(), transforms_.get(), waiter_);
}

BlockPipeline::~BlockPipeline() {
  if (consumer_thread_.joinable()) consumer_thread_.join();
  if (delivery_thread_.joinable()) {
    if (abandoned_) delivery_thread_.detach();
    else delivery_thread_.join();
  }
}

void BlockPipeline::start() {
  delivery_thread_ = std::thread([this] { delivery_main(); });
  consumer_thread_ = std::thread([this] { consumer_main(); });
}

void BlockPipeline::request_stop() {
  stop_requested_ = true;
  waiter_.request_stop();
}

bool BlockPipeline::join() {
  {
    std::unique_lock lock(join_mutex_);
    join_cv_.wait(lock, [&] { return consumer_finished_; });
  }
  if (consumer_thread_.joinable()) consumer_thread_.join();
  return !abandoned_;
}

// ---------------------------------------------------------------- consumer thread

void BlockPipeline::consumer_main() {
  const auto keep_waiting = [this] {
    publish_status();  // the block shows the broker as unreachable meanwhile
    return !stop_requested_.load();
  };
  if (auto error = client_.create(keep_waiting); !error.empty()) {
    fail(error);
    std::lock_guard lock(mutex_);
    delivery_stop_ = true;
    work_cv_.notify_all();
  } else {
    client_.refresh_subscription(true);
    publish_status();
    auto next_status = Clock::now() + kStatusEvery;
    while (!stop_requested_ && !failed_) {
      poll_once();
      if (Clock::now() >= next_status) {
        if (auto refused = client_.refusal(); !refused.empty()) fail(refused);
        client_.check_broker(kStatusEvery);
        publish_status();
        next_status = Clock::now() + kStatusEvery;
      }
    }
    shutdown_path();
  }
  {
    std::lock_guard lock(join_mutex_);
    consumer_finished_ = true;
  }
  join_cv_.notify_all();
}

void BlockPipeline::poll_once() {
  if (operator_paused_.load() != operator_pause_applied_) {
    operator_pause_applied_ = !operator_pause_applied_;
    spdlog::info("{}: {} by the operator", log_prefix_, operator_pause_applied_ ? "paused" : "resumed");
    client_.set_paused(paused_ || operator_pause_applied_);
    publish_status();
  }
  client_.refresh_subscription(false);
  committer_.commit_stored(Clock::now(), [this] { return caught_up(); });
  take_rewinds();
  const bool paused = apply_backpressure();
  if (!paused) wait_while_sink_behind();

  auto wait = paused ? milliseconds(0) : poll_wait();
  // Offsets wait behind a commit in flight, whose completion does not wake the poll, or for the
  // commit interval: look again when they may go, so they go out (and a stopped producer's last
  // records are committed) then rather than at the end of a full poll wait.
  if (const auto again = committer_.look_again_in(Clock::now(), kCommitFollowUpWait)) wait = std::min(wait, *again);
  // Never take more than the buffer has room for, so the record limit holds exactly (while
  // paused the one slot can only carry a group event: every assigned partition is paused).
  const size_t buffered = buffered_records_.load();
  const size_t room = buffered < settings_.max_buffered_records ? settings_.max_buffered_records - buffered : 0;
  std::vector<kafka::MessagePtr> polled;
  polled.reserve(std::clamp<size_t>(room, 1, kPollBatch));
  client_.poll(wait, std::clamp<size_t>(room, 1, kPollBatch), polled);
  const auto now = Clock::now();
  // A poll returns runs of records from one partition: bucket each run at once, and account
  // for the whole poll in one update of the shared counters.
  size_t polled_bytes = 0;
  std::vector<kafka::MessagePtr> run;
  rd_kafka_topic_t* run_topic = nullptr;
  int32_t run_partition = -1;
  auto bucket_run = [&] {
    if (run.empty()) return;
    buckets_->add(TopicPartition{rd_kafka_topic_name(run_topic), run_partition}, std::move(run), now);
    run.clear();
  };
  for (auto& m : polled) {
    if (m->rkt != run_topic || m->partition != run_partition) {
      bucket_run();
      run_topic = m->rkt;
      run_partition = m->partition;
    }
    polled_bytes += kafka::message_bytes(m.get());
    run.push_back(std::move(m));
  }
  bucket_run();
  buffered_records_ += polled.size();
  buffered_bytes_ += polled_bytes;
  consumed_records_ += polled.size();
  consumed_bytes_ += polled_bytes;
  flush_due(Clock::now());
}

void BlockPipeline::flush_due(Clock::time_point now) {
  for (auto& ready : buckets_->take_ready(now)) enqueue(std::move(ready.tp), std::move(ready.records));
}

// Preparing a batch is done by whichever thread has time: the consumer thread does it here
// while the delivery thread has work queued (the sink is the bottleneck), otherwise the delivery
// thread does it as it takes the job (the consumer is the bottleneck). Each job is prepared
// exactly once, by the thread that owns it at that moment.
void BlockPipeline::enqueue(TopicPartition tp, std::vector<kafka::MessagePtr> messages) {
  QueuedJob queued;
  Job& job = queued.job;
  job.tp = std::move(tp);
  for (const auto& m : messages) job.bytes += kafka::message_bytes(m.get());
  // A batch that will wait behind others (the sink is the bottleneck: it holds up to the buffer's
  // bound) is copied out of librdkafka's messages, which cost ~300 B a record beside the bytes
  // while held; one that is written at once is not (kafka/kafka_records.h).
  job.records = std::make_unique<kafka::KafkaRecords>(std::move(messages));
  if (buffered_records_.load() > kCopyBeyondBatches * settings_.block.batch_length)
    job.records = std::make_unique<kafka::CopiedRecords>(*job.records);  // the messages go with the old one
  if (const auto g = generation_.find(job.tp); g != generation_.end()) job.generation = g->second;
  size_t waiting;
  {
    std::lock_guard lock(mutex_);
    waiting = jobs_.size();
  }
  if (waiting >= kPrepareAheadQueue) preparation_->prepare_ahead(queued);
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(queued));
  }
  work_cv_.notify_one();
}

// What sits between broker and sink is bounded. The consumer drains librdkafka eagerly and,
// the moment the buffer is full, pauses its partitions; it resumes them below half. Pausing at
// once (rather than just not polling) matters: librdkafka 2.0 re-checks a fetch queue that went
// over queued.min.messages only on its 1 s broker tick, so a consumer that merely stops polling
// loses up to a second per stall, while a pause/resume is an op that wakes the fetcher at once.
// Since the queue was drained, a pause throws away at most the fetch responses in flight.
// Returns true while paused: the loop then polls only to serve group events.
bool BlockPipeline::apply_backpressure() {
  const size_t records = buffered_records_.load(), bytes = buffered_bytes_.load();
  const bool over = records >= settings_.max_buffered_records || bytes >= settings_.max_buffered_bytes;
  const bool under_half = records < settings_.max_buffered_records / 2 && bytes < settings_.max_buffered_bytes / 2;
  if (!paused_) {
    if (over) set_paused(true, records, bytes);
    return paused_;
  }
  if (under_half) {
    set_paused(false, records, bytes);
    return false;
  }
  // Flush what is due meanwhile (a full buffer may still hold quiet buckets), then wait for room.
  flush_due(Clock::now());
  std::unique_lock lock(mutex_);
  done_cv_.wait_for(lock, kMaxPollWait, [&] {
    return !rewinds_.empty() || (buffered_records_.load() < settings_.max_buffered_records / 2 &&
                                 buffered_bytes_.load() < settings_.max_buffered_bytes / 2);
  });
  return true;
}

// The longest the consumer may wait: one poll wait, or less when a bucket's linger ends sooner.
milliseconds BlockPipeline::poll_wait() const {
  const auto deadline = buckets_->next_deadline();
  if (!deadline) return kMaxPollWait;
  return std::clamp(std::chrono::duration_cast<milliseconds>(*deadline - Clock::now()), milliseconds(0), kMaxPollWait);
}

// A sink that keeps up needs the consumer only a few batches ahead of it: more read ahead is
// memory, not speed (the stdout bench read 12,000 records ahead of its sink at 1.6 M records/s;
// 2 batches waiting instead of 4 held 2.6 MB less at its peak, at the same speed). So while
// kJobsAhead batches wait for the delivery thread, the consumer waits too, leaving
// the records in librdkafka's fetch queue (bounded by queued.min.messages; the fetcher idles
// instead of reading more). Up to one poll wait at most: group events, commits and a bucket's
// linger are served meanwhile, and a sink that stays behind meets the buffer limits above.
void BlockPipeline::wait_while_sink_behind() {
  const auto wait = poll_wait();
  std::unique_lock lock(mutex_);
  done_cv_.wait_for(lock, wait, [&] { return jobs_.size() < kJobsAhead || !rewinds_.empty() || stop_requested_; });
}

// Consumer thread: drops the records of `tp` not handed to the delivery thread yet (bucketed,
// or queued as jobs) and adds what they were to the counts; the caller releases them.
void BlockPipeline::drop_buffered(const TopicPartition& tp, size_t& records, size_t& bytes) {
  for (auto& m : buckets_->take_partition(tp)) {
    ++records;
    bytes += kafka::message_bytes(m.get());
  }
  // Under mutex_, so no job is between the queue and in_flight_ meanwhile.
  std::lock_guard lock(mutex_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->job.tp == tp) {
      records += it->job.records->size();
      bytes += it->job.bytes;
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void BlockPipeline::request_rewind(const TopicPartition& tp, int64_t offset, uint64_t generation) {
  {
    std::lock_guard lock(mutex_);
    rewinds_.push_back({tp, offset, generation});
  }
  done_cv_.notify_all();
  client_.wake();
}

// The records of a partition are read again from an offset: what is buffered of it (bucketed
// or queued, all of an older generation) goes, and the partition's reading moves back.
void BlockPipeline::take_rewinds() {
  std::vector<Rewind> rewinds;
  {
    std::lock_guard lock(mutex_);
    if (rewinds_.empty()) return;
    rewinds.swap(rewinds_);
  }
  for (const auto& r : rewinds) {
    uint64_t& generation = generation_[r.tp];
    generation = std::max(generation, r.generation);
    // Everything buffered of the partition was read before this point: an older generation.
    size_t dropped_records = 0, dropped_bytes = 0;
    drop_buffered(r.tp, dropped_records, dropped_bytes);
    release(dropped_records, dropped_bytes);
    const auto& assigned = client_.assignment();
    if (std::find(assigned.begin(), assigned.end(), r.tp) == assigned.end()) continue;  // handed away meanwhile
    if (auto error = client_.seek(r.tp, r.offset); !error.empty()) {
      fail("cannot read " + r.tp.to_string() + " again from offset " + std::to_string(r.offset) + ": " + error);
      return;
    }
    spdlog::info("{}: reading {} again from offset {} ({} buffered records of it dropped)", log_prefix_,
                 r.tp.to_string(), r.offset, dropped_records);
  }
}

void BlockPipeline::set_paused(bool paused, size_t records, size_t bytes) {
  paused_ = paused;
  if (paused)
    spdlog::info("{}: {} records / {} bytes buffered (limits {} / {}): pausing the consumer until the sink catches up",
                 log_prefix_, records, bytes, settings_.max_buffered_records, settings_.max_buffered_bytes);
  else spdlog::info("{}: buffer drained; resuming the consumer", log_prefix_);
  client_.set_paused(paused || operator_pause_applied_);
  publish_status();
}

void BlockPipeline::on_assigned(const std::vector<TopicPartition>& partitions) {
  sink_.notify_partitions(true, static_cast<uint32_t>(settings_.block_index), partitions);
  publish_status();
}

// Partitions are being handed away. Records buffered for them that the sink has not seen are
// dropped (the next owner reads them from the committed offset); writes the sink has started
// are sealed (flush) and allowed to finish, up to shutdown_timeout, and their offsets are
// committed before the partitions go, so nothing is delivered twice by this process and
// nothing is skipped. Then the sink hears that it no longer owns them.
void BlockPipeline::on_revoking(const std::vector<TopicPartition>& revoked, bool lost) {
  size_t dropped_records = 0, dropped_bytes = 0;
  for (const auto& tp : revoked) drop_buffered(tp, dropped_records, dropped_bytes);
  if (in_flight_.any(revoked)) {
    seal("partitions are revoked with writes under way");
    if (!in_flight_.wait_idle(revoked, settings_.shutdown_timeout))
      spdlog::error(
          "{}: writes of revoked partitions still pending after {} ms; handing them over anyway (their "
          "records may be written again by the next owner)",
          log_prefix_, settings_.shutdown_timeout.count());
  }
  release(dropped_records, dropped_bytes);
  if (dropped_records)
    spdlog::info("{}: dropped {} buffered records of revoked partitions (not yet written; the next owner reads them)",
                 log_prefix_, dropped_records);
  if (!lost) committer_.commit_sync("rebalance");
  sink_.notify_partitions(false, static_cast<uint32_t>(settings_.block_index), revoked);
}

void BlockPipeline::publish_status() {
  BlockStatus b;
  b.group_id = group_id_;
  for (const auto& tp : client_.assignment()) b.assigned.push_back(tp.to_string());
  b.paused = paused_ || operator_pause_applied_;
  b.paused_by_operator = operator_pause_applied_;
  for (auto& l : client_.lags()) b.lag.push_back({std::move(l.tp.topic), l.tp.partition, l.position, l.high});
  const auto commits = committer_.counts();
  b.delivered_records = counters_.delivered.load();
  b.stored_batches = commits.stored;
  b.committed_batches = commits.committed;
  b.commits = commits.commits;
  b.failed_commits = commits.failed_commits;
  b.skipped_records = counters_.skipped.load();
  b.dead_lettered_records = counters_.dead_lettered.load();
  b.filtered_records = counters_.filtered.load();
  b.buffered_records = buffered_records_.load();
  b.buffered_bytes = buffered_bytes_.load();
  b.broker_unreachable_since_ms = client_.broker_unreachable_since();
  b.consumed_records = consumed_records_;
  b.rejected_records = counters_.rejected.load(std::memory_order_relaxed);
  b.consumed_bytes = consumed_bytes_;
  for (size_t i = 0; i < b.write_attempts.size(); ++i)
    b.write_attempts[i] = counters_.attempts[i].load(std::memory_order_relaxed);
  for (const auto& bucket : counters_.write_latency.buckets)
    b.write_latency_buckets.push_back(bucket.load(std::memory_order_relaxed));
  b.write_latency_sum_seconds =
      static_cast<double>(counters_.write_latency.sum_us.load(std::memory_order_relaxed)) / 1e6;
  for (const auto& bucket : counters_.end_to_end_latency.buckets)
    b.end_to_end_latency_buckets.push_back(bucket.load(std::memory_order_relaxed));
  b.end_to_end_latency_sum_seconds =
      static_cast<double>(counters_.end_to_end_latency.sum_us.load(std::memory_order_relaxed)) / 1e6;
  status_.set_block(settings_.sink_key, settings_.block_index, std::move(b));
  status_.set_counters(settings_.sink_key, sink_.counters());
}

// Clean stop and error path alike: hand everything buffered to the delivery thread (batches of
// a partition that failed are skipped there), wait for it within shutdown_timeout, then one
// synchronous commit and leave the group.
void BlockPipeline::shutdown_path() {
  for (auto& ready : buckets_->take_all()) enqueue(std::move(ready.tp), std::move(ready.records));
  {
    std::unique_lock lock(mutex_);
    delivery_stop_ = true;
    work_cv_.notify_all();
    if (!done_cv_.wait_for(lock, settings_.shutdown_timeout, [&] { return delivery_finished_; })) {
      abandoned_ = true;
      spdlog::error(
          "{}: the sink did not finish writing within shutdown_timeout ({} ms); "
          "giving up on the batch in flight (it stays uncommitted and is delivered again on restart)",
          log_prefix_, settings_.shutdown_timeout.count());
    }
  }
  done_cv_.notify_all();
  committer_.commit_sync(failed_ ? "error path" : "shutdown");
  if (!abandoned_) {
    client_.close();
  } else {
    // The delivery thread may still touch the handle; the process exits without destroying it.
    std::lock_guard lock(mutex_);
    jobs_.clear();
  }
  publish_status();
  spdlog::info("{}: stopped", log_prefix_);
}

// ---------------------------------------------------------------- delivery thread

void BlockPipeline::delivery_main() {
  DeliveryWindow::Settings ws;
  ws.log_prefix = log_prefix_;
  ws.on_bad_record = settings_.block.on_bad_record;
  ws.retry = settings_.retry;
  ws.seal_retry_after = settings_.block.poll_interval;
  ws.dead_letter_write_failures = settings_.block.dead_letter_write_failures;
  DeliveryWindow window(std::move(ws),
                        DeliveryWindow::Dependencies{.writer = writer_, .offsets = committer_, .host = *this});
  for (;;) {
    while (!window.full()) {
      QueuedJob queued;
      {
        std::unique_lock lock(mutex_);
        if (window.empty()) work_cv_.wait(lock, [&] { return !jobs_.empty() || delivery_stop_; });
        if (jobs_.empty()) break;
        queued = std::move(jobs_.front());
        jobs_.pop_front();
        in_flight_.begin(queued.job.tp);
      }
      done_cv_.notify_all();  // room in the queue for a consumer waiting on it
      // A job of a failed or rewound partition is not prepared: it only keeps its place.
      window.start(window.accepts(queued.job) ? preparation_->ready(std::move(queued))
                                              : PreparedJob(std::move(queued.job), {}));
      sealed_ = false;
    }
    if (window.empty()) break;  // stopping, and everything is written
    if (const auto freed = window.collect_released(); freed.records) {
      release(freed.records, freed.bytes);
      done_cv_.notify_all();
    }
    if (!window.oldest_done()) {
      await_oldest(window);
      if (!window.oldest_done()) continue;  // a job came: start it
    }
    PreparedJob done = window.finish_oldest();
    if (!done.released) release(done.records->size(), done.bytes);
    const TopicPartition tp = done.tp;
    done = PreparedJob{};  // drops the batch and the messages it pointed into
    in_flight_.end(tp);
    done_cv_.notify_all();
  }
  seal("the block stops");  // whatever the sink still holds
  {
    std::lock_guard lock(mutex_);
    delivery_finished_ = true;
  }
  done_cv_.notify_all();
}

// An asynchronous sink may hold its writes open for more (one COPY for many batches): a batch
// that comes meanwhile is started, not kept waiting for the oldest. When none comes within
// poll_interval (or the block is stopping), the sink is asked once to seal what it holds.
void BlockPipeline::await_oldest(DeliveryWindow& window) {
  std::unique_lock lock(mutex_);
  auto ready = [&] { return window.oldest_done() || (!window.full() && !jobs_.empty()) || window.release_waiting(); };
  if (sealed_) {
    work_cv_.wait(lock, ready);  // sealed already: wait for the outcome
    return;
  }
  work_cv_.wait_for(lock, settings_.block.poll_interval, [&] { return ready() || delivery_stop_; });
  if (ready()) return;
  const bool stopping = delivery_stop_;
  lock.unlock();
  seal(stopping ? "the block stops" : "the oldest write waited poll_interval");
}

void BlockPipeline::seal(std::string_view why) {
  spdlog::debug("{}: asking the sink to seal the writes it holds: {}", log_prefix_, why);
  sealed_ = true;
  sink_.flush(settings_.shutdown_timeout);
}

DeadLetters* BlockPipeline::dead_letters(std::string& error) {
  if (!dead_letter_)
    dead_letter_ =
        kafka::DeadLetterProducer::create(settings_.bootstrap_servers, settings_.client_properties,
                                          *settings_.block.dead_letter_topic, settings_.sink_key, log_prefix_, error);
  return dead_letter_.get();
}

void BlockPipeline::written(const DecodedBatch& batch, const std::vector<std::pair<int64_t, std::string>>& rejected) {
  if (!settings_.tap || !settings_.tap->armed(Tap::Stage::Written)) return;
  for (const auto& r : batch.records)
    if (std::none_of(rejected.begin(), rejected.end(), [&](const auto& x) { return x.first == r.offset; }))
      settings_.tap->offer(Tap::Stage::Written, batch.tp.topic.c_str(), batch.tp.partition, batch.block_index, r,
                           batch.format, batch.changes);
}

void BlockPipeline::write_done() {
  std::lock_guard lock(mutex_);
  work_cv_.notify_all();
}

void BlockPipeline::fail(const std::string& message) {
  const bool first = !failed_.exchange(true);
  spdlog::error("{}: {}", log_prefix_, message);
  if (first && on_error_) on_error_(message);
}

void BlockPipeline::release(size_t records, size_t bytes) {
  const bool drained = records && buffered_records_.fetch_sub(records) == records;
  buffered_bytes_ -= bytes;
  // Offsets held for the commit interval may go now that everything read is written (caught_up).
  if (drained) client_.wake();
}

// Everything read is written (nothing buffered, queued or being written) and the reading is at
// the end of each assigned partition as last seen: no batch is coming for a held commit to wait for.
bool BlockPipeline::caught_up() const {
  if (buffered_records_.load() != 0) return false;
  for (const auto& lag : client_.lags())
    if (lag.high < 0 || lag.position < lag.high) return false;
  return true;
}

}  // namespace picomq::runtime
