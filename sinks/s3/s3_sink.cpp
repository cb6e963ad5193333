// S3 sink: the records of each topic-partition as objects (JSON lines or raw payloads, gzip /
// zstd / none) under keys resolved from each object's first record ({topic}, {partition},
// {start_offset}, record-time date fields...). Objects end by the records alone (max records,
// max bytes, record-time window, the key's time fields) or on flush (quiet poll_interval, revoke,
// shutdown). A batch's write completes only when every object holding its records is written
// (PUT 200), so its offset moves only then; after a crash the replay from the committed offset
// rebuilds the same objects under the same keys (docs/sinks/s3.md, "Replay"). One partition's
// objects are uploaded in order by upload threads; a failed upload fails its batches and every
// later one of the partition, and the retry starts the next object at the failed one's first
// offset again (same key).
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "picomq/kit/compression.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/sdk.hpp"
#include "s3/client.h"
#include "s3/config.h"
#include "s3/csv.h"
#include "s3/objects.h"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
namespace s3 = picomq::s3;

// One batch's write: complete when the call returned and every object holding its records is
// written (or one failed).
struct BatchWrite final : s3::Owner {
  explicit BatchWrite(sdk::Pending p) : pending(std::move(p)) {}
  void joined() override {
    std::lock_guard lock(mutex);
    ++outstanding;
  }
  // One object (or the call itself) is done; nullopt: fine.
  void finish(const std::optional<std::pair<bool, std::string>>& failure) {
    {
      std::lock_guard lock(mutex);
      if (failure && (!failed || (failure->first && !failed->first))) failed = failure;
      if (--outstanding > 0) return;
    }
    if (!failed) return pending.done();
    if (failed->first) return pending.fatal(failed->second);
    pending.retry(failed->second);
  }
  sdk::Pending pending;
  std::mutex mutex;
  size_t outstanding = 1;                             // + 1 until write_batch returns
  std::optional<std::pair<bool, std::string>> failed;  // fatal?, reason
};

struct PartitionState {
  std::unique_ptr<s3::PartitionObjects> objects;
  std::deque<std::unique_ptr<s3::Object>> queue;  // sealed, in order, waiting for upload
  bool uploading = false;
  bool in_ready = false;
  // After a failed upload (or a rewind): the offset the next object must start at; a batch
  // starting after it is refused (retry) until the one holding it comes back.
  std::optional<int64_t> expect;
  // Records up to this offset are in objects written before (found at the first batch after a
  // start, or dropped on a rewind): skipped.
  std::optional<int64_t> skip_through;
  bool resumed = false;  // the first batch looked up the object it starts in
  // After a failure: the records up to this offset come again as retries. The runtime waits for
  // each retried batch alone (no flush comes), so until then a batch's records end its object:
  // at the offsets where dropped objects had been ended by a flush (the same objects again), or
  // else at the batch's end.
  std::optional<int64_t> recovering_through;
  std::set<int64_t> recut;
};

void fail_owners(const s3::Object& o, bool fatal, const std::string& reason) {
  for (const auto& owner : o.owners) static_cast<BatchWrite&>(*owner).finish(std::pair{fatal, reason});
}

}  // namespace

