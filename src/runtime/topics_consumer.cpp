#include "runtime/topics_consumer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <span>

namespace picomq::runtime {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t kPollBatch = 4096;
constexpr milliseconds kMaxPollWait{50};
constexpr milliseconds kCommitFollowUpWait{2};
constexpr milliseconds kStatusEvery{1000};
constexpr size_t kPrepareAheadQueue = 2;  // jobs waiting for the delivery thread before the consumer decodes
constexpr int kFetchQueueBackoffVersion = 0x020200ff;  // librdkafka 2.2.0
constexpr int kDeadLetterTimeoutMs = 15000;  // per attempt: produce and wait for the broker's acks

size_t message_bytes(const rd_kafka_message_t* m) { return m->len + m->key_len; }

bool is_internal_topic(const std::string& topic) { return topic.rfind("__", 0) == 0; }

void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  const char* name = rd_kafka_name(rk);
  if (level <= 3)
    spdlog::error("kafka {} {}: {}", name, fac, buf);
  else if (level <= 4)
    spdlog::warn("kafka {} {}: {}", name, fac, buf);
  else if (level <= 6)
    spdlog::info("kafka {} {}: {}", name, fac, buf);
  else
    spdlog::debug("kafka {} {}: {}", name, fac, buf);
}

void error_cb(rd_kafka_t* rk, int err, const char* reason, void*) {
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  // Transport errors are retried by librdkafka forever; say so, so nobody mistakes it for a stall.
  if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || code == RD_KAFKA_RESP_ERR__TRANSPORT ||
      code == RD_KAFKA_RESP_ERR__RESOLVE)
    spdlog::warn("kafka {}: broker unreachable ({}); retrying", rd_kafka_name(rk), reason);
  else if (rd_kafka_fatal_error(rk, nullptr, 0))
    spdlog::error("kafka {}: fatal client error: {}", rd_kafka_name(rk), reason);
  else
    spdlog::warn("kafka {}: {} ({})", rd_kafka_name(rk), reason, rd_kafka_err2name(code));
}


std::vector<TopicPartition> to_vector(const rd_kafka_topic_partition_list_t* list) {
  std::vector<TopicPartition> out;
  for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

}  // namespace

TopicsConsumer::TopicsConsumer(BlockSettings settings, SinkPlugin& plugin, StatusBoard& status,
                               ErrorCallback on_error)
    : settings_(std::move(settings)), plugin_(plugin), status_(status), on_error_(std::move(on_error)) {
  group_id_ = settings_.block.group_id(settings_.sink_key);
  log_prefix_ = "sink '" + settings_.sink_key + "' topics[" + std::to_string(settings_.block_index) + "]";
  if (settings_.block.anchored_pattern) pattern_.emplace(*settings_.block.anchored_pattern, std::regex::ECMAScript);
  buckets_ = std::make_unique<Bucketer<MessagePtr>>(settings_.block.batch_length, settings_.block.poll_interval);
  const auto decoders = make_decoder_factory(settings_.block);  // schema compiled once, shared by both threads
  consumer_side_.decoder = decoders->make();
  if (!settings_.block.arrow_schema.empty()) {
    std::vector<arrow::DeclaredColumn> declared;
    for (const auto& c : settings_.block.arrow_schema)
      declared.push_back({c.name, *arrow::parse_column_type(c.type), c.nullable});  // validated with the definition
    arrow_options_.declared = std::move(declared);
  }
  delivery_side_.decoder = decoders->make();
  if (!settings_.transforms.empty()) transforms_ = std::make_unique<const transform::Chain>(settings_.transforms);
}

TopicsConsumer::~TopicsConsumer() {
  if (consumer_thread_.joinable()) consumer_thread_.join();
  if (delivery_thread_.joinable()) {
    if (abandoned_) delivery_thread_.detach();
    else delivery_thread_.join();
  }
}

void TopicsConsumer::start() {
  delivery_thread_ = std::thread([this] { delivery_main(); });
  consumer_thread_ = std::thread([this] { consumer_main(); });
}

void TopicsConsumer::request_stop() { stop_requested_ = true; }

bool TopicsConsumer::join() {
  {
    std::unique_lock lock(join_mutex_);
    join_cv_.wait(lock, [&] { return consumer_finished_; });
  }
  if (consumer_thread_.joinable()) consumer_thread_.join();
  return !abandoned_;
}

// ---------------------------------------------------------------- consumer thread

rd_kafka_t* TopicsConsumer::create_consumer(std::string& error) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const std::string& k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
      if (error.empty()) error = "consumer property '" + k + "': " + errstr;
    }
  };
  set("bootstrap.servers", settings_.bootstrap_servers);
  set("client.id", "picomq-connect-" + settings_.sink_key + "-" + std::to_string(settings_.block_index));
  for (const auto& [k, v] : settings_.client_properties) set(k, v);
  // librdkafka 2.2 made the fetcher's back-off on a full queue configurable (default 1 s);
  // a short one keeps a consumer that fell behind for a moment from idling that long.
  if (rd_kafka_version() >= kFetchQueueBackoffVersion) set("fetch.queue.backoff.ms", "10");
  set("auto.offset.reset",
      settings_.block.auto_offset_reset == config::OffsetReset::Latest ? "latest" : "earliest");
  for (const auto& [k, v] : settings_.block.properties) set(k, v);
  // Not overridable: these are what commit-after-the-write rests on.
  set("group.id", group_id_);
  set("enable.auto.commit", "false");
  set("enable.auto.offset.store", "false");
  if (!error.empty()) {
    rd_kafka_conf_destroy(conf);
    return nullptr;
  }
  read_fetch_queue_limits(conf);
  rd_kafka_conf_set_opaque(conf, this);
  rd_kafka_conf_set_rebalance_cb(conf, &TopicsConsumer::rebalance_trampoline);
  rd_kafka_conf_set_error_cb(conf, error_cb);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!rk) {
    error = std::string("cannot create consumer: ") + errstr;
    return nullptr;
  }
  rd_kafka_poll_set_consumer(rk);
  return rk;
}

