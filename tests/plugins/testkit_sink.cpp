// testkit sink: a plugin the integration tests drive to observe and to misbehave. Built with
// the C++ SDK in several variants (tests/plugins/CMakeLists.txt): the planes it declares
// (default: rows+batches native; TESTKIT_PLANES_ROWS: rows only; TESTKIT_PLANES_ARROW: all
// three, so batches arrive as Arrow and the log line's payload is the row's payload columns
// rendered as name=value pairs; TESTKIT_ASYNC: batches native and asynchronous, up to 4 writes
// pending, each completed by a worker thread after delay_ms), TESTKIT_FUTURE_ABI
// claims an ABI this runtime does not speak, TESTKIT_BAD_NATIVE declares a native Arrow plane
// it does not implement.
//
// plugin_config:
//   log_path       file that receives one line per written record: "topic:partition:offset<TAB>payload"
//                  (appended with one write() per call, before the call returns OK)
//   calls_path     optional file that receives one line per call: "<epoch ms> <call#> <topic>[<p>] <first>..<last> <n>
//   <status>" fail_while_exists  calls fail (fail_status) while this file exists: a destination down, then back
//   secret_token   a secret option that is never used (the operations API masks it)
//   fail_times     the first N calls fail (default 0); fail_topic limits that to one topic,
//                  fail_offset to calls that carry that offset
//   fail_status    "retry" (default), "partial", "fatal", "reject"
//   reject_offset  with fail_status = "reject": the offset of the record to reject
//   delay_ms       every call sleeps this long first (a slow destination)
//   hang_on_call   that call (1-based) never returns (a hung destination)
//   crash_on_call  that call aborts the process
//   hang_in_close  close() never returns (a plugin stuck at shutdown)
//   open_error     open() fails with this message
//   log_headers    each log line ends with "<TAB>headers=<count>" (the headers the record came with)
//   unread_headers open() declares that this instance never reads headers (PMQ_FIELD_HEADERS)
//   max_in_flight  > 0: open() lowers this instance's writes in flight per block to it
//   plane          rows|batches|arrow: open() takes batches on this plane (ABI 2.5 set_plane)
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "picomq/arrow_view.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace sdk = picomq::sdk;

int open_append(const std::string& path) { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644); }

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += size_t(n);
  }
}

constexpr std::array kOptions{
    pmq_option{"log_path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "one line per written record"},
    pmq_option{"calls_path", PMQ_OPTION_STRING, 0, nullptr, nullptr, "one line per call"},
    pmq_option{"fail_times", PMQ_OPTION_INT, 0, "0", nullptr, "the first N calls fail"},
    pmq_option{"fail_topic", PMQ_OPTION_STRING, 0, nullptr, nullptr, "only calls for this topic fail"},
    pmq_option{"fail_offset", PMQ_OPTION_INT, 0, "-1", nullptr, "only calls carrying this offset fail"},
    pmq_option{"fail_status", PMQ_OPTION_STRING, 0, "\"retry\"", "retry|partial|fatal|reject", "how they fail"},
    pmq_option{"reject_offset", PMQ_OPTION_INT, 0, "-1", nullptr, "the offset rejected by fail_status = reject"},
    pmq_option{"fail_while_exists", PMQ_OPTION_STRING, 0, nullptr, nullptr,
               "calls fail (fail_status) while this file exists"},
    pmq_option{"secret_token", PMQ_OPTION_STRING, PMQ_OPTION_SECRET, nullptr, nullptr,
               "a secret that is never used (masking tests)"},
    pmq_option{"delay_ms", PMQ_OPTION_INT, 0, "0", nullptr, "every call sleeps this long first"},
    pmq_option{"hang_on_call", PMQ_OPTION_INT, 0, "-1", nullptr, "that call never returns"},
    pmq_option{"crash_on_call", PMQ_OPTION_INT, 0, "-1", nullptr, "that call aborts the process"},
    pmq_option{"hang_in_close", PMQ_OPTION_BOOL, 0, "false", nullptr, "close() never returns"},
    pmq_option{"open_error", PMQ_OPTION_STRING, 0, nullptr, nullptr, "open() fails with this message"},
    pmq_option{"log_headers", PMQ_OPTION_BOOL, 0, "false", nullptr, "log lines end with the record's header count"},
    pmq_option{"unread_headers", PMQ_OPTION_BOOL, 0, "false", nullptr, "declare at open() that headers are never read"},
    pmq_option{"max_in_flight", PMQ_OPTION_INT, 0, "0", nullptr, "> 0: lower the writes in flight per block to this"},
    pmq_option{"plane", PMQ_OPTION_STRING, 0, nullptr, "rows|batches|arrow", "open() takes batches on this plane"},
};

class Testkit : public sdk::BaseSink<Testkit> {
 public:
  static constexpr std::string_view sink_name = "testkit";
  // The tests' sink logs what it is given: redrives included.
  static constexpr bool takes_redrives = true;
#if defined(TESTKIT_PLANES_ARROW)
  // Claims change events on the Arrow plane, which cannot carry them: the runtime's refusal test.
  static constexpr uint32_t change_ops = PMQ_CHANGE_OPS_KEYED;
#endif
  static constexpr std::string_view sink_version = "0.2.0";
#if defined(TESTKIT_PLANES_ROWS)
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows};
  static constexpr std::array native_data_planes{sdk::DataPlane::Rows};
#elif defined(TESTKIT_PLANES_ARROW)
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches,
                                                   sdk::DataPlane::Arrow};
  static constexpr std::array native_data_planes = accepted_data_planes;
