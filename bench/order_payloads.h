#pragma once
// Order-like JSON payloads of ~200 bytes, the shape of bench/gen_records.py, generated in process
// (deterministic: seed 42) for the benchmarks that need no Kafka.
#include <cstddef>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace picomq::bench {

// The shape of bench/gen_records.py (same fields, similar value spread).
inline std::vector<std::string> order_payloads(std::size_t n) {
  std::mt19937_64 rng(42);
  auto pick = [&](std::size_t k) { return static_cast<std::size_t>(rng() % k); };
  const char* regions[] = {"eu", "us", "apac", "latam"};
  const char* currencies[] = {"EUR", "USD", "GBP", "JPY", "BRL", "CHF"};
  const char* statuses[] = {"created", "paid", "shipped", "delivered", "cancelled", "refunded"};
  const char* channels[] = {"web", "ios", "android", "store", "partner"};
  const char* cities[] = {"Berlin", "Lyon", "Austin", "Osaka", "Recife", "Zurich", "Leeds", "Porto", "Denver", "Pune"};
  std::vector<std::string> out;
  out.reserve(n);
  char buf[512];
  for (std::size_t i = 0; i < n; ++i) {
    std::string items = "\"SKU-" + std::to_string(10000 + pick(5000)).substr(0) + "\"";
    if (pick(2)) items += ",\"SKU-" + std::to_string(10000 + pick(5000)) + "\"";
    const long cents = 100 + static_cast<long>(pick(9'999'900));
    int len = std::snprintf(
        buf, sizeof buf,
        "{\"id\":\"%s-%09zu\",\"customer\":%zu,\"status\":\"%s\",\"channel\":\"%s\",\"amount\":%ld.%02ld,"
        "\"ccy\":\"%s\",\"items\":[%s],\"qty\":%zu,\"ship_to\":{\"city\":\"%s\"},\"express\":%s,\"ts\":%lld}",
        regions[i % 4], i, 1 + pick(9'999'999), statuses[pick(6)], channels[pick(5)], cents / 100, cents % 100,
        currencies[pick(6)], items.c_str(), 1 + pick(20), cities[pick(10)], pick(5) == 0 ? "true" : "false",
        1'735'689'600'000LL + static_cast<long long>(i) * 37 + static_cast<long long>(pick(37)));
    out.emplace_back(buf, static_cast<std::size_t>(len));
  }
  return out;
}

}  // namespace picomq::bench
