// bench_transform_cost: the cost of a 5-transform chain per record, without Kafka.
//
//   bench_transform_cost [records.jsonl|-] [repetitions=5] [mode]
//
// Without a file it generates 100000 order-like records of ~200 bytes, the shape of
// bench/gen_records.py. Times, over all records, repetition by repetition (median printed):
//   parse_serialize     transform/json.h: parse + serialise each payload (the floor of any
//                       chain that changes a record, with the chain's own document)
//   chain               picomq::transform::Chain::apply with the 5 transforms below
//   chain_noop          a chain whose transforms change nothing (a filter on a field that
//                       never matches): parse only, the input bytes are kept
//   nlohmann_parse_serialize, rapidjson_parse_serialize, rapidjson_chain (the same 5 steps hand
//                       written on RapidJSON's DOM): the libraries considered instead, for
//                       comparison (RapidJSON parts only when its headers are installed)
// Prints one line per mode: "transform_cost mode=<m> records=<n> payload_bytes=<n> reps=<n>
// ns_per_record=<median wall> cpu_ns_per_record=<median thread CPU> runs_ns=<each repetition>".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "config/sink_definition.h"
#include "order_payloads.h"
#include "transform/chain.h"
#include "transform/json.h"

#if __has_include(<rapidjson/document.h>)
#define PICOMQ_BENCH_RAPIDJSON 1
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
namespace pt = picomq::transform;

constexpr std::string_view kChain = R"(type = "sink"
key = "bench"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["bench.orders"]

[[transforms]]
type = "filter"
drop_when = { field = "status", equals = "cancelled" }
[[transforms]]
type = "rename_fields"
fields = [ { from = "ccy", to = "currency" } ]
[[transforms]]
type = "delete_fields"
fields = ["channel"]
[[transforms]]
type = "add_fields"
fields = [ { path = "source", value = "kafka" }, { path = "ingested_at", compute = "now_ms" } ]
[[transforms]]
type = "cast"
fields = [ { path = "customer", to = "string" } ]
)";

constexpr std::string_view kNoopChain = R"(type = "sink"
key = "bench"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["bench.orders"]

[[transforms]]
type = "filter"
drop_when = { field = "status", equals = "no-such-status" }
)";

// CPU time of this thread: on a shared machine it moves much less than wall time.
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_transform_cost: %s\n", message.c_str());
  std::exit(2);
}

