#pragma once
// A host for unit tests of a sink, without a broker or the runtime: the runtime's own option
// validation (unknown keys, types, defaults, required, allowed values, the sink's validate()),
// its plane choice (rows / batches / arrow through the runtime's Arrow exporter), write outcomes,
// rejected records, Pending completions, flush and partition notifications, logs and counters.
// Link picomq::sinkkit_testing.
//
//   kit::testing::FakeHost host(picomq::sdk::descriptor<MySink>());
//   host.open(R"({"url": "http://127.0.0.1:8080/in"})");
//   auto outcome = host.write(kit::testing::TestBatch::json("orders", 0, 100, {R"({"id":1})"}));
//   EXPECT_EQ(outcome.status, PMQ_WRITE_OK);
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::kit::testing {

struct TestHeader {
  std::string name;
  std::optional<std::string> value;  // nullopt: a null header value
};

struct TestRecord {
  int64_t offset = 0;
  std::optional<std::string> payload;  // nullopt: a tombstone
  std::optional<std::string> key;
  std::vector<TestHeader> headers;
  int64_t timestamp_ms = 1'700'000'000'000;
  std::optional<std::string> writer_schema;  // ABI 2.4 writer_schemas[i]; the batch has the array if any record has one
  // ABI 2.8 change events: the batch is one of changes if any record's op is not APPEND.
  pmq_change_op op = PMQ_OP_APPEND;
  std::optional<std::string> key_json;
};

// One batch of records from one topic-partition, owning everything its pmq_batch points at.
class TestBatch {
 public:
  TestBatch(std::string topic, int32_t partition, std::vector<TestRecord> records,
            int32_t payload_format = PMQ_PAYLOAD_JSON, std::string schema = "json", uint32_t block_index = 0);
  // JSON payloads at offsets first_offset, first_offset + 1, ...
  static TestBatch json(std::string topic, int32_t partition, int64_t first_offset, std::vector<std::string> payloads);
  TestBatch(const TestBatch& other)
      : TestBatch(other.topic_, other.raw_.partition, other.records_, other.raw_.payload_format, other.schema_,
                  other.raw_.block_index) {}
  TestBatch& operator=(const TestBatch&) = delete;

  const pmq_batch& raw() const { return raw_; }
  const std::vector<TestRecord>& records() const { return records_; }
  size_t size() const { return records_.size(); }

 private:
  void build();
  std::string topic_, schema_;
  std::vector<TestRecord> records_;
  std::vector<std::vector<pmq_header>> headers_;
  std::vector<pmq_record> pmq_records_;
  std::vector<const char*> writer_schemas_;
  pmq_batch raw_{};
};

struct Rejection {
  size_t record_index;
  std::string reason;
};

// What a write came to, as the runtime would see it.
struct WriteOutcome {
  pmq_write_status status = PMQ_WRITE_PENDING;  // PENDING only when a wait timed out
  std::string error;
  std::vector<Rejection> rejected;
  bool ok() const { return status == PMQ_WRITE_OK; }
};

class FakeHost;

// A write in flight (or finished): wait() for its outcome.
class Write {
 public:
  // The outcome once the write completed; status PENDING when `timeout` passed first.
  WriteOutcome wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool completed() const;
  // How many times the sink completed it (the contract: exactly once).
  int completions() const;
  // Whether the sink released the batch (ABI 2.3 release(); this host keeps it anyway), and
  // whether it did so against the contract (twice, or after the completion).
  bool released() const;
  bool misreleased() const;

 private:
  friend class FakeHost;
  friend struct HostCallbacks;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  WriteOutcome outcome_;
  int completions_ = 0;
  bool finished_ = false;
  int releases_ = 0;
  bool released_late_ = false;
  std::shared_ptr<const TestBatch> batch_;  // alive until completed, as the ABI promises
  std::vector<uint8_t> arrow_storage_;      // the exported schema and array when the plane is arrow
};

// check()'s problems one per line, for a test's failure message or a find().
inline std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) out += p + "\n";
  return out;
}

class FakeHost {
 public:
  // A descriptor in this process (picomq::sdk::descriptor<MySink>()), or from load().
  explicit FakeHost(const pmq_sink_plugin& plugin);
  // Loads a plugin shared library (path to the .so), as the runtime does.
  static std::unique_ptr<FakeHost> load(const std::string& path);
  ~FakeHost();
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  // The problems the runtime would report for this [plugin_config] (a JSON object): the option
  // table's, then the sink's validate()'s, each "key: message". Empty: the config is fine.
  std::vector<std::string> check(std::string_view config_json) const;
  // Validates like check() (once: the sink opens on the options that passed) and opens the
  // sink; throws std::runtime_error with the problems or the sink's open() error.
  void open(std::string_view config_json = "{}", std::string sink_key = "test");
  // The definition's [[topics]] blocks the sink sees from now on (ABI 2.7 subscriptions), as the
  // runtime passes them: [{"topics": ["a", "b"], "pattern": null}, ...]. Unset: not offered.
  void subscriptions(std::string json) {
    subscriptions_ = std::move(json);
    api_.subscriptions = subscriptions_.c_str();
  }
  bool is_open() const { return instance_ != nullptr; }

  // Writes on the plane the runtime would deliver on and waits for the outcome.
  WriteOutcome write(const TestBatch& batch, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Starts a write and returns at once (an asynchronous sink's write stays pending).
  std::shared_ptr<Write> start_write(const TestBatch& batch);

  void flush(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void assign(uint32_t block_index, const std::vector<std::pair<std::string, int32_t>>& partitions);
  void revoke(uint32_t block_index, const std::vector<std::pair<std::string, int32_t>>& partitions);
  // ABI 2.6: the host stops the instance now, from this thread, beside a write in progress on
  // another (the one call that is not serialised).
  void stop();
  void close();

  uint32_t delivery_plane() const { return plane_; }
  uint32_t unread_fields() const { return unread_fields_; }
  uint32_t max_in_flight() const { return max_in_flight_; }
  // "<level>: <message>" per line the sink logged (debug, info, warn, error).
  std::vector<std::string> logs() const;
  bool logged(std::string_view fragment) const;
  uint64_t counter(std::string_view name) const;

 private:
  friend struct HostCallbacks;
  void* dl_handle_ = nullptr;
  const pmq_sink_plugin* plugin_;
  uint32_t plane_ = PMQ_PLANE_ROWS;  // the best native plane, or the one set_plane() named
  std::string plane_error_;
  struct Options;
  // check(), keeping the validated options in `accepted` (when given) if there is no problem.
  std::vector<std::string> validate_config(std::string_view config_json, Options* accepted) const;
  std::unique_ptr<Options> options_;
  pmq_host_api api_{};
  std::string sink_key_;
  std::string subscriptions_;
  void* instance_ = nullptr;
  uint32_t unread_fields_ = 0;
  uint32_t max_in_flight_ = 1;
  std::mutex call_mutex_;  // write calls into the instance, one at a time as the runtime makes them
  mutable std::mutex mutex_;
  std::vector<std::string> logs_;
  std::map<std::string, uint64_t, std::less<>> counters_;
  std::vector<std::shared_ptr<Write>> writes_;  // kept until close(): the sink may complete late
};

}  // namespace picomq::kit::testing
