// The Rust example sink (examples/sinks/rust_sink, on sdk/rust) in the conformance suite: it
// appends one JSON line per record (the envelope layout) to <directory>/<file>, read back here.
// Failures a test can cause: the directory renamed away (retried until it is back), the file
// being a directory (fatal); `required_field` makes it refuse a record.
#include <filesystem>

#include "conformance.h"

namespace picomq::conformance {
namespace {

namespace fs = std::filesystem;

class ExampleRustAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "example_rust"; }
  std::string plugin() const override { return "libpicomq_connector_example_rust_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = false;  // an append-only file cannot take a line back
    c.destinations_per_topic = false;
    c.binary_keys = false;  // JSON: base64
    return c;
  }
  std::string prepare(const std::string& test_name, const std::string&) override {
    dir_ = test::make_temp_dir("example_rust");  // test names have characters mkdtemp refuses
    (void)test_name;
    // The permanent failure's target: a folder where the file would be.
    fs::create_directories(dir_ / "blocked");
    return "directory = \"" + dir_.string() + "\"\nbuffer_records = 7";
  }
  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    if (!fs::exists(dir_ / "records.jsonl")) return out;
    for (const auto& line : test::read_lines(dir_ / "records.jsonl"))
      out.push_back(from_envelope(nlohmann::json::parse(line), "records.jsonl"));
    return out;
  }
  bool legal_destination(const std::string& name) const override { return name == "records.jsonl"; }

  void inject_transient_failure(bool on) override {
    const fs::path away = dir_.string() + ".away";
    if (on) fs::rename(dir_, away);
    else fs::rename(away, dir_);
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"file = \"blocked\"", "Is a directory"};
  }
  std::string rejecting_config() const override { return "required_field = \"n\""; }
  std::string rejected_payload() const override { return "{\"m\": 1}"; }

 private:
  fs::path dir_;
};

PICOMQ_CONFORMANCE_ADAPTER(ExampleRustAdapter);

}  // namespace
}  // namespace picomq::conformance
