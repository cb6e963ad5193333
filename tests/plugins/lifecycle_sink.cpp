// lifecycle sink: a test plugin that writes down every ABI 2.2 lifecycle call it gets, one line
// each, to `events_path`:
//   open <sink_key> | assigned <block> <t>[<p>] ... | revoked <block> <t>[<p>] ... |
//   write <block> <t>[<p>] <first>..<last> | flush | close
// With `accumulate = true` its batch writes stay pending (an accumulating sink, like one COPY
// for many batches) until flush() completes them all, or `max_held` of them are held. It counts
// "batches" and "records" through the host, and validate() refuses `max_held` without
// `accumulate`. With `validations_path`, validate() appends a line there per call (how often a
// host checks one config).
#include <fcntl.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "picomq/sdk.hpp"

namespace {

namespace sdk = picomq::sdk;

constexpr std::array kOptions{
    pmq_option{"events_path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "one line per lifecycle call"},
    pmq_option{"accumulate", PMQ_OPTION_BOOL, 0, "false", nullptr, "hold batch writes pending until flush()"},
    pmq_option{"max_held", PMQ_OPTION_INT, 0, "0", nullptr,
               "with accumulate: complete once this many are held (0: only flush)"},
    pmq_option{"validations_path", PMQ_OPTION_STRING, 0, nullptr, nullptr, "one line per validate() call"},
};

class Lifecycle : public sdk::BaseSink<Lifecycle> {
 public:
  static constexpr std::string_view sink_name = "lifecycle";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  static constexpr uint32_t max_in_flight = 16;
  static constexpr auto options = kOptions;

  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) {
    if (config.has("validations_path")) append_line(config.string("validations_path"), "validate");
    if (config.integer("max_held") > 0 && !config.boolean("accumulate"))
      problems.add("max_held", "needs accumulate = true");
    if (config.integer("max_held") < 0) problems.add("max_held", "must not be negative");
  }

  void open(const sdk::Config& config) {
    fd_ = ::open(config.string("events_path").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open events_path");
    accumulate_ = config.boolean("accumulate");
    max_held_ = static_cast<size_t>(config.integer("max_held"));
    event("open " + std::string(sink_key()));
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    event("write " + std::to_string(batch.block_index()) + " " + std::string(batch.topic()) + "[" +
          std::to_string(batch.partition()) + "] " + std::to_string(batch[0].offset()) + ".." +
          std::to_string(batch[batch.size() - 1].offset()));
    count("batches");
    count("records", batch.size());
    sdk::Pending write = pending();
    if (!accumulate_) {
      write.done();
      return write;
    }
    std::lock_guard lock(mutex_);
    held_.push_back(write);
    if (max_held_ && held_.size() >= max_held_) complete_held();
    return write;
  }

  void flush(std::chrono::milliseconds) {
    event("flush");
    std::lock_guard lock(mutex_);
    complete_held();
  }

  void partitions_assigned(uint32_t block, const std::vector<sdk::TopicPartition>& partitions) {
    event("assigned " + std::to_string(block) + list(partitions));
  }
  void partitions_revoked(uint32_t block, const std::vector<sdk::TopicPartition>& partitions) {
    event("revoked " + std::to_string(block) + list(partitions));
  }

  void close() {
    event("close");
    ::close(fd_);
  }

 private:
  static std::string list(const std::vector<sdk::TopicPartition>& partitions) {
    std::string out;
    for (const auto& tp : partitions) out += " " + std::string(tp.topic) + "[" + std::to_string(tp.partition) + "]";
    return out;
  }
  void complete_held() {
    for (auto& w : held_) w.done();
    held_.clear();
  }
  static void append_line(const std::string& path, const std::string& line) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    const std::string text = line + "\n";
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
  }
  void event(const std::string& line) {
    const std::string text = line + "\n";
    (void)!::write(fd_, text.data(), text.size());
  }
  int fd_ = -1;
  bool accumulate_ = false;
  size_t max_held_ = 0;
  std::mutex mutex_;
  std::vector<sdk::Pending> held_;
};

}  // namespace

PICOMQ_SINK_PLUGIN(Lifecycle)
