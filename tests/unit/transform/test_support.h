// Helpers shared by the transform tests: definitions from TOML, chains, records.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/sink_definition.h"
#include "transform/chain.h"

namespace picomq::transform::testing {

// Five lines: a valid definition head with one json [[topics]] block; tests append
// [[transforms]] blocks, which therefore start on line 6.
inline constexpr std::string_view kHead = R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders"]
)";

inline config::EnvLookup fake_env(std::map<std::string, std::string> vars = {}) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline config::SinkDefinitionResult parse(std::string_view rest, std::map<std::string, std::string> env = {},
                                          std::string_view head = kHead) {
  return config::parse_sink_definition(std::string(head) + std::string(rest), "sink.toml", fake_env(std::move(env)));
}

inline std::string dump(const std::vector<config::ConfigError>& errors) { return config::format_errors(errors); }

// The single error about `key`; fails the test when there is none or more than one.
inline config::ConfigError error_for(const std::vector<config::ConfigError>& errors, std::string_view key) {
  const config::ConfigError* found = nullptr;
  int count = 0;
  for (const auto& e : errors) {
    if (e.key == key) {
      found = &e;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "errors about key '" << key << "' in:\n" << dump(errors);
  return found ? *found : config::ConfigError{};
}

// 2025-01-01T00:00:00.123Z
inline constexpr std::int64_t kNow = 1'735'689'600'123;

inline Chain chain_of(std::string_view transforms_toml, std::map<std::string, std::string> env = {}) {
  auto result = parse(transforms_toml, std::move(env));
  EXPECT_TRUE(result.definition) << dump(result.errors);
  if (!result.definition) return Chain();
  ChainOptions options;
  options.now_ms = [] { return kNow; };
  return Chain(result.definition->transforms, options);
}

struct Record {
  std::string topic = "orders.eu";
  std::int32_t partition = 3;
  std::int64_t offset = 42;
  std::int64_t timestamp_ms = 1'735'689'600'000;
  std::optional<std::string> key = std::string("k-1");
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

struct Outcome {
  Verdict verdict = Verdict::Keep;
  std::string payload;
  std::string error;
};

inline Outcome run(const Chain& chain, std::string payload, const Record& r = Record()) {
  std::vector<pmq_header> headers;
  for (const auto& [name, value] : r.headers) {
    pmq_header h{};
    h.name = {reinterpret_cast<const uint8_t*>(name.data()), name.size()};
    if (value) h.value = {reinterpret_cast<const uint8_t*>(value->data()), value->size()};
    headers.push_back(h);
  }
  RecordMeta meta;
  meta.topic = r.topic;
  meta.partition = r.partition;
  meta.offset = r.offset;
  meta.timestamp_ms = r.timestamp_ms;
  if (r.key) meta.key = *r.key;
  meta.headers = headers;
  Outcome out;
  out.payload = std::move(payload);
  out.verdict = chain.apply(meta, out.payload, out.error);
  return out;
}

// The payload after the chain, or "FAIL: <error>" / "DROP".
inline std::string transformed(const Chain& chain, std::string payload, const Record& r = Record()) {
  Outcome o = run(chain, std::move(payload), r);
  switch (o.verdict) {
    case Verdict::Keep: return o.payload;
    case Verdict::Drop: return "DROP";
    case Verdict::Fail: return "FAIL: " + o.error;
  }
  return "?";
}

}  // namespace picomq::transform::testing
