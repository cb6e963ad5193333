#include "runtime/redrive.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "decoders/payload_decoder.h"
#include "runtime/delivery/batch_preparer.h"
#include "runtime/delivery/delivery_window.h"
#include "runtime/kafka/client_conf.h"
#include "runtime/kafka/dead_letter.h"
#include "runtime/kafka/partition_list.h"
#include "runtime/plugin_host/library.h"
#include "runtime/sink_runner.h"
#include "transform/chain.h"
#include "transform/time.h"

namespace picomq::runtime {
namespace {

using nlohmann::ordered_json;

// Dead letters rebuilt as the records they were, as the preparer reads consumed records (in
// their source partition's offset order).
class RebuiltRecords final : public ConsumedRecords {
 public:
  explicit RebuiltRecords(std::vector<kafka::DeadLetterRecord> letters) : letters_(std::move(letters)) {}
  size_t size() const override { return letters_.size(); }
  ConsumedRecord at(size_t index) const override {
    const auto& d = letters_[index];
    ConsumedRecord r;
    r.offset = d.offset;
    r.timestamp_ms = d.timestamp_ms;
    r.key = bytes(d.key);
    r.value = bytes(d.value);
    return r;
  }
  void headers(size_t index, std::vector<pmq_header>& out) const override {
    for (const auto& [name, value] : letters_[index].headers)
      out.push_back(pmq_header{{reinterpret_cast<const uint8_t*>(name.data()), name.size()}, bytes(value)});
  }
  const kafka::DeadLetterRecord& letter(size_t index) const { return letters_[index]; }

 private:
  static pmq_bytes bytes(const std::optional<std::string>& s) {
    return s ? pmq_bytes{reinterpret_cast<const uint8_t*>(s->data()), s->size()} : pmq_bytes{nullptr, 0};
  }
  std::vector<kafka::DeadLetterRecord> letters_;
};

// The change operations the sink applies (a truncate it cannot apply is bad again); without its
// plugin, every one.
uint32_t change_ops_of(const PluginLibrary* library) {
  if (library) return runtime::change_ops(library->descriptor());
  return PMQ_CHANGE_OP_BIT(PMQ_OP_UPSERT) | PMQ_CHANGE_OP_BIT(PMQ_OP_DELETE) | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) |
         PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
}

// The block that reads `topic` now, or -1.
int block_reading(const config::SinkDefinition& definition, const std::string& topic) {
  for (size_t b = 0; b < definition.topics.size(); ++b)
    if (definition.topics[b].reads(topic)) return static_cast<int>(b);
  return -1;
}

// A preparer for block `index` as the runtime has it, every bad record said with its stage.
std::unique_ptr<BatchPreparer> make_preparer(const config::SinkDefinition& definition, size_t index,
                                             uint32_t change_ops, const transform::Chain& chain,
                                             const arrow::ExportOptions* arrow_export) {
  const auto& block = definition.topics[index];
  BatchPreparer::Settings settings;
  settings.schema = block.schema;
  settings.on_bad_record = config::BadRecordPolicy::DeadLetter;
  settings.block_index = static_cast<uint32_t>(index);
  settings.changes = block.changes;
  settings.key_fields = block.key_fields;
  settings.change_ops = change_ops;
  settings.arrow_export = arrow_export;
  const auto decoders = decoders::make_decoder_factory(block);
  const auto key_decoders = block.key_schema ? decoders::make_decoder_factory(*block.key_schema) : nullptr;
  return std::make_unique<BatchPreparer>(settings, decoders->make(), key_decoders ? key_decoders->make() : nullptr,
                                         definition.transforms.empty() ? nullptr : &chain);
}

struct Outcome {
  std::string outcome;  // write | bad | filtered | no_block
  std::string stage, reason;
};

}  // namespace

