// Test-only shared library that pyarrow drives through ctypes (check_with_pyarrow.py): builds a
// pmq_batch from a JSON-lines file and exports it with picomq::arrow::export_batch, and reads
// pyarrow-made batches back through picomq::sdk::ArrowBatchView.
//
// A line describes one record:
//   {"offset": 5, "timestamp_ms": 1700000000000 | -1, "key_b64": "..." | null,
//    "headers": [["name", "value_b64" | null], ...],
//    "payload": "text of the payload" | null (tombstone), "payload_b64": "..." (raw bytes instead)}
// Options (a JSON object): {"topic": "t", "partition": 0, "format": "json" | "text" | "raw",
//   "include_metadata": true, "declared": [{"name": "a", "type": "int64", "nullable": true}, ...]}
#include <atomic>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "picomq/arrow_view.hpp"
#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/encoding.hpp"

namespace {

thread_local std::string g_last_error;
std::atomic<int64_t> g_live{0};          // exported structs whose release has not run yet
std::atomic<int64_t> g_bad_releases{0};  // releases that left the exporter's struct unreleased

// The root schema and array are wrapped so the test can see pyarrow release them: the wrapper's
// release runs the exporter's, then checks that it marked its struct released.
template <class Struct>
struct Wrapped {
  Struct inner;
};

template <class Struct>
void release_wrapped(Struct* outer) {
  auto* wrapped = static_cast<Wrapped<Struct>*>(outer->private_data);
  wrapped->inner.release(&wrapped->inner);
  if (wrapped->inner.release != nullptr) g_bad_releases.fetch_add(1);
  delete wrapped;
  outer->private_data = nullptr;
  outer->release = nullptr;
  g_live.fetch_sub(1);
}

template <class Struct>
void wrap(Struct* exported) {
  auto* wrapped = new Wrapped<Struct>{*exported};
  exported->private_data = wrapped;
  exported->release = release_wrapped<Struct>;
  g_live.fetch_add(1);
}

std::string decode_b64(const std::string& text) {
  auto bytes = picomq::kit::base64_decode(text);
  if (!bytes) throw std::runtime_error("bad base64: " + text);
  return std::string(bytes->begin(), bytes->end());
}

pmq_bytes bytes_of(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

struct BatchStorage {
  std::string topic;
  std::deque<std::string> strings;  // stable addresses
  std::deque<std::vector<pmq_header>> headers;
  std::vector<pmq_record> records;

  const std::string& keep(std::string s) { return strings.emplace_back(std::move(s)); }
};

void load_records(const char* jsonl_path, BatchStorage& storage) {
  std::ifstream in(jsonl_path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + jsonl_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line);
    pmq_record record{};
    record.offset = j.value("offset", static_cast<int64_t>(storage.records.size()));
    record.timestamp_ms = j.value("timestamp_ms", int64_t{-1});
    if (j.contains("key_b64") && !j["key_b64"].is_null()) record.key = bytes_of(storage.keep(decode_b64(j["key_b64"])));
    auto& headers = storage.headers.emplace_back();
    for (const auto& h : j.value("headers", nlohmann::json::array())) {
      pmq_header header{bytes_of(storage.keep(h.at(0).get<std::string>())), {nullptr, 0}};
      if (!h.at(1).is_null()) header.value = bytes_of(storage.keep(decode_b64(h.at(1))));
      headers.push_back(header);
    }
    record.headers = headers.empty() ? nullptr : headers.data();
    record.header_count = headers.size();
    if (j.contains("payload_b64")) {
      record.payload = bytes_of(storage.keep(decode_b64(j["payload_b64"])));
    } else if (j.contains("payload") && !j["payload"].is_null()) {
      record.payload = bytes_of(storage.keep(j["payload"].get<std::string>()));
    }
    storage.records.push_back(record);
  }
}

picomq::arrow::ExportOptions load_options(const nlohmann::json& o) {
  picomq::arrow::ExportOptions options;
  options.include_metadata = o.value("include_metadata", true);
  if (o.contains("declared")) {
    options.declared.emplace();
    for (const auto& d : o["declared"]) {
      const auto type = picomq::arrow::parse_column_type(d.at("type").get<std::string>());
      if (!type) throw std::runtime_error("unknown type " + d.at("type").dump());
      options.declared->push_back({d.at("name").get<std::string>(), *type, d.value("nullable", true)});
    }
  }
  return options;
}

int32_t payload_format(const std::string& name) {
  if (name == "json") return PMQ_PAYLOAD_JSON;
  if (name == "text") return PMQ_PAYLOAD_TEXT;
  if (name == "raw") return PMQ_PAYLOAD_RAW;
  throw std::runtime_error("unknown format " + name);
}

// One value read through the view, as JSON (binary as base64, maps as [key, value] pairs).
nlohmann::json value_json(const picomq::sdk::ColumnView& column, size_t row) {
  using picomq::sdk::ColumnType;
  if (column.is_null(row)) return nullptr;
  switch (column.type()) {
    case ColumnType::Bool: return column.as_bool(row);
    case ColumnType::Int32: return column.as_int32(row);
    case ColumnType::Int64: return column.as_int64(row);
    case ColumnType::Float64: return column.as_double(row);
    case ColumnType::TimestampMs: return column.as_timestamp_ms(row);
    case ColumnType::Utf8:
    case ColumnType::LargeUtf8: return std::string(column.as_string(row));
    case ColumnType::Binary:
    case ColumnType::LargeBinary: {
      const auto b = column.as_bytes(row);
      return picomq::kit::base64_encode(std::span<const uint8_t>(b.data, b.size));
    }
    case ColumnType::Map: {
      auto pairs = nlohmann::json::array();
      for (const auto& [key, value] : column.entries(row)) {
        pairs.push_back({std::string(key), value ? nlohmann::json(picomq::kit::base64_encode(
                                                       std::span<const uint8_t>(value->data, value->size)))
                                                 : nlohmann::json(nullptr)});
      }
      return pairs;
    }
    default: throw std::runtime_error("the view test does not read " + std::string(column.format()));
  }
}

}  // namespace

