// Every example of docs/transforms.md runs: a "```toml example" block, its "```json in" record and
// the "```json out" (or "```text out": DROP / FAIL: ...) result the page shows.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_support.h"

#ifndef PICOMQ_TRANSFORMS_DOC
#error "PICOMQ_TRANSFORMS_DOC must name docs/transforms.md"
#endif

namespace picomq::transform {
namespace {

struct Example {
  int line = 0;
  std::string toml, in, out;
};

std::vector<Example> examples() {
  std::ifstream file(PICOMQ_TRANSFORMS_DOC);
  EXPECT_TRUE(file) << "cannot read " << PICOMQ_TRANSFORMS_DOC;
  std::vector<Example> out;
  std::string line, *target = nullptr;
  int n = 0;
  while (std::getline(file, line)) {
    ++n;
    if (target) {
      if (line == "```") {
        target = nullptr;
      } else {
        *target += line + "\n";
      }
      continue;
    }
    if (line == "```toml example") {
      out.push_back({n, "", "", ""});
      target = &out.back().toml;
    } else if (line == "```json in" && !out.empty()) {
      target = &out.back().in;
    } else if ((line == "```json out" || line == "```text out") && !out.empty()) {
      target = &out.back().out;
    }
  }
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST(Docs, EveryExampleOfTransformsMdRuns) {
  auto all = examples();
  EXPECT_GE(all.size(), 17u);  // the page has one or more per transform
  testing::Record record;
  record.topic = "orders.eu";
  record.partition = 0;
  record.offset = 42;
  record.timestamp_ms = 1'735'689'600'000;
  record.key = "eu-1001";
  record.headers = {{"trace-id", "abc123"}};
  for (const auto& e : all) {
    SCOPED_TRACE("docs/transforms.md:" + std::to_string(e.line));
    ASSERT_FALSE(e.in.empty());
    ASSERT_FALSE(e.out.empty());
    auto chain = testing::chain_of(e.toml);
    EXPECT_EQ(testing::transformed(chain, trimmed(e.in), record), trimmed(e.out));
  }
}

}  // namespace
}  // namespace picomq::transform