std::string redrive_dry_run(const config::SinkDefinition& definition, const config::RuntimeConfig& runtime_config,
                            const std::string& bootstrap_servers, const std::string& dead_letter_topic,
                            const kafka::DeadLetterFilter& filter, const std::string& cursor, size_t limit,
                            std::string& error) {
  const kafka::DeadLetterReader reader(bootstrap_servers, runtime_config.client_properties, dead_letter_topic);
  const auto page = reader.page(filter, cursor, limit, error);
  if (!error.empty() && page.records.empty()) return {};
  error.clear();

  std::string plugin_error;
  const auto library = PluginLibrary::load(definition.path, runtime_config.plugin_path, plugin_error);
  const uint32_t change_ops = change_ops_of(library.get());

  // Each source partition's dead letters, in the dead-letter topic's order, with the block that
  // reads the topic now.
  std::vector<Outcome> outcomes(page.records.size());
  std::map<std::pair<int, std::pair<std::string, int32_t>>, std::vector<size_t>> groups;
  for (size_t i = 0; i < page.records.size(); ++i) {
    const auto& d = page.records[i];
    const int block = block_reading(definition, d.topic);
    if (block < 0) outcomes[i] = {"no_block", "", "no [[topics]] block of the sink reads '" + d.topic + "' now"};
    else groups[{block, {d.topic, d.partition}}].push_back(i);
  }
  const transform::Chain chain(definition.transforms);
  for (const auto& [where, indices] : groups) {
    auto preparer = make_preparer(definition, static_cast<size_t>(where.first), change_ops, chain, nullptr);
    std::vector<kafka::DeadLetterRecord> letters;
    for (size_t i : indices) letters.push_back(page.records[i]);
    const RebuiltRecords records(std::move(letters));
    const PreparedBatch prepared = preparer->prepare({where.second.first, where.second.second}, records, true);
    std::map<size_t, const BadRecord*> bad;
    for (const auto& b : prepared.bad) bad[b.index] = &b;
    size_t next = 0;  // the next record the sink would be called with
    for (size_t k = 0; k < indices.size(); ++k) {
      Outcome& o = outcomes[indices[k]];
      if (auto it = bad.find(k); it != bad.end()) {
        o = {"bad", std::string(to_string(it->second->stage)), it->second->reason};
      } else if (!prepared.retry_error.empty() && next >= prepared.batch.records.size()) {
        o = {"bad", "decode", prepared.retry_error};
      } else if (next < prepared.batch.records.size() &&
                 prepared.batch.records[next].offset == page.records[indices[k]].offset) {
        o = {"write", "", ""};
        ++next;
      } else {
        o = {"filtered", "", ""};
      }
    }
  }

  ordered_json records = ordered_json::array();
  std::map<std::string, int64_t> summary{{"write", 0}, {"bad", 0}, {"filtered", 0}, {"no_block", 0}};
  for (size_t i = 0; i < page.records.size(); ++i) {
    const auto& d = page.records[i];
    const auto& o = outcomes[i];
    ++summary[o.outcome];
    ordered_json r{{"id", d.id()},
                   {"source", {{"topic", d.topic}, {"partition", d.partition}, {"offset", d.offset}}},
                   {"was", {{"stage", d.stage}, {"reason", d.reason}}},
                   {"outcome", o.outcome}};
    if (!o.stage.empty()) r["stage"] = o.stage;
    if (!o.reason.empty()) r["reason"] = o.reason;
    records.push_back(std::move(r));
  }
  ordered_json out{{"topic", dead_letter_topic},
                   {"dry_run", true},
                   {"scanned", page.scanned},
                   {"next_cursor", page.next_cursor.empty() ? ordered_json(nullptr) : ordered_json(page.next_cursor)},
                   {"summary", summary},
                   {"records", std::move(records)}};
  return out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// ---------------------------------------------------------------- the redrive that writes

namespace {

constexpr int kKafkaTimeoutMs = 10000;
// librdkafka refuses a commit's metadata over the broker's offset.metadata.max.bytes (4096 by
// default): the selection must fit well within it.
constexpr size_t kMaxSelectionBytes = 3500;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string time_text(int64_t ms) {
  if (ms < 0) return {};
  return transform::time::to_rfc3339(transform::time::from_millis(ms));
}

// "20261207T171502-3fa2": sortable, and unique enough for the groups of one sink.
std::string new_redrive_id() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
  std::random_device rd;
  char tail[8];
  std::snprintf(tail, sizeof tail, "%04x", static_cast<unsigned>(rd() & 0xffffu));
  return std::string(when) + "-" + tail;
}

// The redrive's consumer group, used for its commits only (assign, never subscribe).
struct GroupHandle {
  rd_kafka_t* rk = nullptr;
  ~GroupHandle() {
    if (rk) rd_kafka_destroy(rk);
  }
};

bool open_group(GroupHandle& h, const std::string& bootstrap, const config::RuntimeConfig& rc, const std::string& group,
                std::string& error) {
  kafka::ClientConf conf(rc.client_properties, bootstrap);
  conf.set("client.id", "picomq-connect-redrive");
  conf.set("group.id", group);
  conf.set("enable.auto.commit", "false");
  conf.set("enable.auto.offset.store", "false");
  conf.set("allow.auto.create.topics", "false");
  h.rk = conf.create(RD_KAFKA_CONSUMER);
  if (!h.rk) error = "the redrive's group client: " + conf.error();
  return h.rk != nullptr;
}

// The dead-letter topic's partitions and their low / high watermarks now.
bool watermarks(rd_kafka_t* rk, const std::string& topic, std::map<int32_t, std::pair<int64_t, int64_t>>& out,
                std::string& error) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, kKafkaTimeoutMs);
  rd_kafka_topic_destroy(t);
  if (err) {
    error = "dead-letter topic '" + topic + "': " + rd_kafka_err2str(err);
    return false;
  }
  std::vector<int32_t> partitions;
  if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
    for (int i = 0; i < md->topics[0].partition_cnt; ++i) partitions.push_back(md->topics[0].partitions[i].id);
  const bool missing = md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR;
  rd_kafka_metadata_destroy(md);
  if (missing) {
    error = "dead-letter topic '" + topic + "' does not exist: nothing was dead-lettered yet";
    return false;
  }
  for (int32_t p : partitions) {
    int64_t low = 0, high = 0;
    if (rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, kKafkaTimeoutMs)) {
      error = "dead-letter topic '" + topic + "' partition " + std::to_string(p) + ": the broker did not answer";
      return false;
    }
    out[p] = {low, high};
  }
  return true;
}

