// stdout sink: one JSON line per record, with or without the metadata fields, or pretty.
// Options: the table below (and docs/sinks/stdout.md, generated from it). Records are rendered
// by the kit's record JSON writer (envelope, or payload only): a JSON payload is embedded as is
// (line breaks in its whitespace become spaces, so a record stays on one line); text becomes a
// JSON string; raw bytes a base64 string; a tombstone null. Change events (docs/changes.md) are
// printed as data: pico_op and pico_row_key beside the metadata, a delete with a null payload.
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "picomq/kit/options.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/subscriptions.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;

enum class Stream { Stdout, Stderr };

struct Settings {
  bool include_metadata = true;
  bool pretty = false;
  Stream stream = Stream::Stdout;
};

struct Output {
  bool include_metadata = true;
  bool pretty = false;
  FILE* stream = stdout;
  kit::RecordJsonWriter writer;
  std::string buffer;
  std::vector<iovec> iov;
};

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
pmq_write_status write_json_lines(Output& sink, const pmq_batch& batch) {
  static const char kNewline = '\n';
  std::string& rendered = sink.buffer;
  rendered.clear();
  // First render what must change, so `rendered` no longer moves when iovecs point into it.
  std::vector<std::pair<size_t, size_t>> spans(batch.record_count, {SIZE_MAX, 0});
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (!needs_rewrite(r)) continue;
    const size_t start = rendered.size();
    sink.writer.append_payload(rendered, batch, r);
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

pmq_write_status write_lines(Output& sink, const pmq_batch& batch) {
  if (batch.payload_format == PMQ_PAYLOAD_JSON && !sink.include_metadata && !sink.pretty)
    return write_json_lines(sink, batch);
  std::string& out = sink.buffer;
  out.clear();
  const auto json = sink.writer.begin(batch);
  for (size_t i = 0; i < batch.record_count; ++i) {
    const pmq_record& r = *pmq_batch_record(&batch, i);
    if (sink.pretty) {
      std::string line;
      json.append(line, r);
      out += nlohmann::json::parse(line).dump(2);
    } else {
      json.append(out, r);
    }
    out += '\n';
  }
  if (std::fwrite(out.data(), 1, out.size(), sink.stream) != out.size() || std::fflush(sink.stream) != 0) {
    clearerr(sink.stream);
    return PMQ_WRITE_PARTIAL;  // some lines may have reached the stream
  }
  return PMQ_WRITE_OK;
}

}  // namespace

class StdoutSink : public picomq::sdk::BaseSink<StdoutSink> {
 public:
  static constexpr std::string_view sink_name = "stdout";
  static constexpr std::string_view sink_version = "0.2.0";
  static constexpr std::string_view description =
      "Prints each record as one JSON line (or pretty JSON) on stdout or stderr.";
  // Every batch is written by write_batch: batches is the only native plane (rows stay accepted,
  // as for every sink, and are never used since batches are native).
  static constexpr std::array accepted_data_planes{picomq::sdk::DataPlane::Rows, picomq::sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{picomq::sdk::DataPlane::Batches};
  // A redriven dead letter is one more line (at least once, as its replays).
  static constexpr bool takes_redrives = true;
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static inline const kit::OptionTable<Settings> options{
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("Wrap each record in an object with pico_topic, pico_partition, pico_offset, pico_timestamp, "
                "pico_key (base64) and pico_headers (UTF-8 or base64), and the payload under \"payload\". "
                "Off: print the payload alone."),
      kit::option("pretty", &Settings::pretty)
          .fallback(false)
          .help("Indent each record over several lines instead of one line per record."),
      kit::option("stream", &Settings::stream)
          .choices({{"stdout", Stream::Stdout}, {"stderr", Stream::Stderr}})
          .fallback(Stream::Stdout)
          .help("Where to print."),
  };

  // Without the metadata a change would print as its row alone, and a delete as null.
  static void validate(const picomq::sdk::Config& config, picomq::sdk::ConfigProblems& problems) {
    if (kit::has_changes(config) && !options.parse(config).include_metadata)
      problems.add("include_metadata",
                   "must stay on for change events (changes = ... in [[topics]]): pico_op and pico_row_key say what "
                   "each line does, a delete has no payload");
  }

  void open(const picomq::sdk::Config& config) {
    picomq::sdk::ConfigProblems problems;
    validate(config, problems);
    problems.throw_if_any();
    const Settings settings = options.parse(config);
    out_.include_metadata = settings.include_metadata;
    if (!out_.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);
    out_.pretty = settings.pretty;
    out_.stream = settings.stream == Stream::Stderr ? stderr : stdout;
    out_.writer = kit::RecordJsonWriter(
        {.layout = out_.include_metadata ? kit::JsonLayout::Envelope : kit::JsonLayout::PayloadOnly});
  }
  void write_batch(const picomq::sdk::Batch& batch) { check(write_lines(out_, batch.raw())); }
  void close() { std::fflush(out_.stream); }  // NOLINT(readability-make-member-function-const): the SDK's hook

 private:
  static void check(pmq_write_status status) {
    if (status != PMQ_WRITE_OK)
      throw picomq::sdk::PartialWriteError(std::string("cannot write to the stream: ") + std::strerror(errno));
  }
  Output out_;
};

PICOMQ_SINK_PLUGIN(StdoutSink)
