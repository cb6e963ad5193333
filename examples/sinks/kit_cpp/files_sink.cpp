// Example: a sink on the sink kit (docs/sinkkit.md). Each topic's records go, as NDJSON with the
// pico_* metadata, into a file named from a template ("{topic_segment[-1]}.ndjson") under a
// directory; consecutive batches of a file share one write and one fsync (the kit's accumulator),
// and each batch is acknowledged only after that fsync.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <picomq/kit/accumulator.hpp>
#include <picomq/kit/destination_cache.hpp>
#include <picomq/kit/options.hpp>
#include <picomq/kit/record_json.hpp>
#include <picomq/sdk.hpp>
#include <string>
#include <utility>

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace std::chrono_literals;

namespace {

struct Settings {
  std::string directory;
  std::string file;
  std::chrono::milliseconds commit_interval{};
  std::chrono::milliseconds idle{};
  bool include_headers = true;
};

// One open file of the directory (closed with the sink).
struct File {
  File(std::string p, int f) : path(std::move(p)), fd(f) {}
  File(File&& o) noexcept : path(std::move(o.path)), fd(std::exchange(o.fd, -1)) {}
  ~File() {
    if (fd >= 0) ::close(fd);
  }
  std::string path;
  int fd = -1;
};

// A file name fits one path segment, NAME_MAX (255) bytes: a longer one (a 249-character topic
// and ".ndjson") keeps its first bytes and ends with a hash of the whole name, so distinct topics
// keep distinct files. FNV-1a: the same file after a restart.
std::string file_name(std::string name) {
  constexpr size_t kMax = 255;
  if (name.size() <= kMax) return name;
  uint32_t hash = 2166136261u;
  for (const unsigned char c : name) hash = (hash ^ c) * 16777619u;
  char suffix[10];
  std::snprintf(suffix, sizeof suffix, "_%08x", hash);
  name.resize(kMax - 9);
  return name + suffix;
}

// A segment: the lines of some batches for one file, written and fsynced at commit.
struct Lines : kit::Segment {
  explicit Lines(File* file) : file(file) {}
  void commit() override {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(file->fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        // Lines already in the file carry their record ids: a reader drops what the retry repeats.
        const std::string why = file->path + ": " + std::strerror(errno);
        if (done) throw sdk::PartialWriteError(why);
        throw sdk::RetryableError(why);
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(file->fd) != 0) throw sdk::PartialWriteError(file->path + ": fsync: " + std::strerror(errno));
  }
  File* file;
  std::string text;
};

}  // namespace

class FilesSink : public sdk::BaseSink<FilesSink> {
 public:
  static constexpr std::string_view sink_name = "example_files";
  static constexpr std::string_view description =
      "Appends each topic's records as NDJSON to a file per topic, one fsync per group of batches (kit example).";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 16;
  static inline const kit::OptionTable<Settings> options{
      kit::option("directory", &Settings::directory)
          .required()
          .check(kit::not_empty())
          .help("Where the files go (created)."),
      kit::option("file", &Settings::file)
          .fallback("{topic}.ndjson")
          .help("File name template: {topic}, {topic_segment[N]}."),
      kit::option("commit_interval", &Settings::commit_interval)
          .fallback(200ms)
          .help("Batches of a file share one fsync for up to this long."),
      kit::option("idle", &Settings::idle).fallback(10ms).help("... or until no batch has come for this long."),
      kit::option("include_headers", &Settings::include_headers).fallback(true).help("Add pico_headers."),
  };
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) {
    options.validate(config, problems);
    if (auto t = kit::NameTemplate::parse(config.string("file")); !t) problems.add("file", t.error());
  }

  void open(const sdk::Config& config) {
    settings_ = options.parse(config);
    std::error_code ec;
    std::filesystem::create_directories(settings_.directory, ec);
    if (ec) throw sdk::FatalError("directory " + settings_.directory + ": " + ec.message());
    writer_ = kit::RecordJsonWriter({.include_headers = settings_.include_headers});
    files_ = std::make_unique<kit::DestinationCache<File>>(
        kit::NameTemplate::parse(settings_.file).value(), kit::NamePolicy::ObjectKey,
        [this](const std::string& name, std::string_view) {
          std::string path = settings_.directory + "/" + file_name(name);
          const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
          if (fd < 0) throw sdk::FatalError("cannot open " + path + ": " + std::strerror(errno));
          return File(std::move(path), fd);
        },
        "file");
    accumulator_ =
        std::make_unique<kit::Accumulator>(kit::AccumulatorLimits{.commit_interval = settings_.commit_interval,
                                                                  .idle = settings_.idle,
                                                                  .max_batches = max_in_flight,
                                                                  .max_open = 8},
                                           [this](const kit::CommitReport& r) {
                                             if (r.ok) count("fsyncs");
                                           });
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    File& file = files_->get(batch.topic());
    std::string lines;  // rendered before the append: a batch that cannot render fails alone
    const auto json = writer_.begin(batch.raw());
    for (const sdk::Record& r : batch) {
      json.append(lines, r.raw());
      lines += '\n';
    }
    sdk::Pending write = pending();
    accumulator_->append(
        file.path, write, {lines.size(), batch.size()}, [&] { return std::make_unique<Lines>(&file); },
        [&](kit::Segment& s) { static_cast<Lines&>(s).text += lines; });
    return write;
  }
  void flush(std::chrono::milliseconds) { accumulator_->flush(); }
  void close() {
    if (accumulator_) accumulator_->close();
  }

 private:
  Settings settings_;
  kit::RecordJsonWriter writer_;
  std::unique_ptr<kit::DestinationCache<File>> files_;
  std::unique_ptr<kit::Accumulator> accumulator_;  // after files_: its segments point at them
};

PICOMQ_SINK_PLUGIN(FilesSink)
