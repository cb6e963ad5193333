// picomq-connect C++ sink SDK: header-only, over the C ABI in picomq/sink_abi.h.
//
//   #include <picomq/sdk.hpp>
//
//   class MySink : public picomq::sdk::BaseSink<MySink> {
//    public:
//     static constexpr std::string_view sink_name = "my_sink";
//     void open(const picomq::sdk::Config& config) { ... }
//     void write(const picomq::sdk::Record& record) { ... }
//     void close() { ... }
//   };
//   PICOMQ_SINK_PLUGIN(MySink)
//
// A sink declares its planes explicitly (accepted_data_planes, native_data_planes) and
// implements write() / write_batch() / write_arrow_batch() for the native ones; nothing is
// inferred. Outcomes: return normally when everything is written; throw RetryableError,
// PartialWriteError or FatalError otherwise; name refused records with reject() (or throw
// RecordRejected). No exception leaves the plugin: the trampolines below turn them into
// outcomes. See docs/sdk.md.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "picomq/arrow_view.hpp"
#include "picomq/sink_abi.h"

namespace picomq::sdk {

enum class DataPlane : uint32_t {
  Rows = PMQ_PLANE_ROWS,
  Batches = PMQ_PLANE_BATCHES,
  Arrow = PMQ_PLANE_ARROW,
};

inline std::string_view to_string(DataPlane plane) { return pmq_plane_name(static_cast<uint32_t>(plane)); }

enum class PayloadFormat { Json = PMQ_PAYLOAD_JSON, Text = PMQ_PAYLOAD_TEXT, Raw = PMQ_PAYLOAD_RAW };

enum class LogLevel { Debug = PMQ_LOG_DEBUG, Info = PMQ_LOG_INFO, Warn = PMQ_LOG_WARN, Error = PMQ_LOG_ERROR };

using Bytes = std::span<const uint8_t>;

// ---------------------------------------------------------------- outcomes

// Nothing was written; the runtime retries the same batch after a back-off.
struct RetryableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Some of the batch may be written; the runtime retries it (make writes idempotent).
struct PartialWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Retrying cannot help (bad credentials, missing table...): the sink stops in Error.
struct FatalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// One record the destination refused; the rest of the batch is written.
struct RecordRejected : std::runtime_error {
  RecordRejected(size_t record_index, const std::string& reason) : std::runtime_error(reason), index(record_index) {}
  size_t index;
};

// A write still in flight (an asynchronous sink's write_batch / write_arrow_batch returns one).
// Complete it exactly once, from any thread: done(), or retry / partial / fatal with a reason;
// name refused records with reject() before done(). The batch it was started for stays valid
// until then. Dropping every copy without completing reports a possibly partial failure.
class Pending {
 public:
  Pending() = default;
  void done() { finish(state_ && state_->rejected ? PMQ_WRITE_REJECTED : PMQ_WRITE_OK, nullptr); }
  void retry(const std::string& reason) { finish(PMQ_WRITE_RETRY, reason.c_str()); }
  void partial(const std::string& reason) { finish(PMQ_WRITE_PARTIAL, reason.c_str()); }
  void fatal(const std::string& reason) { finish(PMQ_WRITE_FATAL, reason.c_str()); }
  void reject(size_t record_index, const std::string& reason) {
    if (!state_ || state_->completed.load()) return;
    state_->host->reject_record(state_->result, record_index, reason.c_str());
    state_->rejected = true;
  }
  bool completed() const { return !state_ || state_->completed.load(); }
  // ABI 2.3: the sink holds what it needs of the batch (encoded or copied it), so the host may
  // free the batch now instead of at the completion; the batch must not be read after this. A
  // RETRY after it makes the host read the records again from the broker (see sink_abi.h).
  // Call after any reject(). Returns false (and does nothing) on a host older than ABI 2.3.
  bool release() {
    if (!state_ || state_->completed.load() || state_->released) return false;
    if (state_->host->struct_size < offsetof(pmq_host_api, release) + sizeof(state_->host->release) ||
        !state_->host->release)
      return false;
    state_->released = true;
    state_->host->release(state_->result);
    return true;
  }

