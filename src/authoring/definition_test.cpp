#include "authoring/definition_test.h"

#include <algorithm>
#include <map>
#include <ostream>

#include "authoring/json_diff.h"
#include "config/sink_definition.h"
#include "config/test_fixture.h"
#include "decoders/payload_decoder.h"
#include "runtime/config_check.h"
#include "runtime/delivery/batch_preparer.h"
#include "runtime/plugin_host/library.h"
#include "runtime/record_view.h"
#include "transform/chain.h"

namespace picomq::authoring {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// A test's inputs as the preparer reads consumed records.
class FixtureRecords final : public runtime::ConsumedRecords {
 public:
  explicit FixtureRecords(const std::vector<config::FixtureInput>& inputs) : inputs_(inputs) {}
  size_t size() const override { return inputs_.size(); }
  runtime::ConsumedRecord at(size_t index) const override {
    const auto& in = inputs_[index];
    runtime::ConsumedRecord r;
    r.offset = *in.offset;
    r.timestamp_ms = in.timestamp_ms;
    r.key = bytes(in.key);
    r.value = bytes(in.payload);
    return r;
  }
  void headers(size_t index, std::vector<pmq_header>& out) const override {
    for (const auto& [name, value] : inputs_[index].headers)
      out.push_back(pmq_header{{reinterpret_cast<const uint8_t*>(name.data()), name.size()}, bytes(value)});
  }