void TopicsConsumer::consumer_main() {
  std::string error;
  rk_ = create_consumer(error);
  if (!rk_) {
    fail({}, error);
    std::lock_guard lock(mutex_);
    delivery_stop_ = true;
    work_cv_.notify_all();
  } else {
    queue_ = rd_kafka_queue_get_consumer(rk_);
    commit_queue_ = rd_kafka_queue_new(rk_);
    spdlog::info("{}: consumer group '{}' on {}", log_prefix_, group_id_, settings_.bootstrap_servers);
    refresh_subscription(true);
    publish_status();

    std::vector<rd_kafka_message_t*> polled(kPollBatch);
    auto next_status = Clock::now() + kStatusEvery;
    while (!stop_requested_ && !failed_) {
      refresh_subscription(false);
      commit_stored();
      const bool paused = apply_backpressure();

      auto wait = paused ? milliseconds(0) : kMaxPollWait;
      if (auto deadline = buckets_->next_deadline(); deadline && !paused) {
        auto until = std::chrono::duration_cast<milliseconds>(*deadline - Clock::now());
        wait = std::clamp(until, milliseconds(0), kMaxPollWait);
      }
      // Offsets wait behind a commit in flight, whose completion does not wake the poll: look
      // again soon, so they go out (and a stopped producer's last records are committed) within
      // a few ms of it rather than at the end of a full poll wait.
      if (commit_in_flight_ && offsets_stored_) wait = std::min(wait, kCommitFollowUpWait);
      // Never take more than the buffer has room for, so the record limit holds exactly (while
      // paused the one slot can only carry a group event: every assigned partition is paused).
      const size_t buffered = buffered_records_.load();
      const size_t room = buffered < settings_.max_buffered_records ? settings_.max_buffered_records - buffered : 0;
      const size_t take = std::clamp<size_t>(room, 1, kPollBatch);
      const ssize_t n = rd_kafka_consume_batch_queue(queue_, static_cast<int>(wait.count()), polled.data(), take);
      const auto now = Clock::now();
      // A poll returns runs of records from one partition: bucket each run at once, and
      // account for the whole poll in one update of the shared counters.
      size_t polled_records = 0, polled_bytes = 0;
      std::vector<MessagePtr> run;
      rd_kafka_topic_t* run_topic = nullptr;
      int32_t run_partition = -1;
      auto bucket_run = [&] {
        if (run.empty()) return;
        buckets_->add(TopicPartition{rd_kafka_topic_name(run_topic), run_partition}, std::move(run), now);
        run.clear();
      };
      for (ssize_t i = 0; i < n; ++i) {
        MessagePtr m(polled[i]);
        if (m->err) {
          if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            spdlog::warn("{}: consumer error: {}", log_prefix_, rd_kafka_message_errstr(m.get()));
          continue;
        }
        if (m->rkt != run_topic || m->partition != run_partition) {
          bucket_run();
          run_topic = m->rkt;
          run_partition = m->partition;
        }
        ++polled_records;
        polled_bytes += message_bytes(m.get());
        run.push_back(std::move(m));
      }
      bucket_run();
      buffered_records_ += polled_records;
      buffered_bytes_ += polled_bytes;
      watch_fetch_queue(polled_records ? polled_bytes / polled_records : 0);
      flush_due(Clock::now());
      if (Clock::now() >= next_status) {
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

// Explicit topics plus, for a pattern, every broker topic it matches; re-evaluated every
// pattern_refresh so topics created later are picked up. A change re-subscribes (a rebalance).
void TopicsConsumer::refresh_subscription(bool force) {
  const auto now = Clock::now();
  if (!force && (!pattern_ || now < next_pattern_refresh_)) return;
  next_pattern_refresh_ = now + settings_.pattern_refresh;

  std::set<std::string> wanted(settings_.block.topics.begin(), settings_.block.topics.end());
  if (pattern_) {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk_, 1, nullptr, &md, 2000);
    if (err) {
      spdlog::warn("{}: cannot list the broker's topics to match pattern '{}': {}; retrying", log_prefix_,
                   *settings_.block.pattern, rd_kafka_err2str(err));
      if (!force) return;  // keep the current subscription until the broker answers
    } else {
      for (int i = 0; i < md->topic_cnt; ++i) {
        std::string name = md->topics[i].topic;
        if (md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR && !is_internal_topic(name) &&
            std::regex_search(name, *pattern_, std::regex_constants::match_continuous))
          wanted.insert(name);
      }
      rd_kafka_metadata_destroy(md);
    }
  }
  std::vector<std::string> next(wanted.begin(), wanted.end());
  if (!force && next == subscribed_) return;

  for (const auto& t : next)
    if (!std::binary_search(subscribed_.begin(), subscribed_.end(), t)) spdlog::info("{}: subscribing to '{}'", log_prefix_, t);
  for (const auto& t : subscribed_)
    if (!wanted.count(t)) spdlog::info("{}: topic '{}' no longer subscribed", log_prefix_, t);
  subscribed_ = next;
  if (next.empty()) {
    spdlog::info("{}: no topic matches yet; waiting", log_prefix_);
    rd_kafka_unsubscribe(rk_);
    return;
  }
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(next.size()));
  for (const auto& t : next) rd_kafka_topic_partition_list_add(list, t.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(rk_, list)) spdlog::error("{}: subscribe failed: {}", log_prefix_, rd_kafka_err2str(err));
  rd_kafka_topic_partition_list_destroy(list);
}

void TopicsConsumer::flush_due(std::chrono::steady_clock::time_point now) {
  for (auto& ready : buckets_->take_ready(now)) enqueue(std::move(ready.tp), std::move(ready.records));
}

// Decoding + transforming a batch is done by whichever thread has time: the consumer thread
// does it here while the delivery thread has work queued (the sink is the bottleneck),
// otherwise the delivery thread does it before the write (the consumer is the bottleneck).
// Each job is prepared exactly once, by the thread that owns it at that moment.
void TopicsConsumer::enqueue(TopicPartition tp, std::vector<MessagePtr> messages) {
  Job job;
  job.tp = std::move(tp);
  job.messages = std::move(messages);
  for (const auto& m : job.messages) job.bytes += message_bytes(m.get());
  size_t queued;
  {
    std::lock_guard lock(mutex_);
    queued = jobs_.size();
  }
  if (queued >= kPrepareAheadQueue) prepare(job, consumer_side_);
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

// What sits between broker and plugin is bounded. The consumer drains librdkafka eagerly and,
// the moment the buffer is full, pauses its partitions; it resumes them below half. Pausing at
// once (rather than just not polling) matters: librdkafka 2.0 re-checks a fetch queue that went
// over queued.min.messages only on its 1 s broker tick, so a consumer that merely stops polling
// loses up to a second per stall, while a pause/resume is an op that wakes the fetcher at once.
// Since the queue was drained, a pause throws away at most the fetch responses in flight.
// Returns true while paused: the loop then polls only to serve group events.
bool TopicsConsumer::apply_backpressure() {
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
    return buffered_records_.load() < settings_.max_buffered_records / 2 &&
           buffered_bytes_.load() < settings_.max_buffered_bytes / 2;
  });
  return true;
}

// librdkafka before 2.2 stops fetching for a consumer whose queue went over queued.min.messages
// or queued.max.messages.kbytes, and looks again only on its 1 s broker tick. A consumer that
// fell behind for a moment (a busy core, a slow batch) would then idle for most of a second.
// So we watch the queue: once it was near a limit and we have drained it, a seek to the current
// position wakes the fetcher at once; the queue is empty, so nothing is fetched twice.
void TopicsConsumer::read_fetch_queue_limits(rd_kafka_conf_t* conf) {
  auto get = [&](const char* name, size_t fallback) {
    char value[64];
    size_t size = sizeof value;
    if (rd_kafka_conf_get(conf, name, value, &size) != RD_KAFKA_CONF_OK) return fallback;
    return static_cast<size_t>(std::strtoull(value, nullptr, 10));
  };
  fetch_queue_max_records_ = get("queued.min.messages", 100000);
  fetch_queue_max_bytes_ = get("queued.max.messages.kbytes", 65536) * 1024;
}

void TopicsConsumer::watch_fetch_queue(size_t recent_message_bytes) {
  if (rd_kafka_version() >= kFetchQueueBackoffVersion) return;
  if (recent_message_bytes) recent_message_bytes_ = recent_message_bytes;
  const size_t queued = rd_kafka_queue_length(queue_);
  if (queued * 10 >= fetch_queue_max_records_ * 9 || queued * recent_message_bytes_ * 10 >= fetch_queue_max_bytes_ * 9) {
    fetcher_may_sleep_ = true;
  } else if (fetcher_may_sleep_ && queued == 0 && !paused_) {
    fetcher_may_sleep_ = false;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR && list) {
      wake_fetcher(list);
      rd_kafka_topic_partition_list_destroy(list);
    }
  }
}