extern "C" {

// 0: exported; 1: records rejected; 2: any other failure. The message is in last_error().
__attribute__((visibility("default"))) int pmq_arrow_interop_export(const char* jsonl_path, const char* options_json,
                                                                    struct ArrowSchema* schema,
                                                                    struct ArrowArray* array) {
  try {
    g_last_error.clear();
    const auto o = nlohmann::json::parse(options_json ? options_json : "{}");
    BatchStorage storage;
    storage.topic = o.value("topic", std::string("topic"));
    load_records(jsonl_path, storage);
    pmq_batch batch{};
    batch.struct_size = sizeof batch;
    batch.topic = storage.topic.c_str();
    batch.partition = o.value("partition", 0);
    batch.payload_format = payload_format(o.value("format", std::string("json")));
    batch.schema = "json";
    batch.records = storage.records.data();
    batch.record_count = storage.records.size();
    batch.record_size = sizeof(pmq_record);
    const auto result = picomq::arrow::export_batch(batch, load_options(o), schema, array);
    if (!result.ok) {
      for (const auto& r : result.rejected) g_last_error += std::to_string(r.record_index) + ": " + r.reason + "\n";
      g_last_error += result.error;
      return result.rejected.empty() ? 2 : 1;
    }
    wrap(schema);
    wrap(array);
    return 0;  // the batch's storage goes away here: the export must not point into it
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return 2;
  }
}

__attribute__((visibility("default"))) const char* pmq_arrow_interop_last_error() { return g_last_error.c_str(); }

// Schema and array each count: 2 per export until pyarrow releases them.
__attribute__((visibility("default"))) int64_t pmq_arrow_interop_live_exports() { return g_live.load(); }
__attribute__((visibility("default"))) int64_t pmq_arrow_interop_bad_releases() { return g_bad_releases.load(); }

// Reads a batch through picomq::sdk::ArrowBatchView into JSON {"names": [...], "columns": [[...]]}
// written to `out` (NUL-terminated). Returns the length, or -1 with last_error().
__attribute__((visibility("default"))) int64_t pmq_arrow_interop_view_json(const struct ArrowSchema* schema,
                                                                           const struct ArrowArray* array, char* out,
                                                                           size_t capacity) {
  try {
    const picomq::sdk::ArrowBatchView view(schema, array);
    nlohmann::json doc{{"names", nlohmann::json::array()}, {"columns", nlohmann::json::array()}};
    for (size_t c = 0; c < view.num_columns(); ++c) {
      const auto column = view.column(c);
      doc["names"].push_back(std::string(column.name()));
      auto values = nlohmann::json::array();
      for (size_t row = 0; row < view.num_rows(); ++row) values.push_back(value_json(column, row));
      doc["columns"].push_back(values);
    }
    const std::string text = doc.dump();
    if (text.size() + 1 > capacity) throw std::runtime_error("output buffer too small");
    std::memcpy(out, text.c_str(), text.size() + 1);
    return static_cast<int64_t>(text.size());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

}  // extern "C"
