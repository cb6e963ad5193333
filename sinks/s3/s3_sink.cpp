// S3 sink: the records of each topic-partition as objects (JSON lines, CSV, Avro, Parquet or raw payloads, gzip /
// zstd / none) under keys resolved from each object's first record ({topic}, {partition},
// {start_offset}, record-time date fields...). Objects end by the records alone (max records,
// max bytes, record-time window, the key's time fields) or on flush (quiet poll_interval, revoke,
// shutdown). A batch's write completes only when every object holding its records is written
// (PUT 200), so its offset moves only then; after a crash the replay from the committed offset
// rebuilds the same objects under the same keys (docs/sinks/s3.md, "Behaviour under replay and crashes"). The first
// upload of a key wins (If-None-Match: *): a killed run's upload that the store applies late never
// replaces an object, and a key taken by another cut of the records is left to it, the records
// after its last offset going into the next object. One partition's
// objects are uploaded in order by upload threads; a failed upload fails its batches and every
// later one of the partition, and the retry starts the next object at the failed one's first
// offset again (same key).
#include <algorithm>
#include <atomic>
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
#include <unordered_map>
#include <vector>

#include "picomq/kit/compression.hpp"
#include "picomq/kit/random_token.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/sdk.hpp"
#include "s3/avro.h"
#include "s3/client.h"
#include "s3/config.h"
#include "s3/csv.h"
#include "s3/objects.h"
#include "s3/parquet.h"

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
  size_t outstanding = 1;                              // + 1 until write_batch returns
  std::optional<std::pair<bool, std::string>> failed;  // fatal?, reason
};

// The upload of the object an upload thread works on (streamed: parts go up as it grows).
struct Stream {
  bool started = false;   // the object's head bytes are in `buffer`
  std::string buffer;     // encoded (compressed) bytes not uploaded yet
  std::string upload_id;  // multipart upload under way
  std::string marker;     // its last offset's marker (a key of its own: marker_key)
  bool multipart = false;
  std::string parts_xml, digests;
  size_t parts = 0;
  uint64_t uploaded = 0;
};

