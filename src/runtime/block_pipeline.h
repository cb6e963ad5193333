#pragma once
// One [[topics]] block of a sink definition at run time, wired from its parts:
//
//   ConsumerClient --poll--> Bucketer --flush rules--> jobs --> PreparationStage --> DeliveryWindow --> sink
//        ^                                                                             |
//        +--------------- OffsetCommitter (store on the delivery thread, commit here) <+
//
// Threads: the consumer thread owns the Kafka client: it polls, buckets, decides flushes,
// commits, serves rebalances and pauses the partitions while the buffer is full; the delivery
// thread drives the delivery window (writes, retries, bad records, offset stores). Preparing a
// batch is done by whichever of the two has time (see enqueue()). A slow write never stops the
// consumer from serving its group; what sits between the two is bounded.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "config/sink_definition.h"
#include "runtime/bucketer.h"
#include "runtime/delivery/delivery_window.h"
#include "runtime/delivery/in_flight.h"
#include "runtime/delivery/offset_committer.h"
#include "runtime/delivery/preparation_stage.h"
#include "runtime/delivery/retry.h"
#include "runtime/kafka/consumer_client.h"
#include "runtime/kafka/dead_letter.h"
#include "runtime/plugin_host/sink_instance.h"
#include "runtime/status.h"
#include "transform/chain.h"

namespace picomq::runtime {

struct BlockSettings {
  std::string sink_key;
  size_t block_index = 0;
  config::TopicsBlock block;
  std::string bootstrap_servers;
  std::vector<std::pair<std::string, std::string>> client_properties;  // [broker.properties]
  std::optional<std::string> group_instance_id;                        // [broker] group_instance_id
  config::GroupProtocol group_protocol = config::GroupProtocol::Auto;  // [broker] group_protocol
  size_t max_buffered_records = 100000;
  size_t max_buffered_bytes = 64u << 20;
  std::chrono::milliseconds shutdown_timeout{30000};
  std::chrono::milliseconds pattern_refresh{2000};
  RetryPolicy retry;
  std::vector<config::TransformSpec> transforms;  // the definition's [[transforms]], in order
  Tap* tap = nullptr;                             // the sink's (runtime/tap.h); may be null
};

class Tap;

class BlockPipeline final : private kafka::RebalanceListener, private DeliveryHost {
 public:
  using ErrorCallback = std::function<void(const std::string& message)>;

  BlockPipeline(BlockSettings settings, SinkInstance& sink, StatusBoard& status, ErrorCallback on_error);
  ~BlockPipeline() override;

  void start();
  // Graceful stop: flush what is buffered through the sink, then one synchronous commit.
  void request_stop();
  // Waits for the stop to finish. False when the delivery thread was still stuck in the sink
  // when shutdown_timeout ran out (the caller must then exit the process without cleanup).
  bool join();
  bool failed() const { return failed_.load(); }
  // The operator's pause (POST /sinks/{key}/pause): the consumer thread pauses every assigned
  // partition at its next poll and keeps serving its group; buffered batches are still written.
  void set_operator_paused(bool paused) { operator_paused_ = paused; }
  bool abandoned() const { return abandoned_.load(); }

 private:
  // consumer thread
  void consumer_main();
  void poll_once();
  void flush_due(std::chrono::steady_clock::time_point now);  // buckets the flush rules say are ready
  void enqueue(TopicPartition tp, std::vector<kafka::MessagePtr> messages);
  bool apply_backpressure();
  std::chrono::milliseconds poll_wait() const;
  void wait_while_sink_behind();
  void set_paused(bool paused, size_t records, size_t bytes);
  void on_assigned(const std::vector<TopicPartition>& partitions) override;
  void on_revoking(const std::vector<TopicPartition>& partitions, bool lost) override;
  void publish_status();
  void shutdown_path();

  // delivery thread
  void delivery_main();
  // Waits until the oldest write is done or another job can start; seals what the sink holds
  // (flush) when nothing else comes within poll_interval, or at once when stopping.
  void await_oldest(DeliveryWindow& window);

