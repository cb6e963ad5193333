// The example files sink in the conformance suite (tests/conformance/README.md), built against
// the installed kit by picomq_add_conformance_test(): a fresh directory per test; every file's
// NDJSON lines read back as the records they carry, the file (without .ndjson) as destination.
#include <filesystem>
#include <map>
#include <picomq/kit/testing/conformance.hpp>
#include <string>
#include <vector>

namespace conformance = picomq::conformance;
namespace test = picomq::test;

namespace {

class FilesAdapter final : public conformance::SinkAdapter {
 public:
  std::string name() const override { return "example_files"; }
  std::string plugin() const override { return "libpicomq_connector_example_files_sink"; }
  conformance::Capabilities capabilities() const override {
    conformance::Capabilities c;
    c.deduplicates_replays = false;   // it appends: a replayed record is one more line
    c.destinations_per_topic = true;  // `file` is a template; a topic's file is opened on its first batch
    c.binary_keys = false;            // JSON lines: base64
    c.no_failure_injection =
        "the files sink writes to local files it keeps open, which a test cannot make fail and then work "
        "again (and as root, permissions do not stop a write)";
    c.no_rejection = "the files sink writes every record as a JSON line and refuses none";
    return c;
  }

  std::string prepare(const std::string&, const std::string& target) override {
    directory_ = test::make_temp_dir("picomq-conf-files");
    return "directory = \"" + directory_.string() + "\"\nfile = \"" + target + ".ndjson\"";
  }

  std::vector<conformance::WrittenRecord> read_back(const std::vector<test::Runtime*>&) override {
    std::vector<conformance::WrittenRecord> out;
    file_of_.clear();
    for (const auto& file : std::filesystem::directory_iterator(directory_)) {
      std::string destination = file.path().filename().string();
      if (destination.ends_with(".ndjson")) destination.resize(destination.size() - 7);
      file_of_[destination] = file.path().filename().string();
      for (const auto& line : test::read_lines(file.path()))
        out.push_back(conformance::from_envelope(nlohmann::json::parse(line), destination));
    }
    return out;
  }

  // Its file has a name the filesystem takes: one path segment of at most NAME_MAX (255) bytes.
  bool legal_destination(const std::string& name) const override {
    const auto file = file_of_.find(name);
    if (file == file_of_.end()) return false;
    const std::string& f = file->second;
    return !f.empty() && f.size() <= 255 && f.find('/') == std::string::npos && f.find('\0') == std::string::npos &&
           f != "." && f != "..";
  }

 private:
  std::filesystem::path directory_;
  std::map<std::string, std::string> file_of_;  // destination -> its file's name, from read_back()
};

PICOMQ_CONFORMANCE_ADAPTER(FilesAdapter);

}  // namespace
