#pragma once
// The integration harness of this tree: the installed one (picomq/kit/testing/harness.hpp: Kafka,
// the runtime as a process), where this build keeps the runtime, the plugins and the Kafka
// launcher, and helpers for this tree's test plugins (tests/plugins, testkit.cpp).
#include "picomq/kit/testing/harness.hpp"

namespace picomq::test {

// This build's runtime, plugin folder and tests/servers/kafka.sh (compile definitions of
// testkit.cpp only, so the tests' own sources compile alike in every clone); the environment
// overrides each (use_locations).
Locations tree_locations();

// main() of a test binary of this tree whose tests share one fresh Kafka broker.
inline int run_tests_with_kafka(int argc, char** argv) { return run_tests_with_kafka(argc, argv, tree_locations()); }

// What the testkit plugin wrote: ids "topic:partition:offset" and payloads, in write order.
struct TestkitLog {
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  static TestkitLog read(const std::filesystem::path& p);
};

struct TestkitCall {
  int64_t at_ms;
  int64_t call;
  std::string tp;
  int64_t first, last;
  size_t count;
  std::string status;
};
std::vector<TestkitCall> read_calls(const std::filesystem::path& p);

// [plugin_config] lines for the testkit plugin logging to <rt dir>/<name>.log and <name>.calls.
std::string testkit_config(const Runtime& rt, const std::string& name = "records", const std::string& extra = "");

// Definition text for the testkit plugin.
std::string testkit_definition(const std::string& key, const std::string& topics_block,
                               const std::string& plugin_config);

}  // namespace picomq::test
