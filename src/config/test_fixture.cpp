#include "config/test_fixture.h"

#include <algorithm>

#include "config/file_text.h"
#include "config/toml_reader.h"
#include "picomq/kit/encoding.hpp"

namespace picomq::config {
namespace {

using detail::Diagnostics;
using detail::read_file_text;
using detail::TableReader;

constexpr const char* kPayloadKeys = "json, json_text, text, base64, file or tombstone = true";

// The tables of an array of tables (`[[tests.input]]`, or `input = [{...}, ...]`); an error
// for anything else.
std::vector<const toml::table*> tables_of(TableReader& r, std::string_view key, bool* present = nullptr) {
  std::vector<const toml::table*> out;
  const toml::node* n = r.node(key);
  if (present) *present = n != nullptr;
  if (!n) return out;
  const toml::array* items = n->as_array();
  if (!items) {
    r.error(*n, key, "'" + std::string(key) + "' must be an array of tables ([[...]])");
    return out;
  }
  for (const auto& item : *items) {
    if (const auto* t = item.as_table()) out.push_back(t);
    else r.error(item, key, "each entry of '" + std::string(key) + "' must be a table");
  }
  return out;
}

// Reads a file named relative to the fixture's folder.
std::optional<std::string> fixture_file(TableReader& r, const toml::node& at, std::string_view key,
                                        const std::string& name, const std::filesystem::path& base) {
  std::filesystem::path path(name);
  if (path.is_relative()) path = base / path;
  std::string error;
  auto text = read_file_text(path, &error);
  if (!text) r.error(at, key, "cannot read '" + path.string() + "': " + error);
  return text;
}

// A payload or key written one of several ways: `json` (any TOML value, serialized), `json_text`
// (JSON as written, valid or not), `text`, `base64`, `file`; `kind` says which one (`json` and
// `json_text` both give "json").
struct Bytes {
  std::optional<std::string> value;
  std::string kind;  // "" when none was written
  const toml::node* at = nullptr;
};

Bytes read_bytes(TableReader& r, const std::string& prefix, const std::filesystem::path& base, bool with_file) {
  Bytes out;
  auto take = [&](std::string_view key, const toml::node* n, std::optional<std::string> value, std::string kind) {
    if (!n) return;
    if (!out.kind.empty()) {
      r.error(*n, key, "'" + std::string(key) + "' and the " + out.kind + " written before it: write one of them");
      return;
    }
    out.value = std::move(value);
    out.kind = std::move(kind);
    out.at = n;
  };
  const std::string json_key = prefix + "json", json_text_key = prefix + "json_text", text_key = prefix + "text",
                    base64_key = prefix + "base64", file_key = prefix + "file";
  if (const toml::node* n = r.node(json_key)) {
    const nlohmann::json value = detail::to_json(*n, r.key_path(json_key), r.diagnostics(), r.env());
    take(json_key, n, value.dump(), "json");
  }
  if (const toml::node* n = r.node(json_text_key)) {
    if (auto s = r.string(json_text_key)) take(json_text_key, n, std::move(*s), "json");
  }
  if (const toml::node* n = r.node(text_key)) {
    if (auto s = r.string(text_key)) take(text_key, n, std::move(*s), "text");
  }
  if (const toml::node* n = r.node(base64_key)) {
    if (auto s = r.string(base64_key)) {
      if (auto decoded = kit::base64_decode(*s))
        take(base64_key, n, std::string(decoded->begin(), decoded->end()), "base64");
      else r.error(*n, base64_key, "'" + base64_key + "' is not valid base64 (RFC 4648, padded)");
    }
  }
  if (with_file) {
    if (const toml::node* n = r.node(file_key)) {
      if (auto s = r.string(file_key))
        if (auto text = fixture_file(r, *n, file_key, *s, base)) take(file_key, n, std::move(*text), "file");
    }
  }
  return out;
}

// `headers = { name = "value" }` (any order) or `headers = [["name", "value"], ...]` (this order).
// TOML has no null: a header with a null value is the one-element pair ["name"].
std::optional<FixtureHeaders> read_headers(TableReader& r, bool* ordered) {
  const toml::node* n = r.node("headers");
  if (!n) return std::nullopt;
  FixtureHeaders out;
  const std::string key = r.key_path("headers");
  if (const auto* t = n->as_table()) {
    *ordered = false;
    for (auto&& [k, v] : *t) {
      if (auto s = detail::interpolate(v, key, r.diagnostics(), r.env())) out.emplace_back(std::string(k.str()), *s);
      else if (!v.is_string()) r.error(v, "headers", "header '" + std::string(k.str()) + "': a value must be a string");
    }
    return out;
  }
  if (const auto* a = n->as_array()) {
    *ordered = true;
    for (const auto& item : *a) {
      const auto* pair = item.as_array();
      const bool ok = pair && (pair->size() == 1 || pair->size() == 2) &&
                      std::all_of(pair->begin(), pair->end(), [](const toml::node& e) { return e.is_string(); });
      if (!ok) {
        r.error(item, "headers", "each header must be [\"name\", \"value\"] (or [\"name\"] for a null value)");
        continue;
      }
      std::optional<std::string> value;
      if (pair->size() == 2) value = detail::interpolate(*pair->get(1), key, r.diagnostics(), r.env());
      out.emplace_back(std::string(pair->get(0)->as_string()->get()), std::move(value));
    }
    return out;
  }
  r.error(*n, "headers", "'headers' must be a table of strings or an array of [\"name\", \"value\"] pairs");
  return std::nullopt;
}

std::optional<int64_t> read_timestamp(TableReader& r) {
  const toml::node* n = r.node("timestamp");
  if (!n) return std::nullopt;
  if (const auto* i = n->as_integer()) return i->get();
  if (const auto* dt = n->as_date_time()) {
    const auto& v = dt->get();
    if (!v.offset) {
      r.error(*n, "timestamp", "a date-time timestamp needs its offset (e.g. 2025-01-01T00:00:00Z)");
      return std::nullopt;
    }
    std::tm tm{};
    tm.tm_year = v.date.year - 1900;
    tm.tm_mon = v.date.month - 1;
    tm.tm_mday = v.date.day;
    tm.tm_hour = v.time.hour;
    tm.tm_min = v.time.minute;
    tm.tm_sec = v.time.second;
    const int64_t seconds = static_cast<int64_t>(timegm(&tm)) - int64_t{v.offset->minutes} * 60;
    return seconds * 1000 + v.time.nanosecond / 1'000'000;
  }
  r.error(*n, "timestamp", "'timestamp' must be milliseconds since the epoch or a date-time with its offset");
  return std::nullopt;
}

FixtureInput read_input(TableReader& r, const std::filesystem::path& base) {
  FixtureInput in;
  in.line = static_cast<int>(r.toml_table().source().begin.line);
  in.offset = r.integer("offset");
  if (in.offset && *in.offset < 0) r.error(*r.toml_table().get("offset"), "offset", "'offset' must be 0 or more");
  if (auto ts = read_timestamp(r)) in.timestamp_ms = *ts;
  Bytes key = read_bytes(r, "key_", base, false);
  if (const toml::node* n = r.node("key")) {
    if (!key.kind.empty())
      r.error(*n, "key", "'key' and the key_" + key.kind + " written before it: write one of them");
    else if (auto s = r.string("key")) key.value = std::move(*s);
  }
  in.key = std::move(key.value);
  bool ordered = false;
  if (auto headers = read_headers(r, &ordered)) in.headers = std::move(*headers);
  Bytes payload = read_bytes(r, "", base, true);
  const bool tombstone = r.boolean("tombstone").value_or(false);
  if (tombstone && !payload.kind.empty()) {
    r.error(*r.toml_table().get("tombstone"), "tombstone", "a tombstone has no payload: drop the " + payload.kind);
  } else if (!tombstone && payload.kind.empty()) {
    r.error_here("an input needs its payload: " + std::string(kPayloadKeys));
  }
  in.payload = std::move(payload.value);
  r.finish();
  return in;
}

FixtureExpectedRecord read_expected(TableReader& r, const std::filesystem::path& base) {
  FixtureExpectedRecord e;
  e.line = static_cast<int>(r.toml_table().source().begin.line);
  e.where = r.path();
  Bytes payload = read_bytes(r, "", base, true);
  if (r.boolean("tombstone").value_or(false)) {
    if (!payload.kind.empty())
      r.error(*r.toml_table().get("tombstone"), "tombstone", "a tombstone has no payload: drop the " + payload.kind);
    e.payload_kind = FixtureExpectedRecord::Payload::Tombstone;
  } else if (payload.kind == "json") {
    e.payload_kind = FixtureExpectedRecord::Payload::Json;
    e.payload = std::move(*payload.value);
    if (!nlohmann::json::accept(e.payload))
      r.error(*payload.at, "json_text", "the expected payload is not valid JSON: write the bytes as text instead");
  } else if (!payload.kind.empty() && payload.value) {
    e.payload_kind = FixtureExpectedRecord::Payload::Bytes;
    e.payload = std::move(*payload.value);
  }
  if (auto ignore = r.string_array("ignore_fields")) {
    for (auto& f : *ignore) e.ignore_fields.push_back(std::move(f.value));
    if (e.payload_kind != FixtureExpectedRecord::Payload::Json)
      r.error(*r.toml_table().get("ignore_fields"), "ignore_fields",
              "'ignore_fields' is about a JSON payload (json or json_text)");
  }
  e.key = r.string("key");
  if (const toml::node* n = r.node("key_json"))
    e.key_json = detail::to_json(*n, r.key_path("key_json"), r.diagnostics(), r.env()).dump();
  if (const toml::node* n = r.node("key_json_text")) {
    if (e.key_json) r.error(*n, "key_json_text", "'key_json_text' and 'key_json': write one of them");
    else if (auto s = r.string("key_json_text")) {
      if (!nlohmann::json::accept(*s)) r.error(*n, "key_json_text", "'key_json_text' is not valid JSON");
      e.key_json = std::move(*s);
    }
  }
  e.headers = read_headers(r, &e.headers_ordered);
  if (auto op = r.string("op")) {
    static const char* kOps[] = {"append", "upsert", "delete", "truncate", "patch"};
    if (std::find(std::begin(kOps), std::end(kOps), *op) == std::end(kOps))
      r.error(*r.toml_table().get("op"), "op",
              "'op' must be append, upsert, delete, truncate or patch, got \"" + *op + "\"");
    e.op = std::move(*op);
  }
  e.offset = r.integer("offset");
  r.finish();
  return e;
}

FixtureExpectedBad read_expected_bad(TableReader& r) {
  FixtureExpectedBad b;
  b.line = static_cast<int>(r.toml_table().source().begin.line);
  b.where = r.path();
  if (auto offset = r.integer("offset", true)) b.offset = *offset;
  if (auto stage = r.string("stage")) {
    if (*stage != "decode" && *stage != "transform" && *stage != "sink")
      r.error(*r.toml_table().get("stage"), "stage",
              "'stage' must be decode, transform or sink, got \"" + *stage + "\"");
    b.stage = std::move(*stage);
  }
  b.reason = r.string("reason");
  r.finish();
  return b;
}

FixtureCase read_case(TableReader& r, const std::filesystem::path& base) {
  FixtureCase c;
  c.line = static_cast<int>(r.toml_table().source().begin.line);
  c.where = r.path();
  c.name = r.string("name", true).value_or("");
  c.topic = r.string("topic");
  if (auto p = r.integer("partition")) {
    if (*p < 0 || *p > INT32_MAX)
      r.error(*r.toml_table().get("partition"), "partition", "'partition' must be 0 or more");
    c.partition = static_cast<int32_t>(*p);
  }
  if (auto b = r.integer("block")) {
    if (*b < 0) r.error(*r.toml_table().get("block"), "block", "'block' is the [[topics]] block's index, 0 or more");
    c.block = static_cast<int>(*b);
  }
  const auto inputs = tables_of(r, "input");
  if (inputs.empty()) r.missing("input", "[[tests.input]]: the records the test hands over");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TableReader in(*inputs[i], detail::index_key(r.key_path("input"), i), r.diagnostics(), r.env());
    c.input.push_back(read_input(in, base));
  }
  // Offsets: as written, else one after the previous input's; they must go up, as in a partition.
  int64_t next = 0;
  for (size_t i = 0; i < c.input.size(); ++i) {
    auto& in = c.input[i];
    if (!in.offset) in.offset = next;
    else if (*in.offset < next)
      r.diagnostics().error(inputs[i]->source(), detail::index_key(r.key_path("input"), i) + ".offset",
                            "offsets must go up within a test, as in a partition: " + std::to_string(*in.offset) +
                                " after " + std::to_string(next - 1));
    next = *in.offset + 1;
  }
  bool has_expect = false;
  const auto expected = tables_of(r, "expect", &has_expect);
  if (has_expect) {
    c.expect.emplace();
    for (size_t i = 0; i < expected.size(); ++i) {
      TableReader e(*expected[i], detail::index_key(r.key_path("expect"), i), r.diagnostics(), r.env());
      c.expect->push_back(read_expected(e, base));
    }
  }
  const auto bad = tables_of(r, "expect_bad");
  for (size_t i = 0; i < bad.size(); ++i) {
    TableReader b(*bad[i], detail::index_key(r.key_path("expect_bad"), i), r.diagnostics(), r.env());
    c.expect_bad.push_back(read_expected_bad(b));
    const int64_t offset = c.expect_bad.back().offset;
    if (std::none_of(c.input.begin(), c.input.end(), [&](const FixtureInput& in) { return in.offset == offset; }))
      r.diagnostics().error(bad[i]->source(), detail::index_key(r.key_path("expect_bad"), i) + ".offset",
                            "no input has offset " + std::to_string(offset));
  }
  c.expect_filtered = r.integer("expect_filtered");
  // A test that checks nothing passes whatever the definition does.
  if (!has_expect && c.expect_bad.empty() && !c.expect_filtered)
    r.error_here("test '" + c.name +
                 "' expects nothing: add [[tests.expect]] (what the sink is called with; `expect = []` for nothing), "
                 "[[tests.expect_bad]] or expect_filtered (picomq-connect test --show prints what it gets)");
  r.finish();
  return c;
}

}  // namespace

