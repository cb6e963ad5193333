// testkit sink: a plugin the integration tests drive to observe and to misbehave.
//
// plugin_config:
//   log_path       file that receives one line per written record: "topic:partition:offset<TAB>payload"
//                  (appended with one write() per batch, before the call returns OK)
//   calls_path     optional file that receives one line per call: "<epoch ms> <call#> <topic>[<p>] <first>..<last> <n> <status>"
//   fail_times     the first N calls fail (default 0); fail_topic limits that to one topic
//   fail_status    "retry" (default), "partial", "fatal", "reject"
//   reject_offset  with fail_status = "reject": the offset of the record to reject
//   delay_ms       every call sleeps this long first (a slow destination)
//   hang_on_call   that call (1-based) never returns (a hung destination)
//   crash_on_call  that call aborts the process
//   open_error     open() fails with this message
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "picomq/sink_abi.h"

namespace {

struct Testkit {
  const pmq_host_api* host = nullptr;
  int log_fd = -1;
  int calls_fd = -1;
  int64_t fail_times = 0;
  std::string fail_topic;
  pmq_write_status fail_status = PMQ_WRITE_RETRY;
  int64_t reject_offset = -1;
  int64_t delay_ms = 0;
  int64_t hang_on_call = -1;
  int64_t crash_on_call = -1;
  int64_t calls = 0;
  int64_t failures = 0;
};

int open_append(const std::string& path) { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644); }

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += size_t(n);
  }
}

void* tk_open(const pmq_host_api* host, const char* config_json, char* errbuf, size_t errbuf_size) {
  try {
    auto cfg = nlohmann::json::parse(config_json);
    if (cfg.contains("open_error")) {
      std::snprintf(errbuf, errbuf_size, "%s", cfg["open_error"].get<std::string>().c_str());
      return nullptr;
    }
    auto* tk = new Testkit();
    tk->host = host;
    tk->log_fd = open_append(cfg.at("log_path").get<std::string>());
    if (cfg.contains("calls_path")) tk->calls_fd = open_append(cfg["calls_path"].get<std::string>());
    tk->fail_times = cfg.value("fail_times", int64_t(0));
    tk->fail_topic = cfg.value("fail_topic", std::string());
    const auto status = cfg.value("fail_status", std::string("retry"));
    tk->fail_status = status == "partial" ? PMQ_WRITE_PARTIAL
                      : status == "fatal" ? PMQ_WRITE_FATAL
                      : status == "reject" ? PMQ_WRITE_REJECTED
                                           : PMQ_WRITE_RETRY;
    tk->reject_offset = cfg.value("reject_offset", int64_t(-1));
    tk->delay_ms = cfg.value("delay_ms", int64_t(0));
    tk->hang_on_call = cfg.value("hang_on_call", int64_t(-1));
    tk->crash_on_call = cfg.value("crash_on_call", int64_t(-1));
    return tk;
  } catch (const std::exception& e) {
    std::snprintf(errbuf, errbuf_size, "testkit: %s", e.what());
    return nullptr;
  }
}

const char* status_name(pmq_write_status s) {
  switch (s) {
    case PMQ_WRITE_OK: return "ok";
    case PMQ_WRITE_RETRY: return "retry";
    case PMQ_WRITE_PARTIAL: return "partial";
    case PMQ_WRITE_FATAL: return "fatal";
    case PMQ_WRITE_REJECTED: return "reject";
  }
  return "?";
}

pmq_write_status tk_write(void* instance, const pmq_batch* b, pmq_write_result* result) noexcept {
  auto* tk = static_cast<Testkit*>(instance);
  const int64_t call = ++tk->calls;
  if (call == tk->crash_on_call) std::abort();
  if (call == tk->hang_on_call)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  if (tk->delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(tk->delay_ms));

  pmq_write_status status = PMQ_WRITE_OK;
  if (tk->failures < tk->fail_times && (tk->fail_topic.empty() || tk->fail_topic == b->topic)) {
    ++tk->failures;
    status = tk->fail_status;
  }
  size_t reject_index = b->record_count;
  if (status == PMQ_WRITE_REJECTED) {
    for (size_t i = 0; i < b->record_count; ++i)
      if (pmq_batch_record(b, i)->offset == tk->reject_offset) reject_index = i;
    if (reject_index == b->record_count) status = PMQ_WRITE_OK;  // the offset is not in this batch
  }

  if (tk->calls_fd >= 0) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    char line[512];
    std::snprintf(line, sizeof line, "%lld %lld %s[%d] %lld..%lld %zu %s\n", (long long)now, (long long)call, b->topic,
                  b->partition, (long long)pmq_batch_record(b, 0)->offset,
                  (long long)pmq_batch_record(b, b->record_count - 1)->offset, b->record_count, status_name(status));
    write_all(tk->calls_fd, line);
  }
  if (status == PMQ_WRITE_OK || status == PMQ_WRITE_REJECTED) {
    std::string out;
    for (size_t i = 0; i < b->record_count; ++i) {
      if (i == reject_index) continue;
      const pmq_record* r = pmq_batch_record(b, i);
      out += b->topic;
      out += ':' + std::to_string(b->partition) + ':' + std::to_string(r->offset) + '\t';
      if (r->payload.data) out.append(reinterpret_cast<const char*>(r->payload.data), r->payload.size);
      out += '\n';
    }
    write_all(tk->log_fd, out);
  }
  if (status == PMQ_WRITE_REJECTED) tk->host->reject_record(result, reject_index, "testkit rejects this offset");
  else if (status != PMQ_WRITE_OK) tk->host->set_error(result, "testkit injected failure");
  return status;
}

void tk_close(void* instance) {
  auto* tk = static_cast<Testkit*>(instance);
  if (tk->log_fd >= 0) ::close(tk->log_fd);
  if (tk->calls_fd >= 0) ::close(tk->calls_fd);
  delete tk;
}

const pmq_sink_plugin kDescriptor = {
    sizeof(pmq_sink_plugin), PMQ_SINK_ABI_VERSION, "testkit", "0.1.0", tk_open, tk_write, tk_close,
};

// Same plugin, claiming an ABI this runtime does not speak (for the refusal test).
const pmq_sink_plugin kFutureDescriptor = {
    sizeof(pmq_sink_plugin), (PMQ_SINK_ABI_VERSION_MAJOR + 1) << 16, "testkit-future", "0.1.0", tk_open, tk_write, tk_close,
};

}  // namespace

extern "C" PMQ_SINK_EXPORT const pmq_sink_plugin* picomq_sink_plugin_entry(uint32_t) {
#ifdef TESTKIT_FUTURE_ABI
  return &kFutureDescriptor;
#else
  (void)kFutureDescriptor;
  return &kDescriptor;
#endif
}