 private:
  template <class S>
  friend class BaseSink;
  template <class S>
  friend struct Exporter;
  struct State {
    const pmq_host_api* host = nullptr;
    pmq_write_result* result = nullptr;
    std::atomic<bool> completed{false};
    bool rejected = false;
    bool released = false;
    ~State() {
      if (!completed.exchange(true)) {
        host->set_error(result, "the sink dropped a pending write without completing it");
        host->complete(result, PMQ_WRITE_PARTIAL);
      }
    }
  };
  explicit Pending(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void finish(pmq_write_status status, const char* reason) {
    if (!state_ || state_->completed.exchange(true)) return;  // exactly once
    if (reason) state_->host->set_error(state_->result, reason);
    state_->host->complete(state_->result, status);
  }
  std::shared_ptr<State> state_;
};

// ---------------------------------------------------------------- records

struct Header {
  std::string_view name;
  std::optional<Bytes> value;  // nullopt: a null header value
};

inline std::string_view as_text(Bytes bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

// One record of a batch; a view valid during the write call.
class Record {
 public:
  Record(const pmq_batch* batch, size_t index)
      : batch_(batch), record_(pmq_batch_record(batch, index)), index_(index) {}

  size_t index() const { return index_; }  // position in its batch (what reject() takes)
  std::string_view topic() const { return batch_->topic; }
  int32_t partition() const { return batch_->partition; }
  int64_t offset() const { return record_->offset; }
  int64_t timestamp_ms() const { return record_->timestamp_ms; }  // -1: none
  std::optional<Bytes> key() const {
    if (!record_->key.data) return std::nullopt;
    return Bytes(record_->key.data, record_->key.size);
  }
  size_t header_count() const { return record_->header_count; }
  Header header(size_t i) const {
    const pmq_header& h = record_->headers[i];
    Header out{as_text({h.name.data, h.name.size}), std::nullopt};
    if (h.value.data) out.value = Bytes(h.value.data, h.value.size);
    return out;
  }
  std::vector<Header> headers() const {
    std::vector<Header> out;
    out.reserve(header_count());
    for (size_t i = 0; i < header_count(); ++i) out.push_back(header(i));
    return out;
  }
  PayloadFormat format() const { return static_cast<PayloadFormat>(batch_->payload_format); }
  std::string_view schema() const { return batch_->schema; }
  // ABI 2.4: the writer schema (JSON text) the payload was decoded by, for an avro block; empty
  // when there is none (another schema, a tombstone, a host older than 2.4).
  std::string_view writer_schema() const {
    const char* s = pmq_batch_writer_schema(batch_, index_);
    return s ? std::string_view(s) : std::string_view();
  }
  bool is_tombstone() const { return record_->payload.data == nullptr; }
  // ABI 2.8, a block with `changes` (docs/changes.md): what the record asks of the destination
  // (PMQ_OP_APPEND for plain records), and the row's key as a JSON object (empty: none).
  pmq_change_op op() const { return static_cast<pmq_change_op>(pmq_record_op(batch_, record_)); }
  std::string_view key_json() const {
    const pmq_bytes key = pmq_record_key_json(batch_, record_);
    return key.data ? std::string_view(reinterpret_cast<const char*>(key.data), key.size) : std::string_view();
  }
  Bytes payload() const { return {record_->payload.data, record_->payload.size}; }
  // JSON and text payloads are UTF-8: this is the payload as text.
  std::string_view payload_text() const { return as_text(payload()); }
  const pmq_record& raw() const { return *record_; }
  const pmq_batch* batch() const { return batch_; }  // the batch this record belongs to

 private:
  const pmq_batch* batch_;
  const pmq_record* record_;
  size_t index_;
};

// Records of one topic-partition, in offset order; a view valid during the write call.
class Batch {
 public:
  explicit Batch(const pmq_batch* batch) : batch_(batch) {}

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Record;
    using difference_type = std::ptrdiff_t;
    iterator(const pmq_batch* b, size_t i) : batch_(b), i_(i) {}
    Record operator*() const { return Record(batch_, i_); }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      auto copy = *this;
      ++i_;
      return copy;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const pmq_batch* batch_;
    size_t i_;
  };

  std::string_view topic() const { return batch_->topic; }
  int32_t partition() const { return batch_->partition; }
  PayloadFormat format() const { return static_cast<PayloadFormat>(batch_->payload_format); }
  std::string_view schema() const { return batch_->schema; }
  // The [[topics]] block the batch came from (0 from a host older than ABI 2.2).
  uint32_t block_index() const {
    return batch_->struct_size >= offsetof(pmq_batch, block_index) + sizeof(uint32_t) ? batch_->block_index : 0;
  }
  size_t size() const { return batch_->record_count; }
  bool empty() const { return size() == 0; }
  Record operator[](size_t i) const { return Record(batch_, i); }
  iterator begin() const { return {batch_, 0}; }
  iterator end() const { return {batch_, size()}; }
  const pmq_batch& raw() const { return *batch_; }

 private:
  const pmq_batch* batch_;
};

// One batch as an Arrow record batch (Arrow C Data Interface). Read it with view() (an
// ArrowBatchView, picomq/arrow_view.hpp) or hand schema() and array() to Arrow; a sink that
// needs it after the call (a write still in flight) takes ownership with take_schema() /
// take_array() and calls their release callbacks when done.
class ArrowBatch {
 public:
  explicit ArrowBatch(const pmq_arrow_batch* batch) : batch_(batch) {}
  std::string_view topic() const { return batch_->topic; }
  int32_t partition() const { return batch_->partition; }
  uint32_t block_index() const {
    return batch_->struct_size >= offsetof(pmq_arrow_batch, block_index) + sizeof(uint32_t) ? batch_->block_index : 0;
  }
  size_t size() const { return batch_->record_count; }
  std::span<const int64_t> offsets() const { return {batch_->offsets, batch_->record_count}; }
  const ArrowSchema* schema() const { return batch_->arrow_schema; }
  const ArrowArray* array() const { return batch_->arrow_array; }
  ArrowBatchView view() const { return ArrowBatchView(schema(), array()); }  // columns: docs/arrow.md
  ArrowSchema take_schema() const { return take(batch_->arrow_schema); }
  ArrowArray take_array() const { return take(batch_->arrow_array); }
  const pmq_arrow_batch& raw() const { return *batch_; }