#elif defined(TESTKIT_ASYNC)
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr uint32_t max_in_flight = 4;
#elif defined(TESTKIT_BAD_NATIVE)
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches,
                                                   sdk::DataPlane::Arrow};
  static constexpr std::array native_data_planes = accepted_data_planes;  // but no write_arrow_batch
#else
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
#endif
  static constexpr auto options = kOptions;

  void open(const sdk::Config& config) {
    if (config.has("open_error")) throw std::runtime_error(config.string("open_error"));
    log_fd_ = open_append(config.string("log_path"));
    if (log_fd_ < 0) throw std::runtime_error("cannot open log_path " + config.string("log_path"));
    if (config.has("calls_path")) calls_fd_ = open_append(config.string("calls_path"));
    fail_times_ = config.integer("fail_times");
    fail_topic_ = config.string("fail_topic");
    fail_status_ = config.string("fail_status");
    fail_offset_ = config.integer("fail_offset");
    if (config.has("fail_while_exists")) fail_while_exists_ = config.string("fail_while_exists");
    reject_offset_ = config.integer("reject_offset");
    delay_ms_ = config.integer("delay_ms");
    hang_on_call_ = config.integer("hang_on_call");
    crash_on_call_ = config.integer("crash_on_call");
    hang_in_close_ = config.boolean("hang_in_close");
    log_headers_ = config.boolean("log_headers");
    if (config.boolean("unread_headers")) declare_unread_fields(PMQ_FIELD_HEADERS);
    if (config.integer("max_in_flight") > 0)
      declare_max_in_flight(static_cast<uint32_t>(config.integer("max_in_flight")));
    if (config.has("plane")) {
      const std::string plane = config.string("plane");
      declare_plane(plane == "rows"      ? sdk::DataPlane::Rows
                    : plane == "batches" ? sdk::DataPlane::Batches
                                         : sdk::DataPlane::Arrow);
    }
  }

  void write(const sdk::Record& record) { handle(Call::of(sdk::Batch(record.batch()), record.index(), 1)); }
#if defined(TESTKIT_ASYNC)
  // Each batch is written by its own worker thread after delay_ms, so several are in flight.
  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending done = pending();
    Call call = Call::of(batch, 0, batch.size());
    std::lock_guard lock(workers_mutex_);
    workers_.emplace_back([this, done, call = std::move(call)]() mutable {
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      try {
        std::lock_guard handle_lock(handle_mutex_);
        handle(call, /*with_delay=*/false, &done);
        done.done();
      } catch (const sdk::RetryableError& e) {
        done.retry(e.what());
      } catch (const sdk::PartialWriteError& e) {
        done.partial(e.what());
      } catch (const std::exception& e) {
        done.fatal(e.what());
      }
    });
    return done;
  }
#elif !defined(TESTKIT_PLANES_ROWS)
  void write_batch(const sdk::Batch& batch) { handle(Call::of(batch, 0, batch.size())); }
#endif
#if defined(TESTKIT_PLANES_ARROW)
  void write_arrow_batch(const sdk::ArrowBatch& batch) {
    sdk::ArrowBatchView view(batch.schema(), batch.array());
    Call call{std::string(batch.topic()),
              batch.partition(),
              0,
              {},
              {},
              {}};  // no header counts: log_headers does not apply to Arrow
    for (size_t row = 0; row < view.num_rows(); ++row) {
      if (view.column("pico_offset").as_int64(row) != batch.offsets()[row])
        throw sdk::FatalError("pico_offset column disagrees with the batch offsets");
      call.offsets.push_back(batch.offsets()[row]);
      std::string payload;
      for (size_t c = 0; c < view.num_columns(); ++c) {
        auto col = view.column(c);
        if (col.name().rfind("pico_", 0) == 0) continue;
        payload += (payload.empty() ? "" : " ") + std::string(col.name()) + "=" + render(col, row);
      }
      call.payloads.push_back(std::move(payload));
    }
    handle(call);
  }
