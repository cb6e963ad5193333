// A sink's start up to its open(): [plugin_config] is checked once — option table, then the
// plugin's validate() — with every problem positioned in the definition file, and the plugin
// opens on the options that passed. The lifecycle plugin (tests/plugins/lifecycle_sink.cpp)
// writes down each validate() and open() call.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "config/sink_definition.h"
#include "runtime/sink_runner.h"
#include "temp_dir.h"
#include "test_support.h"

namespace picomq::runtime {
namespace {

using config::testing::fake_env;
using config::testing::TempDir;

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class SinkStart : public ::testing::Test {
 protected:
  // Line 9 of the definition is `extra`: the positions below depend on it.
  config::SinkDefinition definition(const std::string& extra) {
    const std::string text =
        "type = \"sink\"\nkey = \"lc\"\npath = \"libpicomq_connector_lifecycle_sink\"\n"
        "[[topics]]\ntopics = [\"t\"]\n[plugin_config]\n"
        "events_path = \"" +
        events().string() +
        "\"\n"
        "validations_path = \"" +
        validations().string() + "\"\n" + extra + "\n";
    auto parsed = config::parse_sink_definition(text, "sinks.d/lc.toml", fake_env());
    EXPECT_TRUE(parsed.definition) << config::testing::dump(parsed.errors);
    return parsed.definition ? *parsed.definition : config::SinkDefinition{};
  }
  std::shared_ptr<PluginLibrary> lifecycle() {
    std::string error;
    auto library = PluginLibrary::load("libpicomq_connector_lifecycle_sink", {PICOMQ_PLUGIN_DIR}, error);
    EXPECT_TRUE(library) << error;
    return library;
  }
  std::filesystem::path events() const { return dir.path() / "events"; }
  std::filesystem::path validations() const { return dir.path() / "validations"; }

  TempDir dir;
};

TEST_F(SinkStart, PluginConfigIsValidatedOnceAndTheSinkOpensOnTheOptionsThatPassed) {
  std::string error;
  auto sink = open_sink_instance(definition("accumulate = true\nmax_held = 2"), lifecycle(), error);
  ASSERT_TRUE(sink) << error;
  EXPECT_EQ(lines_of(validations()), std::vector<std::string>{"validate"}) << "one check per start";
  EXPECT_EQ(lines_of(events()), std::vector<std::string>{"open lc"});
  sink->close();
}

TEST_F(SinkStart, AProblemFoundByTheSinksValidateIsPositionedAndNothingOpens) {
  std::string error;
  EXPECT_FALSE(open_sink_instance(definition("max_held = 3"), lifecycle(), error));
  EXPECT_EQ(error,
            "[plugin_config] does not fit the lifecycle sink:\n"
            "  max_held: needs accumulate = true (sinks.d/lc.toml:9:12)");
  EXPECT_EQ(lines_of(validations()), std::vector<std::string>{"validate"});
  EXPECT_FALSE(std::filesystem::exists(events())) << "open() was not called";
}

TEST_F(SinkStart, AnOptionTableProblemIsPositionedAndTheSinksValidateDoesNotRun) {
  std::string error;
  EXPECT_FALSE(open_sink_instance(definition("max_hled = 3"), lifecycle(), error));
  EXPECT_EQ(error,
            "[plugin_config] does not fit the lifecycle sink:\n"
            "  max_hled: unknown option for the lifecycle sink; did you mean 'max_held'? (known: events_path "
            "accumulate max_held validations_path) (sinks.d/lc.toml:9:1)");
  EXPECT_FALSE(std::filesystem::exists(validations())) << "validate() sees only options the table accepted";
  EXPECT_FALSE(std::filesystem::exists(events()));
}

}  // namespace
}  // namespace picomq::runtime
