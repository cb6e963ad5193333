#include "s3/parquet.h"

#include <cstring>
#include <stdexcept>

#include "picomq/sdk.hpp"

namespace picomq::s3 {
namespace {

// A kept record: [offset i64][timestamp i64][key][payload][header count u32]{[name][value]}, each
// bytes field an i32 length (-1: none — no key, a tombstone, a null header value) and its bytes,
// so it reads back in one pass. Host byte order: it never leaves the process.
template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(std::string_view& in) {
  T v;
  if (in.size() < sizeof v) throw std::runtime_error("parquet: a kept record is cut short");
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return v;
}

int32_t length_of(const pmq_bytes& b) { return b.data ? static_cast<int32_t>(b.size) : -1; }

pmq_bytes take(std::string_view& in, int32_t length) {
  if (length < 0) return {nullptr, 0};
  if (in.size() < static_cast<size_t>(length)) throw std::runtime_error("parquet: a kept record is cut short");
  pmq_bytes b{reinterpret_cast<const uint8_t*>(in.data()), static_cast<size_t>(length)};
  in.remove_prefix(static_cast<size_t>(length));
  return b;
}

}  // namespace

ParquetEncoder::ParquetEncoder(kit::ParquetOptions options, std::optional<std::vector<arrow::DeclaredColumn>> declared,
                               bool include_metadata)
    : options_(options) {
  export_.include_metadata = include_metadata;
  export_.declared = std::move(declared);
}

std::string ParquetEncoder::schema_key(const pmq_batch& batch) {
  return std::to_string(batch.payload_format) + ":" + (batch.schema ? batch.schema : "");
}

void ParquetEncoder::append(std::string& out, const pmq_record& r) const {
  const auto bytes = [&](const pmq_bytes& b) {
    put<int32_t>(out, length_of(b));
    if (b.data) out.append(reinterpret_cast<const char*>(b.data), b.size);
  };
  put<int64_t>(out, r.offset);
  put<int64_t>(out, r.timestamp_ms);
  bytes(r.key);
  bytes(r.payload);
  const uint32_t headers = export_.include_metadata ? static_cast<uint32_t>(r.header_count) : 0;
  put<uint32_t>(out, headers);
  for (uint32_t h = 0; h < headers; ++h) {
    bytes(r.headers[h].name);
    bytes(r.headers[h].value);
  }
}

std::unordered_map<size_t, std::string> ParquetEncoder::refusals(const pmq_batch& batch) const {
  arrow::HeldExport held;
  held.result = arrow::export_batch(batch, export_, &held.schema, &held.array);
  std::unordered_map<size_t, std::string> out;
  for (auto& r : held.result.rejected) out.emplace(r.record_index, std::move(r.reason));
  if (!held.result.ok && out.empty())
    throw sdk::FatalError("parquet: the records cannot be exported to Arrow: " + held.result.error);
  return out;
}

std::string ParquetEncoder::file(std::string_view kept, uint64_t records, const std::string& topic, int32_t partition,
                                 const std::string& schema) const {
  // The records back as a batch of pmq_records pointing into `kept`.
  std::vector<pmq_record> rows(records);
  std::vector<pmq_header> headers;
  std::vector<std::pair<size_t, uint32_t>> header_spans(records);  // first index, count
  std::string_view in = kept;
  const auto bytes = [&] { return take(in, get<int32_t>(in)); };
  for (uint64_t i = 0; i < records; ++i) {
    pmq_record& r = rows[i];
    r.offset = get<int64_t>(in);
    r.timestamp_ms = get<int64_t>(in);
    r.key = bytes();
    r.payload = bytes();
    const auto count = get<uint32_t>(in);
    header_spans[i] = {headers.size(), count};
    for (uint32_t h = 0; h < count; ++h) {
      pmq_header& header = headers.emplace_back();
      header.name = bytes();
      if (!header.name.data) header.name.data = reinterpret_cast<const uint8_t*>("");  // a name is never null
      header.value = bytes();
    }
  }
  if (!in.empty()) throw std::runtime_error("parquet: kept records longer than their count");
  // Pointers into `headers` once it stops growing.
  for (uint64_t i = 0; i < records; ++i) {
    rows[i].headers = header_spans[i].second ? headers.data() + header_spans[i].first : nullptr;
    rows[i].header_count = header_spans[i].second;
  }
  const size_t colon = schema.find(':');
  const std::string schema_name = colon == std::string::npos ? std::string() : schema.substr(colon + 1);
  pmq_batch batch{};
  batch.struct_size = sizeof batch;
  batch.topic = topic.c_str();
  batch.partition = partition;
  batch.payload_format = std::stoi(schema.substr(0, colon));
  batch.schema = schema_name.c_str();
  batch.records = rows.data();
  batch.record_count = rows.size();
  batch.record_size = sizeof(pmq_record);

  ArrowSchema arrow_schema{};
  ArrowArray arrow_array{};
  const arrow::ExportResult result = arrow::export_batch(batch, export_, &arrow_schema, &arrow_array);
  if (!result.ok) {
    // The records passed refusals() in their batches; one the object's columns refuse (a field
    // named like a metadata column, once no payload of the object is a non-object) stops the sink
    // rather than go missing from the file.
    if (!result.rejected.empty())
      throw sdk::FatalError("parquet: the record at offset " +
                            std::to_string(rows[result.rejected.front().record_index].offset) + " of " + topic + "[" +
                            std::to_string(partition) +
                            "] does not fit its object's columns: " + result.rejected.front().reason);
    throw sdk::FatalError("parquet: the records cannot be exported to Arrow: " + result.error);
  }
  return kit::write_parquet(options_, &arrow_schema, &arrow_array);
}

}  // namespace picomq::s3