class S3Sink : public sdk::BaseSink<S3Sink> {
 public:
  static constexpr std::string_view sink_name = "s3";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes each topic-partition's records as objects (JSON lines or raw, gzip/zstd) to S3 under keys from the "
      "first offset: a replay rewrites the same keys. Rotation by records, bytes and record time; SigV4.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  // Batches pending while their objects fill: an object of max_object_records needs up to
  // max_object_records / batch_length of them (the runtime flushes when the window is full).
  static constexpr uint32_t max_in_flight = 4096;
  static inline const kit::OptionTable<s3::Settings>& options = s3::option_table();

  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { (void)s3::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto p = s3::plan(config, problems);
    if (!p) {
      std::string text = problems.text();
      if (!text.empty() && text.back() == '\n') text.pop_back();
      throw sdk::FatalError(text);
    }
    plan_ = std::make_unique<s3::Plan>(std::move(*p));
    const s3::Settings& s = plan_->settings;
    writer_ = kit::RecordJsonWriter({.layout = s.include_metadata ? kit::JsonLayout::Envelope : kit::JsonLayout::PayloadOnly});
    if (!s.include_metadata || s.format == s3::Format::Raw) declare_unread_fields(PMQ_FIELD_HEADERS);
    if (s.format == s3::Format::Csv) {
      csv_ = std::make_unique<s3::CsvEncoder>(s.csv_columns);
      if (s.csv_header) object_header_ = csv_->header();
      if (std::find(s.csv_columns.begin(), s.csv_columns.end(), "pico_headers") == s.csv_columns.end())
        declare_unread_fields(PMQ_FIELD_HEADERS);
    }
    rotation_ = {.max_records = static_cast<uint64_t>(s.max_object_records), .max_bytes = s.max_object_bytes.bytes,
                 .interval_ms = s.rotate_interval.count()};
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<s3::Client>(
        *plan_, static_cast<size_t>(s.max_uploads_in_flight),
        s3::Client::Hooks{.log_warn = [this](const std::string& m) { log(sdk::LogLevel::Warn, m); },
                          .count = [this](const char* name, uint64_t n) { count(name, n); }});
    if (std::string warning = client_->check_bucket(); !warning.empty()) log(sdk::LogLevel::Warn, warning);
    for (int64_t i = 0; i < s.max_uploads_in_flight; ++i) uploaders_.emplace_back([this] { upload_main(); });
    log(sdk::LogLevel::Info, "s3 sink: bucket '" + s.bucket + "' at " + plan_->scheme + "://" + plan_->host +
                                 plan_->base_path + (plan_->path_style ? " (path-style)" : " (virtual-hosted)") +
                                 ", keys " + plan_->prefix + s.key_template);
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending result = pending();
    auto write = std::make_shared<BatchWrite>(result);
    const pmq_batch& b = batch.raw();
    if (b.record_count == 0) {
      write->finish(std::nullopt);
      return result;
    }
    const int64_t first = pmq_batch_record(&b, 0)->offset;
    bool resumed;
    {
      std::lock_guard lock(mutex_);
      resumed = partition(b.topic, b.partition).resumed;
    }
    std::optional<int64_t> resume_through;
    if (!resumed) {
      // The first batch of the partition since the start (or an assignment): the object it
      // starts in may be written already (a crash after the upload, before the commit).
      try {
        resume_through = written_through(b);
      } catch (const sdk::FatalError& e) {
        write->finish(std::pair{true, std::string(e.what())});
        return result;
      } catch (const std::exception& e) {
        {
          // The batch comes again alone (no flush): its records end their object then.
          std::lock_guard lock(mutex_);
          PartitionState& p = partition(b.topic, b.partition);
          const int64_t last = pmq_batch_record(&b, b.record_count - 1)->offset;
          p.recovering_through = std::max(p.recovering_through.value_or(last), last);
        }
        write->finish(std::pair{false, std::string(e.what())});
        return result;
      }
    }
    const auto json = writer_.begin(b);
    std::string encoded;
    {
      std::lock_guard lock(mutex_);
      PartitionState& p = partition(b.topic, b.partition);
      if (!p.resumed) {
        p.resumed = true;
        if (resume_through) {
          log(sdk::LogLevel::Info, "s3 sink: " + std::string(b.topic) + "[" + std::to_string(b.partition) +
                                       "] resumes at offset " + std::to_string(first) + ", inside an object written up to offset " +
                                       std::to_string(*resume_through) + ": the next object starts after it");
          count("resumed_inside_object");
          p.skip_through = *resume_through;
          p.objects->restart_at(*resume_through + 1);
        }
      }
      const bool covered = p.skip_through && *p.skip_through >= p.objects->next_offset() - 1;
      if (!p.expect && first < p.objects->next_offset() && !covered) rewind(p);
      if (p.expect && first > *p.expect) {
        write->finish(std::pair{false, "waiting for the records from offset " + std::to_string(*p.expect) +
                                           " to come again (an earlier upload of the partition failed)"});
        return result;
      }
      try {
        for (size_t i = 0; i < b.record_count; ++i) {
          const pmq_record& r = *pmq_batch_record(&b, i);
          if ((p.expect && r.offset < *p.expect) || (p.skip_through && r.offset <= *p.skip_through)) continue;
          p.expect.reset();
          encoded.clear();
          if (plan_->settings.format == s3::Format::JsonLines) {
            json.append(encoded, r);
            encoded += '\n';
          } else if (csv_) {
            if (auto refused = csv_->append(encoded, b, r)) {
              write->pending.reject(i, *refused);
              count("rejected_records");
              continue;
            }
          } else {
            if (!r.payload.data) continue;  // a tombstone has no bytes to write
            encoded.append(reinterpret_cast<const char*>(r.payload.data), r.payload.size);
            encoded += plan_->settings.raw_separator;
          }
          p.objects->append(r.offset, r.timestamp_ms, encoded, write);
          if (p.recut.erase(r.offset)) p.objects->seal("flush");  // where the dropped object ended
        }
        if (p.recovering_through) {
          const int64_t last = pmq_batch_record(&b, b.record_count - 1)->offset;
          p.objects->seal("retry");
          if (last >= *p.recovering_through) {
            p.recovering_through.reset();
            p.recut.clear();
          }
        }
      } catch (const sdk::FatalError& e) {
        write->finish(std::pair{true, std::string(e.what())});
        return result;
      }
    }
    cv_.notify_all();
    write->finish(std::nullopt);
    return result;
  }