  // What the delivery window needs from the block (delivery thread, write_done from any).
  Waiter& waiter() override { return waiter_; }
  DeliveryCounters& counters() override { return counters_; }
  DeadLetters* dead_letters(std::string& error) override;
  void partition_failed(const TopicPartition&, const std::string& message) override { fail(message); }
  void write_done() override;
  void written(const DecodedBatch& batch, const std::vector<std::pair<int64_t, std::string>>& rejected) override;
  bool can_rewind() const override { return true; }
  void rewind(const TopicPartition& tp, int64_t offset, uint64_t generation) override {
    request_rewind(tp, offset, generation);
  }

  // The delivery window's view of the sink instance; its seal is the block's (seal()).
  struct SinkWriter final : BatchWriter {
    explicit SinkWriter(BlockPipeline& block) : block(block) {}
    void start(const DecodedBatch& batch, WriteCall& call) override { block.sink_.start(batch, call); }
    size_t max_in_flight() const override { return block.sink_.max_in_flight(); }
    void flush() override { block.seal("a resend waited poll_interval"); }
    BlockPipeline& block;
  };

  // Every seal of the writes the sink holds open (its flush(), ABI 2.2) goes through here, for one
  // of four reasons: the oldest write waited poll_interval with no batch to start beside it
  // (await_oldest), a resend waited as long (the delivery window, through SinkWriter), partitions
  // are revoked with writes of theirs under way (on_revoking), the block stops (delivery_main).
  // Up to shutdown_timeout. Any thread.
  void seal(std::string_view why);

  // The block fails: logged, and the sink hears it once (it stops every block).
  void fail(const std::string& message);
  void release(size_t records, size_t bytes);
  bool caught_up() const;  // consumer thread
  // A released write failed (delivery thread): read `tp` again from `offset`, its jobs from
  // then on carrying `generation`. Carried out by the consumer thread (take_rewinds).
  void request_rewind(const TopicPartition& tp, int64_t offset, uint64_t generation);
  void take_rewinds();
  void drop_buffered(const TopicPartition& tp, size_t& records, size_t& bytes);

  BlockSettings settings_;
  SinkInstance& sink_;
  StatusBoard& status_;
  ErrorCallback on_error_;
  std::string group_id_;
  std::string log_prefix_;
  kafka::ConsumerClient client_;
  OffsetCommitter committer_;
  std::unique_ptr<Bucketer<kafka::MessagePtr>> buckets_;
  bool paused_ = false;
  std::map<TopicPartition, uint64_t> generation_;  // consumer thread: each partition's read generation

  std::unique_ptr<const transform::Chain> transforms_;  // null without [[transforms]]
  arrow::ExportOptions arrow_options_;                  // the block's declared columns, for arrow-plane sinks
  std::unique_ptr<PreparationStage> preparation_;
  SinkWriter writer_{*this};
  std::atomic<bool> sealed_{false};                         // the sink was asked to seal since the last write started
  std::unique_ptr<kafka::DeadLetterProducer> dead_letter_;  // delivery thread, created on first use
  DeliveryCounters counters_;
  StopWaiter waiter_;  // interrupts the delivery thread's retry waits at stop

  // shared between the two threads
  std::mutex mutex_;
  std::condition_variable work_cv_;  // delivery thread waits for jobs / outcomes / stop
  std::condition_variable done_cv_;  // consumer thread waits for buffer room / the delivery thread to finish
  std::deque<QueuedJob> jobs_;
  struct Rewind {
    TopicPartition tp;
    int64_t offset;
    uint64_t generation;
  };
  std::vector<Rewind> rewinds_;   // asked for by the delivery thread, not carried out yet
  InFlightPartitions in_flight_;  // jobs the delivery thread took (begun under mutex_), not yet finished
  bool delivery_stop_ = false;
  bool delivery_finished_ = false;

  std::atomic<size_t> buffered_records_{0};
  std::atomic<size_t> buffered_bytes_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> operator_paused_{false};
  bool operator_pause_applied_ = false;  // consumer thread
  uint64_t consumed_records_ = 0;        // consumer thread
  uint64_t consumed_bytes_ = 0;
  std::atomic<bool> failed_{false};
  std::atomic<bool> abandoned_{false};

  std::thread consumer_thread_;
  std::thread delivery_thread_;
  std::mutex join_mutex_;
  std::condition_variable join_cv_;
  bool consumer_finished_ = false;
};

}  // namespace picomq::runtime
