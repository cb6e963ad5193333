// libFuzzer target: arbitrary text as a sink definition (with [[transforms]]).
//
// Invariants checked, beyond "no crash, no sanitizer report":
//  - parse_sink_definition returns either a definition or at least one error, never both;
//  - every error has a message, and a position unless it is about the whole file;
//  - the transforms of an accepted definition always compile into a Chain (the parser is the
//    only validation; Chain's constructor must not throw for what it accepted);
//  - that chain runs on a few fixed payloads without failing on its own account.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "config/sink_definition.h"
#include "transform/chain.h"
#include "transform/json.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Every ${VAR} is set (to a short value), except ${UNSET}.
  auto env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "UNSET") return std::nullopt;
    return std::string("v");
  };
  auto result = picomq::config::parse_sink_definition(text, "fuzz.toml", env);
  if (result.definition.has_value() == !result.errors.empty())
    fail("a definition XOR errors", picomq::config::format_errors(result.errors));
  for (const auto& e : result.errors)
    if (e.message.empty()) fail("an error without a message", e.to_string());
  if (!result.definition) return 0;

  picomq::transform::ChainOptions options;
  options.now_ms = [] { return std::int64_t{1'735'689'600'123}; };
  try {
    picomq::transform::Chain chain(result.definition->transforms, options);
    picomq::transform::RecordMeta meta;
    meta.topic = "orders.eu";
    meta.offset = 7;
    meta.timestamp_ms = 1'735'689'600'000;
    meta.key = "k";
    for (std::string_view payload :
         {R"({"id":"a","amount":2.50,"ship_to":{"city":"Lyon"},"items":[1,{"x":true}],"ts":1735689600000})",
          R"([1,"two",{"three":3}])", R"("text")", "null"}) {
      std::string p(payload), error;
      auto verdict = chain.apply(meta, p, error);
      if (verdict == picomq::transform::Verdict::Fail && error.empty()) fail("a failure without a message", p);
      if (verdict == picomq::transform::Verdict::Keep) {
        picomq::transform::json::Value v;
        std::string problem;
        if (!picomq::transform::json::parse(p, v, problem)) fail("the chain wrote invalid JSON", p + "\n" + problem);
      }
      (void)chain.apply_without_payload(meta, error);
    }
  } catch (const std::exception& e) {
    fail("an accepted definition did not compile", e.what());
  }
  return 0;
}