 private:
  template <class T>
  static T take(T* from) {  // the C Data Interface move: copy, then mark the source released
    T moved = *from;
    from->release = nullptr;
    return moved;
  }
  const pmq_arrow_batch* batch_;
};

// ---------------------------------------------------------------- configuration

// The validated [plugin_config] of this instance (defaults filled in by the runtime from the
// sink's option table). Reading an option the table does not declare, or as another type than
// it declares, is a bug of the sink: it throws std::logic_error naming the option (in open()
// the sink then fails to open with that message), instead of quietly reading "unset".
class Config {
 public:
  // `declared`: the sink's option table (what the SDK passes); without one (a hand-built host in
  // a test) nothing is checked.
  explicit Config(const pmq_host_api* host) : host_(host) {}
  Config(const pmq_host_api* host, std::span<const pmq_option> declared)
      : host_(host), declared_(declared), checked_(true) {}
  bool has(const char* name) const {
    declared(name, {});
    return host_->config_has(host_->host_ctx, name) != 0;
  }
  std::string string(const char* name) const {
    declared(name, {PMQ_OPTION_STRING});
    const char* v = host_->config_string(host_->host_ctx, name);
    return v ? v : "";
  }
  int64_t integer(const char* name) const {
    declared(name, {PMQ_OPTION_INT, PMQ_OPTION_DURATION, PMQ_OPTION_BYTE_SIZE});
    return host_->config_int(host_->host_ctx, name);
  }
  double number(const char* name) const {
    declared(name, {PMQ_OPTION_FLOAT, PMQ_OPTION_INT});
    return host_->config_float(host_->host_ctx, name);
  }
  bool boolean(const char* name) const {
    declared(name, {PMQ_OPTION_BOOL});
    return host_->config_bool(host_->host_ctx, name) != 0;
  }
  std::chrono::milliseconds duration(const char* name) const {
    declared(name, {PMQ_OPTION_DURATION});
    return std::chrono::milliseconds(host_->config_int(host_->host_ctx, name));
  }
  uint64_t byte_size(const char* name) const {
    declared(name, {PMQ_OPTION_BYTE_SIZE});
    return static_cast<uint64_t>(host_->config_int(host_->host_ctx, name));
  }
  std::vector<std::string> strings(const char* name) const {
    declared(name, {PMQ_OPTION_STRING_LIST});
    std::vector<std::string> out;
    const size_t n = host_->config_list_size(host_->host_ctx, name);
    for (size_t i = 0; i < n; ++i) out.emplace_back(host_->config_list_item(host_->host_ctx, name, i));
    return out;
  }
  std::string json(const char* name) const {
    declared(name, {});
    const char* v = host_->config_json(host_->host_ctx, name);
    return v ? v : "null";
  }
  // The definition's [[topics]] blocks as JSON (ABI 2.7 pmq_host_api.subscriptions): what the
  // instance can be handed, for a sink whose template of destinations must tell the topics
  // apart. Empty from an older host.
  std::string_view subscriptions_json() const {
    constexpr size_t end = offsetof(pmq_host_api, subscriptions) + sizeof(pmq_host_api::subscriptions);
    return host_ && end <= host_->struct_size && host_->subscriptions ? host_->subscriptions : "";
  }

