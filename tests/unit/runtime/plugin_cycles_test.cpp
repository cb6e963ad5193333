// Plugin lifecycles, many times over: load -> open -> write (ok and failing outcomes) -> close
// -> unload, for every shipped plugin and every data plane (rows, batches, arrow), plus open
// failures and the refused test variants. Each cycle checks what a caller can observe (statuses,
// rejections, what the plugin wrote or logged, that dlclose unmapped the library), so the test
// fails on behaviour, not only on crashes. scripts/sanitize.sh runs it under ASan+LSan and UBSan,
// where the repetition turns a per-cycle leak, double release or use after dlclose into a report.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/sink_definition.h"
#include "decoders/payload_decoder.h"
#include "picomq/kit/arrow_export.hpp"
#include "runtime/plugin_host/sink_instance.h"

// From <sanitizer/common_interface_defs.h>; null when no sanitizer runtime is linked. Its name is
// the sanitizer runtime's, and it takes the descriptor as a pointer.
extern "C" void __sanitizer_set_report_fd(void* fd)  // NOLINT(bugprone-reserved-identifier)
    __attribute__((weak));

namespace picomq::runtime {
namespace {

namespace fs = std::filesystem;

constexpr int kCycles = 50;
const std::vector<fs::path> kSearchPath{PICOMQ_PLUGIN_DIR};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "picomq-plugin-cycles-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path file(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// The lines of a file (the file is removed, so the next cycle starts empty).
std::vector<std::string> take_lines(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file, std::ios::binary);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::error_code ec;
  fs::remove(file, ec);
  return lines;
}

std::string take_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove(file, ec);
  return text;
}

// Whether the dynamic loader still has the library mapped (RTLD_NOLOAD loads nothing).
bool is_loaded(const fs::path& so) {
  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle) ::dlclose(handle);
  return handle != nullptr;
}

