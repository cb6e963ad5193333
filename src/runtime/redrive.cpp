#include "runtime/redrive.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "decoders/payload_decoder.h"
#include "runtime/delivery/batch_preparer.h"
#include "runtime/plugin_host/library.h"
#include "transform/chain.h"

namespace picomq::runtime {
namespace {

using nlohmann::ordered_json;

// Dead letters rebuilt as the records they were, as the preparer reads consumed records.
class RebuiltRecords final : public ConsumedRecords {
 public:
  explicit RebuiltRecords(std::vector<const kafka::DeadLetterRecord*> letters) : letters_(std::move(letters)) {}
  size_t size() const override { return letters_.size(); }
  ConsumedRecord at(size_t index) const override {
    const auto& d = *letters_[index];
    ConsumedRecord r;
    r.offset = d.offset;
    r.timestamp_ms = d.timestamp_ms;
    r.key = bytes(d.key);
    r.value = bytes(d.value);
    return r;
  }
  void headers(size_t index, std::vector<pmq_header>& out) const override {
    for (const auto& [name, value] : letters_[index]->headers)
      out.push_back(pmq_header{{reinterpret_cast<const uint8_t*>(name.data()), name.size()}, bytes(value)});
  }

 private:
  static pmq_bytes bytes(const std::optional<std::string>& s) {
    return s ? pmq_bytes{reinterpret_cast<const uint8_t*>(s->data()), s->size()} : pmq_bytes{nullptr, 0};
  }
  std::vector<const kafka::DeadLetterRecord*> letters_;
};

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

  // The change operations the sink applies (a truncate it cannot apply is bad again); without its
  // plugin, every one.
  uint32_t change_ops = PMQ_CHANGE_OP_BIT(PMQ_OP_UPSERT) | PMQ_CHANGE_OP_BIT(PMQ_OP_DELETE) |
                        PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  std::string plugin_error;
  if (auto library = PluginLibrary::load(definition.path, runtime_config.plugin_path, plugin_error))
    change_ops = runtime::change_ops(library->descriptor());

  // Each source partition's dead letters, in the dead-letter topic's order, with the block that
  // reads the topic now.
  std::vector<Outcome> outcomes(page.records.size());
  std::map<std::pair<int, std::pair<std::string, int32_t>>, std::vector<size_t>> groups;
  for (size_t i = 0; i < page.records.size(); ++i) {
    const auto& d = page.records[i];
    int block = -1;
    for (size_t b = 0; b < definition.topics.size() && block < 0; ++b)
      if (definition.topics[b].reads(d.topic)) block = static_cast<int>(b);
    if (block < 0) outcomes[i] = {"no_block", "", "no [[topics]] block of the sink reads '" + d.topic + "' now"};
    else groups[{block, {d.topic, d.partition}}].push_back(i);
  }
  const transform::Chain chain(definition.transforms);
  for (const auto& [where, indices] : groups) {
    const auto& block = definition.topics[static_cast<size_t>(where.first)];
    BatchPreparer::Settings settings;
    settings.schema = block.schema;
    settings.on_bad_record = config::BadRecordPolicy::DeadLetter;  // every bad one said, with its stage
    settings.block_index = static_cast<uint32_t>(where.first);
    settings.changes = block.changes;
    settings.key_fields = block.key_fields;
    settings.change_ops = change_ops;
    const auto decoders = decoders::make_decoder_factory(block);
    const auto key_decoders = block.key_schema ? decoders::make_decoder_factory(*block.key_schema) : nullptr;
    BatchPreparer preparer(settings, decoders->make(), key_decoders ? key_decoders->make() : nullptr,
                           definition.transforms.empty() ? nullptr : &chain);
    std::vector<const kafka::DeadLetterRecord*> letters;
    for (size_t i : indices) letters.push_back(&page.records[i]);
    const RebuiltRecords records(std::move(letters));
    const PreparedBatch prepared = preparer.prepare({where.second.first, where.second.second}, records, true);
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

}  // namespace picomq::runtime
