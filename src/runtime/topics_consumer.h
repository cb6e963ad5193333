#pragma once
// One [[topics]] block of a sink definition at run time: one Kafka consumer in one consumer
// group, its per-partition buckets, and the delivery thread that hands batches to the plugin and
// commits after the write.
//
// Threads: the consumer thread owns the rd_kafka_t handle, polls, buckets and decides flushes;
// the delivery thread writes (with retries) and stores offsets. Decoding + transforming a batch
// is done by whichever of the two has time (see enqueue()).
// Keeping them apart means a slow write never stops the consumer from serving its group; what
// sits between them is bounded, and the consumer pauses its partitions while it is full.
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "runtime/backoff.h"
#include "runtime/bucketer.h"
#include "runtime/dead_letter.h"
#include "runtime/decoder.h"
#include "runtime/plugin_host.h"
#include "runtime/status.h"
#include "transform/chain.h"

namespace picomq::runtime {

struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

struct BlockSettings {
  std::string sink_key;
  size_t block_index = 0;
  config::TopicsBlock block;
  std::string bootstrap_servers;
  std::vector<std::pair<std::string, std::string>> client_properties;  // [broker.properties]
  size_t max_buffered_records = 100000;
  size_t max_buffered_bytes = 64u << 20;
  std::chrono::milliseconds shutdown_timeout{30000};
  std::chrono::milliseconds pattern_refresh{2000};
  RetryPolicy retry;
  std::vector<config::TransformSpec> transforms;  // the definition's [[transforms]], in order
};

class TopicsConsumer {
 public:
  using ErrorCallback = std::function<void(const std::string& message)>;

  TopicsConsumer(BlockSettings settings, SinkPlugin& plugin, StatusBoard& status, ErrorCallback on_error);
  ~TopicsConsumer();

  void start();
  // Graceful stop: flush what is buffered through the plugin, then one synchronous commit.
  void request_stop();
  // Waits for the stop to finish. False when the delivery thread was still stuck in the plugin
  // when shutdown_timeout ran out (the caller must then exit the process without cleanup).
  bool join();
  bool failed() const { return failed_.load(); }
  bool abandoned() const { return abandoned_.load(); }

 private:
  // A record the bad-record policy (skip / dead_letter) takes care of instead of the plugin.
  struct BadRecord {
    size_t index;  // in Job::messages
    BadRecordStage stage;
    std::string reason;
  };
  struct Job {
    TopicPartition tp;
    std::vector<MessagePtr> messages;  // own the bytes the batch points into
    size_t bytes = 0;
    bool prepared = false;
    DecodedBatch batch;   // decoded + transformed (by either thread, see enqueue())
    std::string failure;  // `fail` policy: a record could not be decoded or transformed (batch holds those before it)
    std::vector<BadRecord> bad;  // other policies: records left out of the batch, in offset order
    size_t filtered = 0;         // records a transform dropped
    std::string retry_error;     // a record could not be decoded for now (schema registry): prepare again
    // Where the committed offset goes once the batch is written and its bad records handled:
    // past the last message, or (failure) at the record that failed.
    int64_t commit_to = -1;
  };

  // consumer thread
  void consumer_main();
  rd_kafka_t* create_consumer(std::string& error);
  void refresh_subscription(bool force);
  void flush_due(std::chrono::steady_clock::time_point now);  // buckets the flush rules say are ready
  void enqueue(TopicPartition tp, std::vector<MessagePtr> messages);
  struct Preparer;
  void prepare(Job& job, Preparer& with);  // decode + transform
  bool apply_backpressure();
  void set_paused(bool paused, size_t records, size_t bytes);
  void read_fetch_queue_limits(rd_kafka_conf_t* conf);
  void watch_fetch_queue(size_t recent_message_bytes);
  void wake_fetcher(rd_kafka_topic_partition_list_t* assigned);
  void commit_stored();
  static void commit_done(rd_kafka_t*, rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*, void*);
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions);
  void on_revoke(const rd_kafka_topic_partition_list_t* partitions);
  void resolve_start_offsets(rd_kafka_topic_partition_list_t* partitions);
  void commit_sync(const char* why);
  void publish_status();
  void shutdown_path();