// Seeks each partition to the position after the last record taken from it, which wakes the
// broker thread that fetches it.
void TopicsConsumer::wake_fetcher(rd_kafka_topic_partition_list_t* assigned) {
  if (rd_kafka_position(rk_, assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  rd_kafka_topic_partition_list_t* seek = rd_kafka_topic_partition_list_new(assigned->cnt);
  for (int i = 0; i < assigned->cnt; ++i)
    if (assigned->elems[i].offset >= 0)
      rd_kafka_topic_partition_list_add(seek, assigned->elems[i].topic, assigned->elems[i].partition)->offset =
          assigned->elems[i].offset;
  if (seek->cnt > 0)
    if (rd_kafka_error_t* e = rd_kafka_seek_partitions(rk_, seek, 0)) rd_kafka_error_destroy(e);
  rd_kafka_topic_partition_list_destroy(seek);
}

void TopicsConsumer::set_paused(bool paused, size_t records, size_t bytes) {
  paused_ = paused;
  if (paused)
    spdlog::info("{}: {} records / {} bytes buffered (limits {} / {}): pausing the consumer until the sink catches up",
                 log_prefix_, records, bytes, settings_.max_buffered_records, settings_.max_buffered_bytes);
  else
    spdlog::info("{}: buffer drained; resuming the consumer", log_prefix_);
  rd_kafka_topic_partition_list_t* list = nullptr;
  if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR && list) {
    if (paused_) {
      rd_kafka_pause_partitions(rk_, list);
    } else {
      rd_kafka_resume_partitions(rk_, list);
      // librdkafka 2.0 does not wake its fetcher on resume (it would wait for its 1 s tick).
      if (rd_kafka_version() < kFetchQueueBackoffVersion) wake_fetcher(list);
    }
    rd_kafka_topic_partition_list_destroy(list);
  }
  publish_status();
}

// Written batches store their offsets (delivery thread); the consumer thread commits what is
// stored with at most one asynchronous commit in flight. A broker completes offset commits one
// at a time per connection (Kafka 4 lingers 5 ms on each), so a commit per batch would cap
// throughput at a few hundred batches a second; coalescing commits the same offsets, later by
// at most one round trip. Revocation and shutdown still commit synchronously.
void TopicsConsumer::commit_stored() {
  rd_kafka_queue_poll_callback(commit_queue_, 0);  // serves commit_done for finished commits
  if (commit_in_flight_ || !offsets_stored_.exchange(false)) return;
  commit_in_flight_ = true;
  rd_kafka_commit_queue(rk_, nullptr, commit_queue_, &TopicsConsumer::commit_done, this);
}

void TopicsConsumer::commit_done(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*,
                                 void* opaque) {
  auto* self = static_cast<TopicsConsumer*>(opaque);
  self->commit_in_flight_ = false;
  if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
    spdlog::warn("{}: offset commit failed: {} (committed again with the next one)", self->log_prefix_,
                 rd_kafka_err2str(err));
    self->offsets_stored_ = true;
  }
  (void)rk;
}