// What the group committed on each partition, and the selection kept beside (metadata).
bool committed(rd_kafka_t* rk, const std::string& topic, const std::vector<int32_t>& partitions,
               std::map<int32_t, int64_t>& positions, std::string& metadata, std::string& error) {
  kafka::PartitionList list(static_cast<int>(partitions.size()));
  for (int32_t p : partitions) list.add(topic, p, RD_KAFKA_OFFSET_INVALID);
  if (const auto err = rd_kafka_committed(rk, list.get(), kKafkaTimeoutMs)) {
    error = "reading the redrive's position: " + std::string(rd_kafka_err2str(err));
    return false;
  }
  for (const auto& e : list) {
    if (e.err) {
      error = "reading the redrive's position: " + std::string(rd_kafka_err2str(e.err));
      return false;
    }
    if (e.offset >= 0) positions[e.partition] = e.offset;
    if (e.metadata && e.metadata_size && metadata.empty())
      metadata.assign(static_cast<const char*>(e.metadata), e.metadata_size);
  }
  return true;
}

bool commit(rd_kafka_t* rk, const std::string& topic, const std::map<int32_t, int64_t>& positions,
            const std::string& metadata, std::string& error) {
  kafka::PartitionList list(static_cast<int>(positions.size()));
  for (const auto& [p, o] : positions) {
    auto* e = list.add(topic, p, o);
    e->metadata = const_cast<char*>(metadata.data());  // copied by librdkafka's commit
    e->metadata_size = metadata.size();
  }
  const auto err = rd_kafka_commit(rk, list.get(), 0);
  std::string failed;
  for (auto& e : list) {
    if (e.err && failed.empty()) failed = rd_kafka_err2str(e.err);
    e.metadata = nullptr;  // ours, not the list's to free
    e.metadata_size = 0;
  }
  if (err || !failed.empty()) {
    error = "committing the redrive's position: " + (err ? std::string(rd_kafka_err2str(err)) : failed);
    return false;
  }
  return true;
}

// Offsets of the redrive's writes go nowhere: its position is the dead-letter topic's, committed
// per chunk.
struct NoOffsets final : OffsetSink {
  void store(const TopicPartition&, int64_t) override {}
};

}  // namespace

std::string redrive_selection_json(const RedriveRequest& r) {
  const auto& f = r.filter;
  nlohmann::ordered_json j{{"v", 1}, {"topic", r.dead_letter_topic}, {"chunk", r.chunk}};
  if (r.apply_changes) j["apply_changes"] = true;
  if (f.stage) j["stage"] = *f.stage;
  if (f.reason) j["reason"] = *f.reason;
  if (f.since_ms) j["since_ms"] = *f.since_ms;
  if (f.until_ms) j["until_ms"] = *f.until_ms;
  if (f.topic) j["source_topic"] = *f.topic;
  if (f.partition) j["partition"] = *f.partition;
  if (f.from_offset) j["from_offset"] = *f.from_offset;
  if (f.to_offset) j["to_offset"] = *f.to_offset;
  if (!f.ids.empty()) j["ids"] = f.ids;
  nlohmann::ordered_json end = nlohmann::ordered_json::object();
  for (const auto& [p, o] : f.before) end[std::to_string(p)] = o;
  j["end"] = std::move(end);
  return j.dump();
}