 private:
  static pmq_bytes bytes(const std::optional<std::string>& s) {
    // Present but empty must not read as absent: point at the string.
    return s ? pmq_bytes{reinterpret_cast<const uint8_t*>(s->data()), s->size()} : pmq_bytes{nullptr, 0};
  }
  const std::vector<config::FixtureInput>& inputs_;
};

std::string_view text_of(pmq_bytes b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

// One record as the sink gets it: what --show prints and what a failure shows.
ordered_json record_view(const pmq_record& r, pmq_payload_format format, bool changes) {
  ordered_json view;
  view["offset"] = r.offset;
  if (changes) view["op"] = runtime::op_name(r.op);
  if (r.key.data) view["key"] = runtime::bytes_json(r.key);
  if (r.key_json.data) view["key_json"] = json::parse(text_of(r.key_json), nullptr, false);
  if (r.header_count) {
    auto headers = ordered_json::array();
    for (size_t i = 0; i < r.header_count; ++i)
      headers.push_back(
          ordered_json::array({std::string(text_of(r.headers[i].name)), runtime::bytes_json(r.headers[i].value)}));
    view["headers"] = std::move(headers);
  }
  if (!r.payload.data) view["payload"] = nullptr;
  else if (format == PMQ_PAYLOAD_JSON) view["payload"] = ordered_json::parse(text_of(r.payload), nullptr, false);
  else view["payload"] = runtime::bytes_json(r.payload);
  return view;
}

std::string brief(const ordered_json& view) {
  std::string text = view.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 400 ? text.substr(0, 400) + "…" : text;
}

// Which [[topics]] block takes the test's records, and from which topic.
const config::TopicsBlock* block_for(const config::SinkDefinition& d, const config::FixtureCase& c, std::string& topic,
                                     std::string& error) {
  if (c.block) {
    if (*c.block >= static_cast<int>(d.topics.size())) {
      error = "block " + std::to_string(*c.block) + ": the definition has " + std::to_string(d.topics.size()) +
              " [[topics]] block(s)";
      return nullptr;
    }
  }
  if (c.topic) {
    topic = *c.topic;
  } else {
    const auto& b = d.topics[c.block.value_or(0)];
    if (b.topics.size() != 1 || (!c.block && d.topics.size() != 1)) {
      error = "name the test's topic (topic = \"...\"): the definition reads more than one";
      return nullptr;
    }
    topic = b.topics.front();
  }
  auto takes = [&](const config::TopicsBlock& b) { return b.reads(topic); };
  if (c.block) {
    const auto& b = d.topics[*c.block];
    if (!takes(b)) {
      error = "topic '" + topic + "' is not read by block " + std::to_string(*c.block);
      return nullptr;
    }
    return &b;
  }
  for (const auto& b : d.topics)
    if (takes(b)) return &b;
  error = "no [[topics]] block of the definition reads topic '" + topic + "'";
  return nullptr;
}

// Removes the field at a dotted path through objects; false when it is not there.
bool erase_path(json& value, const std::string& path) {
  json* at = &value;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
    if (!at->is_object()) return false;
    auto it = at->find(path.substr(start, dot - start));
    if (it == at->end()) return false;
    at = &*it;
  }
  return at->is_object() && at->erase(path.substr(start)) > 0;
}

struct BadOne {
  runtime::BadRecordStage stage = runtime::BadRecordStage::Decode;
  std::string reason;
  bool stops = false;  // `fail`: the sink stops at it
};

// One test's verdict: the lines that say what differs (empty: passed).
struct Verdict {
  std::vector<std::string> problems;
  std::string summary;  // "3 in: 2 to the sink, 1 bad, 0 filtered"
};

void compare_record(const config::FixtureExpectedRecord& e, const pmq_record& r, pmq_payload_format format,
                    size_t index, size_t count, std::vector<std::string>& problems) {
  std::vector<std::string> lines;
  using Payload = config::FixtureExpectedRecord::Payload;
  if (e.payload_kind == Payload::Tombstone && r.payload.data)
    lines.emplace_back("payload: expected none (a tombstone), got one");
  if (e.payload_kind == Payload::Json) {
    if (!r.payload.data) lines.push_back("payload: expected " + json_brief(json::parse(e.payload)) + ", got none");
    else {
      const json got = json::parse(text_of(r.payload), nullptr, false);
      if (got.is_discarded())
        lines.push_back("payload: expected JSON " + json_brief(json::parse(e.payload)) +
                        ", got bytes that are not JSON: " + json_brief(runtime::bytes_json(r.payload)));
      else {
        json want = json::parse(e.payload);
        json have = got;
        for (const auto& path : e.ignore_fields)
          if (!erase_path(have, path)) lines.push_back("payload." + path + ": missing (its value is not compared)");
          else erase_path(want, path);
        for (auto& line : json_diff(want, have, "payload")) lines.push_back(std::move(line));
      }
    }
  }
  if (e.payload_kind == Payload::Bytes && (!r.payload.data || text_of(r.payload) != e.payload))
    lines.push_back("payload: expected " + json_brief(runtime::bytes_json(std::optional<std::string_view>(e.payload))) +
                    ", got " + json_brief(runtime::bytes_json(r.payload)));
  (void)format;
  if (e.key && (!r.key.data || text_of(r.key) != *e.key))
    lines.push_back("key: expected " + json(*e.key).dump() + ", got " + json_brief(runtime::bytes_json(r.key)));
  if (e.key_json) {
    if (!r.key_json.data) lines.push_back("key_json: expected " + *e.key_json + ", got none");
    else
      for (auto& line :
           json_diff(json::parse(*e.key_json), json::parse(text_of(r.key_json), nullptr, false), "key_json"))
        lines.push_back(std::move(line));
  }
  if (e.op && *e.op != runtime::op_name(r.op))
    lines.push_back("op: expected " + *e.op + ", got " + runtime::op_name(r.op));
  if (e.offset && *e.offset != r.offset)
    lines.push_back("offset: expected " + std::to_string(*e.offset) + ", got " + std::to_string(r.offset));
  if (e.headers) {
    config::FixtureHeaders got;
    for (size_t i = 0; i < r.header_count; ++i) {
      const pmq_header& h = r.headers[i];
      got.emplace_back(std::string(text_of(h.name)),
                       h.value.data ? std::optional<std::string>(std::string(text_of(h.value))) : std::nullopt);
    }
    config::FixtureHeaders want = *e.headers;
    if (!e.headers_ordered) {
      std::stable_sort(got.begin(), got.end());
      std::stable_sort(want.begin(), want.end());
    }
    if (got != want) {
      auto show = [](const config::FixtureHeaders& hs) {
        auto a = json::array();
        for (const auto& [n, v] : hs) a.push_back(v ? json::array({n, *v}) : json::array({n, nullptr}));
        return json_brief(a, 400);
      };
      lines.push_back(std::string("headers") + (e.headers_ordered ? " (in this order)" : "") + ": expected " +
                      show(want) + ", got " + show(got));
    }
  }
  if (lines.empty()) return;
  problems.push_back(e.where + " (record " + std::to_string(index + 1) + " of " + std::to_string(count) +
                     " to the sink, offset " + std::to_string(r.offset) + "):");
  for (auto& line : lines) problems.push_back("  " + line);
}

}  // namespace