 private:
  // Throws unless `name` is in the option table with one of `types` (any type when empty).
  void declared(const char* name, std::initializer_list<int32_t> types) const {
    if (!checked_) return;
    for (const pmq_option& o : declared_) {
      if (std::string_view(o.name) != name) continue;
      if (types.size() == 0) return;
      for (int32_t t : types)
        if (o.type == t) return;
      throw std::logic_error(std::string("option '") + name + "' is read as another type than the sink declares it");
    }
    throw std::logic_error(std::string("option '") + name + "' is not declared in the sink's option table");
  }
  const pmq_host_api* host_;
  std::span<const pmq_option> declared_;
  bool checked_ = false;
};

// What a sink's validate() reports: every problem of the configuration, each naming its key.
class ConfigProblems {
 public:
  void add(std::string_view key, std::string_view message) {
    text_.append(key).append(": ").append(message).push_back('\n');
  }
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  // For open(), which re-checks what validate() checked (a host may skip validate()): every
  // problem as one FatalError, one per line.
  void throw_if_any() const {
    if (empty()) return;
    std::string message = text_;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    throw FatalError(message);
  }

 private:
  std::string text_;
};

// A wait that stop() ends at once, for every waiter, now and later: what lets the host's stop()
// (ABI 2.6) and close() cut a back-off, a Retry-After or a poll short. A sink's own is
// BaseSink::stopping(); the kit's clients keep theirs (kit::StopSignal is this class).
//
//   while (!try_connect())
//     if (!stopping().wait_for(backoff.next())) throw sdk::RetryableError("stopping");
class StopSignal {
 public:
  // False when stopped (before or during the wait): give up now.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> delay) const {
    std::unique_lock lock(mutex_);
    return !cv_.wait_for(lock, delay, [&] { return stopped_; });
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool stopped_ = false;
};

// One partition named by a partition notification (valid for the call).
struct TopicPartition {
  std::string_view topic;
  int32_t partition;
};

// ---------------------------------------------------------------- the base class

template <class Derived>
class BaseSink {
 public:
  // Defaults a sink shadows with its own static members.
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description = "";
  static constexpr std::array<DataPlane, 1> accepted_data_planes{DataPlane::Rows};
  static constexpr std::array<DataPlane, 1> native_data_planes{DataPlane::Rows};
  static constexpr std::array<pmq_option, 0> options{};
  // Writes of one [[topics]] block that may be pending at once: an asynchronous sink's
  // write_batch / write_arrow_batch return sdk::Pending (see pending()).
  static constexpr uint32_t max_in_flight = 1;