bool parse_redrive_selection(const std::string& text, RedriveRequest& r, std::string& error) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("v", 0) != 1 || !j.contains("end") || !j["end"].is_object()) {
    error = "the group's commit metadata is not a redrive's selection";
    return false;
  }
  try {
    auto& f = r.filter;
    r.dead_letter_topic = j.value("topic", r.dead_letter_topic);
    r.chunk = j.value("chunk", r.chunk);
    r.apply_changes = j.value("apply_changes", false);
    if (j.contains("stage")) f.stage = j["stage"].get<std::string>();
    if (j.contains("reason")) f.reason = j["reason"].get<std::string>();
    if (j.contains("since_ms")) f.since_ms = j["since_ms"].get<int64_t>();
    if (j.contains("until_ms")) f.until_ms = j["until_ms"].get<int64_t>();
    if (j.contains("source_topic")) f.topic = j["source_topic"].get<std::string>();
    if (j.contains("partition")) f.partition = j["partition"].get<int32_t>();
    if (j.contains("from_offset")) f.from_offset = j["from_offset"].get<int64_t>();
    if (j.contains("to_offset")) f.to_offset = j["to_offset"].get<int64_t>();
    if (j.contains("ids")) f.ids = j["ids"].get<std::vector<std::string>>();
    f.before.clear();
    for (const auto& [p, o] : j["end"].items()) f.before[std::stoi(p)] = o.get<int64_t>();
  } catch (const std::exception& e) {
    error = std::string("the redrive's selection: ") + e.what();
    return false;
  }
  return true;
}

Redrive::Redrive(config::SinkDefinition definition, const config::RuntimeConfig& runtime_config,
                 std::string bootstrap_servers, RedriveRequest request)
    : definition_(std::move(definition)),
      runtime_config_(runtime_config),
      bootstrap_servers_(std::move(bootstrap_servers)),
      request_(std::move(request)) {}

Redrive::~Redrive() {
  stop();
  join();
}

std::shared_ptr<Redrive> Redrive::start(const config::SinkDefinition& definition,
                                        const config::RuntimeConfig& runtime_config,
                                        const std::string& bootstrap_servers, RedriveRequest request,
                                        std::string& error, int& status) {
  status = 500;
  auto library = PluginLibrary::load(definition.path, runtime_config.plugin_path, error);
  if (!library) return nullptr;
  if (!takes_redrives(library->descriptor())) {
    status = 409;
    error = "sink '" + definition.key + "' (plugin " + library->descriptor().name +
            ") does not take redrives: it keeps exactly once by a per-partition high-water mark (or was built "
            "before sink ABI 2.9), so records below what it wrote would be dropped as replays. The dry run still "
            "shows what a redrive would do (docs/operations.md, \"Dead letters\")";
    return nullptr;
  }
  for (size_t b = 0; b < definition.topics.size() && !request.apply_changes && request.resume.empty(); ++b)
    if (definition.topics[b].changes != config::ChangeEvents::None) {
      status = 409;
      error = "sink '" + definition.key + "' topics[" + std::to_string(b) +
              "] applies change events: a redriven change is applied after the newer changes of its key that "
              "came since, and a sink without versions (PostgreSQL, Elasticsearch, MongoDB, ...) keeps the older "
              "one. Redrive them when no newer change of their keys was applied, and say so: {\"apply_changes\": "
              "true} (ctl: --apply-changes)";
      return nullptr;
    }
  if (request.chunk < 1 || request.chunk > 10000) {
    status = 400;
    error = "'chunk' must be from 1 to 10000 dead letters";
    return nullptr;
  }
  std::shared_ptr<Redrive> r(new Redrive(definition, runtime_config, bootstrap_servers, std::move(request)));
  RedriveRequest& req = r->request_;
  req.filter.sink = definition.key;
  r->id_ = req.resume.empty() ? new_redrive_id() : req.resume;
  GroupHandle group;
  if (!open_group(group, bootstrap_servers, runtime_config, group_of(definition.key, r->id_), error)) return nullptr;
  std::map<int32_t, std::pair<int64_t, int64_t>> marks;
  if (!watermarks(group.rk, req.dead_letter_topic, marks, error)) {
    status = error.find("does not exist") != std::string::npos ? 404 : 502;
    return nullptr;
  }
  std::vector<int32_t> partitions;
  partitions.reserve(marks.size());
  for (const auto& [p, m] : marks) partitions.push_back(p);
  std::map<int32_t, int64_t> positions;
  std::string metadata;
  if (!committed(group.rk, req.dead_letter_topic, partitions, positions, metadata, error)) {
    status = 502;
    return nullptr;
  }
  if (!req.resume.empty()) {
    if (metadata.empty()) {
      status = 404;
      error = "no redrive '" + req.resume + "' of sink '" + definition.key + "' to resume: its group " +
              group_of(definition.key, req.resume) + " holds no position";
      return nullptr;
    }
    const std::string topic = req.dead_letter_topic;
    if (!parse_redrive_selection(metadata, req, error)) return nullptr;
    req.filter.sink = definition.key;
    if (req.dead_letter_topic != topic) {
      status = 409;
      error = "redrive '" + req.resume + "' reads dead-letter topic '" + req.dead_letter_topic + "', not '" + topic +
              "': name its block";
      return nullptr;
    }
    r->start_ = positions;
  } else {
    // The end is fixed now: what this redrive dead-letters again lands past it.
    req.filter.before.clear();
    for (const auto& [p, m] : marks) {
      req.filter.before[p] = m.second;
      r->start_[p] = m.first;
    }
    const std::string selection = redrive_selection_json(req);
    if (selection.size() > kMaxSelectionBytes) {
      status = 400;
      error = "the selection is too large to keep in the redrive's group (" + std::to_string(selection.size()) +
              " bytes of at most " + std::to_string(kMaxSelectionBytes) +
              "): select by a filter, or redrive the ids in parts";
      return nullptr;
    }
    // Kept before the first write: from here on the redrive can be resumed by its id.
    if (!commit(group.rk, req.dead_letter_topic, r->start_, selection, error)) {
      status = 502;
      return nullptr;
    }
  }
  r->started_ms_ = now_ms();
  r->position_ = kafka::format_cursor(r->start_);
  spdlog::info("sink '{}': redrive {} {} of dead-letter topic '{}' from {} to {} (group {})", definition.key, r->id_,
               req.resume.empty() ? "starts" : "resumes", req.dead_letter_topic, r->position_,
               kafka::format_cursor(req.filter.before), group_of(definition.key, r->id_));
  r->thread_ = std::thread([r = r.get()] { r->run(); });
  status = 202;
  return r;
}