void TopicsConsumer::rebalance_trampoline(rd_kafka_t*, rd_kafka_resp_err_t err,
                                          rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  static_cast<TopicsConsumer*>(opaque)->on_rebalance(err, partitions);
}

void TopicsConsumer::on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions) {
  rebalance_cooperative_ = std::string_view(rd_kafka_rebalance_protocol(rk_)) == "COOPERATIVE";
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    auto added = to_vector(partitions);
    for (const auto& tp : added) spdlog::info("{}: assigned {}", log_prefix_, tp.to_string());
    resolve_start_offsets(partitions);
    if (rebalance_cooperative_) {
      if (auto* e = rd_kafka_incremental_assign(rk_, partitions)) {
        spdlog::error("{}: incremental assign failed: {}", log_prefix_, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
      }
      assignment_.insert(assignment_.end(), added.begin(), added.end());
    } else {
      rd_kafka_assign(rk_, partitions);
      assignment_ = added;
    }
    if (paused_) rd_kafka_pause_partitions(rk_, partitions);
  } else {
    on_revoke(partitions);
    auto removed = to_vector(partitions);
    if (rebalance_cooperative_) {
      if (auto* e = rd_kafka_incremental_unassign(rk_, partitions)) {
        spdlog::error("{}: incremental unassign failed: {}", log_prefix_, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
      }
      std::erase_if(assignment_, [&](const TopicPartition& tp) {
        return std::find(removed.begin(), removed.end(), tp) != removed.end();
      });
    } else {
      rd_kafka_assign(rk_, nullptr);
      assignment_.clear();
    }
  }
  publish_status();
}

// Starts each newly assigned partition at its committed offset, or where auto_offset_reset
// says when the group has none, as concrete offsets. librdkafka would find the same, but gets
// to the reset through its error path, which waits 100-500 ms before asking the leader for
// the log start or end; a fresh group starts that much sooner this way. On any error the
// partition keeps librdkafka's own lookup.
void TopicsConsumer::resolve_start_offsets(rd_kafka_topic_partition_list_t* partitions) {
  constexpr int kTimeoutMs = 10000;
  rd_kafka_topic_partition_list_t* committed = rd_kafka_topic_partition_list_copy(partitions);
  rd_kafka_topic_partition_list_t* unset = rd_kafka_topic_partition_list_new(partitions->cnt);
  if (rd_kafka_committed(rk_, committed, kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // ListOffsets by timestamp: -2 asks for the log start, -1 for the end.
    const int64_t reset = settings_.block.auto_offset_reset == config::OffsetReset::Latest ? -1 : -2;
    for (int i = 0; i < committed->cnt; ++i) {
      const auto& c = committed->elems[i];
      if (c.err) continue;
      if (c.offset >= 0) partitions->elems[i].offset = c.offset;
      else rd_kafka_topic_partition_list_add(unset, c.topic, c.partition)->offset = reset;
    }
  }
  if (unset->cnt > 0 && rd_kafka_offsets_for_times(rk_, unset, kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < unset->cnt; ++i) {
      const auto& u = unset->elems[i];
      if (u.err || u.offset < 0) continue;
      if (auto* p = rd_kafka_topic_partition_list_find(partitions, u.topic, u.partition)) p->offset = u.offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(unset);
  rd_kafka_topic_partition_list_destroy(committed);
}

// A partition is being handed away. Records buffered for it that the plugin has not seen are
// dropped (the next owner reads them from the committed offset); a batch the plugin is writing
// right now is allowed to finish and its offset is committed before the partition goes, so
// nothing is delivered twice by this process and nothing is skipped.
void TopicsConsumer::on_revoke(const rd_kafka_topic_partition_list_t* partitions) {
  const auto revoked = to_vector(partitions);
  const bool lost = rd_kafka_assignment_lost(rk_);
  size_t dropped_records = 0, dropped_bytes = 0;
  for (const auto& tp : revoked) {
    spdlog::info("{}: {} {}", log_prefix_, lost ? "lost" : "revoked", tp.to_string());
    for (auto& m : buckets_->take_partition(tp)) {
      ++dropped_records;
      dropped_bytes += message_bytes(m.get());
    }
  }
  {
    std::unique_lock lock(mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (std::find(revoked.begin(), revoked.end(), it->tp) != revoked.end()) {
        dropped_records += it->messages.size();
        dropped_bytes += it->bytes;
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
    done_cv_.wait(lock, [&] {
      return abandoned_ || std::none_of(revoked.begin(), revoked.end(), [&](const TopicPartition& tp) {
               auto it = in_flight_.find(tp);
               return it != in_flight_.end() && it->second > 0;
             });
    });
  }
  release(dropped_records, dropped_bytes);
  if (dropped_records)
    spdlog::info("{}: dropped {} buffered records of revoked partitions (not yet written; the next owner reads them)",
                 log_prefix_, dropped_records);
  if (!lost) commit_sync("rebalance");
}

void TopicsConsumer::commit_sync(const char* why) {
  rd_kafka_resp_err_t err = rd_kafka_commit(rk_, nullptr, 0);
  if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
    spdlog::warn("{}: synchronous commit ({}) failed: {}", log_prefix_, why, rd_kafka_err2str(err));
}

void TopicsConsumer::publish_status() {
  BlockStatus b;
  b.group_id = group_id_;
  for (const auto& tp : assignment_) b.assigned.push_back(tp.to_string());
  b.paused = paused_;
  b.delivered_records = delivered_records_.load();
  b.committed_batches = committed_batches_.load();
  b.skipped_records = skipped_records_.load();
  b.dead_lettered_records = dead_lettered_records_.load();
  b.filtered_records = filtered_records_.load();
  b.buffered_records = buffered_records_.load();
  b.buffered_bytes = buffered_bytes_.load();
  status_.set_block(settings_.sink_key, settings_.block_index, std::move(b));
}

// Clean stop and error path alike: hand everything buffered to the delivery thread (batches of
// a partition that failed are skipped there), wait for it within shutdown_timeout, then one
// synchronous commit and leave the group.
void TopicsConsumer::shutdown_path() {
  for (auto& ready : buckets_->take_all()) enqueue(std::move(ready.tp), std::move(ready.records));
  {
    std::unique_lock lock(mutex_);
    delivery_stop_ = true;
    work_cv_.notify_all();
    if (!done_cv_.wait_for(lock, settings_.shutdown_timeout, [&] { return delivery_finished_; })) {
      abandoned_ = true;
      spdlog::error("{}: the sink did not finish writing within shutdown_timeout ({} ms); "
                    "giving up on the batch in flight (it stays uncommitted and is delivered again on restart)",
                    log_prefix_, settings_.shutdown_timeout.count());
    }
  }
  done_cv_.notify_all();
  commit_sync(failed_ ? "error path" : "shutdown");
  if (!abandoned_) {
    rd_kafka_queue_poll_callback(commit_queue_, 0);
    rd_kafka_queue_destroy(commit_queue_);
    rd_kafka_consumer_close(rk_);
    rd_kafka_queue_destroy(queue_);
    rd_kafka_destroy(rk_);
    rk_ = nullptr;
  } else {
    // The delivery thread may still touch the handle; the process exits without destroying it.
    std::lock_guard lock(mutex_);
    jobs_.clear();
  }
  publish_status();
  spdlog::info("{}: stopped", log_prefix_);
}

// ---------------------------------------------------------------- delivery thread

// Writes go out in order; up to the plugin's max_in_flight of them may be pending at once
// (asynchronous sinks), and their outcomes are taken strictly in order, so offsets are stored
// in order and only for writes that completed OK. With max_in_flight = 1 each write is awaited.
void TopicsConsumer::delivery_main() {
  const size_t window = plugin_.max_in_flight();
  std::deque<std::unique_ptr<InFlight>> pending;
  for (;;) {
    while (pending.size() < window) {
      auto entry = std::make_unique<InFlight>();
      {
        std::unique_lock lock(mutex_);
        if (pending.empty()) work_cv_.wait(lock, [&] { return !jobs_.empty() || delivery_stop_; });
        if (jobs_.empty()) break;
        entry->job = std::move(jobs_.front());
        jobs_.pop_front();
        ++in_flight_[entry->job.tp];
      }
      start_write(*entry);
      pending.push_back(std::move(entry));
    }
    if (pending.empty()) break;  // stopping, and everything is written
    InFlight& oldest = *pending.front();
    if (oldest.call && pending.size() < window) {
      // An asynchronous sink may be holding its writes open for more (e.g. one COPY for many
      // batches): a batch that comes meanwhile is started, not kept waiting for the oldest.
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return oldest.call->done() || !jobs_.empty(); });
      if (!oldest.call->done()) continue;
    }
    if (oldest.call) oldest.call->wait();
    finish_write(oldest);
    const TopicPartition tp = oldest.job.tp;
    const size_t records = oldest.job.messages.size(), bytes = oldest.job.bytes;
    pending.pop_front();  // drops the batch and the messages it pointed into
    {
      std::lock_guard lock(mutex_);
      if (--in_flight_[tp] == 0) in_flight_.erase(tp);
    }
    release(records, bytes);
    done_cv_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    delivery_finished_ = true;
  }
  done_cv_.notify_all();
}

// Decodes each record, runs the transform chain on it, and sorts out the records that do not
// go to the plugin: dropped by a filter (counted), bad (the block's policy), or, under `fail`,
// the bad record the batch stops at.
void TopicsConsumer::prepare(Job& job, Preparer& with) {
  job.prepared = true;
  DecodedBatch& batch = job.batch;
  batch.tp = job.tp;
  batch.block_index = static_cast<uint32_t>(settings_.block_index);
  batch.schema = std::string(config::to_string(settings_.block.schema));
  batch.format = with.decoder->format();
  batch.records.reserve(job.messages.size());
  job.commit_to = job.messages.empty() ? -1 : job.messages.back()->offset + 1;
  const bool fail_policy = settings_.block.on_bad_record == config::BadRecordPolicy::Fail;
  // librdkafka parses a record's headers (an allocation and a free, even for none) on request;
  // skipping that when nobody reads them is about a tenth of the per-record CPU.
  const bool wants_headers = plugin_.reads_headers() || transforms_;
  auto stop_at = [&](const rd_kafka_message_t* m, std::string message) {
    job.failure = std::move(message);
    job.commit_to = m->offset;
  };

  std::string error;
  std::vector<std::pair<size_t, size_t>> header_ranges;  // per record: first index, count
  header_ranges.reserve(job.messages.size());
  for (size_t i = 0; i < job.messages.size(); ++i) {
    const rd_kafka_message_t* m = job.messages[i].get();
    pmq_record r{};
    r.offset = m->offset;
    if (m->payload) {
      std::span<const uint8_t> in(static_cast<const uint8_t*>(m->payload), m->len);
      const DecodeStatus status = with.decoder->decode_record(in, r.payload, batch.owned, error);
      if (status == DecodeStatus::retry) {
        job.retry_error = "cannot decode record " + job.tp.to_string() + " at offset " + std::to_string(m->offset) +
                          " for now (schema " + batch.schema + "): " + error;
        job.commit_to = m->offset;
        break;
      }
      if (status != DecodeStatus::ok) {
        if (fail_policy) {
          stop_at(m, "cannot decode record " + job.tp.to_string() + " at offset " + std::to_string(m->offset) +
                         " (schema " + batch.schema + "): " + error);
          break;
        }
        job.bad.push_back({i, BadRecordStage::Decode, "schema " + batch.schema + ": " + error});
        continue;
      }
    }
    rd_kafka_timestamp_type_t ts_type;
    r.timestamp_ms = rd_kafka_message_timestamp(m, &ts_type);
    r.key = m->key ? pmq_bytes{static_cast<const uint8_t*>(m->key), m->key_len} : pmq_bytes{nullptr, 0};
    const size_t first_header = batch.headers.size();
    rd_kafka_headers_t* hdrs = nullptr;
    if (wants_headers && rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) {
      const char* name;
      const void* value;
      size_t size;
      for (size_t h = 0; rd_kafka_header_get_all(hdrs, h, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++h)
        batch.headers.push_back({{reinterpret_cast<const uint8_t*>(name), std::strlen(name)},
                                 {static_cast<const uint8_t*>(value), value ? size : 0}});
    }
    if (transforms_) {
      // Valid until the next record's headers go in (the pointers are set again at the end).
      r.headers = batch.headers.data() + first_header;
      r.header_count = batch.headers.size() - first_header;
      const transform::RecordMeta meta = transform::record_meta(job.tp.topic, job.tp.partition, r);
      transform::Verdict verdict;
      if (batch.format == PMQ_PAYLOAD_JSON && r.payload.data) {
        std::string payload(reinterpret_cast<const char*>(r.payload.data), r.payload.size);
        verdict = transforms_->apply(meta, payload, error);
        if (verdict == transform::Verdict::Keep &&
            (payload.size() != r.payload.size || std::memcmp(payload.data(), r.payload.data, payload.size()) != 0)) {
          batch.owned.push_back(std::move(payload));
          r.payload = {reinterpret_cast<const uint8_t*>(batch.owned.back().data()), batch.owned.back().size()};
        }
      } else {
        verdict = transforms_->apply_without_payload(meta, error);
      }
      if (verdict != transform::Verdict::Keep) batch.headers.resize(first_header);
      if (verdict == transform::Verdict::Drop) {
        ++job.filtered;
        continue;
      }
      if (verdict == transform::Verdict::Fail) {
        if (fail_policy) {
          stop_at(m, "transform failed on record " + job.tp.to_string() + " at offset " + std::to_string(m->offset) +
                         ": " + error);
          break;
        }
        job.bad.push_back({i, BadRecordStage::Transform, error});
        continue;
      }
    }
    header_ranges.emplace_back(first_header, batch.headers.size() - first_header);
    batch.records.push_back(r);
  }
  for (size_t i = 0; i < batch.records.size(); ++i) {
    batch.records[i].headers = header_ranges[i].second ? batch.headers.data() + header_ranges[i].first : nullptr;
    batch.records[i].header_count = header_ranges[i].second;
  }
}

// Prepares the job if the consumer thread did not, and starts its write. Nothing is started for
// a partition that already failed: on restart its failed batch must be the first thing written.
void TopicsConsumer::start_write(InFlight& entry) {
  Job& job = entry.job;
  {
    std::lock_guard lock(mutex_);
    if (failed_partitions_.count(job.tp)) return;
  }
  if (!job.prepared) prepare(job, delivery_side_);
  // A record that cannot be decoded for now (the schema registry is down) is not a bad record:
  // like an unreachable broker, it is waited for, with a warning per attempt, until the decode
  // goes through or the runtime stops (then the records before it are written and committed,
  // and it is the first one read on restart).
  const auto& policy = settings_.retry;
  for (int attempt = 1; !job.retry_error.empty(); ++attempt) {
    const auto delay = policy.delay_before(std::min(attempt + 1, policy.max_attempts));
    spdlog::warn("{}: {}; decoding again in {} ms (attempt {})", log_prefix_, job.retry_error, delay.count(), attempt);
    for (auto slept = std::chrono::milliseconds(0); slept < delay && !stop_requested_; slept += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stop_requested_) break;
    Job again;
    again.tp = job.tp;
    again.messages = std::move(job.messages);
    again.bytes = job.bytes;
    job = std::move(again);
    prepare(job, delivery_side_);
  }
  if (job.batch.records.empty()) return;
  entry.call = std::make_unique<WriteCall>();
  entry.call->on_done = [this] {
    std::lock_guard lock(mutex_);
    work_cv_.notify_all();
  };
  entry.call->write_past_rejections = settings_.block.on_bad_record != config::BadRecordPolicy::Fail;
  plugin_.start(job.batch, arrow_options_, *entry.call);
}

// Takes the outcome of the oldest write: retries a failure (now one write at a time), hands the
// bad records to the policy, stores the offset of what is done, then reports a record the batch
// stopped at (`fail` policy).
void TopicsConsumer::finish_write(InFlight& entry) {
  Job& job = entry.job;
  {
    std::lock_guard lock(mutex_);
    if (failed_partitions_.count(job.tp)) {
      if (entry.call && entry.call->outcome.status == PMQ_WRITE_OK)
        spdlog::warn("{}: a batch of {} completed after an earlier one failed; it is not committed and is written "
                     "again on restart", log_prefix_, job.tp.to_string());
      return;
    }
  }
  DecodedBatch& batch = job.batch;
  if (entry.call) {
    std::string error;
    size_t written_prefix = 0;
    std::vector<std::pair<int64_t, std::string>> rejected;
    if (!write_with_retries(batch, std::move(entry.call->outcome), error, written_prefix, rejected)) {
      if (rejected.empty() || settings_.block.on_bad_record == config::BadRecordPolicy::Fail) {
        if (written_prefix > 0) store_offset(job.tp, batch.records[written_prefix - 1].offset + 1);
        fail(job.tp, error);
        return;
      }
      // The sink wrote the rest; the refused records join the batch's bad records.
      for (auto& [offset, reason] : rejected) {
        auto it = std::lower_bound(job.messages.begin(), job.messages.end(), offset,
                                   [](const MessagePtr& m, int64_t o) { return m->offset < o; });
        if (it != job.messages.end() && (*it)->offset == offset)
          job.bad.push_back({static_cast<size_t>(it - job.messages.begin()), BadRecordStage::Sink, std::move(reason)});
      }
      std::sort(job.bad.begin(), job.bad.end(), [](const BadRecord& a, const BadRecord& b) { return a.index < b.index; });
    }
    delivered_records_ += batch.records.size() - rejected.size();
  }
  if (job.filtered) filtered_records_ += job.filtered;
  if (!job.bad.empty() && !handle_bad_records(job)) return;
  if (!job.messages.empty() && job.commit_to > job.messages.front()->offset) store_offset(job.tp, job.commit_to);
  if (!job.failure.empty()) fail(job.tp, job.failure);
}

bool TopicsConsumer::handle_bad_records(Job& job) {
  auto where = [&](const BadRecord& b) {
    return job.tp.to_string() + " at offset " + std::to_string(job.messages[b.index]->offset) + " (" +
           std::string(to_string(b.stage)) + "): " + b.reason;
  };
  if (settings_.block.on_bad_record == config::BadRecordPolicy::Skip) {
    for (const auto& b : job.bad) spdlog::warn("{}: skipped bad record {}", log_prefix_, where(b));
    skipped_records_ += job.bad.size();
    return true;
  }
  std::vector<DeadLetter> letters;
  for (const auto& b : job.bad) letters.push_back({job.messages[b.index].get(), b.stage, b.reason});
  std::string error;
  if (!dead_letter_)
    dead_letter_ = DeadLetterProducer::create(settings_.bootstrap_servers, settings_.client_properties,
                                              *settings_.block.dead_letter_topic, settings_.sink_key, error);
  const auto& policy = settings_.retry;
  for (int attempt = 1; dead_letter_; ++attempt) {
    if (dead_letter_->send(letters, kDeadLetterTimeoutMs, error)) {
      for (const auto& b : job.bad)
        spdlog::warn("{}: bad record {} produced to dead-letter topic '{}'", log_prefix_, where(b),
                     dead_letter_->topic());
      dead_lettered_records_ += job.bad.size();
      return true;
    }
    if (attempt >= policy.max_attempts) break;
    const auto delay = policy.delay_before(attempt + 1);
    spdlog::warn("{}: {} (attempt {}/{}); retrying in {} ms", log_prefix_, error, attempt, policy.max_attempts,
                 delay.count());
    std::this_thread::sleep_for(delay);
  }
  // Everything before the first bad record is written; nothing from it on may be committed.
  const int64_t first_bad = job.messages[job.bad.front().index]->offset;
  if (first_bad > job.messages.front()->offset) store_offset(job.tp, first_bad);
  fail(job.tp, error);
  return false;
}

// The spec's retry rule: the same batch up to max_attempts times with a doubling backoff; a
// permanent failure or rejected records stop at once. `written_prefix` says how many leading
// records are known written when it gives up (rejections), so their offsets can be committed.
bool TopicsConsumer::write_with_retries(DecodedBatch& batch, WriteOutcome first, std::string& error,
                                        size_t& written_prefix, std::vector<std::pair<int64_t, std::string>>& rejected) {
  const auto& policy = settings_.retry;
  const std::string where = batch.tp.to_string() + " offsets " + std::to_string(batch.records.front().offset) +
                            ".." + std::to_string(batch.records.back().offset);
  for (int attempt = 1;; ++attempt) {
    WriteOutcome out = attempt == 1 ? std::move(first)
                                    : plugin_.write(batch, arrow_options_,
                                                    settings_.block.on_bad_record != config::BadRecordPolicy::Fail);
    if (out.status == PMQ_WRITE_OK) {
      if (attempt > 1) spdlog::info("{}: batch {} written on attempt {}", log_prefix_, where, attempt);
      return true;
    }
    if (out.status == PMQ_WRITE_REJECTED) {
      auto first = *std::min_element(out.rejections.begin(), out.rejections.end());
      const auto offset = first.first < batch.records.size() ? batch.records[first.first].offset : -1;
      written_prefix = std::min(first.first, batch.records.size());
      for (const auto& [index, reason] : out.rejections)
        if (index < batch.records.size()) rejected.emplace_back(batch.records[index].offset, reason);
      error = "the sink rejected record " + batch.tp.to_string() + " at offset " + std::to_string(offset) + ": " +
              first.second + (out.rejections.size() > 1 ? " (and " + std::to_string(out.rejections.size() - 1) + " more)" : "");
      return false;
    }
    if (out.written > 0 && out.written < batch.records.size()) {
      // Rows plane: the records before the failed one are written; commit them and retry the rest.
      store_offset(batch.tp, batch.records[out.written - 1].offset + 1);
      delivered_records_ += out.written;
      batch.records.erase(batch.records.begin(), batch.records.begin() + static_cast<std::ptrdiff_t>(out.written));
    }
    const std::string reason = std::string(to_string(out.status)) + (out.message.empty() ? "" : ": " + out.message);
    if (out.status == PMQ_WRITE_FATAL) {
      error = "write of " + where + " failed permanently: " + reason;
      return false;
    }
    if (attempt >= policy.max_attempts) {
      error = "write of " + where + " failed " + std::to_string(attempt) + " times; last error: " + reason;
      return false;
    }
    const auto delay = policy.delay_before(attempt + 1);
    spdlog::warn("{}: write of {} failed (attempt {}/{}): {}; retrying in {} ms", log_prefix_, where, attempt,
                 policy.max_attempts, reason, delay.count());
    std::this_thread::sleep_for(delay);
  }
}

void TopicsConsumer::store_offset(const TopicPartition& tp, int64_t next_offset) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, tp.topic.c_str(), tp.partition)->offset = next_offset;
  rd_kafka_resp_err_t err = rd_kafka_offsets_store(rk_, list);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list->elems[0].err;
  if (err) {
    spdlog::warn("{}: cannot store offset {} for {}: {} (partition no longer assigned?)", log_prefix_, next_offset,
                 tp.to_string(), rd_kafka_err2str(err));
  } else {
    offsets_stored_ = true;
    committed_batches_ += 1;
    rd_kafka_queue_yield(queue_);  // wake the consumer thread's poll so the commit goes out now
  }
  rd_kafka_topic_partition_list_destroy(list);
}

void TopicsConsumer::fail(const TopicPartition& tp, const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    failed_partitions_.insert(tp);
  }
  const bool first = !failed_.exchange(true);
  spdlog::error("{}: {}", log_prefix_, message);
  if (first && on_error_) on_error_(message);
}

void TopicsConsumer::release(size_t records, size_t bytes) {
  buffered_records_ -= records;
  buffered_bytes_ -= bytes;
}

}  // namespace picomq::runtime