std::vector<fs::path> fixture_files(const fs::path& path) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (!name.empty() && name.front() == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->path().extension() == ".toml" && it->is_regular_file(ec)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void run_fixture_file(const fs::path& file, const TestOptions& options, const config::EnvLookup& env, std::ostream& out,
                      TestTally& tally) {
  auto loaded = config::load_fixture(file, env, options.definition);
  if (!loaded.fixture) {
    for (const auto& e : loaded.errors) out << "error: " << e.to_string() << '\n';
    ++tally.unusable;
    return;
  }
  const config::Fixture& fixture = *loaded.fixture;
  auto definition_result = config::load_sink_definition(fixture.definition, env, decoders::compile_block_schema);
  if (!definition_result.definition) {
    out << file.string() << ": its definition " << fixture.definition.string() << " does not load:\n";
    for (const auto& e : definition_result.errors) out << "error: " << e.to_string() << '\n';
    ++tally.unusable;
    return;
  }
  const config::SinkDefinition& definition = *definition_result.definition;
  out << file.string() << ": sink '" << definition.key << "' (" << fixture.definition.string() << ")\n";

  // The plugin: what starting the sink would refuse in its [plugin_config], and the change
  // operations it applies. Without it the records are still prepared, as for a sink that
  // applies every change.
  uint32_t change_ops = PMQ_CHANGE_OP_BIT(PMQ_OP_UPSERT) | PMQ_CHANGE_OP_BIT(PMQ_OP_DELETE) |
                        PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE) | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH);
  bool arrow_plane = false;
  {
    std::string error;
    if (options.without_plugin) {
      out << "  note: --no-plugin: [plugin_config] is not checked, every change operation is taken as applied\n";
    } else if (auto library = runtime::PluginLibrary::load(definition.path, options.plugin_path, error)) {
      auto check = runtime::check_plugin_config(definition, library->descriptor());
      if (!check.errors.empty()) {
        for (const auto& e : check.errors) out << "error: " << e.to_string() << '\n';
        ++tally.unusable;
        return;
      }
      change_ops = runtime::change_ops(library->descriptor());
      arrow_plane = library->planes().best_plane == PMQ_PLANE_ARROW;
    } else {
      out << "  note: plugin '" << definition.path << "' not found (" << error
          << "): its [plugin_config] is not checked, and it is taken to apply every change operation\n";
    }
  }

  const transform::Chain chain(definition.transforms);
  for (const auto& c : fixture.tests) {
    Verdict verdict;
    std::string topic, error;
    const config::TopicsBlock* block = block_for(definition, c, topic, error);
    std::optional<runtime::PreparedBatch> prepared;
    if (block) {
      runtime::BatchPreparer::Settings settings;
      settings.schema = block->schema;
      settings.on_bad_record = block->on_bad_record;
      settings.block_index = static_cast<uint32_t>(block->index);
      settings.changes = block->changes;
      settings.key_fields = block->key_fields;
      settings.change_ops = change_ops;
      // An arrow-plane sink gets its batches as Arrow columns: records its declared columns
      // cannot hold are bad records of the sink's stage.
      const arrow::ExportOptions export_options = runtime::arrow_export_options(*block);
      if (arrow_plane) settings.arrow_export = &export_options;
      const auto decoders = decoders::make_decoder_factory(*block);
      const auto key_decoders = block->key_schema ? decoders::make_decoder_factory(*block->key_schema) : nullptr;
      runtime::BatchPreparer preparer(settings, decoders->make(), key_decoders ? key_decoders->make() : nullptr,
                                      definition.transforms.empty() ? nullptr : &chain);
      const FixtureRecords records(c.input);
      prepared = preparer.prepare({topic, c.partition}, records, /*wants_headers=*/true);
      if (!prepared->retry_error.empty()) error = prepared->retry_error;
    }
    if (!error.empty()) {
      out << "  FAIL  " << c.name << "\n        " << c.where << ": " << error << '\n';
      ++tally.failed;
      continue;
    }
    const runtime::DecodedBatch& batch = prepared->batch;
    // The bad records by offset: those the policy takes (skip, dead_letter), or under `fail` the
    // one the sink stops at.
    std::map<int64_t, BadOne> bad_by_offset;
    for (const auto& b : prepared->bad) bad_by_offset[*c.input[b.index].offset] = {b.stage, b.reason, false};
    if (!prepared->failure.empty())
      bad_by_offset[prepared->commit_to] = {prepared->failure_stage, prepared->failure, true};

    if (c.expect) {
      const auto& expect = *c.expect;
      if (expect.size() != batch.records.size())
        verdict.problems.push_back("records to the sink: expected " + std::to_string(expect.size()) + ", got " +
                                   std::to_string(batch.records.size()));
      for (size_t i = 0; i < std::min(expect.size(), batch.records.size()); ++i)
        compare_record(expect[i], batch.records[i], batch.format, i, batch.records.size(), verdict.problems);
      for (size_t i = expect.size(); i < batch.records.size(); ++i)
        verdict.problems.push_back(
            "record " + std::to_string(i + 1) + " of " + std::to_string(batch.records.size()) +
            " to the sink, not expected: " + brief(record_view(batch.records[i], batch.format, batch.changes)));
    }
    for (const auto& e : c.expect_bad) {
      const auto it = bad_by_offset.find(e.offset);
      if (it == bad_by_offset.end()) {
        const bool to_sink = std::any_of(batch.records.begin(), batch.records.end(),
                                         [&](const pmq_record& r) { return r.offset == e.offset; });
        const bool after_stop = !prepared->failure.empty() && e.offset > prepared->commit_to;
        verdict.problems.push_back(e.where + ": expected the record at offset " + std::to_string(e.offset) +
                                   " to be bad, but it " +
                                   (to_sink      ? "went to the sink"
                                    : after_stop ? "comes after the one the sink stops at"
                                                 : "was dropped by a filter"));
        continue;
      }
      const std::string stage(runtime::to_string(it->second.stage));
      if (e.stage && *e.stage != stage)
        verdict.problems.push_back(e.where + ": offset " + std::to_string(e.offset) + " went bad at the " + stage +
                                   " stage, not " + *e.stage + ": " + it->second.reason);
      if (e.reason && it->second.reason.find(*e.reason) == std::string::npos)
        verdict.problems.push_back(e.where + ": offset " + std::to_string(e.offset) + "'s reason does not contain " +
                                   json(*e.reason).dump() + ": " + it->second.reason);
    }
    for (const auto& [offset, b] : bad_by_offset)
      if (std::none_of(c.expect_bad.begin(), c.expect_bad.end(),
                       [at = offset](const auto& e) { return e.offset == at; }))
        verdict.problems.push_back("the record at offset " + std::to_string(offset) + " went bad (" +
                                   std::string(runtime::to_string(b.stage)) + "), not expected: " + b.reason);
    if (c.expect_filtered && static_cast<size_t>(*c.expect_filtered) != prepared->filtered)
      verdict.problems.push_back("records dropped by a filter: expected " + std::to_string(*c.expect_filtered) +
                                 ", got " + std::to_string(prepared->filtered));

    const bool passed = verdict.problems.empty();
    passed ? ++tally.passed : ++tally.failed;
    out << (passed ? "  ok    " : "  FAIL  ") << c.name << " (" << c.input.size() << " in: " << batch.records.size()
        << " to the sink, " << bad_by_offset.size() << " bad, " << prepared->filtered << " filtered"
        << (prepared->failure.empty() ? "" : ", the sink stops") << ")\n";
    for (const auto& line : verdict.problems) out << "        " << line << '\n';
    if (!passed || options.show) {
      out << "        the sink is called with (" << topic << "[" << c.partition << "], block " << block->index
          << "):\n";
      for (const auto& r : batch.records)
        out << "          "
            << record_view(r, batch.format, batch.changes).dump(-1, ' ', false, json::error_handler_t::replace)
            << '\n';  // whole: the record as it is
      const char* policy = block->on_bad_record == config::BadRecordPolicy::DeadLetter ? "dead-lettered" : "skipped";
      for (const auto& [offset, b] : bad_by_offset)
        out << "          bad at offset " << offset << " (" << runtime::to_string(b.stage) << "), "
            << (b.stops ? "the sink stops here (on_bad_record = \"fail\")" : policy) << ": " << b.reason << '\n';
    }
  }
}

int run_tests(const std::vector<fs::path>& paths, const TestOptions& options, const config::EnvLookup& env,
              std::ostream& out) {
  TestTally tally;
  size_t files = 0;
  for (const auto& path : paths)
    for (const auto& file : fixture_files(path)) {
      ++files;
      run_fixture_file(file, options, env, out, tally);
    }
  if (files == 0) {
    out << "error: no fixture files (*.toml) in the paths given\n";
    return 2;
  }
  out << tally.passed + tally.failed << " test(s): " << tally.passed << " passed, " << tally.failed << " failed";
  if (tally.unusable) out << "; " << tally.unusable << " fixture file(s) could not be used";
  out << '\n';
  if (tally.unusable) return 2;
  return tally.failed ? 1 : 0;
}

}  // namespace picomq::authoring
