// stdout sink: one JSON line per record, with or without the metadata fields, or pretty.
//
// plugin_config:
//   include_metadata = true   pico_topic, pico_partition, pico_offset, pico_timestamp,
//                             pico_key (base64), pico_headers (UTF-8 or base64), then "payload"
//   pretty = false            indent each record over several lines
//   stream = "stdout"         or "stderr"
// A JSON payload is embedded as is (line breaks in its whitespace become spaces, so a record
// stays on one line); text becomes a JSON string; raw bytes a base64 string; a tombstone null.
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "destination/encoding.h"
#include "destination/metadata.h"
#include "picomq/sink_abi.h"

namespace {

namespace dest = picomq::destination;

struct StdoutSink {
  bool include_metadata = true;
  bool pretty = false;
  FILE* stream = stdout;
  std::string buffer;
  std::vector<iovec> iov;
};

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

void append_payload(std::string& out, const pmq_batch& batch, const pmq_record& r) {
  if (!r.payload.data) {
    out += "null";
    return;
  }
  switch (batch.payload_format) {
    case PMQ_PAYLOAD_JSON: {
      const size_t start = out.size();
      out.append(view(r.payload));
      // Valid JSON has raw CR/LF only as whitespace, so replacing them keeps it equivalent.
      // Most payloads have none: memchr finds that out at memory speed.
      const auto payload = view(r.payload);
      if (std::memchr(payload.data(), '\n', payload.size()) || std::memchr(payload.data(), '\r', payload.size()))
        for (size_t i = start; i < out.size(); ++i)
          if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';
      break;
    }
    case PMQ_PAYLOAD_TEXT: dest::append_json_escaped(out, view(r.payload)); break;
    default:
      out += '"';
      out += dest::base64_encode(std::span<const uint8_t>(r.payload.data, r.payload.size));
      out += '"';
  }
}

void append_record(std::string& out, const pmq_batch& batch, const pmq_record& r, bool include_metadata) {
  if (!include_metadata) {
    append_payload(out, batch, r);
    return;
  }
  out += "{\"";
  out += dest::kTopicField;
  out += "\":";
  dest::append_json_escaped(out, batch.topic);
  out += ",\"";
  out += dest::kPartitionField;
  out += "\":";
  append_int(out, batch.partition);
  out += ",\"";
  out += dest::kOffsetField;
  out += "\":";
  append_int(out, r.offset);
  out += ",\"";
  out += dest::kTimestampField;
  out += "\":";
  append_int(out, r.timestamp_ms);
  if (r.key.data) {
    out += ",\"";
    out += dest::kKeyField;
    out += "\":\"";
    out += dest::base64_encode(std::span<const uint8_t>(r.key.data, r.key.size));
    out += '"';
  }
  if (r.header_count) {
    out += ",\"";
    out += dest::kHeadersField;
    out += "\":{";
    for (size_t h = 0; h < r.header_count; ++h) {
      const pmq_header& hd = r.headers[h];
      if (h) out += ',';
      dest::append_json_escaped(out, dest::header_value_as_string({hd.name.data, hd.name.size}));
      out += ':';
      if (hd.value.data) dest::append_json_escaped(out, dest::header_value_as_string({hd.value.data, hd.value.size}));
      else out += "null";
    }
    out += '}';
  }
  out += ",\"payload\":";
  append_payload(out, batch, r);
  out += '}';
}

void* sink_open(const pmq_host_api* host, const char* config_json, char* errbuf, size_t errbuf_size) {
  try {
    auto cfg = nlohmann::json::parse(config_json);
    auto sink = std::make_unique<StdoutSink>();
    for (auto& [key, value] : cfg.items()) {
      if (key == "include_metadata") sink->include_metadata = value.get<bool>();
      else if (key == "pretty") sink->pretty = value.get<bool>();
      else if (key == "stream") {
        auto s = value.get<std::string>();
        if (s == "stdout") sink->stream = stdout;
        else if (s == "stderr") sink->stream = stderr;
        else throw std::invalid_argument("stream must be \"stdout\" or \"stderr\", not \"" + s + "\"");
      } else {
        throw std::invalid_argument("unknown plugin_config key '" + key + "' (known: include_metadata, pretty, stream)");
      }
    }
    (void)host;
    return sink.release();
  } catch (const std::exception& e) {
    std::snprintf(errbuf, errbuf_size, "stdout sink: %s", e.what());
    return nullptr;
  }
}

// Writes all of `iov` to `fd`, resuming after partial writes and waiting out EAGAIN.
bool write_all(int fd, std::vector<iovec>& iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::writev(fd, iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return false;
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

bool needs_rewrite(const pmq_record& r) {
  return !r.payload.data || std::memchr(r.payload.data, '\n', r.payload.size) ||
         std::memchr(r.payload.data, '\r', r.payload.size);
}

// JSON payloads without metadata are printed as they came, one per line: they go to the
// file descriptor with writev straight from the broker's buffers, with no copy. Only the rare
// payload that must change (a tombstone, line breaks in its whitespace) is rendered first.
pmq_write_status write_json_lines(StdoutSink& sink, const pmq_batch& batch) {
  static const char kNewline = '\n';
  std::string& rendered = sink.buffer;
  rendered.clear();
  // First render what must change, so `rendered` no longer moves when iovecs point into it.
  std::vector<std::pair<size_t, size_t>> spans(batch.record_count, {SIZE_MAX, 0});
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (!needs_rewrite(r)) continue;
    const size_t start = rendered.size();
    append_payload(rendered, batch, r);
    spans[i] = {start, rendered.size() - start};
  }
  auto& iov = sink.iov;
  iov.clear();
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (spans[i].first == SIZE_MAX) iov.push_back({const_cast<uint8_t*>(r.payload.data), r.payload.size});
    else iov.push_back({rendered.data() + spans[i].first, spans[i].second});
    iov.push_back({const_cast<char*>(&kNewline), 1});
  }
  if (std::fflush(sink.stream) != 0 || !write_all(fileno(sink.stream), iov)) {
    clearerr(sink.stream);
    return PMQ_WRITE_PARTIAL;  // some lines may have reached the stream
  }
  return PMQ_WRITE_OK;
}

pmq_write_status sink_write(void* instance, const pmq_batch* batch, pmq_write_result* result) noexcept {
  (void)result;
  auto* sink = static_cast<StdoutSink*>(instance);
  try {
    if (batch->payload_format == PMQ_PAYLOAD_JSON && !sink->include_metadata && !sink->pretty)
      return write_json_lines(*sink, *batch);
    std::string& out = sink->buffer;
    out.clear();
    for (size_t i = 0; i < batch->record_count; ++i) {
      const pmq_record& r = *pmq_batch_record(batch, i);
      if (sink->pretty) {
        std::string line;
        append_record(line, *batch, r, sink->include_metadata);
        out += nlohmann::json::parse(line).dump(2);
      } else {
        append_record(out, *batch, r, sink->include_metadata);
      }
      out += '\n';
    }
    if (std::fwrite(out.data(), 1, out.size(), sink->stream) != out.size() || std::fflush(sink->stream) != 0) {
      clearerr(sink->stream);
      return PMQ_WRITE_PARTIAL;  // some lines may have reached the stream
    }
    return PMQ_WRITE_OK;
  } catch (...) {
    return PMQ_WRITE_FATAL;
  }
}

void sink_close(void* instance) {
  auto* sink = static_cast<StdoutSink*>(instance);
  std::fflush(sink->stream);
  delete sink;
}

const pmq_sink_plugin kDescriptor = {
    sizeof(pmq_sink_plugin), PMQ_SINK_ABI_VERSION, "stdout", "0.1.0", sink_open, sink_write, sink_close,
};

}  // namespace

extern "C" PMQ_SINK_EXPORT const pmq_sink_plugin* picomq_sink_plugin_entry(uint32_t) { return &kDescriptor; }
