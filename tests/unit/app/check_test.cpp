// `picomq-connect --config runtime.toml --check`: the real binary on temp configs. Besides the
// definitions themselves it loads each enabled sink's plugin and checks [plugin_config] against
// the option table and the plugin's validate(), every problem as file:line:column: key '...'.
// The broker address leads nowhere: --check must not connect.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace {

using picomq::config::testing::TempDir;

struct CheckRun {
  int exit_code = -1;
  std::string out, err;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Check : public ::testing::Test {
 protected:
  Check() {
    // A second, empty plugin directory: a missing plugin's error lists both.
    std::filesystem::create_directories(dir.path() / "more-plugins");
    dir.write("runtime.toml",
              "[broker]\nbootstrap_servers = \"127.0.0.1:9\"\n"
              "[plugins]\npath = [\"" +
                  std::string(PICOMQ_PLUGIN_DIR) +
                  "\", \"more-plugins\"]\n"
                  "[sinks]\ndir = \"sinks.d\"\n");
    std::filesystem::create_directories(dir.path() / "sinks.d");
  }

  // A definition file in sinks.d; `plugin` and `plugin_config` (TOML lines after the header)
  // fill the usual template, so the line numbers below are fixed:
  //   1 type, 2 key, 3 path, 4 [[topics]], 5 topics, 6 [plugin_config], 7... its keys.
  std::string sink(const std::string& name, const std::string& plugin, const std::string& plugin_config,
                   const std::string& extra_top = "") {
    auto file = dir.write("sinks.d/" + name + ".toml", "type = \"sink\"\nkey = \"" + name + "\"\npath = \"" + plugin +
                                                           "\"\n[[topics]]\ntopics = [\"" + name +
                                                           "\"]\n[plugin_config]\n" + plugin_config + extra_top);
    return file.string();
  }

  // `env` prefixes the command (VAR=value ...); `mode` is --check, or other arguments.
  CheckRun check(const std::string& env = "", const std::string& mode = "--check") {
    const auto err = dir.path() / "stderr.txt";
    const std::string command = env + " '" + PICOMQ_CONNECT_BIN + "' --config '" +
                                (dir.path() / "runtime.toml").string() + "' " + mode + " 2>'" + err.string() + "'";
    CheckRun run;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return run;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) run.out.append(buf, n);
    const int status = pclose(pipe);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.err = read_file(err);
    return run;
  }

  TempDir dir;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

constexpr const char* kValidating = "libpicomq_connector_validating_sink";

TEST_F(Check, AMisspelledPluginConfigKeyIsAPositionedError) {
  auto file = sink("typo", kValidating, "mdoe = \"upsert\"\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + file +
                                    ":7:1: key 'plugin_config.mdoe': unknown option for the validating sink; did you "
                                    "mean 'mode'?"))
      << run.err;
  EXPECT_FALSE(contains(run.out, "ok:")) << run.out;
}

TEST_F(Check, AMissingPluginIsAnErrorAtPathListingTheFilesTried) {
  auto file = sink("lost", "libpicomq_connector_nowhere_sink", "");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + file +
                                    ":3:8: key 'path': plugin 'libpicomq_connector_nowhere_sink' not found; looked "
                                    "for: " +
                                    std::string(PICOMQ_PLUGIN_DIR) + "/libpicomq_connector_nowhere_sink.so " +
                                    (dir.path() / "more-plugins/libpicomq_connector_nowhere_sink.so").string()))
      << run.err;
  EXPECT_FALSE(contains(run.out, "ok:")) << run.out;
}

TEST_F(Check, APluginThatIsNotASinkIsRefusedAtPath) {
  // A file the loader cannot load: refused, and --check says so at `path`.
  std::ofstream(dir.path() / "more-plugins/libgarbage.so") << "not an ELF file";
  auto file = sink("garbage", "libgarbage", "");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + file + ":3:8: key 'path': cannot load plugin ")) << run.err;
}

TEST_F(Check, ThePluginsOwnValidateIsRunAndPositioned) {
  auto file = sink("cross", kValidating, "key_field = \"id\"\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + file + ":7:13: key 'plugin_config.key_field': needs mode = \"upsert\""))
      << run.err;
  EXPECT_FALSE(contains(run.out, "ok:")) << run.out;
}

TEST_F(Check, EveryProblemOfAFileIsReportedInLineOrder) {
  // The option table's problems (validate() sees only options the table accepted)...
  auto table = sink("table", kValidating, "bogus = 1\nmode = \"merge\"\nkey_field = 5\n");
  // ... validate()'s problems, a secret's value kept out ...
  auto cross = sink("cross", kValidating, "mode = \"upsert\"\ntoken = \"s3cr\"\n");
  // ... and the plugin's problems of a file that has errors of its own.
  auto both = sink("both", kValidating, "key_field = \"id\"\n", "[[transforms]]\ntype = \"nope\"\n");
  auto good = sink("good", "libpicomq_connector_stdout_sink", "pretty = true\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::string expected = "error: " + both + ":7:13: key 'plugin_config.key_field': needs mode = \"upsert\"\n" +
                               "error: " + both + ":9:8: key 'transforms[0].type': ";
  EXPECT_TRUE(contains(run.err, expected)) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + cross + ":7:8: key 'plugin_config.mode': \"upsert\" needs key_field\n" +
                                    "error: " + cross +
                                    ":8:9: key 'plugin_config.token': must be at least 8 characters\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err,
                       "error: " + table + ":7:1: key 'plugin_config.bogus': unknown option for the validating sink") &&
              contains(run.err, "\nerror: " + table +
                                    ":8:8: key 'plugin_config.mode': must be one of insert|upsert, not \"merge\"\n" +
                                    "error: " + table +
                                    ":9:13: key 'plugin_config.key_field': must be a string, not an integer\n"))
      << run.err;
  EXPECT_FALSE(contains(run.err, "s3cr")) << run.err;
  EXPECT_EQ(run.out, "ok: " + good + " (sink 'good')\n");
}