// Whether the library defines STB_GNU_UNIQUE symbols (GCC emits them for static locals of inline
// templates with default visibility, e.g. libstdc++'s std::to_string digit table, whatever
// -fvisibility says). glibc marks the first loaded library that defines such a symbol NODELETE,
// so which plugin stays mapped depends on load order; -fno-gnu-unique avoids it.
bool defines_gnu_unique_symbols(const fs::path& so) {
  static std::map<std::string, bool> cache;
  if (auto it = cache.find(so.string()); it != cache.end()) return it->second;
  std::ifstream in(so, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto read = [&](size_t offset, auto& out) {
    if (offset > image.size() || image.size() - offset < sizeof out) return false;
    std::memcpy(&out, image.data() + offset, sizeof out);
    return true;
  };
  bool found = false;
  Elf64_Ehdr eh;
  if (read(0, eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64) {
    for (size_t i = 0; i < eh.e_shnum && !found; ++i) {
      Elf64_Shdr sh;
      if (!read(eh.e_shoff + i * eh.e_shentsize, sh) || sh.sh_type != SHT_DYNSYM) continue;
      Elf64_Sym sym;
      for (size_t at = sh.sh_offset; at < sh.sh_offset + sh.sh_size && read(at, sym) && !found; at += sizeof sym)
        found = ELF64_ST_BIND(sym.st_info) == STB_GNU_UNIQUE && sym.st_shndx != SHN_UNDEF;
    }
  }
  cache[so.string()] = found;
  return found;
}

// After the host dropped its last reference (and dlclose ran): the library is unmapped. A
// plugin that defines STB_GNU_UNIQUE symbols would be pinned by glibc; the SDK target builds
// plugins with -fno-gnu-unique, so none may.
void expect_unloaded(const fs::path& so) {
  EXPECT_FALSE(defines_gnu_unique_symbols(so)) << so << " defines STB_GNU_UNIQUE symbols (glibc would never unload it)";
  EXPECT_FALSE(is_loaded(so)) << so << " is still mapped after the last reference went (dlclose did not unload it)";
}

std::string json_string(const fs::path& p) { return "\"" + p.string() + "\""; }

// ---------------------------------------------------------------- batches

struct Message {
  int64_t offset;
  int64_t timestamp_ms;
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;  // nullopt: null value
  std::optional<std::string> payload;                                       // nullopt: tombstone
  std::string arrow_render;  // what testkit_arrow logs for it (its payload columns)
};

// A batch built the way BatchPreparer::prepare builds one: the payload decoded by the schema's
// decoder, key and payload viewing the "broker" message, every record's headers in one vector,
// exported as Arrow with `arrow` for an arrow-plane sink (every record must fit: the preparer
// sorts out the others, BatchPreparer's tests). Not movable: the records point into it.
class TestBatch {
 public:
  TestBatch(std::string topic, int32_t partition, config::Schema schema, std::vector<Message> messages,
            const arrow::ExportOptions& arrow = {})
      : messages_(std::move(messages)) {
    batch_.tp = {std::move(topic), partition};
    batch_.schema = std::string(config::to_string(schema));
    auto decoder = decoders::make_decoder(schema);
    batch_.format = decoder->format();
    std::vector<std::pair<size_t, size_t>> header_ranges;
    for (const Message& m : messages_) {
      pmq_record r{};
      r.offset = m.offset;
      r.timestamp_ms = m.timestamp_ms;
      r.key = m.key ? pmq_bytes{bytes(*m.key), m.key->size()} : pmq_bytes{nullptr, 0};
      const size_t first = batch_.headers.size();
      for (const auto& [name, value] : m.headers)
        batch_.headers.push_back(
            {{bytes(name), name.size()}, value ? pmq_bytes{bytes(*value), value->size()} : pmq_bytes{nullptr, 0}});
      header_ranges.emplace_back(first, batch_.headers.size() - first);
      if (m.payload) {
        std::string error;
        if (!decoder->decode({bytes(*m.payload), m.payload->size()}, r.payload, batch_.owned, error))
          throw std::invalid_argument("test payload does not decode: " + error);
      }
      batch_.records.push_back(r);
    }
    for (size_t i = 0; i < batch_.records.size(); ++i) {
      batch_.records[i].headers = header_ranges[i].second ? batch_.headers.data() + header_ranges[i].first : nullptr;
      batch_.records[i].header_count = header_ranges[i].second;
    }
    if (batch_.records.empty()) return;
    auto held = std::make_unique<arrow::HeldExport>();
    held->result = arrow::export_batch(batch_.abi_view(), arrow, &held->schema, &held->array);
    if (!held->result.ok) throw std::invalid_argument("test batch does not export as Arrow: " + held->result.error);
    batch_.arrow_export = std::move(held);
  }
  TestBatch(const TestBatch&) = delete;
  TestBatch& operator=(const TestBatch&) = delete;

  const DecodedBatch& get() const { return batch_; }
  const std::vector<Message>& messages() const { return messages_; }
  const std::string& topic() const { return batch_.tp.topic; }
  int32_t partition() const { return batch_.tp.partition; }
  std::string id(size_t i) const {
    return topic() + ":" + std::to_string(partition()) + ":" + std::to_string(messages_[i].offset);
  }

 private:
  static const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }
  std::vector<Message> messages_;
  DecodedBatch batch_;
};

// JSON records with every shape of key and header: a key, no key, an empty key; a null header
// value, a repeated header, a binary header value; a tombstone; a nested field in one record.
std::unique_ptr<TestBatch> json_batch() {
  return std::make_unique<TestBatch>("orders", 3, config::Schema::Json,
                                     std::vector<Message>{
                                         {100,
                                          1700000000100,
                                          "k100",
                                          {{"trace", "t-100"}, {"nullh", std::nullopt}},
                                          R"({"id":100,"name":"a","ok":true,"amount":100.25})",
                                          "id=100 name=a ok=true amount=100.250000 extra=null"},
                                         {101,
                                          1700000000101,
                                          std::nullopt,
                                          {},
                                          R"({"id":101,"name":"b\u00e9","ok":false,"amount":7})",
                                          "id=101 name=b\xc3\xa9 ok=false amount=7.000000 extra=null"},
                                         {102,
                                          1700000000102,
                                          "",
                                          {{"dup", "1"}, {"dup", "2"}},
                                          R"({"id":102,"name":"c","ok":true,"amount":-1.5})",
                                          "id=102 name=c ok=true amount=-1.500000 extra=null"},
                                         {103,
                                          1700000000103,
                                          "k103",
                                          {{"trace", "t-103"}},
                                          std::nullopt,
                                          "id=null name=null ok=null amount=null extra=null"},
                                         {104,
                                          -1,
                                          "k104",
                                          {{"bin", std::string("\x00\xff", 2)}},
                                          R"({"id":104,"name":"e","ok":true,"amount":0.5,"extra":{"n":[1,2]}})",
                                          R"(id=104 name=e ok=true amount=0.500000 extra={"n":[1,2]})"},
                                     });
}

std::unique_ptr<TestBatch> text_batch() {
  return std::make_unique<TestBatch>("logs", 0, config::Schema::Text,
                                     std::vector<Message>{
                                         {0, 1, std::nullopt, {}, "hello", "payload=hello"},
                                         {1, 2, "k", {{"h", std::nullopt}}, "h\xc3\xa9llo", "payload=h\xc3\xa9llo"},
                                         {2, 3, std::nullopt, {}, "", "payload="},
                                     });
}

std::unique_ptr<TestBatch> raw_batch() {
  return std::make_unique<TestBatch>("bin", 1, config::Schema::Raw,
                                     std::vector<Message>{
                                         {7, 1, std::nullopt, {}, std::string("\x00\x01", 2), "payload=<z>"},
                                         {8, 2, std::nullopt, {}, "\xff\xfe", "payload=<z>"},
                                         {9, 3, "raw-key", {}, "abc", "payload=<z>"},
                                     });
}

arrow::ExportOptions declared_schema() {
  arrow::ExportOptions options;
  options.declared = std::vector<arrow::DeclaredColumn>{{"id", arrow::ColumnType::Int64, false},
                                                        {"name", arrow::ColumnType::Utf8, true}};
  return options;
}

// Records that fit the declared Arrow schema above: an undeclared field is dropped, a missing
// nullable one is null.
std::unique_ptr<TestBatch> declared_ok_batch() {
  return std::make_unique<TestBatch>(
      "orders", 3, config::Schema::Json,
      std::vector<Message>{
          {200, 1, std::nullopt, {}, R"({"id":200,"name":"x","dropped":1})", "id=200 name=x"},
          {201, 2, std::nullopt, {}, R"({"id":201})", "id=201 name=null"},
      },
      declared_schema());
}

// The testkit's log lines for a batch: "topic:partition:offset<TAB>payload" (the rendered
// payload columns on the arrow plane), leaving out record `skip`.
std::vector<std::string> testkit_lines(const TestBatch& b, bool arrow, size_t skip = SIZE_MAX) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < b.messages().size(); ++i) {
    if (i == skip) continue;
    const auto& m = b.messages()[i];
    lines.push_back(b.id(i) + "\t" + (arrow ? m.arrow_render : m.payload.value_or("")));
  }
  return lines;
}

