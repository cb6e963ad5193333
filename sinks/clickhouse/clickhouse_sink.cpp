// ClickHouse sink: records into ClickHouse tables (one per topic, from a name template) through
// the HTTP interface, as `INSERT INTO db.table (cols) FORMAT RowBinary` (clickhouse/row_binary.h),
// or FORMAT Native made from the Arrow plane's columns (clickhouse/arrow_encoder.h).
// Columns are declared, read from the existing table (DESCRIBE TABLE), or, for a table the sink
// creates, inferred from the topic's first batch; JSON values convert strictly to the column
// types, and a record that does not convert is rejected through the bad-record policy.
// Consecutive batches into one table are one insert: a segment of the kit's accumulator, up to
// max_batch_records / max_batch_bytes / commit_interval (ClickHouse wants large inserts; many
// tiny ones end in TOO_MANY_PARTS), committed on the accumulator's thread while the next one
// fills; a batch's write completes when its insert succeeded. Errors by ClickHouse exception code
// (clickhouse/errors.h): transient ones resent for retry_timeout, data errors bisected down to
// the rows the server refuses (rejected, the rest written), configuration errors stop the sink.
// Replays: tables the sink creates are ReplacingMergeTree ordered by the record id
// (pico_topic, pico_partition, pico_offset), so a replayed row replaces itself (exact with FINAL).
// Docs: docs/sinks/clickhouse.md.
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clickhouse/arrow_encoder.h"
#include "clickhouse/changes.h"
#include "clickhouse/client.h"
#include "clickhouse/config.h"
#include "clickhouse/errors.h"
#include "clickhouse/native.h"
#include "clickhouse/replays.h"
#include "clickhouse/row_binary.h"
#include "clickhouse/schema.h"
#include "picomq/kit/accumulator.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/refusal_memory.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/kit/splitter.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace sdk = picomq::sdk;
namespace kit = picomq::kit;
namespace ch = picomq::clickhouse;
using ch::Clock;
using namespace std::chrono_literals;

// Batches one insert may gather (the accumulator's max_batches; max_batch_records and
// max_batch_bytes still bound it). A streamed insert goes up as it gathers, so it can be large:
// fewer parts for the server to write and merge (1M records: 5 inserts, the server's CPU 0.6 s
// against 1.0 s at 64 batches; bench/README.md). An insert sent whole goes up only when it
// commits, and a large one then holds the rows back longer: 64 there. max_in_flight leaves room
// for the next insert filling while two commit (max_concurrent_inserts' default).
constexpr size_t kStreamedSegmentBatches = 256;
constexpr size_t kSegmentBatches = 64;
// Inserts whose insert_deduplication_token a table the sink creates remembers (22.2 on): a resend
// comes within retry_timeout, a few inserts later at most.
constexpr int kDedupWindow = 1000;
// The start-up check's wait for the server.
constexpr auto kHealthCheckTimeout = 5s;

// 128 random bits in hex: this run's inserts' tokens start with it.
std::string random_run_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
    id += word;
  }
  return id;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// One topic's table.
struct TopicTable {
  std::string name;     // sanitised
  std::string display;  // db.table, for messages
  std::string topic;
  bool ready = false;
  std::shared_ptr<ch::RowBinaryEncoder> encoder;           // the batches plane
  std::shared_ptr<ch::ArrowEncoder> arrow;                 // the Arrow plane
  std::shared_ptr<const std::vector<ch::Column>> columns;  // what an insert writes
  std::string insert_sql;
  bool native = false;      // format Native, and the columns allow it
  uint32_t generation = 0;  // bumped when the table is looked up again: older segments stay apart
  bool changes = false;     // a table of change events (pico_version, pico_deleted; clickhouse/changes.h)
  std::set<std::string, std::less<>> table_columns;  // every column DESCRIBE showed (written or not)
};

}  // namespace

class ClickHouseSink;

namespace {

// Where a batch's records came from (copied: the batch itself may be released).
struct Origin {
  std::string topic;
  int32_t partition = 0;
  std::shared_ptr<const std::vector<int64_t>> offsets;  // by record index
};
using RecordId = std::tuple<std::string, int32_t, int64_t>;  // topic, partition, offset

Origin origin_of(const pmq_batch& batch) {
  auto offsets = std::make_shared<std::vector<int64_t>>(batch.record_count);
  for (size_t i = 0; i < batch.record_count; ++i) (*offsets)[i] = pmq_batch_record(&batch, i)->offset;
  return {batch.topic ? batch.topic : "", batch.partition, std::move(offsets)};
}

// An Arrow batch moved out of the write call (the structs are the host's only for the call):
// kept by the insert that holds its rows, for a bisection's re-encoding.
struct HeldArrow {
  ArrowSchema schema{};
  ArrowArray array{};
  Origin origin;
  ch::ArrowInput input;

  explicit HeldArrow(const sdk::ArrowBatch& batch)
      : schema(batch.take_schema()),
        array(batch.take_array()),
        origin{batch.raw().topic ? batch.raw().topic : "", batch.raw().partition,
               std::make_shared<const std::vector<int64_t>>(batch.raw().offsets,
                                                            batch.raw().offsets + batch.raw().record_count)},
        input(ch::arrow_input(batch.raw())) {
    input.schema = &schema;
    input.array = &array;
    input.topic = origin.topic;
    input.offsets = origin.offsets->data();
  }
  HeldArrow(const HeldArrow&) = delete;
  HeldArrow& operator=(const HeldArrow&) = delete;
  ~HeldArrow() {
    if (schema.release) schema.release(&schema);
    if (array.release) array.release(&array);
  }
};

// One insert: consecutive batches for one table, sent as one request when the accumulator
// commits it. Its body is built as batches join, in the insert's format: RowBinary rows, or
// Native blocks (one per batch: made from the batch's Arrow columns, or from its RowBinary rows).
// It keeps each batch's write and each row's place, so a refused insert can be bisected down to
// the rows the server refuses: a part of a batch is cut from its RowBinary rows, or encoded
// again from its Arrow columns (valid until the batch's write completes).
class InsertSegment final : public kit::Segment {
 public:
  using CommitFn = std::function<void(InsertSegment&)>;
  // Sends an insert whose body is the stream (ch::Client::insert_streamed).
  // nullopt: no connection for a stream now (the insert is then sent whole at commit).
  using StartStream = std::function<std::optional<std::future<ch::QueryResult>>(std::shared_ptr<kit::BodyStream>)>;