struct PartitionState {
  std::unique_ptr<s3::PartitionObjects> objects;
  std::deque<std::shared_ptr<s3::Object>> queue;  // sealed, in order, waiting for upload (the first may be under way)
  bool uploading = false;
  bool in_ready = false;
  // The object an upload thread works on (the first of `queue`, or the open one), its upload,
  // and the bytes the thread holds for it (chunks taken, compressed bytes not uploaded yet).
  std::shared_ptr<s3::Object> current;
  Stream stream;
  uint64_t in_hand = 0;
  // After a failed upload (or a rewind): the offset the next object must start at; a batch
  // starting after it is refused (retry) until the one holding it comes back.
  std::optional<int64_t> expect;
  // Records up to this offset are in objects written before (found at the first batch after a
  // start, or dropped on a rewind, or holding a key we were refused): skipped.
  std::optional<int64_t> skip_through;
  // Until resumed, each batch looks in the bucket for the objects its records are in already (a
  // run before this one, or the object that took a key from us), and the records in them are
  // skipped: first by listing the keys around the first record (listed), then by following the
  // objects from there, key after key.
  bool resumed = false;
  bool listed = false;
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
      "Writes each topic-partition's records as objects (JSON lines, CSV, Avro, Parquet or raw, gzip/zstd) to S3 under "
      "keys "
      "from the first offset: a replay rewrites the same keys. Rotation by records, bytes and record time; streamed "
      "multipart uploads; SigV4.";
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
    problems.throw_if_any();
    plan_ = std::make_unique<s3::Plan>(std::move(*p));
    const s3::Settings& s = plan_->settings;
    writer_ = kit::RecordJsonWriter(
        {.layout = s.include_metadata ? kit::JsonLayout::Envelope : kit::JsonLayout::PayloadOnly});
    if (!s.include_metadata || s.format == s3::Format::Raw) declare_unread_fields(PMQ_FIELD_HEADERS);
    if (s.format == s3::Format::Avro) {
      if (s.avro_schema) avro_ = std::make_unique<s3::AvroEncoder>(*s.avro_schema, s.compression);
      declare_unread_fields(PMQ_FIELD_HEADERS);
    }
    if (s.format == s3::Format::Csv) {
      csv_ = std::make_unique<s3::CsvEncoder>(s.csv_columns);
      if (s.csv_header) object_header_ = csv_->header();
      if (std::find(s.csv_columns.begin(), s.csv_columns.end(), "pico_headers") == s.csv_columns.end())
        declare_unread_fields(PMQ_FIELD_HEADERS);
    }
    if (s.format == s3::Format::Parquet)
      parquet_ = std::make_unique<s3::ParquetEncoder>(plan_->parquet, plan_->parquet_columns, s.include_metadata);
    if (!s.include_metadata && parquet_) declare_unread_fields(PMQ_FIELD_HEADERS);
    rotation_ = {.max_records = static_cast<uint64_t>(s.max_object_records),
                 .max_bytes = s.max_object_bytes.bytes,
                 .interval_ms = s.rotate_interval.count(),
                 .chunk_bytes = parquet_ ? 0 : s.chunk_size.bytes};  // a Parquet file is made whole at the seal
    held_limit_ = static_cast<uint64_t>(s.parts_in_flight) * s.part_size.bytes;
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<s3::Client>(
        *plan_, static_cast<size_t>(s.max_uploads_in_flight),
        s3::Client::Hooks{.log_warn = [this](const std::string& m) { log(sdk::LogLevel::Warn, m); },
                          .count = [this](const char* name, uint64_t n) { count(name, n); }});
    if (std::string warning = client_->check_bucket(); !warning.empty()) log(sdk::LogLevel::Warn, warning);
    for (int64_t i = 0; i < s.max_uploads_in_flight; ++i) uploaders_.emplace_back([this] { upload_main(); });
    log(sdk::LogLevel::Info, "s3 sink: " + plan_->bucket.where() +
                                 (plan_->bucket.path_style ? " (path-style)" : " (virtual-hosted)") + ", keys " +
                                 plan_->prefix + s.key_template);
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
    bool resumed, listed;
    std::optional<int64_t> skip_through;
    {
      // Memory: wait while the partition's objects hold more than parts_in_flight x part_size
      // bytes not uploaded yet (the upload thread drains them part by part).
      std::unique_lock lock(mutex_);
      PartitionState& p = partition(b.topic, b.partition);
      if (held(p) > held_limit_) {
        count("memory_waits");
        while (!closing_ && held(p) > held_limit_) cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      if (p.expect && first > *p.expect) return waiting_for(*p.expect, write, result);
      resumed = p.resumed;
      listed = p.listed;
      skip_through = p.skip_through;
    }
    std::optional<Found> found;
    if (!resumed) {
      // The first batch of the partition since the start (or an assignment, or a key taken from
      // us): the objects its records are in may be written already (a crash after the upload,
      // before the commit; a killed run's upload that landed late).
      try {
        found = find_written(b, listed ? skip_through : std::nullopt, !listed);
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
    // parquet: the records its columns refuse, found in the batch (the file is made later).
    std::unordered_map<size_t, std::string> parquet_refused;
    std::string parquet_schema;
    if (parquet_) {
      try {
        parquet_refused = parquet_->refusals(b);
      } catch (const sdk::FatalError& e) {
        write->finish(std::pair{true, std::string(e.what())});
        return result;
      }
      parquet_schema = s3::ParquetEncoder::schema_key(b);
    }
    {
      std::lock_guard lock(mutex_);
      PartitionState& p = partition(b.topic, b.partition);
      if (!p.resumed && found) {
        p.listed = true;
        p.resumed = found->complete;
        if (found->through && (!p.skip_through || *found->through > *p.skip_through)) {
          log(sdk::LogLevel::Info,
              "s3 sink: " + std::string(b.topic) + "[" + std::to_string(b.partition) + "] resumes at offset " +
                  std::to_string(first) + ", inside " +
                  (found->objects > 1 ? std::to_string(found->objects) + " objects" : std::string("an object")) +
                  " written up to offset " + std::to_string(*found->through) + ": the next object starts after it");
          if (found->listed) count("resumed_inside_object");
          if (found->objects > (found->listed ? 1u : 0u))
            count("objects_found_ahead", found->objects - (found->listed ? 1 : 0));
          p.skip_through = *found->through;
          p.objects->restart_at(*found->through + 1);
        }
      }
      const bool covered = p.skip_through && *p.skip_through >= p.objects->next_offset() - 1;
      if (!p.expect && first < p.objects->next_offset() && !covered) rewind(p);
      if (p.expect && first > *p.expect) return waiting_for(*p.expect, write, result);
      try {
        const char* last_schema = nullptr;  // of the previous record: its encoder is `topic_encoder`
        TopicEncoder* topic_encoder = nullptr;
        for (size_t i = 0; i < b.record_count; ++i) {
          const pmq_record& r = *pmq_batch_record(&b, i);
          if (p.expect && r.offset < *p.expect) continue;
          p.expect.reset();  // the records came again from the failed object's first offset
          if (p.skip_through && r.offset <= *p.skip_through) continue;
          encoded.clear();
          std::string_view schema;  // the record's writer schema, when objects follow the topic's
          if (plan_->settings.format == s3::Format::JsonLines) {
            json.append(encoded, r);
            encoded += '\n';
          } else if (plan_->settings.format == s3::Format::Avro) {
            s3::AvroEncoder* encoder = avro_.get();
            if (!encoder) {
              const char* text = pmq_batch_writer_schema(&b, i);
              if (!text && r.payload.data) throw sdk::FatalError(no_writer_schema(b));
              if (!text) {
                write->pending.reject(i, "avro: a tombstone (null payload) has no writer schema to write it by");
                count("rejected_records");
                continue;
              }
              if (text != last_schema) {
                topic_encoder = &encoder_for(text);
                last_schema = text;
              }
              if (!topic_encoder->encoder) {
                write->pending.reject(i, "avro: the record's writer schema cannot be written: " + topic_encoder->error);
                count("rejected_records");
                continue;
              }
              encoder = topic_encoder->encoder.get();
              schema = text;
            }
            if (auto refused = encoder->append(encoded, b, r)) {
              write->pending.reject(i, *refused);
              count("rejected_records");
              continue;
            }
          } else if (parquet_) {
            if (auto it = parquet_refused.find(i); it != parquet_refused.end()) {
              write->pending.reject(i, "parquet: " + it->second);
              count("rejected_records");
              continue;
            }
            parquet_->append(encoded, r);
            schema = parquet_schema;
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
          p.objects->append(r.offset, r.timestamp_ms, encoded, write, schema);
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
    // The records are encoded into their objects: the runtime may free the batch now, so what an
    // object holds until it is complete is its own bytes, bounded by parts_in_flight x
    // part_size, and not every batch it spans (64 MiB objects held ~360 MB of records). Should
    // the object fail, the runtime reads the records again from the broker. Before finish():
    // until then the write cannot complete.
    write->pending.release();
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
    for (auto& [tp, p] : partitions_) {
      p->current.reset();  // no thread has it any more
      drop(*p, false, "the sink closed before the object was written");
    }
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
          std::string(topic), partition, rotation_, key_context(),
          [this, raw](std::shared_ptr<s3::Object> o) {  // called with mutex_ held
            count("sealed_objects");
            raw->queue.push_back(std::move(o));
            schedule(raw);
          },
          [this, raw] {  // a chunk of the open object: it can go up
            note_held(*raw);
            schedule(raw);
          });
      states_.emplace(raw, self);
    }
    return *slot;
  }

  static sdk::Pending waiting_for(int64_t expect, const std::shared_ptr<BatchWrite>& write, sdk::Pending result) {
    write->finish(std::pair{false, "waiting for the records from offset " + std::to_string(expect) +
                                       " to come again (an earlier upload of the partition failed)"});
    return result;
  }

  // What find_written() found: the records up to `through` are in `objects` written objects;
  // `complete` once an object's key is free (the search ends), else the next batch goes on.
  struct Found {
    std::optional<int64_t> through;
    size_t objects = 0;
    bool listed = false;  // the first was found by listing (the batch starts inside it)
    bool complete = true;
  };

  // The written objects `b`'s records are in, from its first record on. `list`: first the
  // object with the greatest start offset at or before the first record, among the keys of the
  // record's time bucket (listed by narrowing offset-digit prefixes, so a partition's thousands
  // of objects are not listed), and the last offset in its metadata. Then, from `through` (that
  // one's last offset, or what an earlier batch found), the object whose key the next record
  // would start, and the next, while they are there (HEAD): a run killed after its uploads
  // landed and before it committed them left them, and each would refuse our other cut of its
  // records (conditional_create) or be overwritten by it.
  Found find_written(const pmq_batch& b, std::optional<int64_t> through, bool list) {
    Found found;
    if (list) {
      through = listed_through(b);
      if (!through) return found;
      found.listed = true;
      found.objects = 1;
    }
    if (!through) return found;
    found.through = through;
    for (size_t i = 0; i < b.record_count;) {
      const pmq_record& r = *pmq_batch_record(&b, i);
      if (r.offset <= *found.through) {
        ++i;
        continue;
      }
      auto key = plan_->key.resolve({.topic = b.topic,
                                     .partition = b.partition,
                                     .start_offset = r.offset,
                                     .timestamp_ms = r.timestamp_ms,
                                     .sink_key = sink_key(),
                                     .ext = plan_->ext});
      if (!key) throw sdk::FatalError("key_template: " + key.error());
      const auto last = client_->last_offset(plan_->prefix + key.value(), {std::string(b.topic), b.partition});
      if (!last || *last < r.offset) return found;  // free: the search ends
      found.through = last;
      ++found.objects;
    }
    found.complete = false;  // every record is in them: the next batch's records go on
    return found;
  }

  std::optional<int64_t> listed_through(const pmq_batch& b) {
    const pmq_record& r = *pmq_batch_record(&b, 0);
    auto prefix = plan_->key.resolve_prefix({.topic = b.topic,
                                             .partition = b.partition,
                                             .timestamp_ms = r.timestamp_ms,
                                             .sink_key = sink_key(),
                                             .ext = plan_->ext});
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
        if (start > r.offset || (best && start <= best->first)) continue;
        // Only the key this partition's object starting there has: a listed key of another
        // topic-partition (or with other text after the digits) is never taken for ours.
        auto own = plan_->key.resolve({.topic = b.topic,
                                       .partition = b.partition,
                                       .start_offset = start,
                                       .timestamp_ms = r.timestamp_ms,
                                       .sink_key = sink_key(),
                                       .ext = plan_->ext});
        if (own && plan_->prefix + own.value() == key) best = std::pair{start, key};
      }
      if (best) {
        const auto last = client_->last_offset(best->second, {std::string(b.topic), b.partition});
        if (last && *last >= r.offset) return last;
        return std::nullopt;
      }
      if (cut < 3) return std::nullopt;
    }
  }

  s3::KeyContext key_context() {
    s3::KeyContext k{.key_template = &plan_->key,
                     .prefix = plan_->prefix,
                     .sink_key = std::string(sink_key()),
                     .ext = plan_->ext,
                     .object_header = object_header_,
                     .container_header = {},
                     .sync_marker = {}};
    if (plan_->settings.format == s3::Format::Avro) {
      k.container_header = [this](const std::string& key, const std::string& schema) {  // mutex_ held
        if (avro_) return avro_->header(key);
        const TopicEncoder& e = encoder_for(schema);
        return e.encoder ? e.encoder->header(key) : std::string();  // no record of a failed schema gets here
      };
      k.sync_marker = [](const std::string& key) { return s3::AvroEncoder::sync_marker(key); };
    }
    return k;
  }

  // avro without avro_schema: an encoder per writer schema the records name (ABI 2.4), or why
  // the schema cannot be written. mutex_ held. At most 64 kept: a topic's schemas change
  // rarely, and an encoder is cheap to build again (what objects hold is the schema's text).
  struct TopicEncoder {
    std::unique_ptr<s3::AvroEncoder> encoder;
    std::string error;
  };
  TopicEncoder& encoder_for(std::string_view text) {
    auto it = topic_encoders_.find(std::string(text));
    if (it != topic_encoders_.end()) return it->second;
    if (topic_encoders_.size() >= 64) topic_encoders_.clear();
    TopicEncoder e;
    try {
      e.encoder = std::make_unique<s3::AvroEncoder>(text, plan_->settings.compression);
    } catch (const std::invalid_argument& x) {
      e.error = x.what();
      if (e.error.rfind("avro_schema: ", 0) == 0) e.error = e.error.substr(13);
    }
    return topic_encoders_.emplace(std::string(text), std::move(e)).first->second;
  }

  // Why an avro object cannot be written without avro_schema from this batch's records.
  static std::string no_writer_schema(const pmq_batch& b) {
    std::string why =
        "format = \"avro\" without avro_schema writes each record by the writer schema it was decoded "
        "from, and " +
        std::string(b.topic) + " gives none: ";
    if (b.struct_size < offsetof(pmq_batch, writer_schemas) + sizeof(b.writer_schemas))
      why += "the runtime is older than sink ABI 2.4, which passes writer schemas";
    else why += "its [[topics]] block has schema = \"" + std::string(b.schema ? b.schema : "") + "\", not \"avro\"";
    return why + ". Declare avro_schema.";
  }

  // mutex_ held: bytes of the partition's objects not uploaded yet.
  static uint64_t held(const PartitionState& p) {
    uint64_t n = p.in_hand;
    for (const auto& o : p.queue) n += o->chunk_bytes;
    if (const auto& o = p.objects->open()) n += o->chunk_bytes;
    return n;
  }

  // mutex_ held: counter peak_unuploaded_bytes follows the most any partition held (a counter
  // only grows: by the rise of the peak).
  void note_held(const PartitionState& p) {
    const uint64_t n = held(p);
    if (n > peak_held_) {
      count("peak_unuploaded_bytes", n - peak_held_);
      peak_held_ = n;
    }
  }

  // mutex_ held: the object the upload thread works on next (in order: the first sealed one, or
  // the open one), or null.
  static std::shared_ptr<s3::Object> head(const PartitionState& p) {
    return p.queue.empty() ? p.objects->open() : p.queue.front();
  }

  // mutex_ held: the partition has upload work (a sealed object, or a chunk of the open one) and
  // no thread on it.
  void schedule(PartitionState* p) {
    if (p->uploading || p->in_ready) return;
    const auto h = head(*p);
    if (!h || (!h->sealed && h->chunks.empty())) return;
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
      open->dropped = true;  // an upload under way of it is aborted
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
    // The object an upload thread has stays (its outcome comes from the thread), unless open.
    std::shared_ptr<s3::Object> kept;
    for (auto& o : p.queue) {
      if (o == p.current) {
        kept = o;
        continue;
      }
      note(*o);
      fail_owners(*o, fatal, reason);
    }
    p.queue.clear();
    if (kept) p.queue.push_back(std::move(kept));
    if (auto open = p.objects->take_open()) {
      open->dropped = true;
      p.recovering_through = std::max(p.recovering_through.value_or(open->last_offset), open->last_offset);
      fail_owners(*open, fatal, reason);
    }
  }

  void upload_main() {
    Codecs codecs = make_codecs();
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return closing_ || !ready_.empty(); });
      if (closing_) return;
      std::shared_ptr<PartitionState> p = std::move(ready_.front());
      ready_.pop_front();
      p->in_ready = false;
      p->uploading = true;
      work(*p, lock, codecs);
      p->uploading = false;
      schedule(p.get());
      if (p->queue.empty() && !p->uploading &&
          !p->objects->open()) {  // a revoked partition's last upload: its state goes
        const auto it =
            std::find_if(partitions_.begin(), partitions_.end(), [&](const auto& e) { return e.second == p; });
        if (it == partitions_.end()) states_.erase(p.get());
      }
      cv_.notify_all();  // writes waiting for memory
    }
  }

  struct Codecs {
    kit::Compressor chunks;                // gzip / zstd / none of each chunk
    std::optional<s3::AvroBlocks> blocks;  // avro: the container's codec
  };

  // Unlocked: a sealed parquet object's kept records (its chunks) as its Parquet file, one chunk.
  std::deque<s3::Chunk> parquet_file(std::deque<s3::Chunk> chunks, const s3::Object& o) {
    std::string kept;
    uint64_t records = 0;
    for (auto& c : chunks) {
      kept += c.data;
      records += c.records;
    }
    chunks.clear();
    try {
      chunks.push_back({parquet_->file(kept, records, o.topic, o.partition, o.schema), records});
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const sdk::FatalError*>(&e)) throw;
      // The same records would fail the same way again: not a retry.
      throw sdk::FatalError("parquet: writing " + o.key + ": " + e.what());
    }
    return chunks;
  }

  // mutex_ held (released while uploading): uploads what the partition's first object has (its
  // chunks; and when it is sealed, the rest), object after object, until nothing is left to do.
  void work(PartitionState& p, std::unique_lock<std::mutex>& lock, Codecs& codecs) {
    const uint64_t part_size = plan_->settings.part_size.bytes;
    for (bool first = true; !closing_; first = false) {
      if (!first && !ready_.empty()) return;  // other partitions wait for a thread: this one goes to the back
      std::shared_ptr<s3::Object> o = head(p);
      if (!o) return;
      if (o != p.current) {
        if (p.current && p.current->dropped && !p.stream.upload_id.empty()) {
          // Dropped (records came again) while no thread had it: its upload goes.
          const std::string key = p.current->key, id = p.stream.upload_id;
          p.stream = Stream{};
          lock.unlock();
          client_->abort_multipart(key, id);
          lock.lock();
          continue;
        }
        p.current = o;
        p.stream = Stream{};
      }
      if (o->chunks.empty() && !o->sealed) return;  // more when its records come
      std::deque<s3::Chunk> chunks = std::move(o->chunks);
      o->chunks.clear();
      p.in_hand += o->chunk_bytes;
      o->chunk_bytes = 0;
      const bool last = o->sealed;
      Stream& st = p.stream;
      lock.unlock();

      std::optional<std::pair<bool, std::string>> failure;
      std::optional<int64_t> taken_through;  // the key was taken by an object holding the records up to here
      try {
        if (plan_->settings.conditional_create && !probed_) check_conditional_writes();
        // Chunks are compressed each on its own: several at once when the records come faster
        // than one thread compresses (one partition's object, gzip: most of the sink's CPU).
        if (parquet_) {  // sealed (no chunk before): its records are all there
          uint64_t kept = 0;
          for (const auto& c : chunks) kept += c.data.size();
          chunks = parquet_file(std::move(chunks), *o);
          lock.lock();
          p.in_hand = p.in_hand - std::min(p.in_hand, kept) + chunks.front().data.size();
          lock.unlock();
        }
        std::vector<std::string> encoded = encode_chunks(chunks, *o, codecs);
        for (size_t i = 0; i < chunks.size(); ++i) {
          if (!st.started) {
            st.buffer = o->head;
            st.started = true;
          }
          st.buffer += encoded[i];
          const uint64_t raw = chunks[i].data.size(), packed = encoded[i].size();
          chunks[i] = {};
          encoded[i] = {};
          lock.lock();
          p.in_hand = p.in_hand - raw + packed;
          note_held(p);
          lock.unlock();
          // Parts as the object grows: each of part_size, cut where one PUT's parts would be.
          while (st.buffer.size() > part_size)
            upload_part(*o, st, std::string_view(st.buffer).substr(0, part_size), p, lock);
        }
        if (last) finish(*o, st, p, lock);
      } catch (const s3::KeyTaken& e) {
        failure = std::pair{false, std::string(e.what())};
        taken_through = std::max(e.last_offset, o->first_offset - 1);
      } catch (const sdk::FatalError& e) {
        failure = std::pair{true, std::string(e.what())};
      } catch (const std::exception& e) {
        failure = std::pair{false, std::string(e.what())};
      }
      if (failure && !st.upload_id.empty()) client_->abort_multipart(o->key, st.upload_id);
      if (taken_through && !st.marker.empty()) client_->delete_object(st.marker);

      lock.lock();
      if (o->dropped) {  // dropped meanwhile (records came again): its batches failed then; its upload goes
        if (!failure && !st.upload_id.empty()) {
          lock.unlock();
          client_->abort_multipart(o->key, st.upload_id);
          lock.lock();
        }
        p.current.reset();
        p.stream = Stream{};
        p.in_hand = 0;
        continue;
      }
      if (!failure && !last) {
        p.in_hand = st.buffer.size();
        continue;  // chunks may have come meanwhile
      }
      // Done with it: written, or failed.
      p.current.reset();
      p.in_hand = 0;
      if (!p.queue.empty() && p.queue.front() == o) p.queue.pop_front();
      else if (p.objects->open() == o) (void)p.objects->take_open();
      if (failure) {
        log(failure->first ? sdk::LogLevel::Error : sdk::LogLevel::Warn,
            "s3 sink: " + o->key + " not written: " + failure->second);
        // This object and every later one of the partition: their batches are retried (or stop
        // the sink), and the next object starts at this one's first offset again.
        drop(p, failure->first, "an earlier object of the partition was not written: " + failure->second);
        p.recovering_through = std::max(p.recovering_through.value_or(o->last_offset), o->last_offset);
        if (o->sealed_by == "flush" || o->sealed_by == "revoke" || o->sealed_by == "retry")
          p.recut.insert(o->last_offset);
        p.expect = o->first_offset;
        p.objects->restart_at(o->first_offset);
        if (taken_through) {
          // Another run's object holds this one's first records (and maybe more): they come again
          // from the broker and those up to its last offset are skipped; the next object starts
          // after it, once the next batch has looked for more objects of that run (a key taken
          // twice in a row would otherwise cost the runtime's retries).
          count("keys_taken");
          p.skip_through = std::max(p.skip_through.value_or(*taken_through), *taken_through);
          p.objects->restart_at(*p.skip_through + 1);
          p.resumed = false;
          p.listed = true;
        }
      } else {
        count("written_records", o->records);
        log(sdk::LogLevel::Debug, "s3 sink: wrote " + o->key + " (" + std::to_string(o->records) + " records, " +
                                      std::to_string(st.uploaded) + " bytes" +
                                      (st.multipart ? " in " + std::to_string(st.parts) + " parts" : "") +
                                      ", sealed by " + o->sealed_by + ")");
      }
      lock.unlock();
      for (const auto& owner : o->owners) static_cast<BatchWrite&>(*owner).finish(failure);
      lock.lock();
    }
  }

  // Unlocked: the chunks through the codec (compressed, or framed as Avro blocks), in order; by
  // up to max_uploads_in_flight threads (this one with its codecs, helpers with their own).
  std::vector<std::string> encode_chunks(const std::deque<s3::Chunk>& chunks, const s3::Object& o, Codecs& codecs) {
    std::vector<std::string> out(chunks.size());
    auto encode = [&](Codecs& c, size_t i) {
      out[i] =
          c.blocks ? c.blocks->block(chunks[i].data, chunks[i].records, o.sync) : c.chunks.compress(chunks[i].data);
    };
    const size_t threads = std::min<size_t>({chunks.size(), static_cast<size_t>(plan_->settings.max_uploads_in_flight),
                                             std::max(1u, std::thread::hardware_concurrency())});
    if (threads <= 1 || plan_->settings.compression == kit::Compression::None) {
      for (size_t i = 0; i < chunks.size(); ++i) encode(codecs, i);
      return out;
    }
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto run = [&](Codecs& c) {
      try {
        for (size_t i; (i = next++) < chunks.size();) encode(c, i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        error = std::current_exception();
      }
    };
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < threads; ++t)
      helpers.emplace_back([&] {
        Codecs own = make_codecs();
        run(own);
      });
    run(codecs);
    for (auto& h : helpers) h.join();
    if (error) std::rethrow_exception(error);
    return out;
  }

  Codecs make_codecs() const {
    Codecs c{kit::Compressor(plan_->object_compression, plan_->object_compression_level), std::nullopt};
    if (plan_->settings.format == s3::Format::Avro)
      c.blocks.emplace(plan_->settings.compression, static_cast<int>(plan_->settings.compression_level));
    return c;
  }

  // Unlocked: one part of the object's multipart upload (started at the first), removed from the buffer.
  void upload_part(const s3::Object& o, Stream& st, std::string_view part, PartitionState& p,
                   std::unique_lock<std::mutex>& lock) {
    if (!st.multipart) {
      st.multipart = true;
      // Its own marker: an upload of the same key by another run (that may win it) has another.
      st.marker = s3::marker_key(o.key, kit::random_token());
      st.upload_id = client_->create_multipart(o.key, plan_->content_type, st.marker, {o.topic, o.partition});
    }
    ++st.parts;
    st.digests += s3::md5_binary(part);
    st.parts_xml += "<Part><PartNumber>" + std::to_string(st.parts) + "</PartNumber><ETag>" +
                    client_->upload_part(o.key, st.upload_id, st.parts, part) + "</ETag></Part>";
    st.uploaded += part.size();
    const size_t n = part.size();
    st.buffer.erase(0, n);
    lock.lock();
    p.in_hand -= std::min<uint64_t>(p.in_hand, n);
    lock.unlock();
    cv_.notify_all();
  }

  // Unlocked: the sealed object's rest: one PUT when it fits in a part, else its last part, its
  // last offset's marker and CompleteMultipartUpload.
  void finish(const s3::Object& o, Stream& st, PartitionState& p, std::unique_lock<std::mutex>& lock) {
    if (!st.started) st.buffer = o.head;  // no chunk (cannot happen: an object has a record)
    if (!st.multipart) {
      client_->put_object(o.key, st.buffer, plan_->content_type, o.last_offset, {o.topic, o.partition});
      st.uploaded += st.buffer.size();
      return;
    }
    upload_part(o, st, st.buffer, p, lock);
    client_->put_marker(st.marker, o.last_offset);
    if (client_->complete_multipart(o.key, st.upload_id, st.parts_xml, s3::multipart_etag_of(st.digests, st.parts),
                                    st.marker, {o.topic, o.partition}) == s3::Client::Completion::TakenBySameBytes) {
      // Another upload of our bytes has the key, and its object names its own marker: this
      // upload and its marker go. (When the object is this upload's, completed by a send whose
      // answer was lost, the marker is the object's: it stays.)
      client_->abort_multipart(o.key, st.upload_id);
      client_->delete_object(st.marker);
      st.upload_id.clear();
    }
  }

  // Unlocked, before the first upload with conditional_create: the store must refuse what the
  // rule rests on (a second If-None-Match write of a key); asked again after a retryable failure.
  void check_conditional_writes() {
    std::lock_guard lock(probe_mutex_);
    if (probed_) return;
    client_->check_conditional_writes();
    probed_ = true;
  }

  std::unique_ptr<s3::Plan> plan_;
  kit::RecordJsonWriter writer_;
  s3::Rotation rotation_;
  std::unique_ptr<s3::Client> client_;
  std::unique_ptr<s3::CsvEncoder> csv_;
  std::unique_ptr<s3::AvroEncoder> avro_;  // avro_schema, when declared
  std::unique_ptr<s3::ParquetEncoder> parquet_;
  std::unordered_map<std::string, TopicEncoder> topic_encoders_;
  uint64_t held_limit_ = 0;
  uint64_t peak_held_ = 0;
  std::string object_header_;
  std::mutex mutex_;  // partitions_, states_, ready_, every PartitionState, closing_
  std::condition_variable cv_;
  std::map<std::pair<std::string, int32_t>, std::shared_ptr<PartitionState>> partitions_;
  std::map<PartitionState*, std::shared_ptr<PartitionState>> states_;  // alive while assigned or uploading
  std::deque<std::shared_ptr<PartitionState>> ready_;
  bool closing_ = false;
  std::vector<std::thread> uploaders_;
  std::mutex probe_mutex_;
  std::atomic<bool> probed_{false};  // check_conditional_writes() passed
};

PICOMQ_SINK_PLUGIN(S3Sink)