std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::unique_ptr<SinkInstance> open_sink(const std::shared_ptr<PluginLibrary>& library, const std::string& config) {
  std::string error;
  auto sink = SinkInstance::open(library, "cycles", config, error);
  EXPECT_TRUE(sink) << error;
  return sink;
}

void expect_status(const WriteOutcome& out, pmq_write_status status, const std::string& what) {
  EXPECT_EQ(out.status, status) << what << ": got '" << to_string(out.status) << "' (" << out.message << ")";
}

// Loads `path_name`, runs `body` with the library, drops the last reference and checks that the
// library was unmapped.
template <class Body>
void with_library(const std::string& path_name, Body&& body) {
  std::string error;
  auto library = PluginLibrary::load(path_name, kSearchPath, error);
  ASSERT_TRUE(library) << error;
  const fs::path file = library->file();
  body(library);
  ASSERT_EQ(library.use_count(), 1) << "a sink still holds the library";
  library.reset();
  expect_unloaded(file);
}

// Captures what a plugin prints on stderr (fd 2) into a file; a sanitizer report printed meanwhile
// still goes to the real stderr.
class StderrCapture {
 public:
  explicit StderrCapture(const fs::path& file) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
    if (__sanitizer_set_report_fd)
      __sanitizer_set_report_fd(
          reinterpret_cast<void*>(static_cast<intptr_t>(saved_)));  // NOLINT(performance-no-int-to-ptr)
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    if (__sanitizer_set_report_fd)
      __sanitizer_set_report_fd(reinterpret_cast<void*>(intptr_t{2}));  // NOLINT(performance-no-int-to-ptr)
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

 private:
  int saved_ = -1;
};

// Captures the runtime's log (what plugins send through host->log).
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("plugin-cycles", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream stream_;
};

// ---------------------------------------------------------------- testkit, every plane

