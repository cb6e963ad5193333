// bench_arrow_export: the cost of the arrow plane's export step, without Kafka (bench/planes.sh
// runs it on the same records it produces).
//
//   bench_arrow_export <records.jsonl> [batch_length=1000] [repetitions=5]
//
// Reads one JSON payload per line, builds pmq_batches of batch_length records the way the
// runtime does (payload bytes, offsets, timestamps; no keys, no headers; format JSON, schema
// "json") and times, over all records, repetition by repetition:
//   parse            one simdjson DOM parse of each payload (parser reused, payload copied into
//                    the parser's padded buffer, as the exporter calls it): the part every
//                    JSON decode already pays
//   export           picomq::arrow::export_batch + release of both structs, with the options the
//                    runtime passes when the definition declares no arrow_schema (metadata
//                    columns, payload columns inferred, payloads validated by the decoder: one
//                    On-Demand pass): the arrow plane's extra cost
//   export_unvalidated  the same for payloads nobody validated (a DOM parse, texts split again)
//   export_declared  the same with the payload columns declared (one column per field of the
//                    generated records), for comparison
// Prints one line per mode: "export_cost mode=<m> records=<n> payload_bytes=<n> batch_length=<n>
// reps=<n> ns_per_record=<median> mb_per_s=<median> runs_ns=<each repetition>".
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "picomq/kit/arrow_export.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace pa = picomq::arrow;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_arrow_export: %s\n", message.c_str());
  std::exit(2);
}

struct Data {
  std::string text;                 // the file, payloads separated by '\n'
  std::vector<pmq_record> records;  // pointing into text
  std::vector<pmq_batch> batches;   // pointing into records
  size_t payload_bytes = 0;
};

const char* const kTopic = "bench.planes";
const char* const kSchema = "json";

Data load(const char* path, size_t batch_length) {
  Data d;
  std::ifstream in(path, std::ios::binary);
  if (!in) die(std::string("cannot read ") + path);
  d.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  d.text.reserve(d.text.size() + simdjson::SIMDJSON_PADDING);
  const int64_t base_ts = 1'735'689'600'000;
  size_t start = 0;
  while (start < d.text.size()) {
    size_t end = d.text.find('\n', start);
    if (end == std::string::npos) end = d.text.size();
    if (end > start) {
      pmq_record r{};
      r.offset = static_cast<int64_t>(d.records.size());
      r.timestamp_ms = base_ts + r.offset * 37;
      r.key = {nullptr, 0};
      r.headers = nullptr;
      r.header_count = 0;
      r.payload = {reinterpret_cast<const uint8_t*>(d.text.data() + start), end - start};
      d.payload_bytes += end - start;
      d.records.push_back(r);
    }
    start = end + 1;
  }
  if (d.records.empty()) die(std::string(path) + " holds no records");
  for (size_t first = 0; first < d.records.size(); first += batch_length) {
    pmq_batch b{};
    b.struct_size = sizeof(pmq_batch);
    b.topic = kTopic;
    b.partition = 0;
    b.payload_format = PMQ_PAYLOAD_JSON;
    b.schema = kSchema;
    b.records = d.records.data() + first;
    b.record_count = std::min(batch_length, d.records.size() - first);
    b.record_size = sizeof(pmq_record);
    d.batches.push_back(b);
  }
  return d;
}

// The generated records' fields (bench/gen_records.py) as declared columns.
std::vector<pa::DeclaredColumn> declared_columns() {
  return {{"id", pa::ColumnType::Utf8, false},        {"customer", pa::ColumnType::Int64, false},
          {"status", pa::ColumnType::Utf8, false},    {"channel", pa::ColumnType::Utf8, false},
          {"amount", pa::ColumnType::Float64, false}, {"ccy", pa::ColumnType::Utf8, false},
          {"items", pa::ColumnType::Json, false},     {"qty", pa::ColumnType::Int64, false},
          {"ship_to", pa::ColumnType::Json, false},   {"express", pa::ColumnType::Bool, false},
          {"ts", pa::ColumnType::TimestampMs, false}};
}

uint64_t sink_ = 0;  // results fed here so no loop is optimised away