  // Hooks a sink shadows. The ones it does not are not exported: a plane declared native
  // without its hook is refused when the plugin loads.
  void open(const Config&) {}
  void write(const Record&) {}
  void write_batch(const Batch&) {}
  void write_arrow_batch(const ArrowBatch&) {}
  void close() {}
  // ABI 2.2 hooks; not exported unless shadowed. flush(): complete every pending write now
  // (seal what is accumulating). partitions_*(): a [[topics]] block gained or is handing away
  // these partitions. A sink may also declare
  //   static void validate(const Config&, ConfigProblems&);
  // ABI 2.6: stop() runs when the host stops the instance, on another thread, maybe during a
  // write (see sink_abi.h), after stopping() is signalled: end waits the signal does not reach
  // (e.g. a kit::RequestEngine's resends). Must not block.
  void stop() {}
  // pure cross-option checks, run before open() and by `--check`.
  void flush(std::chrono::milliseconds /*timeout*/) {}
  void partitions_assigned(uint32_t /*block_index*/, const std::vector<TopicPartition>&) {}
  void partitions_revoked(uint32_t /*block_index*/, const std::vector<TopicPartition>&) {}

 protected:
  // Signalled by the host's stop() (ABI 2.6) and before close(): every wait of a synchronous
  // write (a back-off, a poll) waits on it, so a stopping runtime is not held up by it.
  const StopSignal& stopping() const { return stopping_; }
  void log(LogLevel level, const std::string& message) const {
    if (host_) host_->log(host_->host_ctx, static_cast<int32_t>(level), message.c_str());
  }
  // During a write: this record (index in the batch) was refused by the destination. The
  // write then reports the refused records and the rest as written.
  void reject(size_t record_index, const std::string& reason) {
    if (host_ && result_) host_->reject_record(result_, record_index, reason.c_str());
    rejected_ = true;
  }
  const pmq_host_api* host() const { return host_; }
  // The definition's key of this sink (empty from a host older than ABI 2.2).
  std::string_view sink_key() const {
    return host_offers(&pmq_host_api::sink_key) ? std::string_view(host_->sink_key) : std::string_view();
  }
  // Adds n to this instance's counter `name` ([a-z0-9_]+), shown in the status and metrics.
  // Any thread. A no-op on a host older than ABI 2.2.
  void count(const char* name, uint64_t n = 1) const {
    if (host_offers(&pmq_host_api::count)) host_->count(host_->host_ctx, name, n);
  }
  // During open(): this instance never reads these record fields (PMQ_FIELD_* bits), so the host
  // may leave them empty and save extracting them (PMQ_FIELD_HEADERS: records come without
  // headers). A host older than ABI 2.1 fills them anyway.
  void declare_unread_fields(uint32_t fields) const {
    if (host_offers(&pmq_host_api::set_unread_fields)) host_->set_unread_fields(host_->host_ctx, fields);
  }
  // During open(): this instance keeps at most n writes per block pending (1 up to the class's
  // max_in_flight), e.g. when its configuration needs writes in order. Needs a 2.1 host.
  void declare_max_in_flight(uint32_t n) const {
    if (host_offers(&pmq_host_api::set_max_in_flight)) host_->set_max_in_flight(host_->host_ctx, n);
  }
  // During open(): this instance takes its batches on `plane`, one of the class's native planes,
  // not the best one (for a sink whose plane depends on its configuration). Needs a 2.5 host
  // (this header's plugins run on no older one).
  void declare_plane(DataPlane plane) const {
    if (host_offers(&pmq_host_api::set_plane)) host_->set_plane(host_->host_ctx, static_cast<uint32_t>(plane));
  }
  // Whether the host's pmq_host_api has this function: set, and within the struct_size of a
  // host of an older minor ABI (whose struct ends earlier).
  template <class Fn>
  bool host_offers(Fn pmq_host_api::*function) const {
    static const pmq_host_api layout{};  // where the member sits, measured on a whole struct
    const auto offset = static_cast<size_t>(reinterpret_cast<const char*>(&(layout.*function)) -
                                            reinterpret_cast<const char*>(&layout));
    return host_ && offset + sizeof(Fn) <= host_->struct_size && host_->*function != nullptr;
  }
  // During write_batch / write_arrow_batch of an asynchronous sink: the handle of this write,
  // to complete later (the method returns it).
  Pending pending() {
    auto state = std::make_shared<typename Pending::State>();
    state->host = host_;
    state->result = result_;
    pending_ = state;
    return Pending(std::move(state));
  }