  void flush(std::chrono::milliseconds) {
    {
      std::lock_guard lock(mutex_);
      for (auto& [tp, p] : partitions_) p->objects->seal("flush");
    }
    cv_.notify_all();
  }

  void partitions_revoked(uint32_t, const std::vector<sdk::TopicPartition>& list) {
    std::lock_guard lock(mutex_);
    for (const auto& tp : list) {
      auto it = partitions_.find({std::string(tp.topic), tp.partition});
      if (it == partitions_.end()) continue;
      PartitionState& p = *it->second;
      p.objects->seal("revoke");  // the host flushed before; anything left goes up now
      // An upload under way (or queued) keeps the state alive in states_ until it is done.
      if (!p.uploading && p.queue.empty()) states_.erase(&p);
      partitions_.erase(it);
    }
    cv_.notify_all();
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    cv_.notify_all();
    if (client_) client_->close();
    for (auto& t : uploaders_) t.join();
    uploaders_.clear();
    std::lock_guard lock(mutex_);
    for (auto& [tp, p] : partitions_) drop(*p, false, "the sink closed before the object was written");
    partitions_.clear();
  }

 private:
  PartitionState& partition(std::string_view topic, int32_t partition) {
    auto& slot = partitions_[{std::string(topic), partition}];
    if (!slot) {
      slot = std::make_shared<PartitionState>();
      std::shared_ptr<PartitionState> self = slot;
      PartitionState* raw = slot.get();
      slot->objects = std::make_unique<s3::PartitionObjects>(
          std::string(topic), partition, rotation_,
          s3::KeyContext{.key_template = &plan_->key, .prefix = plan_->prefix, .sink_key = std::string(sink_key()),
                         .ext = plan_->ext, .object_header = object_header_},
          [this, raw](std::unique_ptr<s3::Object> o) {  // called with mutex_ held
            count("objects_sealed");
            raw->queue.push_back(std::move(o));
            schedule(raw);
          });
      states_.emplace(raw, self);
    }
    return *slot;
  }

  // The last offset of the written object that `b`'s first record is in, if there is one: the
  // object with the greatest start offset at or before it, among the keys of the record's time
  // bucket (listed by narrowing offset-digit prefixes, so a partition's thousands of objects
  // are not listed), and the last offset in its metadata.
  std::optional<int64_t> written_through(const pmq_batch& b) {
    const pmq_record& r = *pmq_batch_record(&b, 0);
    auto prefix = plan_->key.resolve_prefix({.topic = b.topic, .partition = b.partition, .timestamp_ms = r.timestamp_ms,
                                             .sink_key = sink_key(), .ext = plan_->ext});
    if (!prefix) throw sdk::FatalError("key_template: " + prefix.error());
    const std::string base = plan_->prefix + prefix.value();
    char digits[32];
    std::snprintf(digits, sizeof digits, "%020lld", static_cast<long long>(r.offset));
    for (size_t cut = 17;; cut -= 3) {
      std::optional<std::pair<int64_t, std::string>> best;
      for (const std::string& key : client_->list_keys(base + std::string(digits, cut))) {
        if (key.size() < base.size() + 20) continue;
        const std::string number = key.substr(base.size(), 20);
        if (number.find_first_not_of("0123456789") != std::string::npos) continue;
        const int64_t start = std::stoll(number);
        if (start <= r.offset && (!best || start > best->first)) best = std::pair{start, key};
      }
      if (best) {
        const auto last = client_->last_offset(best->second);
        if (last && *last >= r.offset) return last;
        return std::nullopt;
      }
      if (cut < 3) return std::nullopt;
    }
  }

  // mutex_ held: the partition has an object to upload and none under way.
  void schedule(PartitionState* p) {
    if (p->uploading || p->in_ready || p->queue.empty()) return;
    p->in_ready = true;
    ready_.push_back(states_.at(p));
  }