TEST_F(Check, AGoodConfigIsOk) {
  auto validating = sink("upsert", kValidating, "mode = \"upsert\"\nkey_field = \"id\"\ntoken = \"long enough\"\n");
  auto stdout_sink = sink("stdout", "libpicomq_connector_stdout_sink", "");
  auto run = check();
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, "ok: " + stdout_sink + " (sink 'stdout')\nok: " + validating + " (sink 'upsert')\n");
}

// A Python sink: --check imports its class as the host would at start (python_path, the module,
// a BaseSink subclass whose planes the runtime takes), without calling it; each problem is an
// error at the option it is about. The tests' own Python sinks are a module of sinks/python/tests.
TEST_F(Check, APythonSinksClassIsImportedAsAtStartAndEachProblemIsAtItsOption) {
#ifdef PICOMQ_NO_PYTHON_SINK
  GTEST_SKIP() << "this build has no Python sink (PICOMQ_SINKS)";
#endif
  constexpr const char* kPython = "libpicomq_connector_python_sink";
  const std::string module_dir = std::string(PICOMQ_SOURCE_DIR) + "/sinks/python/tests/python";
  auto good = sink("good", kPython, "class = \"test_sinks:Record\"\npython_path = [\"" + module_dir + "\"]\n");
  auto lost = sink("lost", kPython, "class = \"no_such_module:Sink\"\n");
  auto missing = sink("missing", kPython, "class = \"test_sinks:Batches\"\npython_path = [\"/nowhere/at/all\"]\n");
  auto not_a_sink = sink("plain", kPython, "class = \"json:JSONDecoder\"\n");
  auto no_class =
      sink("noclass", kPython, "class = \"test_sinks:NoSuchClass\"\npython_path = [\"" + module_dir + "\"]\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.out, "ok: " + good + " (sink 'good')\n")) << run.out << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + lost +
                                    ":7:9: key 'plugin_config.class': cannot import module 'no_such_module': "
                                    "ModuleNotFoundError"))
      << run.err;
  EXPECT_TRUE(contains(
      run.err, "error: " + missing + ":8:15: key 'plugin_config.python_path': /nowhere/at/all is not a directory"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + not_a_sink +
                                    ":7:9: key 'plugin_config.class': 'json:JSONDecoder' is not a subclass of "
                                    "picomq_connect.BaseSink"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + no_class + ":7:9: key 'plugin_config.class': module 'test_sinks' ("))
      << run.err;
  EXPECT_TRUE(contains(run.err, "has no 'NoSuchClass'")) << run.err;
}

TEST_F(Check, ADisabledSinksPluginIsNotLoaded) {
  auto file = sink("off", "libpicomq_connector_nowhere_sink", "anything = \"goes\"\n", "");
  // enabled = false must be a top-level key: put it before the first table.
  std::string text = read_file(file);
  std::ofstream(file) << "enabled = false\n" << text;
  auto run = check();
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "ok: " + file + " (sink 'off', disabled: its plugin is not checked)\n");
}

// The schema decoders are a module (docs/runtime.md, "Memory at start"): loaded for an avro
// schema, and a missing one is an error at the block's `schema`, naming the file looked for.
TEST_F(Check, AnAvroSchemaLoadsTheDecoderModuleAndWithoutItIsAnErrorAtSchema) {
  auto file = dir.write("sinks.d/avro.toml",
                        "type = \"sink\"\nkey = \"avro\"\npath = \"libpicomq_connector_stdout_sink\"\n[[topics]]\n"
                        "topics = [\"avro\"]\nschema = \"avro\"\n"
                        "avro_schema_json = '{\"type\": \"record\", \"name\": \"A\", \"fields\": [{\"name\": \"id\", "
                        "\"type\": \"long\"}]}'\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "ok: " + file.string() + " (sink 'avro')\n");

  std::filesystem::create_directories(dir.path() / "no-modules");
  run = check("PICOMQ_MODULE_DIR='" + (dir.path() / "no-modules").string() + "'");
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "error: " + file.string() +
                                    ":6:10: key 'topics[0].schema': module picomq_schema_decoders: cannot load '" +
                                    (dir.path() / "no-modules/libpicomq_schema_decoders.so").string() +
                                    "': cannot open shared object file: No such file or directory (the folder "
                                    "PICOMQ_MODULE_DIR names)"))
      << run.err;
}

// The operations API is a module too: without it the runtime does not start (exit 2) and says
// which file it looked for. The broker address leads nowhere; the API starts before any fetch.
TEST_F(Check, TheApiWithoutItsModuleStopsTheRuntimeNamingTheFile) {
  dir.write("runtime.toml",
            "[broker]\nbootstrap_servers = \"127.0.0.1:9\"\n[sinks]\ndir = \"sinks.d\"\n"
            "[api]\nenabled = true\nlisten = \"127.0.0.1:0\"\n");
  std::filesystem::create_directories(dir.path() / "no-modules");
  auto run = check("PICOMQ_MODULE_DIR='" + (dir.path() / "no-modules").string() + "'", "");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(
      run.err, "module picomq_ops: cannot load '" + (dir.path() / "no-modules/libpicomq_ops.so").string() + "'"))
      << run.err;
}

TEST_F(Check, ABadRuntimeConfigExitsWith2) {
  dir.write("runtime.toml", "[broker]\nbootstrap_servers = \"127.0.0.1:9\"\n[sinks]\ndri = \"sinks.d\"\n");
  auto run = check();
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "key 'sinks.dri'")) << run.err;
}

}  // namespace