 private:
  template <class S>
  friend struct Exporter;
  const pmq_host_api* host_ = nullptr;
  pmq_write_result* result_ = nullptr;
  bool rejected_ = false;
  StopSignal stopping_;
  // The handle of the write in progress, held until the trampoline knows its outcome, so a
  // handle dropped by a throw cannot complete the write behind the synchronous status.
  std::shared_ptr<typename Pending::State> pending_;
};

template <class S>
struct Exporter {
  using Base = BaseSink<S>;
  static constexpr bool implements_write = !std::is_same_v<decltype(&S::write), decltype(&Base::write)>;
  static constexpr bool implements_write_batch =
      !std::is_same_v<decltype(&S::write_batch), decltype(&Base::write_batch)>;
  static constexpr bool implements_write_arrow_batch =
      !std::is_same_v<decltype(&S::write_arrow_batch), decltype(&Base::write_arrow_batch)>;
  static constexpr bool implements_flush = !std::is_same_v<decltype(&S::flush), decltype(&Base::flush)>;
  static constexpr bool implements_partitions =
      !std::is_same_v<decltype(&S::partitions_assigned), decltype(&Base::partitions_assigned)> ||
      !std::is_same_v<decltype(&S::partitions_revoked), decltype(&Base::partitions_revoked)>;
  static constexpr bool implements_validate = requires(const Config& c, ConfigProblems& p) { S::validate(c, p); };
  static constexpr bool implements_stop = !std::is_same_v<decltype(&S::stop), decltype(&Base::stop)>;
  // ABI 2.8: `static constexpr uint32_t change_ops` (PMQ_CHANGE_OP_BIT of each operation it
  // applies) in a sink that applies change events; none: plain records only.
  static constexpr uint32_t change_ops = [] {
    if constexpr (requires { S::change_ops; }) return static_cast<uint32_t>(S::change_ops);
    else return uint32_t{0};
  }();
  // ABI 2.9: `static constexpr bool takes_redrives = true` in a sink that writes a record handed
  // again long after later offsets of its partition (docs/abi.md); none: the host refuses redrives.
  static constexpr uint32_t takes_redrives = [] {
    if constexpr (requires { S::takes_redrives; }) return static_cast<uint32_t>(S::takes_redrives ? 1 : 0);
    else return uint32_t{0};
  }();
  static std::span<const pmq_option> option_table() { return {S::options.data(), S::options.size()}; }

  template <class Planes>
  static constexpr uint32_t bits(const Planes& planes) {
    uint32_t out = 0;
    for (DataPlane p : planes) out |= static_cast<uint32_t>(p);
    return out;
  }

  static void copy_message(char* errbuf, size_t size, const char* message) {
    std::snprintf(errbuf, size, "%s", message);
  }

  static void* open(const pmq_host_api* host, const char*, char* errbuf, size_t errbuf_size) noexcept {
    S* sink = nullptr;
    try {
      sink = new S();
      static_cast<Base*>(sink)->host_ = host;
      sink->open(Config(host, option_table()));
      return sink;
    } catch (const std::exception& e) {
      copy_message(errbuf, errbuf_size, e.what());
    } catch (...) {
      copy_message(errbuf, errbuf_size, "open() threw a non-standard exception");
    }
    delete sink;
    return nullptr;
  }

