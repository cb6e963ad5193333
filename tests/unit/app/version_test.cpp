// `picomq-connect --version`, and the plugin directory it names: the real binary, and a copy of
// it in a temp prefix laid out as the packages install it (bin/, lib/picomq-connect/plugins/).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "picomq/sink_abi.h"
#include "temp_dir.h"

namespace {

using picomq::config::testing::TempDir;
namespace fs = std::filesystem;

std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, out};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string line_of(const std::string& text, const std::string& name) {
  std::smatch m;
  return std::regex_search(text, m, std::regex("(^|\n)" + name + ": ([^\n]*)")) ? m[2].str() : "<none>";
}

TEST(Version, NamesTheVersionCommitBuildTypeAbiLibrdkafkaAndThePluginDirectory) {
  const auto [code, out] = run("'" + std::string(PICOMQ_CONNECT_BIN) + "' --version");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.substr(0, out.find('\n')), "picomq-connect " PICOMQ_EXPECTED_VERSION) << "the CMake project version";
  EXPECT_TRUE(std::regex_match(line_of(out, "commit"), std::regex("[0-9a-f]{12}(-dirty)?|unknown"))) << out;
  EXPECT_EQ(line_of(out, "build type"), PICOMQ_EXPECTED_BUILD_TYPE);
  EXPECT_EQ(line_of(out, "sink ABI"),
            std::to_string(PMQ_SINK_ABI_VERSION_MAJOR) + "." + std::to_string(PMQ_SINK_ABI_VERSION_MINOR));
  EXPECT_EQ(line_of(out, "librdkafka"), rd_kafka_version_str());
  const auto expected_dir =
      (fs::path(PICOMQ_CONNECT_BIN).parent_path() / ".." / "lib" / "picomq-connect" / "plugins").lexically_normal();
  EXPECT_EQ(line_of(out, "plugin directory"),
            expected_dir.string() + " (searched after the runtime config's [plugins] path)");
}

// Installed as the packages lay it out, the binary finds its plugins without a [plugins] path.
TEST(Version, AnInstalledBinaryFindsThePluginsInstalledBesideIt) {
  TempDir prefix;
  fs::create_directories(prefix.path() / "bin");
  fs::create_directories(prefix.path() / "lib/picomq-connect/plugins");
  fs::copy_file(PICOMQ_CONNECT_BIN, prefix.path() / "bin/picomq-connect");
  fs::copy_file(fs::path(PICOMQ_PLUGIN_DIR) / "libpicomq_connector_stdout_sink.so",
                prefix.path() / "lib/picomq-connect/plugins/libpicomq_connector_stdout_sink.so");
  prefix.write("runtime.toml", "[broker]\nbootstrap_servers = \"127.0.0.1:9\"\n[sinks]\ndir = \"sinks.d\"\n");
  fs::create_directories(prefix.path() / "sinks.d");
  prefix.write("sinks.d/out.toml",
               "type = \"sink\"\nkey = \"out\"\npath = \"libpicomq_connector_stdout_sink\"\n"
               "[[topics]]\ntopics = [\"orders\"]\n");
  const std::string bin = "'" + (prefix.path() / "bin/picomq-connect").string() + "'";
  const auto [version_code, version] = run(bin + " --version");
  EXPECT_EQ(line_of(version, "plugin directory"), (prefix.path() / "lib/picomq-connect/plugins").string() +
                                                      " (searched after the runtime config's [plugins] path)");
  const auto [code, out] = run(bin + " --config '" + (prefix.path() / "runtime.toml").string() + "' --check");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ok: " + (prefix.path() / "sinks.d/out.toml").string()), std::string::npos) << out;
}

}  // namespace
