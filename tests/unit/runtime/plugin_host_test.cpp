// Loading plugins: the search path, ABI version checks and refusals with a clear reason.
#include "runtime/plugin_host.h"

#include <gtest/gtest.h>

namespace picomq::runtime {
namespace {

pmq_sink_plugin valid_descriptor() {
  pmq_sink_plugin d{};
  d.struct_size = sizeof d;
  d.abi_version = PMQ_SINK_ABI_VERSION;
  d.name = "t";
  d.version = "1";
  d.open = [](const pmq_host_api*, const char*, char*, size_t) -> void* { return nullptr; };
  d.write_batch = [](void*, const pmq_batch*, pmq_write_result*) { return PMQ_WRITE_OK; };
  d.close = [](void*) {};
  return d;
}

TEST(PluginHost, AcceptsSameMajorAndOlderMinor) {
  auto d = valid_descriptor();
  EXPECT_EQ(check_plugin_descriptor(&d), "");
}

TEST(PluginHost, RefusesOtherMajorOrNewerMinor) {
  auto d = valid_descriptor();
  d.abi_version = (PMQ_SINK_ABI_VERSION_MAJOR + 1) << 16;
  EXPECT_NE(check_plugin_descriptor(&d).find("built for sink ABI 2.0"), std::string::npos) << check_plugin_descriptor(&d);
  d.abi_version = PMQ_SINK_ABI_VERSION + 1;
  EXPECT_NE(check_plugin_descriptor(&d).find("built for sink ABI 1.1"), std::string::npos);
}

TEST(PluginHost, RefusesIncompleteDescriptors) {
  EXPECT_NE(check_plugin_descriptor(nullptr), "");
  auto d = valid_descriptor();
  d.struct_size = 8;
  EXPECT_NE(check_plugin_descriptor(&d).find("too small"), std::string::npos);
  d = valid_descriptor();
  d.write_batch = nullptr;
  EXPECT_NE(check_plugin_descriptor(&d).find("lacks"), std::string::npos);
}

TEST(PluginHost, LoadsFromTheSearchPathAndNamesWhatItTried) {
  std::string error;
  auto lib = PluginLibrary::load("libpicomq_connector_stdout_sink", {"/nonexistent", PICOMQ_PLUGIN_DIR}, error);
  ASSERT_TRUE(lib) << error;
  EXPECT_STREQ(lib->descriptor().name, "stdout");

  auto missing = PluginLibrary::load("libpicomq_connector_nope_sink", {"/nonexistent", PICOMQ_PLUGIN_DIR}, error);
  EXPECT_FALSE(missing);
  EXPECT_NE(error.find("/nonexistent/libpicomq_connector_nope_sink.so"), std::string::npos) << error;
  EXPECT_NE(error.find("not found"), std::string::npos) << error;

  auto future = PluginLibrary::load("libpicomq_connector_testkit_future_abi_sink", {PICOMQ_PLUGIN_DIR}, error);
  EXPECT_FALSE(future);
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
  EXPECT_NE(error.find("built for sink ABI 2.0"), std::string::npos) << error;
}

TEST(PluginHost, OpenFailureCarriesThePluginsMessage) {
  std::string error;
  auto lib = PluginLibrary::load("libpicomq_connector_stdout_sink", {PICOMQ_PLUGIN_DIR}, error);
  ASSERT_TRUE(lib);
  auto sink = SinkPlugin::open(lib, "k", R"({"strem":"stdout"})", error);
  EXPECT_FALSE(sink);
  EXPECT_NE(error.find("unknown plugin_config key 'strem'"), std::string::npos) << error;
}

}  // namespace
}  // namespace picomq::runtime