void testkit_cycle(const std::shared_ptr<PluginLibrary>& library, uint32_t plane, const TempDir& dir) {
  ASSERT_EQ(library->planes().best_plane, plane) << library->file();
  const bool arrow = plane == PMQ_PLANE_ARROW, rows = plane == PMQ_PLANE_ROWS;
  const auto json = json_batch(), text = text_batch(), raw = raw_batch();
  const fs::path log = dir.file("testkit.log"), calls = dir.file("calls.log");
  const std::string log_path = "\"log_path\":" + json_string(log);

  {  // Everything written: JSON, text and raw batches (and, on arrow, a declared schema).
    auto sink = open_sink(library, "{" + log_path + ",\"calls_path\":" + json_string(calls) + "}");
    ASSERT_TRUE(sink);
    expect_status(sink->write(json->get()), PMQ_WRITE_OK, "json");
    expect_status(sink->write(text->get()), PMQ_WRITE_OK, "text");
    expect_status(sink->write(raw->get()), PMQ_WRITE_OK, "raw");
    std::vector<std::string> expected =
        concat({testkit_lines(*json, arrow), testkit_lines(*text, arrow), testkit_lines(*raw, arrow)});
    size_t expected_calls = rows ? expected.size() : 3;
    if (arrow) {
      // A batch exported with declared columns (the records they cannot hold never reach a sink:
      // the preparer sorts them out, BatchPreparer.ArrowExport* tests).
      const auto fits = declared_ok_batch();
      expect_status(sink->write(fits->get()), PMQ_WRITE_OK, "declared schema");
      expected = concat({expected, testkit_lines(*fits, true)});
      expected_calls += 1;
    }
    sink->close();
    auto closed = sink->write(json->get());
    expect_status(closed, PMQ_WRITE_FATAL, "write after close");
    EXPECT_EQ(closed.message, "the sink is closed");
    EXPECT_EQ(take_lines(log), expected);
    const auto call_lines = take_lines(calls);
    EXPECT_EQ(call_lines.size(), expected_calls);
    for (const auto& line : call_lines) EXPECT_TRUE(line.ends_with(" ok")) << line;
  }

  {  // A retryable failure writes nothing; the retry writes the batch once.
    auto sink = open_sink(library, "{" + log_path + ",\"fail_times\":1,\"fail_status\":\"retry\"}");
    ASSERT_TRUE(sink);
    auto failed = sink->write(json->get());
    expect_status(failed, PMQ_WRITE_RETRY, "retry");
    EXPECT_EQ(failed.message, "testkit injected failure");
    EXPECT_EQ(failed.written, 0u);
    expect_status(sink->write(json->get()), PMQ_WRITE_OK, "the retry");
    sink->close();
    EXPECT_EQ(take_lines(log), testkit_lines(*json, arrow));
  }

  {  // A partial failure at offset 102: one call on batches/arrow, the third call on rows.
    auto sink =
        open_sink(library, "{" + log_path + ",\"fail_times\":1,\"fail_status\":\"partial\",\"fail_offset\":102}");
    ASSERT_TRUE(sink);
    auto failed = sink->write(json->get());
    expect_status(failed, PMQ_WRITE_PARTIAL, "partial");
    EXPECT_EQ(failed.message, "testkit injected failure");
    const auto all = testkit_lines(*json, arrow);
    if (rows) {
      EXPECT_EQ(failed.written, 2u) << "rows plane: the records before the failing one are written";
      EXPECT_EQ(take_lines(log), std::vector<std::string>(all.begin(), all.begin() + 2));
    } else {
      EXPECT_EQ(failed.written, 0u);
      EXPECT_EQ(take_lines(log), std::vector<std::string>{});
    }
  }  // closed by the destructor

  {  // A permanent failure.
    auto sink = open_sink(library, "{" + log_path + ",\"fail_times\":1,\"fail_status\":\"fatal\"}");
    ASSERT_TRUE(sink);
    auto failed = sink->write(raw->get());
    expect_status(failed, PMQ_WRITE_FATAL, "fatal");
    EXPECT_EQ(failed.message, "testkit injected failure");
    sink->close();
    EXPECT_EQ(take_lines(log), std::vector<std::string>{});
  }

  {  // One record rejected, the rest written.
    auto sink = open_sink(
        library,
        "{" + log_path + ",\"fail_times\":1,\"fail_status\":\"reject\",\"fail_offset\":101,\"reject_offset\":101}");
    ASSERT_TRUE(sink);
    auto out = sink->write(json->get());
    expect_status(out, PMQ_WRITE_REJECTED, "reject");
    EXPECT_EQ(out.rejections, (std::vector<std::pair<size_t, std::string>>{{1, "testkit rejects this offset"}}));
    sink->close();
    EXPECT_EQ(take_lines(log), testkit_lines(*json, arrow, /*skip=*/1));
  }

  {  // Refused opens: by the plugin (open() throws) and by the host (an unknown option).
    std::string error;
    EXPECT_FALSE(SinkInstance::open(library, "cycles", "{" + log_path + ",\"open_error\":\"no database\"}", error));
    EXPECT_NE(error.find("failed to open: no database"), std::string::npos) << error;
    error.clear();
    EXPECT_FALSE(SinkInstance::open(library, "cycles", "{" + log_path + ",\"fail_tims\":1}", error));
    EXPECT_NE(error.find("fail_tims"), std::string::npos) << error;
    EXPECT_FALSE(fs::exists(log)) << "a refused open writes nothing";
  }
}