  // mutex_ held: a batch came from before the records taken so far (a retry after a failure of
  // the runtime's, a seek). The open object is dropped (its batches retried); objects already
  // sealed stand, so the next object starts where the open one did.
  void rewind(PartitionState& p) {
    const int64_t at = p.objects->open() ? p.objects->open()->first_offset : p.objects->next_offset();
    log(sdk::LogLevel::Warn, "s3 sink: records from before offset " + std::to_string(p.objects->next_offset()) +
                                 " came again; the next object starts at offset " + std::to_string(at));
    if (auto open = p.objects->take_open()) {
      fail_owners(*open, false, "its object was dropped (records came again)");
      p.expect = at;
      p.recovering_through = std::max(p.recovering_through.value_or(open->last_offset), open->last_offset);
    } else {
      p.skip_through = at - 1;  // in objects sealed already
    }
    p.objects->restart_at(at);
  }

  // mutex_ held: fails the partition's queued and open objects; notes where their records end
  // and where flushes had ended them (recovering_through, recut).
  void drop(PartitionState& p, bool fatal, const std::string& reason) {
    auto note = [&](const s3::Object& o) {
      p.recovering_through = std::max(p.recovering_through.value_or(o.last_offset), o.last_offset);
      if (o.sealed_by == "flush" || o.sealed_by == "revoke" || o.sealed_by == "retry") p.recut.insert(o.last_offset);
    };
    for (auto& o : p.queue) {
      note(*o);
      fail_owners(*o, fatal, reason);
    }
    p.queue.clear();
    if (auto open = p.objects->take_open()) {
      p.recovering_through = std::max(p.recovering_through.value_or(open->last_offset), open->last_offset);
      fail_owners(*open, fatal, reason);
    }
  }

  void upload_main() {
    kit::Compressor compressor(plan_->settings.compression, static_cast<int>(plan_->settings.compression_level));
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return closing_ || !ready_.empty(); });
      if (closing_) return;
      std::shared_ptr<PartitionState> p = std::move(ready_.front());
      ready_.pop_front();
      p->in_ready = false;
      std::unique_ptr<s3::Object> o = std::move(p->queue.front());
      p->queue.pop_front();
      p->uploading = true;
      lock.unlock();

      std::optional<std::pair<bool, std::string>> failure;
      try {
        const std::string body = compressor.compress(o->body);
        client_->put_object(o->key, body, plan_->content_type, o->last_offset);
        count("records_written", o->records);
        log(sdk::LogLevel::Debug, "s3 sink: wrote " + o->key + " (" + std::to_string(o->records) + " records, " +
                                      std::to_string(body.size()) + " bytes, sealed by " + o->sealed_by + ")");
      } catch (const sdk::FatalError& e) {
        failure = std::pair{true, std::string(e.what())};
      } catch (const std::exception& e) {
        failure = std::pair{false, std::string(e.what())};
      }

      lock.lock();
      p->uploading = false;
      if (failure) {
        log(failure->first ? sdk::LogLevel::Error : sdk::LogLevel::Warn,
            "s3 sink: " + o->key + " not written: " + failure->second);
        // This object and every later one of the partition: their batches are retried (or stop
        // the sink), and the next object starts at this one's first offset again.
        drop(*p, failure->first, "an earlier object of the partition was not written: " + failure->second);
        p->recovering_through = std::max(p->recovering_through.value_or(o->last_offset), o->last_offset);
        if (o->sealed_by == "flush" || o->sealed_by == "revoke" || o->sealed_by == "retry") p->recut.insert(o->last_offset);
        p->expect = o->first_offset;
        p->objects->restart_at(o->first_offset);
      }
      schedule(p.get());
      if (p->queue.empty() && !p->uploading) {  // a revoked partition's last upload: its state goes
        const auto it = partitions_.find({o->topic, o->partition});
        if (it == partitions_.end() || it->second != p) states_.erase(p.get());
      }
      lock.unlock();
      for (const auto& owner : o->owners) static_cast<BatchWrite&>(*owner).finish(failure);
      lock.lock();
    }
  }

  std::unique_ptr<s3::Plan> plan_;
  kit::RecordJsonWriter writer_;
  s3::Rotation rotation_;
  std::unique_ptr<s3::Client> client_;
  std::unique_ptr<s3::CsvEncoder> csv_;
  std::string object_header_;
  std::mutex mutex_;  // partitions_, states_, ready_, every PartitionState, closing_
  std::condition_variable cv_;
  std::map<std::pair<std::string, int32_t>, std::shared_ptr<PartitionState>> partitions_;
  std::map<PartitionState*, std::shared_ptr<PartitionState>> states_;  // alive while assigned or uploading
  std::deque<std::shared_ptr<PartitionState>> ready_;
  bool closing_ = false;
  std::vector<std::thread> uploaders_;
};

PICOMQ_SINK_PLUGIN(S3Sink)