FixtureResult parse_fixture(std::string_view toml_text, const std::string& file_name, const EnvLookup& env,
                            const std::optional<std::filesystem::path>& definition_override) {
  FixtureResult result;
  Diagnostics diag(file_name, result.errors);
  const std::filesystem::path base = std::filesystem::path(file_name).parent_path();
  auto parsed = detail::parse_document(toml_text, file_name, diag);
  if (!parsed) return result;
  const toml::table& root = *parsed;
  TableReader r(root, "", diag, env);
  Fixture fixture;
  fixture.file = file_name;
  if (auto definition = r.string("definition", !definition_override)) {
    fixture.definition =
        std::filesystem::path(*definition).is_relative() ? base / *definition : std::filesystem::path(*definition);
    fixture.definition_line = static_cast<int>(root.get("definition")->source().begin.line);
  }
  if (definition_override) fixture.definition = *definition_override;
  const auto tests = tables_of(r, "tests");
  if (tests.empty()) r.missing("tests", "[[tests]]: at least one");
  for (size_t i = 0; i < tests.size(); ++i) {
    TableReader t(*tests[i], detail::index_key("tests", i), diag, env);
    fixture.tests.push_back(read_case(t, base));
  }
  r.finish();
  detail::sort_by_position(result.errors);
  if (result.errors.empty()) result.fixture = std::move(fixture);
  return result;
}

FixtureResult load_fixture(const std::filesystem::path& file, const EnvLookup& env,
                           const std::optional<std::filesystem::path>& definition_override) {
  std::string error;
  auto text = read_file_text(file, &error);
  if (!text) {
    FixtureResult result;
    result.errors.push_back(ConfigError{file.string(), 0, 0, "", error});
    return result;
  }
  return parse_fixture(*text, file.string(), env, definition_override);
}

}  // namespace picomq::config
