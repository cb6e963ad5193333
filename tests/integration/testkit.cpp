// Helpers for this tree's test plugins: what the testkit plugins log, and definitions for them.
#include <sstream>

#include "harness.h"

namespace picomq::test {

Locations tree_locations() { return {PICOMQ_CONNECT_BIN, {PICOMQ_PLUGIN_DIR}, PICOMQ_KAFKA_SH}; }

TestkitLog TestkitLog::read(const std::filesystem::path& p) {
  TestkitLog log;
  for (const auto& line : read_lines(p)) {
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
