// Example: native batches. write_batch() renders the whole batch, writes it with one write()
// and makes it durable with one fsync() before returning: one round trip per batch instead of
// per record, the spec's advice for destinations that can write many records at once.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <picomq/kit/metadata.hpp>  // record_id: header-only, no kit library needed
#include <picomq/sdk.hpp>
#include <string>

namespace sdk = picomq::sdk;

class FsyncBatchSink : public sdk::BaseSink<FsyncBatchSink> {
 public:
  static constexpr std::string_view sink_name = "example_fsync_batch";
  static constexpr std::string_view description =
      "Appends each batch to a file with one write and one fsync (SDK example).";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr std::array options{
      pmq_option{"path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "The file to append to."},
      pmq_option{"fsync", PMQ_OPTION_BOOL, 0, "true", nullptr, "fsync() after each batch."},
  };

  void open(const sdk::Config& config) {
    fd_ = ::open(config.string("path").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd_ < 0) throw sdk::FatalError("cannot open " + config.string("path") + ": " + std::strerror(errno));
    fsync_ = config.boolean("fsync");
  }

  void write(const sdk::Record& record) { append(line(record)); }

  void write_batch(const sdk::Batch& batch) {
    std::string out;
    for (const sdk::Record& r : batch) out += line(r);
    append(out);
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  static std::string line(const sdk::Record& r) {
    return picomq::kit::record_id(r.topic(), r.partition(), r.offset()) + "\t" +
           std::string(r.is_tombstone() ? "" : r.payload_text()) + "\n";
  }
  void append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        // Some lines may be in the file already: a retry relies on readers dropping repeats by id.
        if (done > 0) throw sdk::PartialWriteError(std::string("write failed: ") + std::strerror(errno));
        throw sdk::RetryableError(std::string("write failed: ") + std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    if (fsync_ && ::fsync(fd_) != 0) throw sdk::PartialWriteError(std::string("fsync failed: ") + std::strerror(errno));
  }

  int fd_ = -1;
  bool fsync_ = true;
};

PICOMQ_SINK_PLUGIN(FsyncBatchSink)
