// GET /metrics (api_server.h): the Prometheus text exposition of every sink's status and counters,
// and the process's CPU and memory, through prometheus-cpp's serializer.
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "runtime/ops/api_server.h"

namespace picomq::runtime {

namespace {

std::string process_cpu_and_rss(double& cpu_seconds, double& rss_bytes) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  rss_bytes = static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return {};
}

}  // namespace

std::string metrics_exposition(const std::vector<SinkStatus>& sinks) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  using prometheus::ClientMetric;
  using prometheus::MetricFamily;
  using prometheus::MetricType;
  std::map<std::string, MetricFamily> fam;
  auto family = [&](const std::string& name, MetricType type, const std::string& help) -> MetricFamily& {
    auto& f = fam[name];
    f.name = name;
    f.type = type;
    f.help = help;
    return f;
  };
  auto add = [&](const std::string& name, MetricType type, const std::string& help,
                 std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (type == MetricType::Counter) m.counter.value = value;
    else m.gauge.value = value;
    family(name, type, help).metric.push_back(std::move(m));
  };
  const auto C = MetricType::Counter, G = MetricType::Gauge;
  auto histogram = [&](const std::string& name, const std::string& help, const std::vector<ClientMetric::Label>& labels,
                       const std::vector<uint64_t>& buckets, double sum) {
    if (buckets.size() != LatencyHistogram::kBounds.size() + 1) return;
    ClientMetric m;
    m.label = labels;
    uint64_t cumulative = 0;
    for (size_t k = 0; k < LatencyHistogram::kBounds.size(); ++k) {
      cumulative += buckets[k];
      m.histogram.bucket.push_back({cumulative, LatencyHistogram::kBounds[k]});
    }
    cumulative += buckets.back();
    m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = sum;
    family(name, MetricType::Histogram, help).metric.push_back(std::move(m));
  };
  static constexpr std::array<const char*, 6> kOutcomes{"ok", "retry", "partial", "fatal", "rejected", "pending"};
  for (const auto& st : sinks) {
    for (const auto* state : {"starting", "running", "stopping", "stopped", "error", "invalid", "disabled"})
      add("picomq_sink_state", G, "1 for the state the sink is in", {{"sink", st.key}, {"state", state}},
          to_string(st.state) == state ? 1 : 0);
    for (const auto& [name, value] : st.counters)
      add("picomq_sink_counter_total", C, "what the sink counted (host API count(), ABI 2.2)",
          {{"sink", st.key}, {"name", name}}, static_cast<double>(value));
    // The autoscaling signal: read from the broker for every sink, running or not.
    for (size_t i = 0; i < st.group_lag.size(); ++i) {
      for (const auto& p : st.group_lag[i]) {
        if (p.records < 0) continue;
        const std::vector<ClientMetric::Label> lp{{"sink", st.key},
                                                  {"block", std::to_string(i)},
                                                  {"topic", p.topic},
                                                  {"partition", std::to_string(p.partition)}};
        add("picomq_consumer_lag_records", G,
            "log end offset minus the group's committed offset (records not yet written for good)", lp,
            static_cast<double>(p.records));
        if (const double age = p.seconds_at(now_ms); age >= 0)
          add("picomq_consumer_lag_seconds", G, "age of the record at the group's committed offset (0 without lag)", lp,
              age);
      }
    }
    for (size_t i = 0; i < st.blocks.size(); ++i) {
      const auto& b = st.blocks[i];
      const std::vector<ClientMetric::Label> l{{"sink", st.key}, {"block", std::to_string(i)}};
      auto n = [](uint64_t v) { return static_cast<double>(v); };
      add("picomq_records_consumed_total", C, "records polled from the broker", l, n(b.consumed_records));
      add("picomq_consumed_bytes_total", C, "key + value bytes of the records polled", l, n(b.consumed_bytes));
      add("picomq_records_written_total", C, "records the sink wrote", l, n(b.delivered_records));
      add("picomq_records_filtered_total", C, "records a transform dropped", l, n(b.filtered_records));
      add("picomq_records_skipped_total", C, "bad records the skip policy stepped over", l, n(b.skipped_records));
      add("picomq_records_dead_lettered_total", C, "bad records confirmed in the dead-letter topic", l,
          n(b.dead_lettered_records));
      add("picomq_records_rejected_total", C, "records the sink refused (then handled by on_bad_record)", l,
          n(b.rejected_records));
      add("picomq_batches_stored_total", C, "batches whose offsets were stored after their write", l,
          n(b.stored_batches));
      add("picomq_batches_committed_total", C, "stored batches a successful commit covered", l, n(b.committed_batches));
      add("picomq_commits_total", C, "successful offset commits", l, n(b.commits));
      add("picomq_commit_failures_total", C, "failed offset commits (made again with the next one)", l,
          n(b.failed_commits));
      add("picomq_buffered_records", G, "records polled and not yet written", l, n(b.buffered_records));
      add("picomq_buffered_bytes", G, "bytes of the records polled and not yet written", l, n(b.buffered_bytes));
      add("picomq_paused", G, "1 while the consumer is paused (back-pressure or operator)", l, b.paused ? 1 : 0);
      add("picomq_broker_up", G, "1 while the broker answers this block's consumer", l,
          b.broker_unreachable_since_ms ? 0 : 1);
      for (size_t o = 0; o + 1 < kOutcomes.size(); ++o) {
        auto lo = l;
        lo.push_back({"outcome", kOutcomes[o]});
        add("picomq_write_attempts_total", C, "write attempts by outcome (a retry is an attempt of its own)", lo,
            n(b.write_attempts[o]));
      }
      histogram("picomq_write_duration_seconds", "from the start of a batch's write to its outcome, retries included",
                l, b.write_latency_buckets, b.write_latency_sum_seconds);
      histogram("picomq_end_to_end_latency_seconds",
                "from the Kafka timestamp of a batch's first record to its offset being stored for the commit", l,
                b.end_to_end_latency_buckets, b.end_to_end_latency_sum_seconds);
    }
  }
  double cpu = 0, rss = 0;
  process_cpu_and_rss(cpu, rss);
  add("process_cpu_seconds_total", C, "user and system CPU time of the process", {}, cpu);
  add("process_resident_memory_bytes", G, "resident set size of the process", {}, rss);
  std::vector<MetricFamily> out;
  out.reserve(fam.size());
  for (auto& [name, f] : fam) out.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(out);
}

}  // namespace picomq::runtime