  template <class Call>
  static pmq_write_status guarded(void* instance, pmq_write_result* result, Call&& call) noexcept {
    auto* sink = static_cast<S*>(instance);
    Base* base = sink;
    base->result_ = result;
    base->rejected_ = false;
    base->pending_.reset();
    auto fail = [&](pmq_write_status status, const char* message) {
      // A handle taken before the failure must not complete this write a second time.
      if (base->pending_) base->pending_->completed = true;
      base->pending_.reset();
      if (base->host_) base->host_->set_error(result, message);
      base->result_ = nullptr;
      return status;
    };
    try {
      if constexpr (std::is_same_v<decltype(call(*sink)), Pending>) {
        Pending handle = call(*sink);
        if (!handle.state_) return fail(PMQ_WRITE_FATAL, "the sink returned an empty Pending (use pending())");
        base->pending_.reset();
        base->result_ = nullptr;
        return PMQ_WRITE_PENDING;  // completed through the handle, maybe already
      } else {
        call(*sink);
      }
    } catch (const RecordRejected& e) {
      if (base->pending_) base->pending_->completed = true;
      base->pending_.reset();
      base->host_->reject_record(result, e.index, e.what());
      base->result_ = nullptr;
      return PMQ_WRITE_REJECTED;
    } catch (const RetryableError& e) {
      return fail(PMQ_WRITE_RETRY, e.what());
    } catch (const PartialWriteError& e) {
      return fail(PMQ_WRITE_PARTIAL, e.what());
    } catch (const FatalError& e) {
      return fail(PMQ_WRITE_FATAL, e.what());
    } catch (const std::exception& e) {  // unknown failure: assume some of it may be written
      return fail(PMQ_WRITE_PARTIAL, e.what());
    } catch (...) {
      return fail(PMQ_WRITE_PARTIAL, "the sink threw a non-standard exception");
    }
    base->result_ = nullptr;
    base->pending_.reset();
    return base->rejected_ ? PMQ_WRITE_REJECTED : PMQ_WRITE_OK;
  }

  static pmq_write_status write_record(void* instance, const pmq_batch* batch, size_t index,
                                       pmq_write_result* result) noexcept {
    return guarded(instance, result, [&](S& s) { s.write(Record(batch, index)); });
  }
  static pmq_write_status write_batch(void* instance, const pmq_batch* batch, pmq_write_result* result) noexcept {
    return guarded(instance, result, [&](S& s) { return s.write_batch(Batch(batch)); });
  }
  static pmq_write_status write_arrow(void* instance, const pmq_arrow_batch* batch, pmq_write_result* result) noexcept {
    return guarded(instance, result, [&](S& s) { return s.write_arrow_batch(ArrowBatch(batch)); });
  }
  static int validate(const pmq_host_api* host, const char*, char* errbuf, size_t errbuf_size) noexcept {
    try {
      ConfigProblems problems;
      if constexpr (implements_validate) S::validate(Config(host, option_table()), problems);
      if (problems.empty()) return 1;
      copy_message(errbuf, errbuf_size, problems.text().c_str());
    } catch (const std::exception& e) {
      copy_message(errbuf, errbuf_size, e.what());
    } catch (...) {
      copy_message(errbuf, errbuf_size, "validate() threw a non-standard exception");
    }
    return 0;
  }
  template <class Call>
  static void hook(void* instance, const char* name, Call&& call) noexcept {
    auto* sink = static_cast<S*>(instance);
    try {
      call(*sink);
    } catch (const std::exception& e) {
      static_cast<Base*>(sink)->log(LogLevel::Error, std::string(name) + "() failed: " + e.what());
    } catch (...) {
      static_cast<Base*>(sink)->log(LogLevel::Error, std::string(name) + "() threw a non-standard exception");
    }
  }
  static void flush(void* instance, int64_t timeout_ms) noexcept {
    hook(instance, "flush", [&](S& s) { s.flush(std::chrono::milliseconds(timeout_ms)); });
  }
  static std::vector<TopicPartition> partition_list(const pmq_topic_partition* list, size_t count) {
    std::vector<TopicPartition> out;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i) out.push_back({list[i].topic, list[i].partition});
    return out;
  }
  static void partitions_assigned(void* instance, uint32_t block, const pmq_topic_partition* list,
                                  size_t count) noexcept {
    hook(instance, "partitions_assigned", [&](S& s) { s.partitions_assigned(block, partition_list(list, count)); });
  }
  static void partitions_revoked(void* instance, uint32_t block, const pmq_topic_partition* list,
                                 size_t count) noexcept {
    hook(instance, "partitions_revoked", [&](S& s) { s.partitions_revoked(block, partition_list(list, count)); });
  }

  static void stop(void* instance) noexcept {
    auto* sink = static_cast<S*>(instance);
    static_cast<Base*>(sink)->stopping_.stop();
    if constexpr (implements_stop) hook(instance, "stop", [](S& s) { s.stop(); });
  }