void export_all(const Data& d, const pa::ExportOptions& options) {
  for (const pmq_batch& b : d.batches) {
    ArrowSchema schema;
    ArrowArray array;
    const pa::ExportResult result = pa::export_batch(b, options, &schema, &array);
    if (!result.ok) {
      die("export failed: " + (result.rejected.empty() ? result.error
                                                       : "record " + std::to_string(result.rejected[0].record_index) +
                                                             ": " + result.rejected[0].reason));
    }
    if (static_cast<size_t>(array.length) != b.record_count) die("export: wrong row count");
    sink_ += static_cast<uint64_t>(array.n_children);
    schema.release(&schema);
    array.release(&array);
  }
}

// The runtime's path: the decoder's parse of each payload, read by the export as it goes.
void parsed_export_all(const Data& d, const pa::ExportOptions& options, simdjson::dom::parser& parser) {
  for (const pmq_batch& b : d.batches) {
    pa::ParsedBatchExport exporter(options, b.record_count);
    for (size_t i = 0; i < b.record_count; ++i) {
      const pmq_record& r = b.records[i];
      auto doc = parser.parse(r.payload.data, r.payload.size, /*realloc_if_needed=*/true);
      if (doc.error()) die(std::string("payload is not valid JSON: ") + simdjson::error_message(doc.error()));
      exporter.add_parsed({reinterpret_cast<const char*>(r.payload.data), r.payload.size}, &parser);
    }
    ArrowSchema schema;
    ArrowArray array;
    const pa::ExportResult result = exporter.finish(b, &schema, &array);
    if (!result.ok) die("parsed export failed: " + result.error);
    if (static_cast<size_t>(array.length) != b.record_count) die("parsed export: wrong row count");
    sink_ += static_cast<uint64_t>(array.n_children);
    schema.release(&schema);
    array.release(&array);
  }
}

void parse_all(const Data& d, simdjson::dom::parser& parser) {
  for (const pmq_record& r : d.records) {
    auto doc = parser.parse(r.payload.data, r.payload.size, /*realloc_if_needed=*/true);
    if (doc.error()) die(std::string("payload is not valid JSON: ") + simdjson::error_message(doc.error()));
    sink_ += doc.value_unsafe().is_object();
  }
}

void measure(const char* mode, const Data& d, size_t batch_length, int reps, const std::function<void()>& pass) {
  pass();  // warm-up: page in the data, size the allocator's pools
  std::vector<double> ns;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    pass();
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  const double n = static_cast<double>(d.records.size());
  std::printf(
      "export_cost mode=%s records=%zu payload_bytes=%zu batch_length=%zu reps=%d ns_per_record=%.1f "
      "mb_per_s=%.1f runs_ns=",
      mode, d.records.size(), d.payload_bytes, batch_length, reps, median / n,
      static_cast<double>(d.payload_bytes) / (median / 1e9) / 1e6);
  for (size_t i = 0; i < ns.size(); ++i) std::printf("%s%.1f", i ? "," : "", ns[i] / n);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    die("usage: bench_arrow_export <records.jsonl> [batch_length=1000] [repetitions=5] [mode: only this one, e.g. for "
        "perf]");
  const long batch_length = argc > 2 ? std::atol(argv[2]) : 1000;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string only = argc > 4 ? argv[4] : "";
  auto measure = [&](const char* mode, const Data& d, size_t batch_length, int reps,
                     const std::function<void()>& pass) {
    if (only.empty() || only == mode) ::measure(mode, d, batch_length, reps, pass);
  };
  if (batch_length < 1 || reps < 1) die("batch_length and repetitions must be positive");
  const Data d = load(argv[1], static_cast<size_t>(batch_length));

  simdjson::dom::parser parser;
  measure("parse", d, batch_length, reps, [&] { parse_all(d, parser); });

  pa::ExportOptions inferred;  // what the runtime passes without a declared arrow_schema
  inferred.payloads_validated = true;
  measure("parsed", d, batch_length, reps, [&] { parsed_export_all(d, inferred, parser); });
  measure("export", d, batch_length, reps, [&] { export_all(d, inferred); });

  pa::ExportOptions unvalidated;
  measure("export_unvalidated", d, batch_length, reps, [&] { export_all(d, unvalidated); });

  pa::ExportOptions declared;
  declared.declared = declared_columns();
  declared.payloads_validated = true;  // as the runtime passes it
  measure("export_declared", d, batch_length, reps, [&] { export_all(d, declared); });

  return sink_ == 0xFFFFFFFFFFFFFFFFull ? 1 : 0;
}
