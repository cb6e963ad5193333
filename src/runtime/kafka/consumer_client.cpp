// The Kafka consumer of one [[topics]] block (consumer_client.h). Past the ~350 lines of the
// runtime's other files because it is everything that touches one rd_kafka_t handle: its
// rebalance callbacks, commits and pauses call into each other and into the same handle.
#include "runtime/kafka/consumer_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "config/regex.h"
#include "runtime/kafka/client_conf.h"
#include "runtime/kafka/partition_list.h"

namespace picomq::runtime::kafka {

using Clock = std::chrono::steady_clock;

namespace {
constexpr std::chrono::milliseconds kProtocolProbeTimeout{3000};
bool is_internal_topic(const std::string& topic) { return topic.rfind("__", 0) == 0; }
}  // namespace

ConsumerClient::ConsumerClient(ConsumerSettings settings, std::string log_prefix, RebalanceListener& listener)
    : settings_(std::move(settings)), listener_(listener) {
  log_->log_prefix = std::move(log_prefix);
  log_->owner = this;
  if (settings_.anchored_pattern) pattern_ = config::compile_regex(*settings_.anchored_pattern);
}

ConsumerClient::~ConsumerClient() {
  close();
  if (!log_left_behind_) delete log_;
}

std::string ConsumerClient::create(const std::function<bool()>& keep_waiting) {
  std::string error;
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const std::string& k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr) != RD_KAFKA_CONF_OK && error.empty())
      error = "consumer property '" + k + "': " + errstr;
  };
  auto all_properties = settings_.client_properties;
  all_properties.insert(all_properties.end(), settings_.block_properties.begin(), settings_.block_properties.end());
  // Auto asks the broker first: while it does not answer, the block is in an outage like any other
  // (logged once, shown in the status), and asks again until it answers or the block stops.
  std::optional<GroupProtocolChoice> choice;
  std::string refusal;
  bool stopped = false;  // before the broker answered
  while (!(choice = choose_group_protocol(settings_.group_protocol, settings_.bootstrap_servers, all_properties,
                                          settings_.static_membership, kProtocolProbeTimeout, log_prefix(), refusal))) {
    if (!refusal.empty()) return refusal;
    if (log_->begin_outage(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count())) {
      spdlog::warn("{}: broker unreachable (no answer from {} within {} s to choose the group protocol); retrying",
                   log_prefix(), settings_.bootstrap_servers, kProtocolProbeTimeout.count() / 1000);
    }
    if (!keep_waiting || !keep_waiting()) {
      stopped = true;
      choice = GroupProtocolChoice{config::GroupProtocol::Classic, "auto: stopped before the broker answered"};
      break;
    }
  }
  protocol_ = *choice;
  if (log_->broker_down && !stopped) mark_broker_up();
  set("bootstrap.servers", settings_.bootstrap_servers);
  set("client.id", "picomq-connect-" + settings_.sink_key + "-" + std::to_string(settings_.block_index));
  if (protocol_.protocol == config::GroupProtocol::Consumer) {
    set("group.protocol", "consumer");
  } else {
    set("group.protocol", "classic");
    // Incremental rebalances: a member joining or leaving moves only the partitions that change
    // owner, the others keep flowing (librdkafka's default, range + roundrobin, is eager).
    set("partition.assignment.strategy", "cooperative-sticky");
  }
  // librdkafka's read-ahead: its fetcher asks for more while the records fetched and not yet
  // polled are under queued.max.messages.kbytes (and queued.min.messages, set out of the way: a
  // bound in records held 30 MB of 10 KB records and starved a stream of 50 B ones). The runtime
  // buffers what a sink needs itself ([runtime] max_buffered_*); this queue only has to keep the
  // fetcher one response ahead of the consumer: 1.5 MB asks for the next 1 MB response while half
  // of one is still queued. Measured on 207 B records (bench/README.md, "Lighter on the broker"):
  // 3,000 records (~0.6 MB, the bound before) made the consumer wait for fetches (0.82x kcat's
  // records/s after the join), 1.5 MB 1.2x, at 2 MB more of peak RSS.
  set("queued.min.messages", "10000000");
  set("queued.max.messages.kbytes", std::to_string(std::max<size_t>(settings_.read_ahead_bytes >> 10, 64)));
  // The fetcher's back-off once the queue is full (librdkafka's default 1 s): a consumer that fell
  // behind for a moment would idle that long (bench/README.md, "librdkafka 2.12"). With a short
  // queue the fetcher meets it often, and 1.5 MB lasts ~3 ms at 2 M records/s: 1 ms.
  set("fetch.queue.backoff.ms", "1");
  set("reconnect.backoff.ms", kReconnectBackoffMs);  // client_conf.h: the first request ~50 ms sooner
  for (const auto& [k, v] : settings_.client_properties) set(k, v);
  set("auto.offset.reset", settings_.auto_offset_reset == config::OffsetReset::Latest ? "latest" : "earliest");
  for (const auto& [k, v] : settings_.block_properties) set(k, v);
  // Not overridable: these are what commit-after-the-write rests on.
  set("group.id", settings_.group_id);
  set("enable.auto.commit", "false");
  set("enable.auto.offset.store", "false");
  if (!error.empty()) {
    rd_kafka_conf_destroy(conf);
    return error;
  }
  route_client_logs(conf, log_);
  rd_kafka_conf_set_rebalance_cb(conf, &ConsumerClient::rebalance_cb);
  // close() serves the group's last events with rd_kafka_queue_poll_callback on the queue
  // rd_kafka_consumer_close_queue forwards the consumer queue to, where records fetched after the
  // loop stopped consuming still arrive; without a consume callback librdkafka aborts on them
  // (rdkafka_queue.c "assert: res != RD_KAFKA_OP_RES_PASS"). Batches are read with
  // rd_kafka_consume_batch_queue, which never calls it.
  rd_kafka_conf_set_consume_cb(conf, &ConsumerClient::drop_record_fetched_while_closing);
  rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!rk_) return std::string("cannot create consumer: ") + errstr;
  rd_kafka_poll_set_consumer(rk_);
  queue_ = rd_kafka_queue_get_consumer(rk_);
  commit_queue_ = rd_kafka_queue_new(rk_);
  spdlog::info("{}: consumer group '{}' on {}, group protocol {} ({})", log_prefix(), settings_.group_id,
               settings_.bootstrap_servers, config::group_protocol_name(protocol_.protocol), protocol_.why);
  return {};
}