void Redrive::stop() { stop_ = true; }

void Redrive::join() {
  if (thread_.joinable()) thread_.join();
}

void Redrive::finish(State state, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    error_ = error;
    finished_ms_ = now_ms();
  }
  state_ = state;
  const char* what = state == State::Done ? "done" : state == State::Stopped ? "stopped" : "failed";
  if (state == State::Failed)
    spdlog::error("sink '{}': redrive {} failed (resume it by its id): {}", definition_.key, id_, error);
  else
    spdlog::info("sink '{}': redrive {} {}: {} written, {} bad again, {} filtered, {} read by no block",
                 definition_.key, id_, what, written_, bad_again_, filtered_, no_block_);
}

namespace {

// The delivery window's view of the redrive: the sink instance, the dead-letter producer that
// adds the redrive's history, and the failure that ends it.
class RedriveDelivery final : public DeliveryHost, public BatchWriter {
 public:
  RedriveDelivery(SinkInstance& sink, const config::RuntimeConfig& rc, const std::string& bootstrap,
                  const std::string& sink_key, const std::string& topic, const std::string& redrive_id)
      : sink_(sink), rc_(rc), bootstrap_(bootstrap), sink_key_(sink_key), topic_(topic), id_(redrive_id) {}

  // BatchWriter
  void start(const DecodedBatch& batch, WriteCall& call) override { sink_.start(batch, call); }
  size_t max_in_flight() const override { return sink_.max_in_flight(); }
  void flush() override { sink_.flush(rc_.shutdown_timeout); }

  // DeliveryHost
  Waiter& waiter() override { return waiter_; }
  DeliveryCounters& counters() override { return counters_; }
  DeadLetters* dead_letters(std::string& error) override {
    if (!producer_) {
      producer_ = kafka::DeadLetterProducer::create(bootstrap_, rc_.client_properties, topic_, sink_key_,
                                                    "sink '" + sink_key_ + "' redrive " + id_, error);
      if (producer_)
        producer_->extra_headers = [this](const PreparedJob& job, size_t index) { return history_headers(job, index); };
    }
    return producer_.get();
  }
  void partition_failed(const TopicPartition& tp, const std::string& message) override {
    if (failure.empty()) failure = tp.to_string() + ": " + message;
  }
  void write_done() override {}
  bool can_rewind() const override { return false; }
  void rewind(const TopicPartition&, int64_t, uint64_t) override {}

  void request_stop() { waiter_.request_stop(); }
  std::string failure;