  static void close(void* instance) noexcept {
    auto* sink = static_cast<S*>(instance);
    static_cast<Base*>(sink)->stopping_.stop();
    try {
      sink->close();
    } catch (const std::exception& e) {
      static_cast<Base*>(sink)->log(LogLevel::Error, std::string("close() failed: ") + e.what());
    } catch (...) {
      static_cast<Base*>(sink)->log(LogLevel::Error, "close() threw a non-standard exception");
    }
    delete sink;
  }

  static const pmq_sink_plugin& descriptor() {
    static const std::string name(S::sink_name), version(S::sink_version), description(S::description);
    static const pmq_sink_plugin d = {
        .struct_size = sizeof(pmq_sink_plugin),
        .abi_version = PMQ_SINK_ABI_VERSION,
        .name = name.c_str(),
        .version = version.c_str(),
        .description = description.empty() ? nullptr : description.c_str(),
        .accepted_planes = bits(S::accepted_data_planes),
        .native_planes = bits(S::native_data_planes),
        .options = S::options.data(),
        .option_count = S::options.size(),
        .option_size = sizeof(pmq_option),
        .open = &Exporter::open,
        .write_record = implements_write ? &Exporter::write_record : nullptr,
        .write_batch = implements_write_batch ? &Exporter::write_batch : nullptr,
        .write_arrow = implements_write_arrow_batch ? &Exporter::write_arrow : nullptr,
        .close = &Exporter::close,
        .max_in_flight = S::max_in_flight,
        .validate = implements_validate ? &Exporter::validate : nullptr,
        .flush = implements_flush ? &Exporter::flush : nullptr,
        .partitions_assigned = implements_partitions ? &Exporter::partitions_assigned : nullptr,
        .partitions_revoked = implements_partitions ? &Exporter::partitions_revoked : nullptr,
        .stop = &Exporter::stop,
        .change_ops = change_ops,
        .takes_redrives = takes_redrives,
    };
    return d;
  }
};

template <class S>
const pmq_sink_plugin& descriptor() {
  return Exporter<S>::descriptor();
}

// ---------------------------------------------------------------- the plane contract

struct DataPlaneSpec {
  std::vector<DataPlane> accepted_planes;
  std::vector<DataPlane> native_planes;
  DataPlane best_plane;  // the plane batches are delivered on
};

inline std::vector<DataPlane> planes_of(uint32_t bits) {
  std::vector<DataPlane> out;
  for (uint32_t p = PMQ_PLANE_ROWS; p <= PMQ_PLANE_ARROW; p <<= 1)
    if (bits & p) out.push_back(static_cast<DataPlane>(p));
  return out;
}

// The normalised plane contract of a plugin descriptor, through the same function the runtime
// planner uses (pmq_sink_plane_spec). Throws std::invalid_argument with the reason the runtime
// would refuse the plugin for.
inline DataPlaneSpec data_plane_spec(const pmq_sink_plugin& plugin) {
  pmq_plane_spec spec{};
  char error[256] = {0};
  if (!pmq_sink_plane_spec(&plugin, &spec, error, sizeof error))
    throw std::invalid_argument(std::string("sink '") + (plugin.name ? plugin.name : "?") + "' " + error);
  return {planes_of(spec.accepted_planes), planes_of(spec.native_planes), static_cast<DataPlane>(spec.best_plane)};
}

template <class S>
DataPlaneSpec sink_data_plane_spec() {
  return data_plane_spec(descriptor<S>());
}
template <class S>
DataPlaneSpec sink_data_plane_spec(const S&) {
  return sink_data_plane_spec<S>();
}

}  // namespace picomq::sdk

// Exports a BaseSink subclass as a picomq-connect plugin (once per shared library).
#define PICOMQ_SINK_PLUGIN(SinkClass)                                                                 \
  extern "C" PMQ_SINK_EXPORT const pmq_sink_plugin* picomq_sink_plugin_entry(uint32_t /*host_abi*/) { \
    return &::picomq::sdk::descriptor<SinkClass>();                                                   \
  }