std::vector<std::string> load(const char* path) {
  std::ifstream in(path);
  if (!in) die(std::string("cannot read ") + path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(std::move(line));
  return out;
}

pt::Chain compile(std::string_view toml) {
  auto result = picomq::config::parse_sink_definition(toml, "bench.toml",
                                                      [](std::string_view) { return std::optional<std::string>(); });
  if (!result.definition) die("bad chain: " + picomq::config::format_errors(result.errors));
  return pt::Chain(result.definition->transforms);
}

struct Mode {
  std::string name;
  // Processes every record once; returns a checksum so nothing is optimised away.
  std::function<std::size_t(const std::vector<std::string>&)> run;
};

#ifdef PICOMQ_BENCH_RAPIDJSON
std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The same 5 steps on RapidJSON's DOM, written by hand (what the chain would cost on it).
std::size_t rapidjson_chain(const std::string& payload, rapidjson::Document& doc, rapidjson::StringBuffer& out) {
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) return 0;
  auto& a = doc.GetAllocator();
  auto status = doc.FindMember("status");
  if (status != doc.MemberEnd() && status->value.IsString() &&
      std::string_view(status->value.GetString(), status->value.GetStringLength()) == "cancelled")
    return 1;
  auto ccy = doc.FindMember("ccy");
  if (ccy != doc.MemberEnd()) ccy->name.SetString("currency", a);
  doc.EraseMember("channel");
  doc.AddMember("source", "kafka", a);
  doc.AddMember("ingested_at", rapidjson::Value(static_cast<int64_t>(now_ms())), a);
  auto customer = doc.FindMember("customer");
  if (customer != doc.MemberEnd() && customer->value.IsNumber()) {
    std::string text = customer->value.IsInt64() ? std::to_string(customer->value.GetInt64())
                                                 : std::to_string(customer->value.GetDouble());
    customer->value.SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), a);
  }
  out.Clear();
  rapidjson::Writer<rapidjson::StringBuffer> writer(out);
  doc.Accept(writer);
  return out.GetSize();
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> records =
      argc > 1 && std::string(argv[1]) != "-" ? load(argv[1]) : picomq::bench::order_payloads(100'000);
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  if (records.empty()) die("no records");
  std::size_t payload_bytes = 0;
  for (const auto& r : records) payload_bytes += r.size();

  const pt::Chain chain = compile(kChain);
  const pt::Chain noop = compile(kNoopChain);
  pt::RecordMeta meta;
  meta.topic = "bench.orders";

  std::vector<Mode> modes;
  modes.push_back({"parse_serialize", [](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     pt::json::Value doc;
                     std::string out, error;
                     for (const auto& r : in) {
                       if (!pt::json::parse(r, doc, error)) die(error);
                       out.clear();
                       pt::json::serialize(doc, out);
                       sum += out.size();
                     }
                     return sum;
                   }});
  modes.push_back({"chain", [&](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     std::string payload, error;
                     for (const auto& r : in) {
                       payload = r;  // the runtime hands the chain its own copy of each payload
                       meta.offset++;
                       if (chain.apply(meta, payload, error) == pt::Verdict::Fail) die(error);
                       sum += payload.size();
                     }
                     return sum;
                   }});
  modes.push_back({"chain_noop", [&](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     std::string payload, error;
                     for (const auto& r : in) {
                       payload = r;
                       if (noop.apply(meta, payload, error) != pt::Verdict::Keep) die(error);
                       sum += payload.size();
                     }
                     return sum;
                   }});
  modes.push_back({"nlohmann_parse_serialize", [](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     for (const auto& r : in) sum += nlohmann::json::parse(r).dump().size();
                     return sum;
                   }});
#ifdef PICOMQ_BENCH_RAPIDJSON
  modes.push_back({"rapidjson_parse_serialize", [](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     rapidjson::Document doc;
                     rapidjson::StringBuffer out;
                     for (const auto& r : in) {
                       doc.Parse<rapidjson::kParseFullPrecisionFlag>(r.data(), r.size());
                       out.Clear();
                       rapidjson::Writer<rapidjson::StringBuffer> writer(out);
                       doc.Accept(writer);
                       sum += out.GetSize();
                     }
                     return sum;
                   }});
  modes.push_back({"rapidjson_chain", [](const std::vector<std::string>& in) {
                     std::size_t sum = 0;
                     rapidjson::Document doc;
                     rapidjson::StringBuffer out;
                     for (const auto& r : in) sum += rapidjson_chain(r, doc, out);
                     return sum;
                   }});
#endif

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const std::string only = argc > 3 ? argv[3] : "";
  for (const auto& mode : modes) {
    if (!only.empty() && mode.name != only) continue;
    mode.run(records);  // warm-up
    std::vector<double> runs, cpu_runs;
    for (int rep = 0; rep < reps; ++rep) {
      auto start = Clock::now();
      const double cpu_start = thread_cpu_ns();
      volatile std::size_t sink = mode.run(records);
      (void)sink;
      cpu_runs.push_back(thread_cpu_ns() - cpu_start);
      runs.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count());
    }
    std::string each;
    for (double r : runs) each += (each.empty() ? "" : ",") + std::to_string(static_cast<long long>(r));
    const auto n = static_cast<double>(records.size());
    std::printf(
        "transform_cost mode=%s records=%zu payload_bytes=%zu reps=%d ns_per_record=%.1f "
        "cpu_ns_per_record=%.1f runs_ns=%s\n",
        mode.name.c_str(), records.size(), payload_bytes, reps, median(runs) / n, median(cpu_runs) / n, each.c_str());
  }
  return 0;
}