  // `native`: FORMAT Native, `columns` the insert's columns (RowBinary rows made into blocks),
  // `arrow` the table's Arrow encoder (null on the batches plane). `start_stream` (Native only;
  // null: off): the insert goes to the server with its first block and each block follows as its
  // batch joins, so the server parses while the insert gathers, and an insert of many batches
  // does not go up all at once when it commits.
  // `token`: the insert's insert_deduplication_token (empty: none), the same for each time it is
  // sent.
  InsertSegment(std::string table, std::string insert_sql, std::string token, bool native,
                std::shared_ptr<const std::vector<ch::Column>> columns, std::shared_ptr<const ch::ArrowEncoder> arrow,
                CommitFn commit, StartStream start_stream)
      : table_(std::move(table)),
        insert_sql_(std::move(insert_sql)),
        token_(std::move(token)),
        native_(native),
        columns_(std::move(columns)),
        arrow_(std::move(arrow)),
        commit_(std::move(commit)),
        start_stream_(native_ ? std::move(start_stream) : nullptr) {}
  ~InsertSegment() override {
    if (stream_) stream_->fail("the insert was dropped");  // never a complete body unless finish_stream() ran
  }

  // RowBinary rows of one batch (ch::Row::end: each row's end in `data`; `offsets`: each row's
  // Kafka offset).
  void add_rows(sdk::Pending write, const Origin& origin, std::string data, const std::vector<ch::Row>& rows) {
    Part& p = start_part(std::move(write), origin, rows);
    for (const ch::Row& r : rows) p.ends.push_back(r.end);
    if (native_) {
      auto block = ch::native_block(*columns_, data, rows.size());
      if (!block)
        throw sdk::FatalError("table " + table_ + ": cannot make a Native block of its rows: " + block.error());
      add_to_body(std::move(block.value()));
      p.rows_data = std::move(data);
    } else {
      p.offset = body_.size();
      body_ += data;
    }
  }
  // One batch's Native block, made from its Arrow columns.
  void add_block(sdk::Pending write, const Origin& origin, ch::ArrowEncoded& e,
                 std::shared_ptr<const HeldArrow> batch) {
    Part& p = start_part(std::move(write), origin, e.rows);
    p.block = true;
    p.batch = std::move(batch);
    for (const ch::Row& r : e.rows) p.batch_rows.push_back(r.record_index);
    add_to_body(std::move(e.data));
  }
  void commit() override { commit_(*this); }
  void abandon() noexcept override {
    if (stream_) stream_->fail("the insert was abandoned");
  }

  // Whether the insert is on the wire already (its body a stream), and its result once the
  // stream ends here.
  bool streamed() const { return stream_ != nullptr; }
  ch::QueryResult finish_stream() {
    stream_->finish();
    return streamed_.get();
  }

  const std::string& table() const { return table_; }
  const std::string& insert_sql() const { return insert_sql_; }
  const std::string& token() const { return token_; }
  size_t rows() const { return rows_.size(); }
  void reject(size_t row, const std::string& reason) { writes_[rows_[row].write].reject(rows_[row].record, reason); }
  // The record of a row: its topic, partition and offset.
  RecordId record(size_t row) const {
    const Part& p = parts_[rows_[row].part];
    return {p.origin.topic, p.origin.partition, (*p.origin.offsets)[rows_[row].record]};
  }
  // What an insert of rows [first, first + n) sends (made into `scratch` unless it is the body).
  std::string_view request_body(size_t first, size_t n, std::string& scratch) const {
    if (first == 0 && n == rows_.size() && !stream_) return body_;
    scratch.clear();
    for (const Part& p : parts_) {
      const size_t from = std::max(first, p.first), to = std::min(first + n, p.first + p.count);
      if (from >= to) continue;
      const size_t a = from - p.first, b = to - p.first;
      if (p.block) {
        scratch += arrow_->native_block(p.batch->input, std::span<const uint32_t>(p.batch_rows).subspan(a, b - a));
        continue;
      }
      const uint64_t begin = a == 0 ? 0 : p.ends[a - 1], end = p.ends[b - 1];
      const std::string_view rows = native_ ? std::string_view(p.rows_data).substr(begin, end - begin)
                                            : std::string_view(body_).substr(p.offset + begin, end - begin);
      if (!native_) {
        scratch += rows;
        continue;
      }
      auto block = ch::native_block(*columns_, rows, b - a);
      if (!block)
        throw sdk::FatalError("table " + table_ + ": cannot make a Native block of its rows: " + block.error());
      scratch += block.value();
    }
    return scratch;
  }

 private:
  struct RowRef {
    uint32_t write;
    uint32_t part;
    uint32_t record;
  };
  struct Part {  // one batch's rows
    Origin origin;
    size_t first = 0, count = 0;             // its rows in the segment
    bool block = false;                      // a Native block of Arrow columns (else RowBinary rows)
    std::vector<uint64_t> ends;              // RowBinary: each row's end in its bytes
    size_t offset = 0;                       // RowBinary insert: where its bytes start in body_
    std::string rows_data;                   // Native insert: its RowBinary rows
    std::shared_ptr<const HeldArrow> batch;  // block: the batch and which of its rows
    std::vector<uint32_t> batch_rows;
  };
  // A Native block (or RowBinary rows) of the insert: onto its stream, or into the body sent at commit.
  void add_to_body(std::string bytes) {
    if (start_stream_ && body_.empty() && !stream_) {  // the first block: stream the insert if it can
      auto stream = std::make_shared<kit::BodyStream>();
      if (auto answer = start_stream_(stream)) {
        stream_ = std::move(stream);
        streamed_ = std::move(*answer);
      }
    }
    if (stream_) stream_->append(std::move(bytes));
    else body_ += bytes;
  }
  Part& start_part(sdk::Pending write, const Origin& origin, const std::vector<ch::Row>& rows) {
    const auto w = static_cast<uint32_t>(writes_.size());
    const auto part = static_cast<uint32_t>(parts_.size());
    writes_.push_back(std::move(write));
    Part& p = parts_.emplace_back();
    p.origin = origin;
    p.first = rows_.size();
    p.count = rows.size();
    for (const ch::Row& r : rows) rows_.push_back({w, part, r.record_index});
    return p;
  }

  std::string table_, insert_sql_, token_;
  bool native_;
  std::shared_ptr<const std::vector<ch::Column>> columns_;
  std::shared_ptr<const ch::ArrowEncoder> arrow_;
  CommitFn commit_;
  StartStream start_stream_;
  std::shared_ptr<kit::BodyStream> stream_;
  std::future<ch::QueryResult> streamed_;
  std::string body_;  // unless streamed
  std::vector<RowRef> rows_;
  std::vector<Part> parts_;
  std::vector<sdk::Pending> writes_;
};

}  // namespace