void run_testkit(const std::string& path_name, uint32_t plane) {
  TempDir dir;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    with_library(path_name, [&](const std::shared_ptr<PluginLibrary>& library) { testkit_cycle(library, plane, dir); });
    if (::testing::Test::HasFailure()) return;  // one cycle's failures are enough
  }
}

TEST(PluginCycles, TestkitOnTheBatchesPlane) { run_testkit("libpicomq_connector_testkit_sink", PMQ_PLANE_BATCHES); }
TEST(PluginCycles, TestkitOnTheRowsPlane) { run_testkit("libpicomq_connector_testkit_rows_sink", PMQ_PLANE_ROWS); }
TEST(PluginCycles, TestkitOnTheArrowPlane) { run_testkit("libpicomq_connector_testkit_arrow_sink", PMQ_PLANE_ARROW); }

// ABI 2.5 set_plane: an instance whose plane depends on its configuration takes its batches on
// the native plane it names at open(), not the best one; a plane it does not declare native
// fails the open.
TEST(PluginCycles, AnInstanceTakesItsBatchesOnTheNativePlaneItChoseAtOpen) {
  TempDir dir;
  const auto json = json_batch();
  const fs::path log = dir.file("testkit.log");
  const std::string log_path = "\"log_path\":" + json_string(log);
  with_library("libpicomq_connector_testkit_arrow_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
    ASSERT_EQ(library->planes().best_plane, PMQ_PLANE_ARROW);
    for (const auto& [name, plane] : {std::pair{"batches", PMQ_PLANE_BATCHES}, std::pair{"rows", PMQ_PLANE_ROWS}}) {
      SCOPED_TRACE(name);
      auto sink = open_sink(library, "{" + log_path + ",\"plane\":\"" + name + "\"}");
      ASSERT_TRUE(sink);
      EXPECT_EQ(sink->plane(), uint32_t(plane));
      expect_status(sink->write(json->get()), PMQ_WRITE_OK, name);
      sink->close();
      EXPECT_EQ(take_lines(log), testkit_lines(*json, /*arrow=*/false)) << "payloads as they are, not Arrow columns";
    }
  });
  with_library("libpicomq_connector_testkit_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
    std::string error;
    EXPECT_FALSE(SinkInstance::open(library, "cycles", "{" + log_path + ",\"plane\":\"arrow\"}", error));
    EXPECT_NE(error.find("chose the data plane 4 (arrow) with set_plane(), which is not one of its native planes"),
              std::string::npos)
        << error;
  });
}

// ---------------------------------------------------------------- the shipped and example sinks

