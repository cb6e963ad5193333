// bench_tap_cost: what a tap (GET /sinks/{key}/tap) costs the preparation of batches, without
// Kafka: the runtime's BatchPreparer (json schema, two headers per record) over 200,000
// order-like records of ~200 bytes in batches of 1000, repetition by repetition (median printed):
//   none       no tap at all (a preparer without one, as before the tap existed)
//   disarmed   no tap asked for (the normal case: one relaxed load per batch and stage)
//   armed      a tap of the `transformed` stage waiting all along for a block that never comes
//              (the worst case: armed for its whole wait, every record offered and looked at,
//              headers read for every record)
// Prints "tap_cost mode=<m> records=<n> reps=<n> ns_per_record=<median> runs_ns=<each>" and the
// ratios disarmed / none and armed / disarmed.
//
//   bench_tap_cost [repetitions=7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "decoders/payload_decoder.h"
#include "order_payloads.h"
#include "runtime/delivery/batch_preparer.h"
#include "runtime/tap.h"

namespace {

using picomq::runtime::ConsumedRecord;
using picomq::runtime::ConsumedRecords;

// A batch of records as the preparer reads consumed ones.
class Batch final : public ConsumedRecords {
 public:
  Batch(const std::vector<std::string>& payloads, size_t from, size_t count) : payloads_(payloads), from_(from) {
    count_ = std::min(count, payloads.size() - from);
  }
  size_t size() const override { return count_; }
  ConsumedRecord at(size_t index) const override {
    const std::string& p = payloads_[from_ + index];
    ConsumedRecord r;
    r.offset = static_cast<int64_t>(from_ + index);
    r.timestamp_ms = 1796600000000;
    r.value = {reinterpret_cast<const uint8_t*>(p.data()), p.size()};
    return r;
  }
  void headers(size_t, std::vector<pmq_header>& out) const override {
    static const std::string names[] = {"trace", "source"}, values[] = {"t-4f9a2c", "orders-eu"};
    for (int i = 0; i < 2; ++i)
      out.push_back({{reinterpret_cast<const uint8_t*>(names[i].data()), names[i].size()},
                     {reinterpret_cast<const uint8_t*>(values[i].data()), values[i].size()}});
  }

 private:
  const std::vector<std::string>& payloads_;
  size_t from_, count_;
};

int64_t run_once(const std::vector<std::string>& payloads, picomq::runtime::Tap* tap) {
  picomq::config::TopicsBlock block;
  picomq::runtime::BatchPreparer::Settings settings;
  settings.tap = tap;
  const auto decoders = picomq::decoders::make_decoder_factory(block);
  picomq::runtime::BatchPreparer preparer(settings, decoders->make(), nullptr, nullptr);
  const auto start = std::chrono::steady_clock::now();
  size_t written = 0;
  for (size_t from = 0; from < payloads.size(); from += 1000) {
    const Batch batch(payloads, from, 1000);
    written += preparer.prepare({"orders", 0}, batch, false).batch.records.size();
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  if (written != payloads.size()) std::fprintf(stderr, "tap_cost: %zu of %zu prepared\n", written, payloads.size());
  return ns.count();
}

int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const auto payloads = picomq::bench::order_payloads(200000);
  std::vector<int64_t> none, disarmed, armed;
  std::vector<std::unique_ptr<picomq::runtime::Tap>> taps;
  for (int rep = 0; rep < reps; ++rep) {
    none.push_back(run_once(payloads, nullptr));
    picomq::runtime::Tap idle;
    disarmed.push_back(run_once(payloads, &idle));
    // Armed for block 7, which none of these records is in: it waits and looks at every record.
    // Kept to the end: the wait outlives the repetition (the process exits first).
    auto& tap = *taps.emplace_back(std::make_unique<picomq::runtime::Tap>());
    std::thread([&tap] {
      std::vector<std::string> got;
      tap.collect(picomq::runtime::Tap::Stage::Transformed, 7, 10, std::chrono::milliseconds(60000), got);
    }).detach();
    while (!tap.armed(picomq::runtime::Tap::Stage::Transformed)) std::this_thread::yield();
    armed.push_back(run_once(payloads, &tap));
  }
  const auto report = [&](const char* mode, const std::vector<int64_t>& runs) {
    std::string each;
    for (auto r : runs) each += (each.empty() ? "" : ",") + std::to_string(r / static_cast<int64_t>(payloads.size()));
    std::printf("tap_cost mode=%s records=%zu reps=%d ns_per_record=%lld runs_ns=%s\n", mode, payloads.size(), reps,
                static_cast<long long>(median(runs) / static_cast<int64_t>(payloads.size())), each.c_str());
  };
  report("none", none);
  report("disarmed", disarmed);
  report("armed", armed);
  std::printf("tap_cost ratio disarmed/none=%.3f armed/disarmed=%.3f\n",
              static_cast<double>(median(disarmed)) / static_cast<double>(median(none)),
              static_cast<double>(median(armed)) / static_cast<double>(median(disarmed)));
  std::fflush(stdout);
  std::_Exit(0);  // the armed taps' waits may still run
}