// Leaves the group, bounded: with the broker gone, librdkafka's own close waits for a
// coordinator that does not answer (a SIGTERM during an outage took minutes). Then the member
// is left behind, and the broker drops it after its session timeout.
void ConsumerClient::close() {
  if (!rk_) return;
  rd_kafka_queue_poll_callback(commit_queue_, 0);
  rd_kafka_queue_destroy(commit_queue_);
  bool closed = false;
  if (!log_->broker_down) {
    rd_kafka_queue_t* events = rd_kafka_queue_new(rk_);
    if (rd_kafka_error_t* e = rd_kafka_consumer_close_queue(rk_, events)) {
      spdlog::warn("{}: cannot leave the group: {}", log_prefix(), rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    } else {
      const auto deadline = Clock::now() + settings_.close_timeout;
      while (!(closed = rd_kafka_consumer_closed(rk_)) && Clock::now() < deadline && !log_->broker_down)
        rd_kafka_queue_poll_callback(events, 100);  // serves the revoke (and its commit)
    }
    rd_kafka_queue_destroy(events);
  }
  rd_kafka_queue_destroy(queue_);
  if (closed) {
    rd_kafka_destroy(rk_);
  } else {
    // Even rd_kafka_destroy_flags(NO_CONSUMER_CLOSE) waits for the coordinator (measured: the
    // session timeout, 45 s): the handle is left for the process exit.
    spdlog::warn("{}: left without leaving the group (the broker {}); it drops this member after its session timeout",
                 log_prefix(), log_->broker_down ? "is unreachable" : "did not answer in time");
    leave_behind(log_);
    log_left_behind_ = true;
  }
  rk_ = nullptr;
}

// Explicit topics plus, for a pattern, every broker topic it matches.
void ConsumerClient::refresh_subscription(bool force) {
  const auto now = Clock::now();
  if (!force && (!pattern_ || now < next_pattern_refresh_)) return;
  next_pattern_refresh_ = now + settings_.pattern_refresh;

  std::set<std::string> wanted(settings_.topics.begin(), settings_.topics.end());
  if (pattern_) {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk_, 1, nullptr, &md, 2000);
    if (err) {
      spdlog::warn("{}: cannot list the broker's topics to match pattern '{}': {}; retrying", log_prefix(),
                   *settings_.pattern, rd_kafka_err2str(err));
      if (!force) return;  // keep the current subscription until the broker answers
    } else {
      mark_broker_up();
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
    if (!std::binary_search(subscribed_.begin(), subscribed_.end(), t))
      spdlog::info("{}: subscribing to '{}'", log_prefix(), t);
  for (const auto& t : subscribed_)
    if (!wanted.count(t)) spdlog::info("{}: topic '{}' no longer subscribed", log_prefix(), t);
  subscribed_ = next;
  if (next.empty()) {
    spdlog::info("{}: no topic matches yet; waiting", log_prefix());
    rd_kafka_unsubscribe(rk_);
    return;
  }
  PartitionList list(static_cast<int>(next.size()));
  for (const auto& t : next) list.add(t, RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(rk_, list.get()))
    spdlog::error("{}: subscribe failed: {}", log_prefix(), rd_kafka_err2str(err));
}

size_t ConsumerClient::poll(std::chrono::milliseconds wait, size_t max, std::vector<MessagePtr>& out) {
  polled_.resize(std::max(polled_.size(), max));
  const ssize_t n = rd_kafka_consume_batch_queue(queue_, static_cast<int>(wait.count()), polled_.data(), max);
  size_t records = 0;
  for (ssize_t i = 0; i < n; ++i) {
    MessagePtr m(polled_[i]);
    if (m->err) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        spdlog::warn("{}: consumer error: {}", log_prefix(), rd_kafka_message_errstr(m.get()));
      continue;
    }
    ++records;
    out.push_back(std::move(m));
  }
  // Records say nothing about the broker: they may have been fetched before the outage and waited
  // in librdkafka's queue (an outage was logged as over after 0.1 s, then began again).
  return records;
}

std::vector<ConsumerClient::Lag> ConsumerClient::lags() const {
  std::vector<Lag> out;
  if (!rk_ || assignment_.empty()) return out;
  PartitionList list = PartitionList::adopt(rd_kafka_topic_partition_list_new(static_cast<int>(assignment_.size())));
  for (const auto& tp : assignment_) rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
  rd_kafka_position(rk_, list.get());
  for (int i = 0; i < list.get()->cnt; ++i) {
    const auto& p = list.get()->elems[i];
    Lag lag{TopicPartition{p.topic, p.partition}, p.offset >= 0 ? p.offset : -1, -1};
    int64_t low = -1, high = -1;
    if (rd_kafka_get_watermark_offsets(rk_, p.topic, p.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        high >= 0)
      lag.high = high;
    out.push_back(std::move(lag));
  }
  return out;
}

std::string ConsumerClient::seek(const TopicPartition& tp, int64_t offset) {
  PartitionList list(1);
  list.add(tp.topic, tp.partition, offset);
  rd_kafka_error_t* e = rd_kafka_seek_partitions(rk_, list.get(), 10000);
  std::string error;
  if (e) {
    error = rd_kafka_error_string(e);
    rd_kafka_error_destroy(e);
  } else if (const auto err = list.get()->elems[0].err) {
    error = rd_kafka_err2str(err);
  }
  return error;
}

void ConsumerClient::set_paused(bool paused) {
  paused_ = paused;
  rd_kafka_topic_partition_list_t* raw = nullptr;
  if (rd_kafka_assignment(rk_, &raw) != RD_KAFKA_RESP_ERR_NO_ERROR || !raw) return;
  PartitionList list = PartitionList::adopt(raw);
  if (paused_) {
    rd_kafka_pause_partitions(rk_, list.get());
  } else {
    rd_kafka_resume_partitions(rk_, list.get());
    wake_fetcher(list.get());
  }
}

// librdkafka 2.12 serves a resume on its main thread and does not wake the broker thread that
// fetches the partition: that one notices on its next 1 s tick (seen with debug=fetch: resumed at
// .899, "fetch decide" at 1.641), so every back-pressure pause of a sink slower than the consumer
// cost up to a second. A seek to the position after the last record taken moves the partition
// through a fetch-state change, which does wake it; the fetch queue is empty after a pause, so
// nothing is read twice (Robustness.AResumedConsumerFetchesAtOnce).
void ConsumerClient::wake_fetcher(const rd_kafka_topic_partition_list_t* assigned) {
  PartitionList positions = PartitionList::copy_of(assigned);
  if (rd_kafka_position(rk_, positions.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  // Offsets alone (no leader epoch): a seek with an epoch would first validate it with the leader.
  PartitionList seek(positions.size());
  for (const auto& p : positions)
    if (p.offset >= 0) seek.add(p.topic, p.partition, p.offset);
  if (!seek.empty())
    if (rd_kafka_error_t* e = rd_kafka_seek_partitions(rk_, seek.get(), 0)) rd_kafka_error_destroy(e);
}

int64_t ConsumerClient::check_broker(std::chrono::milliseconds every) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  if (const int64_t outage_ms = log_->settled_recovery(now_ms); outage_ms >= 0)
    spdlog::info("{}: broker reachable again after {:.1f} s", log_prefix(), outage_ms / 1000.0);
  if (!log_->broker_down) return 0;
  const auto now = Clock::now();
  if (now >= next_broker_probe_) {
    next_broker_probe_ = now + every;
    // Metadata of one assigned topic: an answer means a broker is back. Not of every topic
    // this client knows: one that finds a subscribed topic missing makes librdkafka cache that
    // and wait minutes before it looks again. Not a ListOffsets either:
    // rd_kafka_query_watermark_offsets() does not return while the leader is unknown, whatever
    // its timeout. Without partitions, the next assignment, record or commit tells instead.
    if (!assignment_.empty()) {
      rd_kafka_topic_t* topic = rd_kafka_topic_new(rk_, assignment_.front().topic.c_str(), nullptr);
      const rd_kafka_metadata_t* md = nullptr;
      if (topic && rd_kafka_metadata(rk_, 0, topic, &md, 500) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_metadata_destroy(md);
        mark_broker_up();
      }
      if (topic) rd_kafka_topic_destroy(topic);
    }
  }
  return log_->broker_down ? log_->broker_down_since_ms.load() : 0;
}

void ConsumerClient::mark_broker_up() {
  // Said by check_broker() once it held (LoggedClient::settled_recovery).
  log_->end_outage(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// ---------------------------------------------------------------- offsets

std::string ConsumerClient::store_offset(const TopicPartition& tp, int64_t next_offset) {
  PartitionList list(1);
  list.add(tp.topic, tp.partition, next_offset);
  rd_kafka_resp_err_t err = rd_kafka_offsets_store(rk_, list.get());
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list[0].err;
  return err ? rd_kafka_err2str(err) : std::string();
}

void ConsumerClient::wake() { rd_kafka_queue_yield(queue_); }

void ConsumerClient::commit_async() {
  rd_kafka_commit_queue(rk_, nullptr, commit_queue_, &ConsumerClient::commit_cb, this);
}

void ConsumerClient::serve_commit_results() { rd_kafka_queue_poll_callback(commit_queue_, 0); }

void ConsumerClient::commit_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*, void* opaque) {
  auto* self = static_cast<ConsumerClient*>(opaque);
  if (!err) self->mark_broker_up();
  if (self->committer_)
    self->committer_->commit_done(err && err != RD_KAFKA_RESP_ERR__NO_OFFSET ? rd_kafka_err2str(err) : std::string());
}

// rd_kafka_commit() would wait as long as librdkafka retries (minutes with the broker gone):
// the commit goes through a queue of its own, waited for up to close_timeout (1 s while the
// broker is known to be unreachable).
std::string ConsumerClient::commit_sync() {
  rd_kafka_queue_t* results = rd_kafka_queue_new(rk_);
  rd_kafka_commit_queue(rk_, nullptr, results, nullptr, nullptr);
  std::string error;
  // During an outage a second is enough to see the broker answer again.
  const auto wait =
      log_->broker_down ? std::min(settings_.close_timeout, std::chrono::milliseconds(1000)) : settings_.close_timeout;
  rd_kafka_event_t* ev = rd_kafka_queue_poll(results, static_cast<int>(wait.count()));
  if (!ev) {
    error = "not confirmed within " + std::to_string(wait.count()) + " ms" +
            (log_->broker_down ? " (the broker is unreachable)" : "");
  } else {
    const rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET) error = rd_kafka_err2str(err);
    else mark_broker_up();
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(results);
  return error;
}

// ---------------------------------------------------------------- rebalances

void ConsumerClient::rebalance_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
                                  void* opaque) {
  if (auto* self = static_cast<ConsumerClient*>(static_cast<LoggedClient*>(opaque)->owner))
    self->on_rebalance(err, partitions);
}

void ConsumerClient::on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions) {
  // KIP-848 is incremental whatever rd_kafka_rebalance_protocol() says before the first subscribe.
  const bool cooperative = protocol_.protocol == config::GroupProtocol::Consumer ||
                           std::string_view(rd_kafka_rebalance_protocol(rk_)) == "COOPERATIVE";
  const auto changed = to_vector(partitions);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    for (const auto& tp : changed) spdlog::info("{}: assigned {}", log_prefix(), tp.to_string());
    resolve_start_offsets(partitions);
    if (cooperative) {
      if (auto* e = rd_kafka_incremental_assign(rk_, partitions)) {
        spdlog::error("{}: incremental assign failed: {}", log_prefix(), rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
      }
      assignment_.insert(assignment_.end(), changed.begin(), changed.end());
    } else {
      rd_kafka_assign(rk_, partitions);
      assignment_ = changed;
    }
    if (paused_) rd_kafka_pause_partitions(rk_, partitions);
    mark_broker_up();  // the group coordinator answered
    listener_.on_assigned(changed);
    return;
  }
  const bool lost = rd_kafka_assignment_lost(rk_);
  for (const auto& tp : changed) spdlog::info("{}: {} {}", log_prefix(), lost ? "lost" : "revoked", tp.to_string());
  listener_.on_revoking(changed, lost);
  if (cooperative) {
    if (auto* e = rd_kafka_incremental_unassign(rk_, partitions)) {
      spdlog::error("{}: incremental unassign failed: {}", log_prefix(), rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    }
    std::erase_if(assignment_, [&](const TopicPartition& tp) {
      return std::find(changed.begin(), changed.end(), tp) != changed.end();
    });
  } else {
    rd_kafka_assign(rk_, nullptr);
    assignment_.clear();
  }
}

// Starts each newly assigned partition at its committed offset, or where auto_offset_reset
// says when the group has none, as concrete offsets. librdkafka would find the same, but gets
// to the reset through its error path, which waits 100-500 ms before asking the leader for
// the log start or end; a fresh group starts that much sooner this way. On any error the
// partition keeps librdkafka's own lookup.
void ConsumerClient::resolve_start_offsets(rd_kafka_topic_partition_list_t* partitions) {
  constexpr int kTimeoutMs = 10000;
  PartitionList committed = PartitionList::copy_of(partitions);
  PartitionList unset(partitions->cnt);
  if (rd_kafka_committed(rk_, committed.get(), kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // ListOffsets by timestamp: -2 asks for the log start, -1 for the end.
    const int64_t reset = settings_.auto_offset_reset == config::OffsetReset::Latest ? -1 : -2;
    for (int i = 0; i < committed.size(); ++i) {
      const auto& c = committed[i];
      if (c.err) continue;
      if (c.offset >= 0) partitions->elems[i].offset = c.offset;
      else unset.add(c.topic, c.partition, reset);
    }
  }
  if (!unset.empty() && rd_kafka_offsets_for_times(rk_, unset.get(), kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (const auto& u : unset) {
      if (u.err || u.offset < 0) continue;
      if (auto* p = rd_kafka_topic_partition_list_find(partitions, u.topic, u.partition)) p->offset = u.offset;
    }
  }
}

}  // namespace picomq::runtime::kafka