#endif

  // Not const: the async variant joins its workers here (NOLINT: tidy sees one variant).
  void close() {  // NOLINT(readability-make-member-function-const)
    if (hang_in_close_)
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
#if defined(TESTKIT_ASYNC)
    for (auto& w : workers_) w.join();  // every write completed before close(); the threads end
#endif
    if (log_fd_ >= 0) ::close(log_fd_);
    if (calls_fd_ >= 0) ::close(calls_fd_);
  }

 private:
  // One call: consecutive records of one topic-partition, first_index being the index of the
  // first in its batch (what reject() takes).
  struct Call {
    std::string topic;
    int32_t partition;
    size_t first_index;
    std::vector<int64_t> offsets;
    std::vector<std::string> payloads;
    std::vector<size_t> header_counts;
    static Call of(const sdk::Batch& batch, size_t first, size_t count) {
      Call c{std::string(batch.topic()), batch.partition(), first, {}, {}, {}};
      for (size_t i = first; i < first + count; ++i) {
        c.offsets.push_back(batch[i].offset());
        c.payloads.emplace_back(batch[i].is_tombstone() ? "" : batch[i].payload_text());
        c.header_counts.push_back(batch[i].header_count());
      }
      return c;
    }
  };

#if defined(TESTKIT_PLANES_ARROW)
  static std::string render(const sdk::ColumnView& col, size_t row) {
    if (col.is_null(row)) return "null";
    switch (col.type()) {
      case sdk::ColumnType::Bool: return col.as_bool(row) ? "true" : "false";
      case sdk::ColumnType::Int64: return std::to_string(col.as_int64(row));
      case sdk::ColumnType::Float64: return std::to_string(col.as_double(row));
      case sdk::ColumnType::Utf8: return std::string(col.as_string(row));
      default: return "<" + std::string(col.format()) + ">";
    }
  }
#endif

  void handle(const Call& c, bool with_delay = true, sdk::Pending* async = nullptr) {
    const int64_t call = ++calls_;
    if (call == crash_on_call_) std::abort();
    if (call == hang_on_call_)
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    if (with_delay && delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));

    std::string status = "ok";
    const bool carries_fail_offset =
        fail_offset_ < 0 || (c.offsets.front() <= fail_offset_ && fail_offset_ <= c.offsets.back());
    if (failures_ < fail_times_ && (fail_topic_.empty() || fail_topic_ == c.topic) && carries_fail_offset) {
      ++failures_;
      status = fail_status_;
    }
    if (!fail_while_exists_.empty() && ::access(fail_while_exists_.c_str(), F_OK) == 0) status = fail_status_;
    size_t reject_at = SIZE_MAX;  // position within the call
    if (status == "reject") {
      for (size_t i = 0; i < c.offsets.size(); ++i)
        if (c.offsets[i] == reject_offset_) reject_at = i;
      if (reject_at == SIZE_MAX) status = "ok";  // the offset is not in this call
    }
    if (calls_fd_ >= 0) {
      const auto now =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      char line[512];
      std::snprintf(line, sizeof line, "%lld %lld %s[%d] %lld..%lld %zu %s\n", (long long)now, (long long)call,
                    c.topic.c_str(), c.partition, (long long)c.offsets.front(), (long long)c.offsets.back(),
                    c.offsets.size(), status.c_str());
      write_all(calls_fd_, line);
    }
    if (status == "ok" || status == "reject") {
      std::string out;
      for (size_t i = 0; i < c.offsets.size(); ++i) {
        if (i == reject_at) continue;
        out += c.topic + ':' + std::to_string(c.partition) + ':' + std::to_string(c.offsets[i]) + '\t' + c.payloads[i];
        if (log_headers_ && i < c.header_counts.size()) out += "\theaders=" + std::to_string(c.header_counts[i]);
        out += '\n';
      }
      write_all(log_fd_, out);
    }
    if (status == "reject" && async) async->reject(c.first_index + reject_at, "testkit rejects this offset");
    else if (status == "reject") reject(c.first_index + reject_at, "testkit rejects this offset");
    else if (status == "retry") throw sdk::RetryableError("testkit injected failure");
    else if (status == "partial") throw sdk::PartialWriteError("testkit injected failure");
    else if (status == "fatal") throw sdk::FatalError("testkit injected failure");
  }

  int log_fd_ = -1;
  bool log_headers_ = false;
  int calls_fd_ = -1;
  std::mutex workers_mutex_, handle_mutex_;
  std::vector<std::thread> workers_;
  int64_t fail_times_ = 0;
  std::string fail_while_exists_;  // a destination that is down while this file exists
  std::string fail_topic_;
  std::string fail_status_;
  int64_t fail_offset_ = -1;
  int64_t reject_offset_ = -1;
  int64_t delay_ms_ = 0;
  int64_t hang_on_call_ = -1;
  bool hang_in_close_ = false;
  int64_t crash_on_call_ = -1;
  int64_t calls_ = 0;
  int64_t failures_ = 0;
};

}  // namespace

#if defined(TESTKIT_FUTURE_ABI)
// The same plugin, claiming an ABI this runtime does not speak (for the refusal test).
extern "C" PMQ_SINK_EXPORT const pmq_sink_plugin* picomq_sink_plugin_entry(uint32_t) {
  static pmq_sink_plugin future = [] {
    pmq_sink_plugin d = sdk::descriptor<Testkit>();
    d.abi_version = (PMQ_SINK_ABI_VERSION_MAJOR + 1) << 16;
    d.name = "testkit-future";
    return d;
  }();
  return &future;
}
#else
PICOMQ_SINK_PLUGIN(Testkit)
#endif