  // delivery thread
  struct InFlight {
    Job job;
    std::unique_ptr<WriteCall> call;  // null when nothing was written (failed partition, no records)
  };
  void delivery_main();
  void start_write(InFlight& entry);
  void finish_write(InFlight& entry);
  // `first` is the outcome of the first attempt, already made.
  // With a REJECTED outcome, `rejected` holds the refused records' offsets and reasons.
  bool write_with_retries(DecodedBatch& batch, WriteOutcome first, std::string& error, size_t& written_prefix,
                          std::vector<std::pair<int64_t, std::string>>& rejected);
  // Skips or dead-letters the job's bad records; false when the dead-letter write failed (the
  // block is then failed and the offset left before the first of them).
  bool handle_bad_records(Job& job);
  void store_offset(const TopicPartition& tp, int64_t next_offset);
  void fail(const TopicPartition& tp, const std::string& message);
  void release(size_t records, size_t bytes);

  static void rebalance_trampoline(rd_kafka_t*, rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*, void*);

  BlockSettings settings_;
  SinkPlugin& plugin_;
  StatusBoard& status_;
  ErrorCallback on_error_;
  std::string group_id_;
  std::string log_prefix_;
  std::optional<std::regex> pattern_;

  rd_kafka_t* rk_ = nullptr;
  rd_kafka_queue_t* queue_ = nullptr;
  rd_kafka_queue_t* commit_queue_ = nullptr;  // results of our asynchronous commits
  bool commit_in_flight_ = false;
  std::vector<std::string> subscribed_;
  std::chrono::steady_clock::time_point next_pattern_refresh_{};
  bool rebalance_cooperative_ = false;
  std::vector<TopicPartition> assignment_;
  bool paused_ = false;
  size_t fetch_queue_max_records_ = 100000;  // librdkafka's queued.min.messages
  size_t fetch_queue_max_bytes_ = 64u << 20;  // librdkafka's queued.max.messages.kbytes
  size_t recent_message_bytes_ = 0;
  bool fetcher_may_sleep_ = false;
  std::unique_ptr<Bucketer<MessagePtr>> buckets_;

  // shared between the two threads
  std::mutex mutex_;
  std::condition_variable work_cv_;   // delivery thread waits for jobs / stop
  std::condition_variable done_cv_;   // consumer thread waits for in-flight jobs to finish
  std::deque<Job> jobs_;
  std::map<TopicPartition, int> in_flight_;  // batches taken by the delivery thread, not yet finished
  bool delivery_stop_ = false;
  bool delivery_finished_ = false;
  std::set<TopicPartition> failed_partitions_;

  std::atomic<size_t> buffered_records_{0};
  std::atomic<size_t> buffered_bytes_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> offsets_stored_{false};  // stored since the last commit was issued
  std::atomic<uint64_t> delivered_records_{0};
  std::atomic<uint64_t> committed_batches_{0};
  std::atomic<uint64_t> skipped_records_{0};
  std::atomic<uint64_t> dead_lettered_records_{0};
  std::atomic<uint64_t> filtered_records_{0};
  std::unique_ptr<DeadLetterProducer> dead_letter_;  // delivery thread, created on first use

  // Decoders keep state (parser buffers), and both threads prepare batches: one each. The
  // transform chain is immutable and shared.
  struct Preparer {
    std::unique_ptr<PayloadDecoder> decoder;
  };
  std::unique_ptr<const transform::Chain> transforms_;  // null without [[transforms]]
  Preparer consumer_side_;
  Preparer delivery_side_;
  arrow::ExportOptions arrow_options_;  // the block's declared columns, for arrow-plane sinks

  std::thread consumer_thread_;
  std::thread delivery_thread_;
  std::mutex join_mutex_;
  std::condition_variable join_cv_;
  bool consumer_finished_ = false;
};

}  // namespace picomq::runtime