 private:
  // pico_error_redrive and pico_error_history: the failures before this one, oldest first.
  std::vector<std::pair<std::string, std::string>> history_headers(const PreparedJob& job, size_t index) const {
    const auto* rebuilt = dynamic_cast<const RebuiltRecords*>(job.records.get());
    if (!rebuilt) return {};
    const auto& d = rebuilt->letter(index);
    nlohmann::ordered_json history =
        nlohmann::ordered_json::parse(d.history.empty() ? "[]" : d.history, nullptr, false);
    if (!history.is_array()) history = nlohmann::ordered_json::array();
    history.push_back({{"stage", d.stage}, {"reason", d.reason}, {"time", d.time}, {"dead_letter", d.id()}});
    if (!d.redrive.empty()) history.back()["redrive"] = d.redrive;
    return {{kafka::kRedriveHeader, id_}, {kafka::kHistoryHeader, history.dump()}};
  }

  SinkInstance& sink_;
  const config::RuntimeConfig& rc_;
  std::string bootstrap_, sink_key_, topic_, id_;
  StopWaiter waiter_;
  DeliveryCounters counters_;
  std::unique_ptr<kafka::DeadLetterProducer> producer_;
};

}  // namespace

void Redrive::run() {
  const std::string& topic = request_.dead_letter_topic;
  std::string error;
  auto library = PluginLibrary::load(definition_.path, runtime_config_.plugin_path, error);
  std::unique_ptr<SinkInstance> sink = library ? open_sink_instance(definition_, library, error) : nullptr;
  if (!sink) return finish(State::Failed, "opening the sink's plugin: " + error);
  GroupHandle group;
  if (!open_group(group, bootstrap_servers_, runtime_config_, group_of(definition_.key, id_), error)) {
    sink->close();
    return finish(State::Failed, error);
  }
  const std::string selection = redrive_selection_json(request_);
  const transform::Chain chain(definition_.transforms);
  const uint32_t change_ops = change_ops_of(library.get());
  std::vector<arrow::ExportOptions> arrow_options;
  for (const auto& block : definition_.topics) arrow_options.push_back(arrow_export_options(block));
  std::map<size_t, std::unique_ptr<BatchPreparer>> preparers;
  std::set<std::pair<size_t, TopicPartition>> announced;

  RedriveDelivery delivery(*sink, runtime_config_, bootstrap_servers_, definition_.key, topic, id_);
  NoOffsets no_offsets;
  DeliveryWindow::Settings ws;
  ws.log_prefix = "sink '" + definition_.key + "' redrive " + id_;
  ws.on_bad_record = config::BadRecordPolicy::DeadLetter;  // bad again: dead-lettered again, with its history
  DeliveryWindow window(std::move(ws), {.writer = delivery, .offsets = no_offsets, .host = delivery});
  const kafka::DeadLetterReader reader(bootstrap_servers_, runtime_config_.client_properties, topic);

  // Writes out what the window holds; false when a write failed for good (or a stop cut it).
  auto drain = [&] {
    if (!window.empty()) delivery.flush();  // a sink that holds writes open seals them
    while (!window.empty()) {
      PreparedJob done = window.finish_oldest();
      if (window.partition_failed(done.tp)) return false;
    }
    return delivery.failure.empty();
  };

  std::string cursor = kafka::format_cursor(start_);
  // Dead letters that a later one in the range supersedes: a record dead-lettered again by an
  // earlier redrive names its earlier dead letters in its history, and only its newest copy is
  // redriven (an at-least-once sink would otherwise write it once per copy).
  std::set<std::string> superseded;
  {
    kafka::DeadLetterFilter every;
    every.sink = request_.filter.sink;
    every.before = request_.filter.before;
    std::string at = cursor, scan_error;
    int64_t read = 0;
    do {
      scan_error.clear();
      at = reader.scan(
          every, at, read,
          [&](kafka::DeadLetterRecord&& d) {
            const auto history = nlohmann::json::parse(d.history.empty() ? "[]" : d.history, nullptr, false);
            if (history.is_array())
              for (const auto& h : history)
                if (h.is_object() && h.contains("dead_letter") && h["dead_letter"].is_string())
                  superseded.insert(h["dead_letter"].get<std::string>());
            return true;
          },
          scan_error);
    } while (!at.empty() && scan_error.rfind("stopped after ", 0) == 0);
    if (!scan_error.empty()) {
      for (const auto& [block, tp] : announced) sink->notify_partitions(false, static_cast<uint32_t>(block), {tp});
      sink->close();
      return finish(State::Failed, scan_error);
    }
  }
  State end_state = State::Done;
  bool reached_end = false;
  while (!stop_) {
    std::vector<kafka::DeadLetterRecord> letters;
    int64_t scanned = 0, skipped_superseded = 0;
    std::string scan_error;
    const std::string next = reader.scan(
        request_.filter, cursor, scanned,
        [&](kafka::DeadLetterRecord&& d) {
          if (d.redrive == id_) return true;  // never its own
          if (superseded.count(d.id())) ++skipped_superseded;
          else letters.push_back(std::move(d));
          return letters.size() < request_.chunk;
        },
        scan_error);
    // A scan stops at a time budget with a cursor to go on from: not a failure.
    if (!scan_error.empty() && !(scan_error.rfind("stopped after ", 0) == 0 && !next.empty())) {
      end_state = State::Failed;
      error = scan_error;
      break;
    }
    // Each source partition's dead letters in offset order (the preparer's and the sink's
    // order), one per record: the newest dead letter of a record carries its whole history.
    std::map<std::pair<size_t, TopicPartition>, std::map<int64_t, kafka::DeadLetterRecord>> groups;
    int64_t no_block = 0, duplicates = 0;
    const int64_t selected = static_cast<int64_t>(letters.size()) + skipped_superseded;
    for (auto& d : letters) {
      const int block = block_reading(definition_, d.topic);
      if (block < 0 || d.partition < 0 || d.offset < 0) {
        ++no_block;
        continue;
      }
      auto& records = groups[{static_cast<size_t>(block), TopicPartition{d.topic, d.partition}}];
      const int64_t offset = d.offset;
      if (!records.emplace(offset, d).second) {
        ++duplicates;
        records[offset] = std::move(d);
      }
    }
    const uint64_t delivered_before = delivery.counters().delivered, bad_before = delivery.counters().dead_lettered,
                   filtered_before = delivery.counters().filtered;
    bool ok = true;
    for (auto& [where, records] : groups) {
      const auto& [block, tp] = where;
      if (announced.insert(where).second) sink->notify_partitions(true, static_cast<uint32_t>(block), {tp});
      auto& preparer = preparers[block];
      if (!preparer)
        preparer = make_preparer(definition_, block, change_ops, chain,
                                 sink->plane() == PMQ_PLANE_ARROW ? &arrow_options[block] : nullptr);
      std::vector<kafka::DeadLetterRecord> ordered;
      for (auto& [offset, d] : records) ordered.push_back(std::move(d));
      Job job;
      job.tp = tp;
      job.records = std::make_unique<RebuiltRecords>(std::move(ordered));
      PreparedBatch prepared = preparer->prepare(tp, *job.records, true);
      if (!prepared.retry_error.empty()) {
        ok = false;
        delivery.failure = tp.to_string() + ": " + prepared.retry_error;
        break;
      }
      if (window.full() && !(ok = drain())) break;
      window.start(PreparedJob(std::move(job), std::move(prepared)));
    }
    ok = drain() && ok;
    {
      std::lock_guard lock(mutex_);
      scanned_ += scanned;
      selected_ += selected;
      no_block_ += no_block;
      duplicates_ += duplicates;
      superseded_ += skipped_superseded;
      written_ += static_cast<int64_t>(delivery.counters().delivered - delivered_before);
      bad_again_ += static_cast<int64_t>(delivery.counters().dead_lettered - bad_before);
      filtered_ += static_cast<int64_t>(delivery.counters().filtered - filtered_before);
    }
    if (!ok) {
      // Nothing of this chunk is committed: a resume writes it again.
      if (delivery.failure.empty() && stop_) end_state = State::Stopped;
      else {
        end_state = State::Failed;
        error = delivery.failure.empty() ? "a write failed" : delivery.failure;
      }
      break;
    }
    // The chunk is written: the redrive's position moves past it.
    std::map<int32_t, int64_t> positions = next.empty() ? request_.filter.before : kafka::parse_cursor(next, error);
    if (!commit(group.rk, topic, positions, selection, error)) {
      end_state = State::Failed;
      break;
    }
    {
      std::lock_guard lock(mutex_);
      ++chunks_;
      position_ = kafka::format_cursor(positions);
    }
    if (next.empty()) {
      reached_end = true;
      break;
    }
    cursor = next;
  }
  if (end_state == State::Done && !reached_end) end_state = State::Stopped;
  for (const auto& [block, tp] : announced) sink->notify_partitions(false, static_cast<uint32_t>(block), {tp});
  sink->flush(runtime_config_.shutdown_timeout);
  sink->close();
  finish(end_state, end_state == State::Failed ? error : std::string());
}

