// libFuzzer target: fixed transform chains applied to arbitrary payload bytes.
//
// Input: the first byte picks record metadata (key present or not, binary or text; headers),
// the rest is the payload. Invariants checked, beyond "no crash, no sanitizer report":
//  - the chain's JSON parser agrees with nlohmann::json::accept: what nlohmann accepts we accept
//    (unless nested deeper than our 1024 levels, or cut at a NUL byte, where nlohmann stops
//    reading), and what we accept nlohmann accepts unless a number overflows a double (which
//    nlohmann refuses and we keep as text);
//  - a kept record is valid JSON, and when a chain rewrote it, it is in canonical form
//    (parse + serialise gives the same bytes);
//  - a failed record has an error message naming its transform.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config/sink_definition.h"
#include "transform/chain.h"
#include "transform/json.h"

namespace {

namespace pt = picomq::transform;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

constexpr std::string_view kHead = R"(type = "sink"
key = "fuzz"
path = "libx"
[[topics]]
topics = ["orders"]
)";

// Every transform type, most options, nested paths and conditions.
constexpr std::string_view kChains[] = {
    R"(
[[transforms]]
type = "filter"
drop_when = { any = [ { field = "status", equals = "cancelled" }, { header = "skip", exists = true } ] }
[[transforms]]
type = "rename_fields"
fields = [ { from = "ccy", to = "currency" }, { from = "a.b", to = "c.d.e" }, { from = "items.0", to = "first" } ]
[[transforms]]
type = "delete_fields"
fields = ["channel", "ship_to.zip", "items.1", 'k\.dot']
[[transforms]]
type = "add_fields"
overwrite = false
fields = [
  { path = "source", value = "kafka" },
  { path = "meta.at", compute = "now_rfc3339" },
  { path = "meta.key", compute = "key" },
  { path = "meta.trace", compute = "header", header = "trace" },
  { path = "meta.id", compute = "record_id" },
]
[[transforms]]
type = "update_fields"
create = true
fields = [ { path = "amount", value = 0, when = { field = "status", in = ["refunded", 3, true] } },
           { path = "copy", copy_from = "ship_to" } ]
[[transforms]]
type = "mask_fields"
fields = ["card", "name", "x.y"]
keep_last = 2
keep_first = 1
[[transforms]]
type = "cast"
fields = [ { path = "customer", to = "string" }, { path = "qty", to = "integer" }, { path = "amount", to = "float" },
           { path = "express", to = "boolean" }, { path = "raw", to = "json" } ]
[[transforms]]
type = "convert_timestamp"
fields = ["ts", "created"]
[[transforms]]
type = "flatten"
)",
    R"(
[[transforms]]
type = "extract_field"
field = "payload.after"
merge = true
[[transforms]]
type = "keep_fields"
fields = ["id", "ship_to.city", "items.0", "after"]
[[transforms]]
type = "flatten"
separator = "."
[[transforms]]
type = "convert_timestamp"
fields = ["ts"]
from = "unix_s"
to = "unix_ns"
)",
    R"(
[[transforms]]
type = "filter"
keep_when = { not = { all = [ { field = "n", gt = 10 }, { field = "n", lte = 1e300 }, { field = "s", matches = "[a-z]+" } ] } }
[[transforms]]
type = "extract_field"
field = "value"
on_missing = "skip"
[[transforms]]
type = "cast"
fields = [ { path = "0", to = "string" }, { path = "v", to = "integer" }, { path = "w", to = "boolean" } ]
[[transforms]]
type = "mask_fields"
fields = ["0", "secret"]
replacement = { hidden = true }
[[transforms]]
type = "convert_timestamp"
fields = ["t"]
to = "date"
)",
};

const std::vector<pt::Chain>& chains() {
  static const std::vector<pt::Chain> compiled = [] {
    std::vector<pt::Chain> out;
    auto env = [](std::string_view) { return std::optional<std::string>(); };
    for (std::string_view chain : kChains) {
      auto result = picomq::config::parse_sink_definition(std::string(kHead) + std::string(chain), "fuzz.toml", env);
      if (!result.definition) fail("a fuzz chain does not parse", picomq::config::format_errors(result.errors));
      pt::ChainOptions options;
      options.now_ms = [] { return std::int64_t{1'735'689'600'123}; };
      out.emplace_back(result.definition->transforms, options);
    }
    return out;
  }();
  return compiled;
}

bool has_overflowing_number(const pt::json::Value& v) {
  if (v.kind == pt::json::Kind::Number) return std::isinf(std::strtod(v.text.c_str(), nullptr));
  for (const auto& m : v.items)
    if (has_overflowing_number(m.value)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);

  // The parser against nlohmann's.
  pt::json::Value doc;
  std::string problem;
  const bool ours = pt::json::parse(payload, doc, problem);
  // nlohmann stops at a NUL byte as if the input ended there ("1\0x" is accepted): a raw NUL
  // is never valid JSON, so such inputs are simply invalid.
  const bool theirs = payload.find('\0') == std::string_view::npos && nlohmann::json::accept(payload);
  if (theirs && !ours && problem.find("nesting") == std::string::npos) fail("nlohmann accepts what we refuse", problem);
  if (ours && !theirs && !has_overflowing_number(doc)) fail("we accept what nlohmann refuses", std::string(payload));
  if (ours) {
    std::string text = pt::json::to_string(doc), again;
    pt::json::Value reparsed;
    if (!pt::json::parse(text, reparsed, problem)) fail("our output does not parse", text);
    pt::json::serialize(reparsed, again);
    if (again != text) fail("serialising is not stable", text + "\n" + again);
    if (!pt::json::equal(doc, reparsed)) fail("a round trip changed the value", text);
  }

  std::string key_bytes = selector & 2 ? std::string("\xff\x01", 2) : std::string("key-1");
  std::string header_value = selector & 8 ? std::string("\xc3\x28") : std::string("t-1");
  std::vector<pmq_header> headers;
  if (selector & 4) {
    pmq_header h{};
    h.name = {reinterpret_cast<const uint8_t*>("trace"), 5};
    h.value = {reinterpret_cast<const uint8_t*>(header_value.data()), header_value.size()};
    headers.push_back(h);
  }
  if (selector & 16) {
    pmq_header h{};
    h.name = {reinterpret_cast<const uint8_t*>("skip"), 4};
    headers.push_back(h);
  }
  pt::RecordMeta meta;
  meta.topic = "orders";
  meta.partition = selector >> 5;
  meta.offset = selector;
  meta.timestamp_ms = selector & 32 ? -1 : 1'735'689'600'000;
  if (selector & 1) meta.key = key_bytes;
  meta.headers = headers;

  for (const auto& chain : chains()) {
    std::string p(payload), error;
    switch (chain.apply(meta, p, error)) {
      case pt::Verdict::Keep:
        if (ours) {
          pt::json::Value out;
          if (!pt::json::parse(p, out, problem)) fail("a kept record is not valid JSON", p + "\n" + problem);
          if (p != payload && pt::json::to_string(out) != p) fail("a rewritten record is not canonical", p);
        }
        break;
      case pt::Verdict::Drop: break;
      case pt::Verdict::Fail:
        if (error.rfind("transforms[", 0) != 0) fail("an error that names no transform", error);
        break;
    }
    (void)chain.apply_without_payload(meta, error);
  }
  return 0;
}
