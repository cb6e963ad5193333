// Helpers for this tree's test plugins: what the testkit plugins log, and definitions for them.
#include <fstream>
#include <iterator>
#include <sstream>

#include "harness.h"

namespace picomq::test {

Locations tree_locations() { return {PICOMQ_CONNECT_BIN, {PICOMQ_PLUGIN_DIR}, PICOMQ_KAFKA_SH}; }

TestkitLog TestkitLog::read(const std::filesystem::path& p) {
  TestkitLog log;
  std::ifstream in(p, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A process killed with SIGKILL inside the plugin's write() can leave a torn last line (the
  // kernel stops a large write at a page boundary). That call never returned, so its records
  // were not written as far as the runtime knows: only newline-terminated lines count.
  text.erase(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    auto tab = line.find('\t');
    log.ids.push_back(line.substr(0, tab));
    log.payloads.push_back(tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return log;
}

std::vector<TestkitCall> read_calls(const std::filesystem::path& p) {
  std::vector<TestkitCall> calls;
  for (const auto& line : read_lines(p)) {
    TestkitCall c;
    std::istringstream in(line);
    std::string range;
    in >> c.at_ms >> c.call >> c.tp >> range >> c.count >> c.status;
    auto dots = range.find("..");
    c.first = std::stoll(range.substr(0, dots));
    c.last = std::stoll(range.substr(dots + 2));
    calls.push_back(c);
  }
  return calls;
}

std::string testkit_config(const Runtime& rt, const std::string& name, const std::string& extra) {
  return "log_path = \"" + (rt.dir() / (name + ".log")).string() + "\"\ncalls_path = \"" +
         (rt.dir() / (name + ".calls")).string() + "\"\n" + extra;
}

std::string testkit_definition(const std::string& key, const std::string& topics_block,
                               const std::string& plugin_config) {
  return plugin_definition(key, "libpicomq_connector_testkit_sink", topics_block, plugin_config);
}

}  // namespace picomq::test
