// Loading plugins: the search path, ABI version checks and refusals with a clear reason.
#include <gtest/gtest.h>

#include "runtime/plugin_host/sink_instance.h"

namespace picomq::runtime {
namespace {

pmq_sink_plugin valid_descriptor() {
  pmq_sink_plugin d{};
  d.struct_size = sizeof d;
  d.abi_version = PMQ_SINK_ABI_VERSION;
  d.name = "t";
  d.version = "1";
  d.open = [](const pmq_host_api*, const char*, char*, size_t) -> void* { return nullptr; };
  d.write_record = [](void*, const pmq_batch*, size_t, pmq_write_result*) { return PMQ_WRITE_OK; };
  d.close = [](void*) {};
  return d;
}

std::string refusal(const pmq_sink_plugin& d) { return check_plugin_descriptor(&d); }

TEST(PluginHost, AcceptsSameMajorAndOlderMinor) {
  auto d = valid_descriptor();
  EXPECT_EQ(check_plugin_descriptor(&d), "");
}

TEST(PluginHost, RefusesOtherMajorOrNewerMinor) {
  auto d = valid_descriptor();
  d.abi_version = (PMQ_SINK_ABI_VERSION_MAJOR + 1) << 16;
  EXPECT_NE(refusal(d).find("built for sink ABI 3.0"), std::string::npos) << refusal(d);
  const std::string ours = "2." + std::to_string(PMQ_SINK_ABI_VERSION_MINOR);
  d.abi_version = PMQ_SINK_ABI_VERSION + 1;
  EXPECT_NE(refusal(d).find("built for sink ABI 2." + std::to_string(PMQ_SINK_ABI_VERSION_MINOR + 1) +
                            ", this runtime speaks " + ours),
            std::string::npos)
      << refusal(d);
  d.abi_version = 1u << 16;
  EXPECT_NE(refusal(d).find("built for sink ABI 1.0, this runtime speaks " + ours), std::string::npos) << refusal(d);
  d.abi_version = 2u << 16;  // a plugin built before 2.1 added set_unread_fields still loads
  EXPECT_EQ(check_plugin_descriptor(&d), "");
}

TEST(PluginHost, RefusesIncompleteDescriptors) {
  EXPECT_NE(check_plugin_descriptor(nullptr), "");
  auto d = valid_descriptor();
  d.struct_size = 8;
  EXPECT_NE(check_plugin_descriptor(&d).find("too small"), std::string::npos);
  d = valid_descriptor();
  d.close = nullptr;
  EXPECT_NE(refusal(d).find("lacks"), std::string::npos);
}

// The plane contract (pmq_sink_plane_spec, shared with the SDK): nothing is inferred.
TEST(PluginHost, PlanesNormaliseToRowsAndEveryNativePlaneMustBeAcceptedAndImplemented) {
  auto d = valid_descriptor();
  pmq_plane_spec spec{};
  ASSERT_EQ(check_plugin_descriptor(&d, &spec), "");
  EXPECT_EQ(spec.accepted_planes, uint32_t(PMQ_PLANE_ROWS)) << "nothing declared: rows";
  EXPECT_EQ(spec.native_planes, uint32_t(PMQ_PLANE_ROWS));
  EXPECT_EQ(spec.best_plane, uint32_t(PMQ_PLANE_ROWS));

  d.accepted_planes = PMQ_PLANE_BATCHES;
  d.native_planes = PMQ_PLANE_BATCHES;
  d.write_batch = [](void*, const pmq_batch*, pmq_write_result*) { return PMQ_WRITE_OK; };
  ASSERT_EQ(check_plugin_descriptor(&d, &spec), "");
  EXPECT_EQ(spec.accepted_planes, uint32_t(PMQ_PLANE_ROWS | PMQ_PLANE_BATCHES)) << "every sink accepts rows";
  EXPECT_EQ(spec.best_plane, uint32_t(PMQ_PLANE_BATCHES));

  d.native_planes = PMQ_PLANE_BATCHES | PMQ_PLANE_ARROW;
  EXPECT_NE(refusal(d).find("declares native data plane 'arrow' but does not accept it"), std::string::npos)
      << refusal(d);
  d.accepted_planes |= PMQ_PLANE_ARROW;
  EXPECT_NE(refusal(d).find("declares native data plane 'arrow' but does not implement write_arrow"), std::string::npos)
      << refusal(d);
  d.write_arrow = [](void*, const pmq_arrow_batch*, pmq_write_result*) { return PMQ_WRITE_OK; };
  ASSERT_EQ(check_plugin_descriptor(&d, &spec), "");
  EXPECT_EQ(spec.best_plane, uint32_t(PMQ_PLANE_ARROW));

  d.write_batch = nullptr;
  EXPECT_NE(refusal(d).find("'batches' but does not implement write_batch"), std::string::npos) << refusal(d);
  d = valid_descriptor();
  d.write_record = nullptr;
  EXPECT_NE(refusal(d).find("'rows' but does not implement write_record"), std::string::npos) << refusal(d);
  d = valid_descriptor();
  d.accepted_planes = 1u << 7;
  EXPECT_NE(refusal(d).find("unknown data plane"), std::string::npos) << refusal(d);
}

TEST(PluginHost, RefusesABrokenOptionTable) {
  auto d = valid_descriptor();
  pmq_option options[2] = {{"a", PMQ_OPTION_BOOL, 0, "true", nullptr, "x"},
                           {"a", PMQ_OPTION_INT, 0, nullptr, nullptr, "y"}};
  d.options = options;
  d.option_count = 2;
  d.option_size = sizeof(pmq_option);
  EXPECT_NE(refusal(d).find("declares 'a' twice"), std::string::npos) << refusal(d);
  options[1] = {"b", PMQ_OPTION_INT, 0, "\"ten\"", nullptr, "y"};
  EXPECT_NE(refusal(d).find("option 'b' has a default that must be an integer, not a string"), std::string::npos)
      << refusal(d);
  options[1] = {"b", 42, 0, nullptr, nullptr, "y"};
  EXPECT_NE(refusal(d).find("unknown type"), std::string::npos) << refusal(d);
  options[1] = {"b", PMQ_OPTION_STRING, 0, "\"x\"", "y|z", "y"};
  EXPECT_NE(refusal(d).find("must be one of y|z"), std::string::npos) << refusal(d);
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
  EXPECT_NE(error.find("built for sink ABI 3.0"), std::string::npos) << error;

  auto bad = PluginLibrary::load("libpicomq_connector_testkit_bad_native_sink", {PICOMQ_PLUGIN_DIR}, error);
  EXPECT_FALSE(bad);
  EXPECT_NE(error.find("declares native data plane 'arrow' but does not implement write_arrow"), std::string::npos)
      << error;
}

TEST(PluginHost, OpenFailureCarriesThePluginsMessage) {
  std::string error;
  auto lib = PluginLibrary::load("libpicomq_connector_stdout_sink", {PICOMQ_PLUGIN_DIR}, error);
  ASSERT_TRUE(lib);
  auto sink = SinkInstance::open(lib, "k", R"({"strem":"stdout"})", error);
  EXPECT_FALSE(sink);
  EXPECT_NE(error.find("strem: unknown option for the stdout sink; did you mean 'stream'?"), std::string::npos)
      << error;

  auto testkit = PluginLibrary::load("libpicomq_connector_testkit_sink", {PICOMQ_PLUGIN_DIR}, error);
  ASSERT_TRUE(testkit) << error;
  auto failing = SinkInstance::open(testkit, "k", R"({"log_path":"/dev/null","open_error":"no database"})", error);
  EXPECT_FALSE(failing);
  EXPECT_NE(error.find("failed to open: no database"), std::string::npos) << error;
}

}  // namespace
}  // namespace picomq::runtime