class ClickHouseSink : public sdk::BaseSink<ClickHouseSink> {
 public:
  static constexpr std::string_view sink_name = "clickhouse";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Writes records into ClickHouse tables (one per topic) over HTTP as RowBinary or Native inserts (Native from "
      "the Arrow plane's columns); consecutive batches share one insert for up to commit_interval; "
      "a replay's records already in the table are left out (by record id).";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches,
                                                   sdk::DataPlane::Arrow};
  // Arrow when the inserts are Native columns of fields (format = "Native", payload_mode =
  // "columns"): the runtime's parse laid out in columns already; else batches (open()).
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches, sdk::DataPlane::Arrow};
  static constexpr uint32_t max_in_flight = 3 * kStreamedSegmentBatches;
  // Change events (docs/changes.md): rows versioned by offset in a ReplacingMergeTree by key.
  static constexpr uint32_t change_ops =
      PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  static inline const kit::OptionTable<ch::Settings>& options = ch::option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { ch::plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto plan = ch::plan(config, problems);
    problems.throw_if_any();
    plan_ = std::make_unique<ch::Plan>(std::move(*plan));
    const ch::Settings& s = plan_->settings;
    if (!s.include_metadata) declare_unread_fields(PMQ_FIELD_HEADERS);
    // Change events come as records (their operations and keys); the inserts may still be Native.
    arrow_plane_ =
        s.format == ch::InsertFormat::Native && s.payload_mode == ch::PayloadMode::Columns && !plan_->changes;
    declare_plane(arrow_plane_ ? sdk::DataPlane::Arrow : sdk::DataPlane::Batches);

    kit::AuthSettings auth;
    auth.type = kit::AuthType::Basic;
    auth.user = s.user;
    auth.password = s.password.value_or("");
    kit::HttpClientOptions http = kit::client_options(s.http, s.tls, auth);
    // Connections: the streamed inserts (at most max_streams_, below), the committers' inserts
    // sent whole (a fallback, a resend, a bisection), one query of the delivery thread.
    max_streams_ = static_cast<size_t>(s.max_open_tables + s.max_concurrent_inserts);
    http.max_in_flight = max_streams_ + static_cast<size_t>(s.max_concurrent_inserts) + 1;
    http.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    if (!s.tls.verify) log(sdk::LogLevel::Warn, "tls_verify is off: the server's certificate is not checked");
    client_ = std::make_unique<ch::Client>(std::move(http), plan_->base_url, s.database);
    log(sdk::LogLevel::Info, "clickhouse sink: " + kit::redact_url(plan_->base_url) + ", tables " + s.database + "." +
                                 s.target_table + ", payload_mode " +
                                 (s.payload_mode == ch::PayloadMode::Columns ? "columns" : "string") +
                                 (plan_->declared.empty() ? "" : " (declared)"));
    health_check();
    stream_inserts_ =
        s.stream_inserts && s.format == ch::InsertFormat::Native && s.http.compression == kit::Compression::None;
    kit::AccumulatorLimits limits =
        kit::accumulator_limits(s.batching, stream_inserts_ ? kStreamedSegmentBatches : kSegmentBatches,
                                static_cast<size_t>(s.max_open_tables));
    limits.idle = ch::kInsertIdle;
    // Each write is released (sink ABI 2.3) once its rows are encoded: the runtime then stops
    // counting the batch against its buffer (max_buffered_records), so the consumer reads on
    // while inserts are on the wire, and what an insert holds is its own body. An insert that
    // fails for good makes the runtime read its batches again from the broker (a rewind).
    limits.background_commits = true;
    limits.committers = static_cast<size_t>(s.max_concurrent_inserts);
    limits.ordered_per_key = false;
    accumulator_ = std::make_unique<kit::Accumulator>(limits, [this](const kit::CommitReport& r) { committed(r); });
  }

  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending write = pending();
    const pmq_batch& raw = batch.raw();
    if (raw.record_count == 0) {
      write.done();
      return write;
    }
    const bool changes = pmq_batch_has_changes(&raw);
    ChangeBatch change_batch;
    if (changes && !prepare_changes(raw, change_batch)) {
      write.done();  // nothing left to write: deletes and truncates of a table that does not exist
      return write;
    }
    const pmq_batch& input = changes ? change_batch.batch : raw;
    const Origin origin = origin_of(raw);
    std::vector<uint32_t> written_before = changes ? std::vector<uint32_t>{} : already_written(raw.topic, origin);
    // A table's setup (DESCRIBE, CREATE, ALTER) and the encoding take time: the insert this batch
    // joins must not commit as idle meanwhile.
    const auto preparing = accumulator_->preparing();
    ch::Encoded encoded;
    InsertTarget target;
    {
      std::lock_guard lock(mutex_);
      auto infer = [&] {
        ch::Inferred inferred = ch::infer_columns(input, version_);
        if (changes) inferred.key = ch::infer_key_columns(input);
        return inferred;
      };
      TopicTable& t = *table_for(raw.topic, infer, changes);
      if (plan_->settings.auto_add_columns) add_new_columns(t, infer);
      encoded = t.encoder->encode(input);
      if (!encoded.ok()) throw sdk::FatalError("table " + t.display + ": " + encoded.error);
      target = insert_target(t);
    }
    if (const auto dropped = leave_out(origin, encoded.rows, encoded.rejected, written_before); !dropped.empty())
      drop_rows(&encoded.data, encoded.rows, dropped);
    if (!take_rejections(write, encoded.rejected, encoded.rows.empty())) return write;
    write.release();  // the rows are encoded (the accumulator's note in open())
    accumulator_->append(
        target.key, write, {encoded.data.size(), encoded.rows.size()}, [&] { return make_segment(target); },
        [&](kit::Segment& s) {
          static_cast<InsertSegment&>(s).add_rows(write, origin, std::move(encoded.data), encoded.rows);
        });
    return write;
  }

  // The Arrow plane (format Native, payload_mode columns): the batch's columns into a Native
  // block, without parsing the payloads again (clickhouse/arrow_encoder.h).
  sdk::Pending write_arrow_batch(const sdk::ArrowBatch& batch) {
    sdk::Pending write = pending();
    if (batch.raw().record_count == 0) {
      write.done();
      return write;
    }
    auto held = std::make_shared<const HeldArrow>(batch);
    const ch::ArrowInput& in = held->input;
    const std::vector<uint32_t> written_before = already_written(batch.raw().topic, held->origin);
    const auto preparing = accumulator_->preparing();
    ch::ArrowEncoded encoded;
    InsertTarget target;
    {
      std::lock_guard lock(mutex_);
      auto infer = [&] { return ch::infer_arrow_columns(in, version_); };
      TopicTable& t = *table_for(batch.raw().topic, infer, false);
      if (plan_->settings.auto_add_columns) add_new_columns(t, infer);
      encoded = t.arrow->encode(in);
      if (!encoded.ok()) throw sdk::FatalError("table " + t.display + ": " + encoded.error);
      target = insert_target(t);
    }
    const Origin& origin = held->origin;
    if (const auto dropped = leave_out(origin, encoded.rows, encoded.rejected, written_before); !dropped.empty()) {
      drop_rows(encoded.native ? nullptr : &encoded.data, encoded.rows, dropped);
      if (encoded.native && !encoded.rows.empty()) {
        std::vector<uint32_t> kept;
        for (const ch::Row& r : encoded.rows) kept.push_back(r.record_index);
        encoded.data = target.arrow->native_block(in, kept);
      }
    }
    if (!take_rejections(write, encoded.rejected, encoded.rows.empty())) return write;
    write.release();  // the block and the Arrow columns are the sink's own now
    accumulator_->append(
        target.key, write, {encoded.data.size(), encoded.rows.size()}, [&] { return make_segment(target); },
        [&](kit::Segment& s) {
          auto& segment = static_cast<InsertSegment&>(s);
          if (encoded.native) segment.add_block(write, origin, encoded, held);
          else segment.add_rows(write, origin, std::move(encoded.data), encoded.rows);
        });
    return write;
  }

  // The host's flush (idle, revoke, shutdown): every open insert goes to the committers now, not
  // waited for here — the host waits for the completions itself, and an insert stalled on one
  // table must not keep the delivery thread from another table's batches (max_concurrent_inserts).
  void flush(std::chrono::milliseconds /*timeout*/) { accumulator_->seal_all(); }

  // A partition assigned (start-up, rebalance) may replay what a run before wrote: its next batch
  // is looked up (already_written).
  void partitions_assigned(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    for (const auto& tp : partitions) replays_.assigned({std::string(tp.topic), tp.partition});
  }
  void partitions_revoked(uint32_t /*block*/, const std::vector<sdk::TopicPartition>& partitions) {
    for (const auto& tp : partitions) replays_.revoked({std::string(tp.topic), tp.partition});
  }

  void close() {
    if (client_) client_->stop();  // resends and their waits end now: one attempt each from here
    if (accumulator_) accumulator_->close();
    if (client_) client_->close();
  }

 private:
  // ------------------------------------------------------------------ inserts

  // What a batch's insert goes into: its table as it was when the batch was encoded.
  struct InsertTarget {
    std::string key, table, insert_sql;
    bool native = false;
    std::shared_ptr<const std::vector<ch::Column>> columns;
    std::shared_ptr<const ch::ArrowEncoder> arrow;
  };
  static InsertTarget insert_target(const TopicTable& t) {
    return {t.display + (t.generation ? " #" + std::to_string(t.generation) : ""),
            t.display,
            t.insert_sql,
            t.native,
            t.columns,
            t.arrow};
  }
  std::unique_ptr<InsertSegment> make_segment(const InsertTarget& target) {
    // Each insert's own token: a resend of it (a lost answer, a failed stream sent again whole) is
    // dropped by the server if the first one was written after all. Unique across runs (a random
    // run id), never derived from the rows: a token seen before drops the rows it comes with.
    std::string token = dedup_tokens_.load() ? run_id_ + "-" + std::to_string(++inserts_made_) : "";
    InsertSegment::StartStream stream;
    if (stream_inserts_)
      stream = [this, sql = target.insert_sql,
                token](std::shared_ptr<kit::BodyStream> body) -> std::optional<std::future<ch::QueryResult>> {
        // A streamed insert holds its connection until it commits, which may wait for a committer.
        // So it starts only on a connection of its own at once (max_streams_); were it to queue
        // behind other streams, a committer waiting for it could wait for ever. Else: sent whole.
        if (streams_.fetch_add(1) >= max_streams_) {
          streams_.fetch_sub(1);
          count("inserts_not_streamed");
          return std::nullopt;
        }
        // The request lasts as long as the insert gathers (up to commit_interval), then as usual.
        return client_->insert_streamed(sql, std::move(body), insert_params(token),
                                        plan_->settings.http.timeout + plan_->settings.batching.commit_interval,
                                        [this] { streams_.fetch_sub(1); });
      };
    return std::make_unique<InsertSegment>(
        target.table, target.insert_sql, std::move(token), target.native, target.columns, target.arrow,
        [this](InsertSegment& s) { commit_insert(s); }, std::move(stream));
  }
  // Rows the server refused in an insert of released batches: their writes complete with the
  // rejections, and since a released batch cannot be resent, the runtime reads the partition
  // again from the batch (sink_abi.h, release). When those records come again they are rejected
  // here, before the batch is released, with the server's reason, and left out of the insert:
  // no second refusal, no loop. (The insert's other rows are written again: a replay.)
  void remember_refused(const RecordId& id, const std::string& reason) {
    refused_.remember(std::get<0>(id), std::get<1>(id), std::get<2>(id), reason);
  }
  // The known refusals among `rows`: added to `rejected` (kept in record order) and forgotten;
  // returns their record indexes (ascending), for the caller to drop (drop_rows).
  std::vector<uint32_t> reject_known_refusals(const Origin& origin, const std::vector<ch::Row>& rows,
                                              std::vector<ch::Rejection>& rejected) {
    std::vector<uint32_t> dropped;
    if (refused_.empty()) return dropped;
    for (const ch::Row& r : rows) {
      auto reason = refused_.take(origin.topic, origin.partition, (*origin.offsets)[r.record_index]);
      if (!reason) continue;
      rejected.push_back({r.record_index, std::move(*reason)});
      dropped.push_back(r.record_index);
    }
    if (dropped.empty()) return dropped;
    std::sort(rejected.begin(), rejected.end(),
              [](const auto& a, const auto& b) { return a.record_index < b.record_index; });
    return dropped;
  }
  // The records of a batch that are in their table already (clickhouse/replays.h), by index:
  // looked up when the batch replays — its partition just assigned, or its offsets going back —
  // in a table with the record id columns (not one of change events: those fold by version).
  std::vector<uint32_t> already_written(const char* topic, const Origin& origin) {
    const ch::ReplayFilter::Partition p{origin.topic, origin.partition};
    const std::vector<int64_t>& offsets = *origin.offsets;
    if (offsets.empty()) return {};
    std::string table, name;
    {
      std::lock_guard lock(mutex_);
      TopicTable* t = table_for(topic, nullptr, false, /*create=*/false);
      if (!t) {
        replays_.passed(p, offsets.back());
        return {};
      }
      for (const char* id : {"pico_topic", "pico_partition", "pico_offset"})
        if (t->changes || !t->table_columns.count(id)) return {};
      table = qualified(*t);
      name = t->name;
    }
    auto query = [&](const std::string& sql) { return run(sql, "looking up replayed records in table " + table); };
    auto found = replays_.written(p, offsets, table, query, [&] { settle_inserts(table, name); });
    if (found.probed && found.replay_end >= 0)
      log(sdk::LogLevel::Info, "table " + table + ": partition " + p.first + "[" + std::to_string(p.second) +
                                   "] replays from offset " + std::to_string(offsets.front()) +
                                   "; the table holds its rows up to offset " + std::to_string(found.replay_end) +
                                   ": records already there are left out");
    if (!found.written.empty()) count("already_written_records", found.written.size());
    return std::move(found.written);
  }

  // Waits (up to `timeout`; close() ends it) for the inserts into `name` that the server is running
  // now to end — a killed run's may still be writing — so that none lands after a replay's look.
  void settle_inserts(const std::string& table, const std::string& name) {
    const std::string sql = "SELECT query_id FROM system.processes WHERE lower(query) LIKE 'insert into%' AND " +
                            std::string("position(query, ") + ch::quote_string(name) + ") > 0 FORMAT TabSeparated";
    auto running = [&] {
      std::set<std::string> ids;
      std::istringstream lines(run(sql, "listing the inserts into table " + table));
      for (std::string id; std::getline(lines, id);)
        if (!id.empty()) ids.insert(id);
      return ids;
    };
    std::set<std::string> waiting = running();
    kit::RetryWait wait(client_->stop_signal(), Clock::now() + plan_->settings.http.timeout,
                        {.initial = 100ms, .max = 100ms, .jitter = false});
    while (!waiting.empty()) {
      if (!wait.wait()) {
        if (wait.stopped()) throw sdk::RetryableError("table " + table + ": stopping while its inserts run");
        log(sdk::LogLevel::Warn, "table " + table + ": " + std::to_string(waiting.size()) +
                                     " inserts into it are still running; looking for replayed records anyway");
        return;
      }
      std::set<std::string> still;
      for (const std::string& id : running())
        if (waiting.count(id)) still.insert(id);
      waiting = std::move(still);
    }
  }

  // The records left out of a batch's insert: the known refusals (rejected again, reject_known_refusals)
  // and those in the table already (`written`, ascending). Ascending.
  std::vector<uint32_t> leave_out(const Origin& origin, const std::vector<ch::Row>& rows,
                                  std::vector<ch::Rejection>& rejected, const std::vector<uint32_t>& written) {
    std::vector<uint32_t> dropped = reject_known_refusals(origin, rows, rejected);
    if (written.empty()) return dropped;
    std::vector<uint32_t> all;
    std::set_union(dropped.begin(), dropped.end(), written.begin(), written.end(), std::back_inserter(all));
    return all;
  }

  // `rows` without the records `dropped` (ascending), and their RowBinary bytes out of `data`
  // (null: a Native block, encoded again by the caller).
  static void drop_rows(std::string* data, std::vector<ch::Row>& rows, const std::vector<uint32_t>& dropped) {
    std::string out;
    std::vector<ch::Row> kept;
    uint64_t begin = 0;
    for (const ch::Row& r : rows) {
      const uint64_t from = std::exchange(begin, r.end);
      if (std::binary_search(dropped.begin(), dropped.end(), r.record_index)) continue;
      if (!data) {
        kept.push_back(r);
        continue;
      }
      out.append(*data, from, r.end - from);
      kept.push_back({out.size(), r.record_index});
    }
    rows = std::move(kept);
    if (data) *data = std::move(out);
  }

  // The batch's rejected records; false when nothing is left to insert (the write is done).
  bool take_rejections(sdk::Pending& write, const std::vector<ch::Rejection>& rejected, bool nothing_left) {
    for (const auto& r : rejected) write.reject(r.record_index, r.reason);
    if (!rejected.empty()) count("rejected_records", rejected.size());
    if (nothing_left) write.done();
    return !nothing_left;
  }

  std::string insert_params(const std::string& token) const {
    // async_insert off: a write is acknowledged only when its rows are in the table. 18.16 has no
    // such setting (and refuses unknown ones).
    std::string params = async_insert_setting_.load() ? "&async_insert=0" : "";
    if (!token.empty()) params += "&insert_deduplication_token=" + kit::percent_encode(token);
    return params;
  }

  // The accumulator's commit of one insert (on its committer thread, or flush()'s caller).
  void commit_insert(InsertSegment& s) {
    const auto deadline = Clock::now() + plan_->settings.retry_timeout;
    uint64_t resends = 0;
    std::string scratch;
    ch::QueryResult r;
    if (s.streamed()) {
      r = s.finish_stream();
      count("streamed_inserts");
      const auto o = r.outcome.outcome;
      if (o == kit::Outcome::Retry || o == kit::Outcome::MaybeWritten) {
        // A stream goes up once: its rows again as one body, resent as usual from here.
        log(sdk::LogLevel::Info, "table " + s.table() + ": a streamed insert of " + std::to_string(s.rows()) +
                                     " rows failed; sending its rows again: " + r.outcome.reason);
        count("resends");
        r = client_->insert(s.insert_sql(), s.request_body(0, s.rows(), scratch), deadline, insert_params(s.token()),
                            &resends);
        r.earlier_maybe_written = r.earlier_maybe_written || o == kit::Outcome::MaybeWritten;
      }
    } else {
      r = client_->insert(s.insert_sql(), s.request_body(0, s.rows(), scratch), deadline, insert_params(s.token()),
                          &resends);
    }
    count("inserts");
    if (resends) count("resends", resends);
    if (r.outcome.outcome == kit::Outcome::Rejected || r.outcome.outcome == kit::Outcome::TooLarge) {
      log(sdk::LogLevel::Info, "table " + s.table() + ": the server refused an insert of " + std::to_string(s.rows()) +
                                   " rows; narrowing down the rows it refuses: " + r.outcome.reason);
      bool written = false;
      bisect(s, 0, s.rows(), deadline, written, r.outcome.reason);
      return;
    }
    finish(s, r, false);
  }

  // Rows [first, first + n) of a refused insert, in halves until each refused row stands alone.
  void bisect(InsertSegment& s, size_t first, size_t n, Clock::time_point deadline, bool& written,
              const std::string& reason) {
    if (n == 1) {
      s.reject(first, "ClickHouse refused the row: " + reason);
      remember_refused(s.record(first), "ClickHouse refused the row: " + reason);
      count("rejected_records");
      return;
    }
    const kit::Halves h = kit::halves(first, n);
    for (auto [from, count_] : {std::pair{h.first_a, h.count_a}, std::pair{h.first_b, h.count_b}}) {
      count("bisect_inserts");
      std::string scratch;
      ch::QueryResult r = client_->insert(
          s.insert_sql(), s.request_body(from, count_, scratch), deadline,
          insert_params(s.token().empty() ? ""
                                          : s.token() + ":" + std::to_string(from) + "+" + std::to_string(count_)));
      if (r.outcome.outcome == kit::Outcome::Rejected || r.outcome.outcome == kit::Outcome::TooLarge) {
        bisect(s, from, count_, deadline, written, r.outcome.reason);
        continue;
      }
      finish(s, r, written);
      written = true;
    }
  }

  // Throws the outcome of an insert that was not Written.
  void finish(InsertSegment& s, const ch::QueryResult& r, bool written_before) {
    const kit::Classification& c = r.outcome;
    switch (c.outcome) {
      case kit::Outcome::Written: return;
      case kit::Outcome::Rejected:
      case kit::Outcome::TooLarge:  // handled by the caller
        return;
      case kit::Outcome::Retry:
        if (written_before || r.earlier_maybe_written)
          throw sdk::PartialWriteError("table " + s.table() + ": " + c.reason);
        throw sdk::RetryableError("table " + s.table() + ": " + c.reason);
      case kit::Outcome::MaybeWritten: throw sdk::PartialWriteError("table " + s.table() + ": " + c.reason);
      case kit::Outcome::Fatal:
        if (r.code == 60 && plan_->settings.auto_create_table) {
          forget_table(s.table());  // dropped while the sink ran: the next attempt creates it again
          throw sdk::RetryableError("table " + s.table() +
                                    " is gone; it is created again on the next attempt: " + c.reason);
        }
        if (r.code == 60)
          throw sdk::FatalError("table " + s.table() + " does not exist and auto_create_table is off: " + c.reason);
        throw sdk::FatalError("table " + s.table() + ": " + c.reason);
    }
  }

  void committed(const kit::CommitReport& r) {
    if (!r.ok) {
      count("failed_writes", r.batches);
      log(sdk::LogLevel::Debug,
          "table " + r.key + ": " + std::to_string(r.batches) + " batches failed (" + r.trigger + "): " + r.error);
      return;
    }
    count("written_records", r.records);
    log(sdk::LogLevel::Debug, "table " + r.key + ": inserted " + std::to_string(r.records) + " rows of " +
                                  std::to_string(r.batches) + " batches (" + r.trigger + "; open " +
                                  std::to_string(r.open_for.count()) + " ms, insert " + std::to_string(r.took.count()) +
                                  " ms)");
  }

  // ------------------------------------------------------------------ change events

  // A batch of change events made ready for the encoder (docs/sinks/clickhouse.md, "Change
  // events"): the changes before its last truncate left out (the table was truncated), its
  // patches merged with their keys' rows, so that every record the encoder writes is an upsert
  // or a delete.
  struct ChangeBatch {
    pmq_batch batch{};
    std::vector<pmq_record> records;
    std::deque<std::string> rows;  // the merged patches' rows
  };

  // Truncates and merges what `raw` asks; false when nothing is left to write (no upsert or patch
  // after the last truncate, and the table does not exist: nothing to delete either).
  bool prepare_changes(const pmq_batch& raw, ChangeBatch& out) {
    size_t last_truncate = SIZE_MAX;
    bool patches = false, rows = false;
    for (size_t i = 0; i < raw.record_count; ++i)
      if (pmq_record_op(&raw, pmq_batch_record(&raw, i)) == PMQ_OP_TRUNCATE) last_truncate = i;
    const size_t first = last_truncate == SIZE_MAX ? 0 : last_truncate + 1;
    for (size_t i = first; i < raw.record_count; ++i) {
      const int32_t op = pmq_record_op(&raw, pmq_batch_record(&raw, i));
      patches = patches || op == PMQ_OP_PATCH;
      rows = rows || op == PMQ_OP_PATCH || op == PMQ_OP_UPSERT;
    }
    // The table's earlier changes are in it before it is truncated or read back.
    if (last_truncate != SIZE_MAX || patches) accumulator_->flush("change events");
    out.batch = raw;
    out.batch.record_size = sizeof(pmq_record);
    out.records.reserve(raw.record_count);
    for (size_t i = 0; i < raw.record_count; ++i) {
      out.records.push_back(*pmq_batch_record(&raw, i));
      if (i < first) out.records.back().op = PMQ_OP_TRUNCATE;  // gone with the table's rows: not written
    }
    out.batch.records = out.records.data();
    std::lock_guard lock(mutex_);
    TopicTable* table = table_for(raw.topic, nullptr, true, false);
    if (last_truncate != SIZE_MAX && table) {
      run("TRUNCATE TABLE " + qualified(*table), "truncating table " + table->display);
      log(sdk::LogLevel::Info, "table " + table->display + " truncated (a truncate event at offset " +
                                   std::to_string(pmq_batch_record(&raw, last_truncate)->offset) + ")");
      count("truncates");
    }
    if (patches) merge_patches(table, first, out);
    return rows || table != nullptr;
  }

  // Each patch of `out` (from record `first` on) made an upsert of its key's row with the
  // patch's columns set: the row as the table has it (its latest version, unless deleted), or as
  // an earlier change of this batch left it; a key without a row gets only what the patch names.
  // mutex_ held; `table` null: it does not exist yet.
  void merge_patches(TopicTable* table, size_t first, ChangeBatch& out) {
    auto bytes = [](const pmq_bytes& b) { return std::string_view(reinterpret_cast<const char*>(b.data), b.size); };
    std::vector<std::string> key_fields;
    std::vector<std::string_view> patch_keys;
    for (size_t i = first; i < out.records.size(); ++i) {
      const pmq_record& r = out.records[i];
      if (r.op != PMQ_OP_PATCH || !r.key_json.data) continue;
      patch_keys.push_back(bytes(r.key_json));
      if (key_fields.empty()) key_fields = ch::key_field_names(bytes(r.key_json));
    }
    std::map<std::string, std::string> current;
    if (table && !patch_keys.empty()) {
      std::vector<std::string> columns;
      for (const ch::Column& c : *table->columns)
        if (c.source == ch::Source::Field) columns.push_back(c.name);
      const std::string sql = ch::current_rows_sql(qualified(*table), key_fields, columns, patch_keys);
      if (!sql.empty()) {
        ch::QueryResult r = client_->query(sql, std::nullopt, "&output_format_json_quote_64bit_integers=0");
        if (r.outcome.outcome != kit::Outcome::Written)
          throw sdk::RetryableError("reading the rows of table " + table->display +
                                    " that patches change: " + r.outcome.reason);
        auto rows = ch::latest_rows(r.body, key_fields);
        if (!rows) throw sdk::FatalError("table " + table->display + ": " + rows.error());
        current = std::move(rows).value();
        count("patch_lookups");
      }
    }
    // Each key's row as the batch has left it so far (nullopt: deleted).
    std::map<std::string, std::optional<std::string>> batch_rows;
    for (size_t i = first; i < out.records.size(); ++i) {
      pmq_record& r = out.records[i];
      if (!r.key_json.data) continue;
      const auto key = ch::key_text(bytes(r.key_json), key_fields);
      if (!key) continue;
      if (r.op == PMQ_OP_UPSERT) batch_rows[*key] = std::string(bytes(r.payload));
      if (r.op == PMQ_OP_DELETE) batch_rows[*key] = std::nullopt;
      if (r.op != PMQ_OP_PATCH) continue;
      std::optional<std::string> base;
      if (auto it = batch_rows.find(*key); it != batch_rows.end()) base = it->second;
      else if (auto c = current.find(*key); c != current.end()) base = c->second;
      std::string row(bytes(r.payload));
      if (base) row = ch::merge_rows(*base, row).value_or(row);
      batch_rows[*key] = row;
      const std::string& kept = out.rows.emplace_back(std::move(row));
      r.payload = {reinterpret_cast<const uint8_t*>(kept.data()), kept.size()};
      r.op = PMQ_OP_UPSERT;
    }
  }

  // ------------------------------------------------------------------ tables

  // Runs a query for the table setup; throws its outcome.
  std::string run(const std::string& sql, const std::string& what) {
    ch::QueryResult r = client_->query(sql);
    switch (r.outcome.outcome) {
      case kit::Outcome::Written: return std::move(r.body);
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten: throw sdk::RetryableError(what + ": " + r.outcome.reason);
      default: throw sdk::FatalError(what + ": " + r.outcome.reason);
    }
  }

  void forget_table(const std::string& display) {
    std::lock_guard lock(mutex_);
    for (auto& [topic, t] : tables_)
      if (t.display == display) {
        t.ready = false;
        ++t.generation;
      }
  }

  // The columns of a table the sink creates, from the batch at hand (called with mutex_ held,
  // after the server's version is known).
  using Infer = std::function<ch::Inferred()>;

  // The topic's table, looked up (or created) on its first batch. mutex_ held. `changes`: the
  // batch's records are change events (a table created for them is one of changes). `create`
  // off: nullptr when the table does not exist.
  TopicTable* table_for(const char* topic, const Infer& infer, bool changes, bool create = true) {
    auto it = tables_.find(topic);
    if (it == tables_.end()) {
      auto resolved = plan_->target_table.resolve(topic);
      if (!resolved) throw sdk::FatalError("target_table for topic '" + std::string(topic) + "': " + resolved.error());
      auto name = kit::sanitize_name(resolved.value(), kit::NamePolicy::SqlIdentifier);
      if (!name) throw sdk::FatalError("target_table for topic '" + std::string(topic) + "': " + name.error());
      TopicTable t;
      t.name = name.value();
      t.display = plan_->settings.database + "." + t.name;
      t.topic = topic;
      it = tables_.emplace(topic, std::move(t)).first;
    }
    TopicTable& t = it->second;
    if (!t.ready && !prepare_table(t, infer, changes, create)) return nullptr;
    return &t;
  }

  std::string qualified(const TopicTable& t) const {
    return ch::quote_identifier(plan_->settings.database) + "." + ch::quote_identifier(t.name);
  }

  void ensure_version() {
    if (version_.major != 0) return;
    const std::string v = trim(run("SELECT version()", "asking the server's version"));
    set_version(ch::parse_version(v));
  }

  void set_version(ch::ServerVersion v) {
    version_ = v;
    async_insert_setting_ = v.at_least(21, 11);
    dedup_tokens_ = v.at_least(22, 2);
  }

  // false: the table does not exist and `create` is off.
  bool prepare_table(TopicTable& t, const Infer& infer, bool changes, bool create = true) {
    ensure_version();
    const ch::Settings& s = plan_->settings;
    auto described = describe(t);
    if (!described && !create) return false;
    if (!described) {
      if (!s.auto_create_table)
        throw sdk::FatalError("table " + t.display +
                              " does not exist and auto_create_table is off (create it, or turn "
                              "auto_create_table on)");
      std::vector<ch::Column> payload;
      if (s.payload_mode == ch::PayloadMode::String) {
        payload.push_back({"payload", ch::nullable(ch::make(ch::Kind::String)), ch::Source::Payload, ""});
      } else if (!plan_->declared.empty()) {
        payload = plan_->declared;
      } else {
        ch::Inferred inferred = infer();
        for (const auto& note : inferred.notes) log(sdk::LogLevel::Warn, "topic '" + t.topic + "': " + note);
        if (inferred.columns.empty())
          throw sdk::FatalError("topic '" + t.topic + "': payload_mode 'columns' found no fields to " +
                                "make columns of in the first batch (no JSON objects with fields); declare `columns`");
        payload = std::move(inferred.columns);
      }
      std::string sql;
      if (changes) {
        std::vector<ch::Column> key = infer().key;
        if (key.empty())
          throw sdk::FatalError("topic '" + t.topic + "': its change events have no keys to order table " + t.display +
                                " by");
        for (ch::Column& k : key)  // a declared column's type, without Nullable (a sorting key)
          for (const ch::Column& d : plan_->declared)
            if (d.name == k.name) k.type = d.type.nullable() ? *d.type.inner : d.type;
        sql = ch::create_change_table_sql(qualified(t), key, payload, s.include_metadata, version_);
      } else {
        sql = ch::create_table_sql(qualified(t), payload, s.include_metadata, dedup_tokens_ ? kDedupWindow : 0);
      }
      run(sql, "creating table " + t.display);
      log(sdk::LogLevel::Info, "created table " + t.display + ": " + sql);
      described = describe(t);
      if (!described) throw sdk::RetryableError("table " + t.display + " was created but DESCRIBE does not find it");
    }
    t.table_columns.clear();
    for (const auto& c : *described) t.table_columns.insert(c.name);
    auto layout = ch::layout_from_table(*described, s.payload_mode == ch::PayloadMode::String, plan_->declared);
    for (const auto& note : layout.notes) log(sdk::LogLevel::Warn, "table " + t.display + ": " + note);
    if (!layout.error.empty()) throw sdk::FatalError("table " + t.display + ": " + layout.error);
    if (changes) {
      auto has = [&](ch::Source source) {
        return std::any_of(layout.columns.begin(), layout.columns.end(),
                           [&](const ch::Column& c) { return c.source == source; });
      };
      if (!has(ch::Source::Version) || !has(ch::Source::Deleted))
        throw sdk::FatalError("table " + t.display +
                              " takes change events only with the columns pico_version UInt64 and pico_deleted UInt8 "
                              "(a ReplacingMergeTree(pico_version) by the key: docs/sinks/clickhouse.md, \"Change "
                              "events\"); add them, or let the sink create the table");
    }
    t.changes = changes;
    t.native = s.format == ch::InsertFormat::Native;
    if (const std::string why = ch::native_unsupported(layout.columns); t.native && !why.empty()) {
      log(sdk::LogLevel::Info, "table " + t.display + ": inserts in RowBinary, not Native: " + why);
      t.native = false;
    }
    t.insert_sql = ch::insert_sql(qualified(t), layout.columns, t.native ? "Native" : "RowBinary");
    log(sdk::LogLevel::Debug, "table " + t.display + ": " + t.insert_sql);
    t.columns = std::make_shared<const std::vector<ch::Column>>(layout.columns);
    if (arrow_plane_) t.arrow = std::make_shared<ch::ArrowEncoder>(std::move(layout.columns), t.native);
    else t.encoder = std::make_shared<ch::RowBinaryEncoder>(std::move(layout.columns));
    t.ready = true;
    return true;
  }

  // auto_add_columns: fields of this batch that are no column of the table yet become Nullable
  // columns (typed by the inference rules over this batch). The segment gathering the table's
  // earlier batches keeps its own column list (columns it omits get their defaults) and commits
  // as it would; this batch and later ones go into the next. mutex_ held.
  void add_new_columns(TopicTable& t, const Infer& infer) {
    ch::Inferred inferred = infer();
    std::vector<ch::Column> added;
    for (auto& c : inferred.columns)
      if (!t.table_columns.count(c.name)) added.push_back(std::move(c));
    if (added.empty()) return;
    std::string names;
    size_t n = 0;
    for (const auto& c : added) {
      ch::QueryResult r = client_->query(ch::add_column_sql(qualified(t), c));
      const bool there = r.code == 44 || r.code == 15;  // another writer added it first
      if (r.outcome.outcome != kit::Outcome::Written && !there) {
        const std::string what = "adding column " + c.name + " " + c.type.name() + " to table " + t.display;
        if (r.outcome.outcome == kit::Outcome::Retry || r.outcome.outcome == kit::Outcome::MaybeWritten)
          throw sdk::RetryableError(what + ": " + r.outcome.reason);
        throw sdk::FatalError(what + ": " + r.outcome.reason);
      }
      if (there) continue;
      names += (names.empty() ? "" : ", ") + c.name + " " + c.type.name();
      ++n;
    }
    if (n) {
      log(sdk::LogLevel::Info, "table " + t.display + ": added columns " + names);
      count("added_columns", n);
    }
    t.ready = false;
    ++t.generation;
    prepare_table(t, infer, t.changes);
  }

  // The table's columns, or nullopt when it does not exist.
  std::optional<std::vector<ch::DescribedColumn>> describe(const TopicTable& t) {
    ch::QueryResult r = client_->query("DESCRIBE TABLE " + qualified(t) + " FORMAT JSONEachRow");
    if (r.outcome.outcome != kit::Outcome::Written) {
      if (r.code == 60) return std::nullopt;
      if (r.outcome.outcome == kit::Outcome::Retry || r.outcome.outcome == kit::Outcome::MaybeWritten)
        throw sdk::RetryableError("looking up table " + t.display + ": " + r.outcome.reason);
      throw sdk::FatalError("looking up table " + t.display + ": " + r.outcome.reason);
    }
    auto cols = ch::parse_describe(r.body);
    if (!cols) throw sdk::FatalError("looking up table " + t.display + ": " + cols.error());
    return std::move(cols).value();
  }

  // ------------------------------------------------------------------ start-up check

  // Connects and authenticates now, so a wrong password or a missing database stops the sink at
  // start, not at the first record. An unreachable server is not a configuration error: a
  // warning, and the sink starts anyway.
  void health_check() {
    const std::string db = plan_->settings.database;
    ch::QueryResult r = client_->query(
        "SELECT version(), (SELECT count() FROM system.databases WHERE name = " + ch::quote_string(db) + ")",
        kHealthCheckTimeout);
    switch (r.outcome.outcome) {
      case kit::Outcome::Written: break;
      case kit::Outcome::Retry:
      case kit::Outcome::MaybeWritten:
        count("destination_unreachable");
        log(sdk::LogLevel::Warn,
            "ClickHouse is not reachable now (the sink starts and retries with each write): " + r.outcome.reason);
        return;
      default:
        throw sdk::FatalError("connecting to ClickHouse as user '" + plan_->settings.user + "': " + r.outcome.reason);
    }
    const std::string answer = trim(r.body);
    const size_t tab = answer.find('\t');
    set_version(ch::parse_version(answer.substr(0, tab)));
    if (tab == std::string::npos || answer.substr(tab + 1) != "1")
      throw sdk::FatalError("database '" + db + "' does not exist on the server (create it, or set `database`)");
    log(sdk::LogLevel::Info, "connected to ClickHouse " + answer.substr(0, tab) + ": database " + db + " found");
  }

  std::unique_ptr<ch::Plan> plan_;
  std::unique_ptr<ch::Client> client_;
  // Rows the server refused in inserts of released batches, rejected when their records come
  // again (the runtime re-reads them: a released batch cannot be resent): kit/refusal_memory.hpp.
  kit::RefusalMemory refused_;
  ch::ReplayFilter replays_;                       // records of replayed batches that are in their tables already
  bool arrow_plane_ = false;                       // batches come as Arrow (set in open())
  ch::ServerVersion version_;                      // set in open() or on a table lookup (mutex_ held)
  std::atomic<bool> async_insert_setting_{false};  // the server knows async_insert (read by commits)
  // The server knows insert_deduplication_token (22.2): each insert carries one (make_segment), and
  // the tables the sink creates keep the last kDedupWindow inserts' tokens.
  std::atomic<bool> dedup_tokens_{false};
  const std::string run_id_ = random_run_id();
  std::atomic<uint64_t> inserts_made_{0};
  bool stream_inserts_ = false;     // Native inserts go up as their batches join (stream_inserts, no compression)
  size_t max_streams_ = 0;          // streamed inserts on the wire at most (a connection each)
  std::atomic<size_t> streams_{0};  // streamed inserts on the wire now
  std::mutex mutex_;                // tables_ and their encoders
  std::unordered_map<std::string, TopicTable> tables_;
  std::unique_ptr<kit::Accumulator> accumulator_;  // last: its threads stop before the rest goes
};

PICOMQ_SINK_PLUGIN(ClickHouseSink)
