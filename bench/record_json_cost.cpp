// bench_record_json_cost: the sink kit's record JSON writer per record, against simdjson's
// minify of the same payloads (the cheapest JSON pass there is: no DOM, one copy).
//
//   bench_record_json_cost [records=100000] [repetitions=7]
//
// Order-like ~200-byte payloads (bench/order_payloads.h), each record with a 12-byte key and two
// headers. Modes, each over all records, repetition by repetition (medians printed):
//   simdjson_minify    simdjson::minify(payload) into a reused buffer: the baseline
//   envelope           RecordJsonWriter, envelope layout: pico_* fields, base64 key, pico_headers, payload
//   envelope_nometa    envelope without key and headers (topic, partition, offset, timestamp, payload)
//   flat               flat layout: the pico_* fields spliced into the payload object
//   payload_only       the payload alone (what a sink writing raw documents pays)
// Prints "record_json_cost mode=<m> records=<n> ns_per_record=<median wall> cpu_ns_per_record=<median
// thread CPU> vs_minify=<cpu ratio>" per mode.
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "order_payloads.h"
#include "picomq/kit/record_json.hpp"

namespace {

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100'000;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  const std::vector<std::string> payloads = picomq::bench::order_payloads(n);
  const std::string key = "customer-042", h1 = "trace-id", v1 = "4bf92f3577b34da6a3ce929d0e0e4736", h2 = "source",
                    v2 = "checkout";
  const pmq_header headers[2] = {{{reinterpret_cast<const uint8_t*>(h1.data()), h1.size()},
                                  {reinterpret_cast<const uint8_t*>(v1.data()), v1.size()}},
                                 {{reinterpret_cast<const uint8_t*>(h2.data()), h2.size()},
                                  {reinterpret_cast<const uint8_t*>(v2.data()), v2.size()}}};
  std::vector<pmq_record> records;
  for (size_t i = 0; i < n; ++i)
    records.push_back(pmq_record{static_cast<int64_t>(i),
                                 1'735'689'600'000 + static_cast<int64_t>(i),
                                 {reinterpret_cast<const uint8_t*>(key.data()), key.size()},
                                 headers,
                                 2,
                                 {reinterpret_cast<const uint8_t*>(payloads[i].data()), payloads[i].size()}});
  pmq_batch batch{sizeof(pmq_batch), "bench.orders",     3, PMQ_PAYLOAD_JSON, "json", records.data(),
                  records.size(),    sizeof(pmq_record), 0};
  pmq_batch bare = batch;
  std::vector<pmq_record> bare_records = records;
  for (auto& r : bare_records) r.key = {nullptr, 0}, r.header_count = 0;
  bare.records = bare_records.data();

  namespace kit = picomq::kit;
  struct Mode {
    std::string name;
    std::function<size_t()> run;
  };
  std::string out;
  auto writer_mode = [&](kit::RecordJsonOptions options, const pmq_batch* b) {
    return [&, options, b] {
      kit::RecordJsonWriter writer(options);
      size_t sum = 0;
      // As a sink's write_batch does: bound to the batch once (a batch of 500 records here).
      for (size_t first = 0; first < n; first += 500) {
        const auto json = writer.begin(*b);
        for (size_t i = first; i < std::min(n, first + 500); ++i) {
          out.clear();
          json.append(out, b->records[i]);
          sum += out.size();
        }
      }
      return sum;
    };
  };
  std::vector<Mode> modes{
      {"simdjson_minify",
       [&] {
         size_t sum = 0;
         out.resize(4096);
         for (const auto& p : payloads) {
           size_t len = 0;
           if (simdjson::minify(p.data(), p.size(), out.data(), len)) std::abort();
           sum += len;
         }
         return sum;
       }},
      {"envelope", writer_mode({}, &batch)},
      {"envelope_nometa", writer_mode({}, &bare)},
      {"flat", writer_mode({.layout = kit::JsonLayout::Flat}, &batch)},
      {"payload_only", writer_mode({.layout = kit::JsonLayout::PayloadOnly}, &batch)},
  };
  double baseline = 0;
  for (const auto& mode : modes) {
    mode.run();  // warm-up
    std::vector<double> wall, cpu;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_ns();
      volatile size_t sink = mode.run();
      (void)sink;
      cpu.push_back(thread_cpu_ns() - c0);
      wall.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
    const double cpu_per = median(cpu) / static_cast<double>(n);
    if (mode.name == "simdjson_minify") baseline = cpu_per;
    std::printf("record_json_cost mode=%s records=%zu ns_per_record=%.1f cpu_ns_per_record=%.1f vs_minify=%.2f\n",
                mode.name.c_str(), n, median(wall) / static_cast<double>(n), cpu_per, cpu_per / baseline);
  }
  return 0;
}