namespace {
// A redrive's selection as its progress shows it: the filters and chunk (its end and topic are
// shown apart, the format version not at all).
nlohmann::ordered_json shown_selection(const RedriveRequest& request) {
  nlohmann::ordered_json selection = nlohmann::ordered_json::parse(redrive_selection_json(request));
  selection.erase("v");
  selection.erase("end");
  selection.erase("topic");
  return selection;
}
}  // namespace

std::vector<std::string> redrives_in_kafka(const std::string& bootstrap_servers,
                                           const config::RuntimeConfig& runtime_config, const std::string& sink_key,
                                           const std::string& dead_letter_topic, std::string& error) {
  const std::string prefix = Redrive::group_of(sink_key, "");
  GroupHandle h;
  if (!open_group(h, bootstrap_servers, runtime_config, "picomq-connect-redrive-list", error)) return {};
  // The groups whose names say they are this sink's redrives.
  std::vector<std::string> groups;
  {
    rd_kafka_queue_t* results = rd_kafka_queue_new(h.rk);
    rd_kafka_ListConsumerGroups(h.rk, nullptr, results);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(results, kKafkaTimeoutMs + 5000);
    if (!ev) {
      error = "listing the consumer groups: no answer from the broker";
    } else if (rd_kafka_event_error(ev)) {
      error = std::string("listing the consumer groups: ") + rd_kafka_event_error_string(ev);
    } else if (const auto* result = rd_kafka_event_ListConsumerGroups_result(ev)) {
      size_t n = 0;
      const rd_kafka_ConsumerGroupListing_t** listed = rd_kafka_ListConsumerGroups_result_valid(result, &n);
      for (size_t i = 0; i < n; ++i) {
        const std::string group = rd_kafka_ConsumerGroupListing_group_id(listed[i]);
        if (group.size() > prefix.size() && group.rfind(prefix, 0) == 0) groups.push_back(group);
      }
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(results);
  }
  if (!error.empty()) return {};
  std::sort(groups.begin(), groups.end());
  std::map<int32_t, std::pair<int64_t, int64_t>> marks;
  if (!groups.empty() && !watermarks(h.rk, dead_letter_topic, marks, error)) return {};
  std::vector<int32_t> partitions;
  partitions.reserve(marks.size());
  for (const auto& [p, m] : marks) partitions.push_back(p);
  std::vector<std::string> out;
  for (const auto& group : groups) {
    GroupHandle g;
    std::map<int32_t, int64_t> positions;
    std::string metadata, why;
    if (!open_group(g, bootstrap_servers, runtime_config, group, why) ||
        !committed(g.rk, dead_letter_topic, partitions, positions, metadata, why) || metadata.empty())
      continue;  // not one on this topic
    RedriveRequest r;
    r.dead_letter_topic = dead_letter_topic;
    if (!parse_redrive_selection(metadata, r, why) || r.dead_letter_topic != dead_letter_topic) continue;
    bool done = true;
    for (const auto& [p, end] : r.filter.before)
      if (positions.count(p) ? positions[p] < end : end > 0) done = false;
    nlohmann::ordered_json selection = shown_selection(r);
    out.push_back(nlohmann::ordered_json{{"id", group.substr(prefix.size())},
                                         {"sink", sink_key},
                                         {"state", done ? "done" : "interrupted"},
                                         {"group", group},
                                         {"topic", dead_letter_topic},
                                         {"selection", std::move(selection)},
                                         {"position", kafka::format_cursor(positions)},
                                         {"end", kafka::format_cursor(r.filter.before)}}
                      .dump());
  }
  return out;
}

std::string Redrive::progress_json() const {
  std::lock_guard lock(mutex_);
  const State state = state_.load();
  nlohmann::ordered_json selection = shown_selection(request_);
  nlohmann::ordered_json out{{"id", id_},
                             {"sink", definition_.key},
                             {"state", state == State::Running  ? "running"
                                       : state == State::Done   ? "done"
                                       : state == State::Failed ? "failed"
                                                                : "stopped"},
                             {"group", group_of(definition_.key, id_)},
                             {"topic", request_.dead_letter_topic},
                             {"selection", std::move(selection)},
                             {"started_at", time_text(started_ms_)},
                             {"finished_at", finished_ms_ < 0 ? nlohmann::ordered_json(nullptr)
                                                              : nlohmann::ordered_json(time_text(finished_ms_))},
                             {"scanned", scanned_},
                             {"selected", selected_},
                             {"written", written_},
                             {"bad_again", bad_again_},
                             {"filtered", filtered_},
                             {"no_block", no_block_},
                             {"duplicates", duplicates_},
                             {"superseded", superseded_},
                             {"chunks", chunks_},
                             {"position", position_},
                             {"end", kafka::format_cursor(request_.filter.before)}};
  if (!error_.empty()) out["error"] = error_;
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace picomq::runtime
