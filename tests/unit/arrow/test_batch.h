#pragma once
// Batches for the Arrow tests, built from plain values, and an owner for what export_batch
// produces (released at the end of the test, as a sink would).
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "picomq/arrow_view.hpp"
#include "picomq/kit/arrow_export.hpp"

namespace picomq::arrow::testing {

using Header = std::pair<std::string, std::optional<std::string>>;

struct TestRecord {
  TestRecord(std::optional<std::string> payload_bytes, std::optional<std::string> record_key = std::nullopt,
             std::vector<Header> record_headers = {}, int64_t timestamp = -1,
             std::optional<int64_t> record_offset = std::nullopt)
      : payload(std::move(payload_bytes)),
        key(std::move(record_key)),
        headers(std::move(record_headers)),
        timestamp_ms(timestamp),
        offset(record_offset) {}

  std::optional<std::string> payload;  // nullopt: tombstone
  std::optional<std::string> key;      // nullopt: no key
  std::vector<Header> headers;
  int64_t timestamp_ms = -1;
  std::optional<int64_t> offset;  // default: 100 + the record's index
};

// Owns the bytes every pmq_record points to; `records_stride` pads each record, as a newer host
// with a larger pmq_record would.
class TestBatch {
 public:
  explicit TestBatch(pmq_payload_format format, std::string topic = "orders", int32_t partition = 3,
                     size_t records_stride = sizeof(pmq_record))
      : format_(format), topic_(std::move(topic)), partition_(partition), stride_(records_stride) {}

  TestBatch& add(TestRecord record) {
    records_.push_back(std::move(record));
    return *this;
  }
  TestBatch& payload(std::string text) { return add({std::move(text)}); }
  TestBatch& tombstone() { return add({std::nullopt}); }

  const pmq_batch& get() {
    headers_.clear();
    storage_.assign(records_.size() * stride_, 0);
    for (size_t i = 0; i < records_.size(); ++i) {
      const TestRecord& r = records_[i];
      std::vector<pmq_header>& headers = headers_.emplace_back();
      for (const auto& [name, value] : r.headers) {
        headers.push_back({bytes(name), value ? bytes(*value) : pmq_bytes{nullptr, 0}});
      }
      pmq_record record{};
      record.offset = r.offset.value_or(100 + static_cast<int64_t>(i));
      record.timestamp_ms = r.timestamp_ms;
      record.key = r.key ? bytes(*r.key) : pmq_bytes{nullptr, 0};
      record.headers = headers.empty() ? nullptr : headers.data();
      record.header_count = headers.size();
      record.payload = r.payload ? bytes(*r.payload) : pmq_bytes{nullptr, 0};
      std::memcpy(storage_.data() + i * stride_, &record, sizeof record);
    }
    batch_ = pmq_batch{};
    batch_.struct_size = sizeof(pmq_batch);
    batch_.topic = topic_.c_str();
    batch_.partition = partition_;
    batch_.payload_format = format_;
    batch_.schema = "json";
    batch_.records = reinterpret_cast<const pmq_record*>(storage_.data());
    batch_.record_count = records_.size();
    batch_.record_size = stride_;
    return batch_;
  }

 private:
  static pmq_bytes bytes(const std::string& s) {
    // A non-NULL pointer even for "": empty is not absent.
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }

  pmq_payload_format format_;
  std::string topic_;
  int32_t partition_;
  size_t stride_;
  std::deque<TestRecord> records_;  // stable addresses for the bytes records point to
  std::deque<std::vector<pmq_header>> headers_;
  std::vector<unsigned char> storage_;
  pmq_batch batch_{};
};

// What one export produced; releases it on destruction.
struct Exported {
  ExportResult result;
  ArrowSchema schema{};
  ArrowArray array{};

  Exported() = default;
  Exported(const Exported&) = delete;
  Exported& operator=(const Exported&) = delete;
  ~Exported() {
    if (schema.release) schema.release(&schema);
    if (array.release) array.release(&array);
  }
  sdk::ArrowBatchView view() const { return sdk::ArrowBatchView(&schema, &array); }
  const ArrowSchema& field(std::string_view name) const {
    for (int64_t i = 0; i < schema.n_children; ++i) {
      if (name == schema.children[i]->name) return *schema.children[i];
    }
    throw std::out_of_range("no field " + std::string(name));
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (int64_t i = 0; i < schema.n_children; ++i) out.emplace_back(schema.children[i]->name);
    return out;
  }
};

inline std::unique_ptr<Exported> run_export(TestBatch& batch, const ExportOptions& options = {}) {
  auto out = std::make_unique<Exported>();
  out->result = export_batch(batch.get(), options, &out->schema, &out->array);
  return out;
}

inline ExportOptions without_metadata() {
  ExportOptions options;
  options.include_metadata = false;
  return options;
}

inline ExportOptions declared(std::vector<DeclaredColumn> columns, bool include_metadata = false) {
  ExportOptions options;
  options.include_metadata = include_metadata;
  options.declared = std::move(columns);
  return options;
}

// The JSON extension's encoded metadata, for comparison.
inline bool has_json_extension(const ArrowSchema& field) {
  for (const auto& [k, v] : sdk::decode_metadata(field.metadata)) {
    if (k == "ARROW:extension:name" && v == "arrow.json") return true;
  }
  return false;
}

}  // namespace picomq::arrow::testing
