#include "runtime/delivery/batch_preparer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <unordered_map>

#include "decoders/json_out.h"
#include "runtime/tap.h"

namespace picomq::runtime {

std::string_view to_string(BadRecordStage stage) {
  switch (stage) {
    case BadRecordStage::Decode: return "decode";
    case BadRecordStage::Transform: return "transform";
    case BadRecordStage::Sink: return "sink";
  }
  return "unknown";
}

namespace {

constexpr char kPatchAdvice[] =
    " leaves out columns Debezium could not read (unchanged TOAST values): give the source table REPLICA "
    "IDENTITY FULL, or write to a sink that applies patches (docs/changes.md)";

// Keeps the batch's records for which `keep(i)` holds (and their writer schemas beside them).
template <class Keep>
void keep_records(DecodedBatch& batch, std::vector<size_t>& source_index, Keep&& keep) {
  size_t kept = 0;
  for (size_t i = 0; i < batch.records.size(); ++i) {
    if (!keep(i)) continue;
    batch.records[kept] = batch.records[i];
    source_index[kept] = source_index[i];
    if (!batch.writer_schemas.empty()) batch.writer_schemas[kept] = batch.writer_schemas[i];
    ++kept;
  }
  batch.records.resize(kept);
  source_index.resize(kept);
  if (!batch.writer_schemas.empty()) batch.writer_schemas.resize(kept);
}

// The Arrow export, once per batch: each write of it (a retry too) lends the sink this one
// (arrow::lend_export). Records the block's declared columns cannot hold are bad records of the
// sink's stage (docs/bad-records.md), sorted out here as undecodable ones are: under `fail` the
// batch stops at the first of them, otherwise the rest is exported again without them.
void export_arrow(PreparedBatch& out, std::vector<size_t>& source_index, const arrow::ExportOptions& options,
                  arrow::ParsedBatchExport* parsed, bool fail_policy) {
  DecodedBatch& batch = out.batch;
  // The export copies what it reads: it stays valid however the batch moves.
  auto held = std::make_unique<arrow::HeldExport>();
  held->result = parsed ? parsed->finish(batch.abi_view(), &held->schema, &held->array)
                        : arrow::export_batch(batch.abi_view(), options, &held->schema, &held->array);
  if (!held->result.ok && !held->result.rejected.empty()) {
    auto refused = std::move(held->result.rejected);
    std::sort(refused.begin(), refused.end(),
              [](const auto& a, const auto& b) { return a.record_index < b.record_index; });
    if (fail_policy) {
      const size_t first = refused.front().record_index;
      const int64_t offset = batch.records.at(first).offset;
      out.failure_stage = BadRecordStage::Sink;
      out.failure = "the sink rejected record " + batch.tp.to_string() + " at offset " + std::to_string(offset) +
                    ": arrow export: " + refused.front().reason +
                    (refused.size() > 1 ? " (and " + std::to_string(refused.size() - 1) + " more)" : "");
      out.commit_to = offset;
      keep_records(batch, source_index, [&](size_t i) { return i < first; });
    } else {
      std::vector<bool> is_refused(batch.records.size());
      for (const auto& r : refused) {
        is_refused.at(r.record_index) = true;
        out.bad.push_back({source_index[r.record_index], BadRecordStage::Sink, "arrow export: " + r.reason});
      }
      std::sort(out.bad.begin(), out.bad.end(),
                [](const BadRecord& a, const BadRecord& b) { return a.index < b.index; });
      keep_records(batch, source_index, [&](size_t i) { return !is_refused[i]; });
    }
    if (batch.records.empty()) return;
    held = std::make_unique<arrow::HeldExport>();
    held->result = arrow::export_batch(batch.abi_view(), options, &held->schema, &held->array);
  }
  if (!held->result.ok) {
    // Not one record's fault (a declared column that collides with a metadata one...): nothing of
    // the batch is written, and it stops at its first record under every policy.
    const int64_t first = batch.records.front().offset;
    out.failure_stage = BadRecordStage::Sink;
    out.failure = "cannot export the batch as Arrow: " +
                  (held->result.error.empty() ? held->result.rejected.at(0).reason : held->result.error);
    out.commit_to = std::min(out.commit_to, first);
    std::erase_if(out.bad, [&](const BadRecord& b) { return b.index >= source_index.front(); });
    keep_records(batch, source_index, [](size_t) { return false; });
    return;
  }
  batch.arrow_export = std::move(held);
}

}  // namespace

arrow::ExportOptions arrow_export_options(const config::TopicsBlock& block) {
  arrow::ExportOptions options;
  if (!block.arrow_schema.empty()) {
    std::vector<arrow::DeclaredColumn> declared;
    for (const auto& c : block.arrow_schema)
      declared.push_back({c.name, *arrow::parse_column_type(c.type), c.nullable});  // validated with the definition
    options.declared = std::move(declared);
  }
  options.payloads_validated = true;
  return options;
}

BatchPreparer::BatchPreparer(Settings settings, std::unique_ptr<decoders::PayloadDecoder> decoder,
                             std::unique_ptr<decoders::PayloadDecoder> key_decoder, const transform::Chain* transforms)
    : settings_(std::move(settings)),
      schema_name_(config::to_string(settings_.schema)),
      decoder_(std::move(decoder)),
      key_decoder_(std::move(key_decoder)),
      transforms_(transforms) {
  if (settings_.changes != config::ChangeEvents::None)
    changes_ = std::make_unique<decoders::ChangeReader>(settings_.changes, settings_.key_fields);
}

PreparedBatch BatchPreparer::prepare(const TopicPartition& tp, const ConsumedRecords& records, bool wants_headers) {
  PreparedBatch out;
  DecodedBatch& batch = out.batch;
  batch.tp = tp;
  batch.block_index = settings_.block_index;
  batch.schema = schema_name_;
  batch.format = decoder_->format();
  batch.changes = changes_ != nullptr;
  batch.records.reserve(records.size());
  out.commit_to = records.empty() ? -1 : records.last_offset() + 1;
  const bool fail_policy = settings_.on_bad_record == config::BadRecordPolicy::Fail;
  const bool tap_decoded = settings_.tap && settings_.tap->armed(Tap::Stage::Decoded);
  const bool tap_transformed = settings_.tap && settings_.tap->armed(Tap::Stage::Transformed);
  wants_headers = wants_headers || transforms_ || tap_decoded || tap_transformed;
  auto where = [&](int64_t offset) { return tp.to_string() + " at offset " + std::to_string(offset); };
  auto stop_at = [&](int64_t offset, BadRecordStage stage, std::string message) {
    out.failure = std::move(message);
    out.failure_stage = stage;
    out.commit_to = offset;
  };
  // Record i is bad: under `fail` the batch stops at it (true: leave the loop), otherwise the
  // policy takes it.
  auto bad_record = [&](size_t i, int64_t offset, BadRecordStage stage, std::string failure, std::string reason) {
    if (fail_policy) {
      stop_at(offset, stage, std::move(failure));
      return true;
    }
    out.bad.push_back({i, stage, std::move(reason)});
    return false;
  };
  auto view = [](pmq_bytes b) {
    return b.data ? std::optional<std::string_view>({reinterpret_cast<const char*>(b.data), b.size}) : std::nullopt;
  };
  auto bytes = [](std::string_view s) {
    return s.empty() ? pmq_bytes{nullptr, 0} : pmq_bytes{reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  };

  // An arrow-plane sink's columns are built from the JSON decoder's own parse of each payload as
  // it is accepted (transforms would rewrite payloads after that parse).
  std::optional<arrow::ParsedBatchExport> parsed_export;
  if (settings_.arrow_export && !transforms_ && !changes_ &&
      arrow::ParsedBatchExport::applies(*settings_.arrow_export)) {
    parsed_export.emplace(*settings_.arrow_export, records.size());
  }

  std::string error;
  // Changes: each key's last full row in this batch, for the patches after it.
  std::unordered_map<std::string_view, std::string_view> full_rows;
  std::vector<std::pair<size_t, size_t>> header_ranges;  // per record: first index, count
  header_ranges.reserve(records.size());
  std::vector<size_t> source_index;  // per record of the batch: its index in `records`
  source_index.reserve(records.size());
  const bool with_writer_schemas = decoder_->has_writer_schemas();
  if (with_writer_schemas) batch.writer_schemas.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const ConsumedRecord in = records.at(i);
    pmq_record r{};
    r.offset = in.offset;
    const char* writer_schema = nullptr;
    if (in.value.data) {
      const decoders::DecodeStatus status =
          decoder_->decode_record({in.value.data, in.value.size}, r.payload, batch.owned, error);
      if (status == decoders::DecodeStatus::retry) {
        out.retry_error =
            "cannot decode record " + where(in.offset) + " for now (schema " + batch.schema + "): " + error;
        out.commit_to = in.offset;
        break;
      }
      if (status != decoders::DecodeStatus::ok) {
        if (fail_policy) {
          stop_at(in.offset, BadRecordStage::Decode,
                  "cannot decode record " + where(in.offset) + " (schema " + batch.schema + "): " + error);
          break;
        }
        out.bad.push_back({i, BadRecordStage::Decode, "schema " + batch.schema + ": " + error});
        continue;
      }
      if (with_writer_schemas) {
        const std::shared_ptr<const std::string>& text = decoder_->writer_schema();
        if (text && (batch.writer_schema_texts.empty() || batch.writer_schema_texts.back() != text))
          batch.writer_schema_texts.push_back(text);
        writer_schema = text ? text->c_str() : nullptr;
      }
    }
    r.timestamp_ms = in.timestamp_ms;
    r.key = in.key;
    if (key_decoder_ && in.key.data) {
      const decoders::DecodeStatus status =
          key_decoder_->decode_record({in.key.data, in.key.size}, r.key_json, batch.owned, error);
      if (status == decoders::DecodeStatus::retry) {
        out.retry_error = "cannot decode the key of record " + where(in.offset) + " for now: " + error;
        out.commit_to = in.offset;
        break;
      }
      if (status != decoders::DecodeStatus::ok) {
        if (bad_record(i, in.offset, BadRecordStage::Decode,
                       "cannot decode the key of record " + where(in.offset) + ": " + error, "key: " + error))
          break;
        continue;
      }
      if (key_decoder_->format() == PMQ_PAYLOAD_TEXT) {  // a text key is a JSON string
        decoders::JsonOut json;
        json.string({reinterpret_cast<const char*>(r.key_json.data), r.key_json.size});
        batch.owned.push_back(std::move(json.str()));
        r.key_json = bytes(batch.owned.back());
      }
    }
    if (changes_) {
      decoders::Change change;
      if (!changes_->read(view(r.payload), view(r.key_json), change, batch.owned, error)) {
        if (bad_record(i, in.offset, BadRecordStage::Decode,
                       "record " + where(in.offset) + " is not a change event (changes = \"" +
                           std::string(config::to_string(settings_.changes)) + "\"): " + error,
                       "change event: " + error))
          break;
        continue;
      }
      if (change.skip) {
        ++out.filtered;
        continue;
      }
      if (change.op == PMQ_OP_TRUNCATE && !(settings_.change_ops & PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE))) {
        if (bad_record(i, in.offset, BadRecordStage::Sink,
                       "the sink does not apply truncates: record " + where(in.offset) + " is one",
                       "the sink does not apply truncates"))
          break;
        continue;
      }
      if (change.op == PMQ_OP_PATCH) {
        // A patch after a full row of its key in this batch is that row with the patch over it.
        if (auto it = full_rows.find(change.key); it != full_rows.end()) {
          change.row = changes_->merge(it->second, change.row, batch.owned);
          change.op = PMQ_OP_UPSERT;
        } else if (!(settings_.change_ops & PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH))) {
          if (bad_record(i, in.offset, BadRecordStage::Sink,
                         "the sink cannot keep a row's unchanged columns: record " + where(in.offset) + kPatchAdvice,
                         std::string("the sink cannot keep a row's unchanged columns") + kPatchAdvice))
            break;
          continue;
        }
      }
      if (change.op == PMQ_OP_UPSERT) full_rows[change.key] = change.row;
      else if (change.op == PMQ_OP_DELETE) full_rows.erase(change.key);
      else if (change.op == PMQ_OP_TRUNCATE) full_rows.clear();
      r.op = change.op;
      r.payload = bytes(change.row);
      r.key_json = bytes(change.key);
    }
    const size_t first_header = batch.headers.size();
    if (wants_headers) records.headers(i, batch.headers);
    if (tap_decoded) {
      pmq_record decoded = r;
      decoded.headers = batch.headers.data() + first_header;
      decoded.header_count = batch.headers.size() - first_header;
      settings_.tap->offer(Tap::Stage::Decoded, tp.topic.c_str(), tp.partition, settings_.block_index, decoded,
                           batch.format, batch.changes);
    }
    if (transforms_) {
      // Valid until the next record's headers go in (the pointers are set again at the end).
      r.headers = batch.headers.data() + first_header;
      r.header_count = batch.headers.size() - first_header;
      const transform::RecordMeta meta = transform::record_meta(tp.topic, tp.partition, r);
      transform::Verdict verdict;
      if (batch.format == PMQ_PAYLOAD_JSON && r.payload.data) {
        std::string payload(reinterpret_cast<const char*>(r.payload.data), r.payload.size);
        verdict = transforms_->apply(meta, payload, error);
        if (verdict == transform::Verdict::Keep &&
            (payload.size() != r.payload.size || std::memcmp(payload.data(), r.payload.data, payload.size()) != 0)) {
          batch.owned.push_back(std::move(payload));
          r.payload = {reinterpret_cast<const uint8_t*>(batch.owned.back().data()), batch.owned.back().size()};
        }
      } else {
        verdict = transforms_->apply_without_payload(meta, error);
      }
      if (verdict != transform::Verdict::Keep) batch.headers.resize(first_header);
      if (verdict == transform::Verdict::Drop) {
        ++out.filtered;
        continue;
      }
      if (verdict == transform::Verdict::Fail) {
        if (fail_policy) {
          stop_at(in.offset, BadRecordStage::Transform,
                  "transform failed on record " + where(in.offset) + ": " + error);
          break;
        }
        out.bad.push_back({i, BadRecordStage::Transform, error});
        continue;
      }
    }
    header_ranges.emplace_back(first_header, batch.headers.size() - first_header);
    if (parsed_export) {
      if (r.payload.data) {
        parsed_export->add_parsed({reinterpret_cast<const char*>(r.payload.data), r.payload.size},
                                  decoder_->last_json_parse());
      } else {
        parsed_export->add_tombstone();
      }
    }
    batch.records.push_back(r);
    source_index.push_back(i);
    if (with_writer_schemas) batch.writer_schemas.push_back(writer_schema);
  }
  for (size_t i = 0; i < batch.records.size(); ++i) {
    batch.records[i].headers = header_ranges[i].second ? batch.headers.data() + header_ranges[i].first : nullptr;
    batch.records[i].header_count = header_ranges[i].second;
  }
  if (settings_.arrow_export && !batch.records.empty())
    export_arrow(out, source_index, *settings_.arrow_export, parsed_export ? &*parsed_export : nullptr, fail_policy);
  if (tap_transformed)
    for (const auto& r : batch.records)
      settings_.tap->offer(Tap::Stage::Transformed, tp.topic.c_str(), tp.partition, settings_.block_index, r,
                           batch.format, batch.changes);
  return out;
}

}  // namespace picomq::runtime
