#pragma once
// The Kafka consumer of one [[topics]] block: owns the rd_kafka_t handle and everything that
// talks to it — creation with the properties commit-after-the-write rests on, polling,
// subscription (explicit topics plus a pattern re-evaluated against the broker's topic list),
// pause / resume, the group protocol (KIP-848 or classic), rebalances (eager, cooperative, KIP-848) with
// concrete start offsets, offset store and commits (the OffsetTransport of the committer), and
// broker connectivity. Used from the block's consumer thread only, except store_offset() and
// wake(), which the delivery thread calls.
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "config/sink_definition.h"
#include "runtime/bucketer.h"
#include "runtime/delivery/offset_committer.h"
#include "runtime/kafka/client_logging.h"
#include "runtime/kafka/group_protocol.h"
#include "runtime/kafka/kafka_records.h"

namespace picomq::runtime::kafka {

struct ConsumerSettings {
  std::string sink_key;
  size_t block_index = 0;
  std::string group_id;
  std::string bootstrap_servers;
  std::vector<std::pair<std::string, std::string>> client_properties;  // [broker.properties]
  std::vector<std::pair<std::string, std::string>> block_properties;   // the block's `properties`
  config::OffsetReset auto_offset_reset = config::OffsetReset::Earliest;
  std::vector<std::string> topics;
  std::optional<std::string> pattern;           // as written
  std::optional<std::string> anchored_pattern;  // what is matched
  std::chrono::milliseconds pattern_refresh{2000};
  // How long a synchronous commit and leaving the group may take (part of shutdown_timeout).
  std::chrono::milliseconds close_timeout{10000};
  // [broker] group_protocol; auto asks the broker (group_protocol.h).
  config::GroupProtocol group_protocol = config::GroupProtocol::Auto;
  // librdkafka's read-ahead, in bytes of records fetched and not yet polled (see create()).
  size_t read_ahead_bytes = 1536u << 10;
  bool static_membership = false;  // group.instance.id is among client_properties
};

// What the consumer tells its block about ownership changes, from inside poll().
class RebalanceListener {
 public:
  virtual ~RebalanceListener() = default;
  virtual void on_assigned(const std::vector<TopicPartition>& partitions) = 0;
  // Before the partitions go: drop what is buffered for them, let their writes finish, commit.
  // `lost`: the session timed out, the partitions already belong to someone else (no commit).
  virtual void on_revoking(const std::vector<TopicPartition>& partitions, bool lost) = 0;
};

class ConsumerClient final : public OffsetTransport {
 public:
  ConsumerClient(ConsumerSettings settings, std::string log_prefix, RebalanceListener& listener);
  ~ConsumerClient() override;
  ConsumerClient(const ConsumerClient&) = delete;
  ConsumerClient& operator=(const ConsumerClient&) = delete;

  // Creates the handle: empty, or what is wrong (a bad property names it). With group_protocol
  // auto it first asks the broker, again and again while `keep_waiting()` (called between
  // attempts, a few seconds apart) says so; without an answer it takes classic.
  std::string create(const std::function<bool()>& keep_waiting = {});
  // Subscribes per the explicit topics and (every pattern_refresh, or now when `force`) the
  // pattern's matches; a change re-subscribes, which rebalances the group.
  void refresh_subscription(bool force);
  // Up to `max` messages, waiting at most `wait` for the first; errors are logged, not returned.
  size_t poll(std::chrono::milliseconds wait, size_t max, std::vector<MessagePtr>& out);
  void set_paused(bool paused);
  // Reads `tp` again from `offset`: librdkafka drops what it fetched past it. Empty, or why not.
  std::string seek(const TopicPartition& tp, int64_t offset);
  bool paused() const { return paused_; }
  // What create() chose: Consumer (KIP-848) or Classic.
  config::GroupProtocol group_protocol() const { return protocol_.protocol; }
  const std::vector<TopicPartition>& assignment() const { return assignment_; }
  // Per assigned partition: the fetch position and the broker's high watermark as last seen
  // (no broker round trip); -1 where unknown.
  struct Lag {
    TopicPartition tp;
    int64_t position = -1;
    int64_t high = -1;
  };
  std::vector<Lag> lags() const;
  // Whether the broker answers: probes it while it did not (at most once per `every`), logs the
  // recovery. Returns the epoch-ms since when it is unreachable, or 0.
  int64_t check_broker(std::chrono::milliseconds every);
  // Non-empty once the broker refused the credentials (the block stops with it).
  std::string refusal() const { return log_->refusal(); }
  int64_t broker_unreachable_since() const { return log_->broker_down ? log_->broker_down_since_ms.load() : 0; }
  // Leaves the group and destroys the handle.
  void close();

  // OffsetTransport
  std::string store_offset(const TopicPartition& tp, int64_t next_offset) override;
  void commit_async() override;
  void serve_commit_results() override;
  std::string commit_sync() override;
  void wake() override;
  void set_commit_listener(OffsetCommitter* committer) { committer_ = committer; }

  const std::string& log_prefix() const { return log_->log_prefix; }

 private:
  static void rebalance_cb(rd_kafka_t*, rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*, void*);
  // A record that reached the consumer queue after the loop stopped: never delivered nor
  // committed, so the group reads it again (see open()).
  static void drop_record_fetched_while_closing(rd_kafka_message_t*, void*) {}
  static void commit_cb(rd_kafka_t*, rd_kafka_resp_err_t, rd_kafka_topic_partition_list_t*, void*);
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions);
  void resolve_start_offsets(rd_kafka_topic_partition_list_t* partitions);
  void mark_broker_up();
  void wake_fetcher(const rd_kafka_topic_partition_list_t* assigned);

  ConsumerSettings settings_;
  // On the heap: the callbacks of a handle left behind at close still reach it.
  LoggedClient* log_ = new LoggedClient;
  bool log_left_behind_ = false;
  RebalanceListener& listener_;
  OffsetCommitter* committer_ = nullptr;
  std::optional<std::regex> pattern_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_queue_t* queue_ = nullptr;
  rd_kafka_queue_t* commit_queue_ = nullptr;  // results of our asynchronous commits
  std::vector<std::string> subscribed_;
  std::chrono::steady_clock::time_point next_pattern_refresh_{};
  std::chrono::steady_clock::time_point next_broker_probe_{};
  std::vector<TopicPartition> assignment_;
  bool paused_ = false;
  GroupProtocolChoice protocol_;
  std::vector<rd_kafka_message_t*> polled_;
};

}  // namespace picomq::runtime::kafka