// A JSON batch only the stdout sink gets: line breaks in a payload's whitespace.
std::unique_ptr<TestBatch> multiline_batch() {
  return std::make_unique<TestBatch>("orders", 3, config::Schema::Json,
                                     std::vector<Message>{{105, 5, std::nullopt, {}, "{\n  \"a\": 1\r\n}", ""}});
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The stdout sink on stderr, in its three shapes: metadata lines (cycle % 3 == 0), bare payloads
// (the zero-copy writev path), pretty JSON.
TEST(PluginCycles, StdoutSinkOnStderr) {
  TempDir dir;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    const int mode = cycle % 3;
    const fs::path captured = dir.file("stderr.txt");
    with_library("libpicomq_connector_stdout_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
      EXPECT_EQ(library->planes().best_plane, uint32_t(PMQ_PLANE_BATCHES));
      const auto json = json_batch(), text = text_batch(), raw = raw_batch(), multiline = multiline_batch();
      const std::string config = mode == 0   ? R"({"stream":"stderr"})"
                                 : mode == 1 ? R"({"stream":"stderr","include_metadata":false})"
                                             : R"({"stream":"stderr","pretty":true})";
      std::vector<WriteOutcome> outcomes;
      {
        StderrCapture capture(captured);
        auto sink = open_sink(library, config);
        if (!sink) return;
        for (const TestBatch* b : {json.get(), text.get(), raw.get(), multiline.get()})
          outcomes.push_back(sink->write(b->get()));
        sink->close();
      }
      for (const auto& out : outcomes) expect_status(out, PMQ_WRITE_OK, "stdout write");
    });
    const std::string out = take_text(captured);
    if (mode == 0) {
      std::istringstream in(out);
      std::vector<std::string> got;
      for (std::string line; std::getline(in, line);) got.push_back(line);
      ASSERT_EQ(got.size(), 12u) << out;
      EXPECT_EQ(got[0], R"({"pico_topic":"orders","pico_partition":3,"pico_offset":100,"pico_timestamp":1700000000100,)"
                        R"("pico_key":"azEwMA==","pico_headers":{"trace":"t-100","nullh":null},)"
                        R"("payload":{"id":100,"name":"a","ok":true,"amount":100.25}})");
      EXPECT_NE(got[1].find(R"("pico_offset":101,"pico_timestamp":1700000000101,"payload":)"), std::string::npos)
          << got[1];
      EXPECT_NE(got[2].find(R"("pico_key":"","pico_headers":{"dup":["1","2"]})"), std::string::npos) << got[2];
      EXPECT_TRUE(got[3].ends_with(R"("payload":null})")) << got[3];
      EXPECT_NE(got[4].find(R"("pico_timestamp":-1,"pico_key":"azEwNA==","pico_headers":{"bin":"AP8="})"),
                std::string::npos)
          << got[4];
      EXPECT_TRUE(got[6].ends_with("\"payload\":\"h\xc3\xa9llo\"}")) << got[6];
      EXPECT_TRUE(got[8].ends_with(R"("payload":"AAE="})")) << got[8];
      EXPECT_TRUE(got[11].ends_with("\"payload\":{   \"a\": 1  }}")) << got[11];
    } else if (mode == 1) {
      EXPECT_EQ(out,
                "{\"id\":100,\"name\":\"a\",\"ok\":true,\"amount\":100.25}\n"
                "{\"id\":101,\"name\":\"b\\u00e9\",\"ok\":false,\"amount\":7}\n"
                "{\"id\":102,\"name\":\"c\",\"ok\":true,\"amount\":-1.5}\n"
                "null\n"
                "{\"id\":104,\"name\":\"e\",\"ok\":true,\"amount\":0.5,\"extra\":{\"n\":[1,2]}}\n"
                "\"hello\"\n\"h\xc3\xa9llo\"\n\"\"\n"
                "\"AAE=\"\n\"//4=\"\n\"YWJj\"\n"
                "{   \"a\": 1  }\n");
    } else {
      EXPECT_EQ(count(out, "\"pico_offset\": "), 12u) << out;
      EXPECT_EQ(count(out, "\n}\n"), 12u) << "one indented object per record";
      EXPECT_EQ(count(out, "\"nullh\": null"), 1u) << out;
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// A sink whose open() cannot open its file: refused, and nothing leaks.
void expect_refused_open(const std::shared_ptr<PluginLibrary>& library, const TempDir& dir,
                         const std::string& extra = "") {
  std::string error;
  const fs::path nowhere = dir.file("no-such-dir") / "out";
  EXPECT_FALSE(SinkInstance::open(library, "cycles", "{\"path\":" + json_string(nowhere) + extra + "}", error));
  EXPECT_NE(error.find("failed to open: cannot open " + nowhere.string()), std::string::npos) << error;
}

TEST(PluginCycles, ExampleJsonlSinkOnTheRowsPlane) {
  TempDir dir;
  const fs::path file = dir.file("out.jsonl");
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    with_library("libpicomq_connector_example_jsonl_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
      EXPECT_EQ(library->planes().best_plane, uint32_t(PMQ_PLANE_ROWS));
      const auto json = json_batch(), text = text_batch(), raw = raw_batch();
      auto sink = open_sink(library, "{\"path\":" + json_string(file) + "}");
      ASSERT_TRUE(sink);
      std::vector<std::string> expected;
      for (const TestBatch* b : {json.get(), text.get(), raw.get()}) {
        expect_status(sink->write(b->get()), PMQ_WRITE_OK, "jsonl write");
        for (size_t i = 0; i < b->messages().size(); ++i) {
          const auto& m = b->messages()[i];
          const bool embedded = b == json.get() && m.payload;  // other formats: null
          expected.push_back("{\"id\":\"" + b->id(i) + "\",\"payload\":" + (embedded ? *m.payload : "null") + "}");
        }
      }
      sink.reset();  // closes
      EXPECT_EQ(take_lines(file), expected);
      expect_refused_open(library, dir);
    });
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PluginCycles, ExampleFsyncBatchSinkOnTheBatchesPlane) {
  TempDir dir;
  const fs::path file = dir.file("out.log");
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    with_library("libpicomq_connector_example_fsync_batch_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
      EXPECT_EQ(library->planes().best_plane, uint32_t(PMQ_PLANE_BATCHES));
      const auto json = json_batch(), text = text_batch(), raw = raw_batch();
      // fsync once in a while: it is the slow part, and it only differs in the syscall.
      auto sink = open_sink(
          library, "{\"path\":" + json_string(file) + ",\"fsync\":" + (cycle % 10 == 0 ? "true" : "false") + "}");
      ASSERT_TRUE(sink);
      for (const TestBatch* b : {json.get(), text.get(), raw.get()})
        expect_status(sink->write(b->get()), PMQ_WRITE_OK, "fsync_batch write");
      sink->close();
      EXPECT_EQ(take_lines(file),
                concat({testkit_lines(*json, false), testkit_lines(*text, false), testkit_lines(*raw, false)}));
      expect_refused_open(library, dir);
    });
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PluginCycles, ExampleCSinkOnTheBatchesPlane) {
  TempDir dir;
  const fs::path file = dir.file("out.txt");
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    const bool with_payload = cycle % 2 == 0;
    LogCapture logs;
    with_library("libpicomq_connector_example_c_sink", [&](const std::shared_ptr<PluginLibrary>& library) {
      EXPECT_EQ(library->planes().best_plane, uint32_t(PMQ_PLANE_BATCHES));
      const auto json = json_batch(), text = text_batch(), raw = raw_batch();
      auto sink = open_sink(
          library, "{\"path\":" + json_string(file) + ",\"with_payload\":" + (with_payload ? "true" : "false") + "}");
      ASSERT_TRUE(sink);
      std::vector<std::string> expected;
      for (const TestBatch* b : {json.get(), text.get(), raw.get()}) {
        expect_status(sink->write(b->get()), PMQ_WRITE_OK, "c sink write");
        for (size_t i = 0; i < b->messages().size(); ++i) {
          const auto& payload = b->messages()[i].payload;
          expected.push_back(b->id(i) + (with_payload ? "\t" + std::to_string(payload ? payload->size() : 0) : ""));
        }
      }
      sink->close();
      EXPECT_EQ(take_lines(file), expected);
      expect_refused_open(library, dir, ",\"with_payload\":true");
    });
    EXPECT_NE(logs.text().find("info sink 'cycles': c sink closing after 11 records"), std::string::npos)
        << logs.text();
    if (::testing::Test::HasFailure()) return;
  }
}

// ---------------------------------------------------------------- refused variants

TEST(PluginCycles, RefusedVariantsAreUnloadedEveryTime) {
  const fs::path dir(PICOMQ_PLUGIN_DIR);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    std::string error;
    EXPECT_FALSE(PluginLibrary::load("libpicomq_connector_testkit_future_abi_sink", kSearchPath, error));
    EXPECT_NE(error.find("refused: the plugin was built for sink ABI 3.0"), std::string::npos) << error;
    expect_unloaded(dir / "libpicomq_connector_testkit_future_abi_sink.so");
    error.clear();
    EXPECT_FALSE(PluginLibrary::load("libpicomq_connector_testkit_bad_native_sink", kSearchPath, error));
    EXPECT_NE(error.find("declares native data plane 'arrow' but does not implement write_arrow"), std::string::npos)
        << error;
    expect_unloaded(dir / "libpicomq_connector_testkit_bad_native_sink.so");
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace picomq::runtime
