// The postgres sink's options and their checks, with no server: the built plugin in the kit's fake
// host (the runtime's option validation, then the sink's validate()), and `picomq-connect --check`
// on a definition file, which must name each mistake at its file position before anything
// connects. The messages are what a user reads; the integration tests check the same ones at start.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "picomq/kit/testing/fake_host.hpp"

namespace {

using picomq::kit::testing::FakeHost;
using picomq::kit::testing::joined;

// A [plugin_config] as JSON: the connection string every case shares plus `more` members.
std::string config(const std::string& more = "") {
  return R"({"connection_string": "host=127.0.0.1 port=1 dbname=x user=u password=s3cretpw")" +
         (more.empty() ? "" : ", " + more) + "}";
}

class PostgresConfig : public ::testing::Test {
 protected:
  std::unique_ptr<FakeHost> host = FakeHost::load(POSTGRES_SINK_PLUGIN);
};

TEST_F(PostgresConfig, AConnectionStringIsAllItNeeds) {
  EXPECT_TRUE(host->check(config()).empty()) << joined(host->check(config()));
  EXPECT_EQ(host->check("{}"), (std::vector<std::string>{"connection_string: missing required option"}));
}

TEST_F(PostgresConfig, EachCrossOptionMistakeIsReportedUnderItsKey) {
  struct Case {
    std::string more, expected;
  };
  for (const Case& c : std::vector<Case>{
           {R"("write_mode": "upsert")", "write_mode: 'upsert' needs upsert_key"},
           {R"("upsert_key": ["pico_key"])", "upsert_key: is only for write_mode 'upsert' (write_mode is 'insert')"},
           {R"("write_mode": "upsert", "upsert_key": ["nope"])",
            "upsert_key: table layout: key column 'nope' is not a column"},
           {R"("write_mode": "upsert", "upsert_key": ["pico_headers"])", "upsert_key: table layout: "},
           {R"("columns": [{"name": "a", "type": "text"}])", "columns: is only for payload_mode 'columns'"},
           {R"("auto_add_columns": true)", "auto_add_columns: is only for payload_mode 'columns'"},
           {R"("payload_mode": "columns", "auto_add_columns": true, "columns": [{"name": "a", "type": "text"}])",
            "auto_add_columns: is for inferred columns; it cannot be combined with declared columns"},
       }) {
    SCOPED_TRACE(c.more);
    const auto problems = host->check(config(c.more));
    ASSERT_EQ(problems.size(), 1u) << joined(problems);
    EXPECT_EQ(problems[0].rfind(c.expected, 0), 0u) << problems[0];
  }
  // pico_headers is jsonb: no key column.
  EXPECT_NE(joined(host->check(config(R"("write_mode": "upsert", "upsert_key": ["pico_headers"])"))).find("jsonb"),
            std::string::npos);
}

// docs/changes.md: change events are applied by key, in upsert mode; with inferred columns each
// table may take its key from its changes' keys.
TEST_F(PostgresConfig, ChangeEventsNeedUpsertModeAndAKeyOrInferredColumns) {
  host->subscriptions(R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])");
  EXPECT_EQ(host->check(config()).at(0).rfind(
                "write_mode: change events (changes = ... in [[topics]]) are applied by key", 0),
            0u)
      << joined(host->check(config()));
  EXPECT_TRUE(host->check(config(R"("write_mode": "upsert", "upsert_key": ["pico_key"])")).empty());
  const std::string inferred = R"("write_mode": "upsert", "payload_mode": "columns")";
  EXPECT_TRUE(host->check(config(inferred)).empty()) << joined(host->check(config(inferred)));
  const auto declared = host->check(config(inferred + R"(, "columns": [{"name": "id", "type": "int8"}])"));
  ASSERT_EQ(declared.size(), 1u) << joined(declared);
  EXPECT_NE(declared[0].find("or inferred columns"), std::string::npos) << declared[0];
  // A plain block: upsert without a key is refused as before.
  host->subscriptions(R"([{"topics": ["t"], "pattern": null, "changes": "none"}])");
  EXPECT_EQ(host->check(config(inferred)).at(0).rfind("write_mode: 'upsert' needs upsert_key", 0), 0u);
}

TEST_F(PostgresConfig, ValueChecksNameTheOptionAndNeverShowThePassword) {
  struct Case {
    std::string json, expected;
  };
  for (const Case& c : std::vector<Case>{
           {config(R"("max_open_tables": 0)"), "max_open_tables: must be from 1 to 64"},
           {config(R"("max_open_tables": 65)"), "max_open_tables: must be from 1 to 64"},
           {config(R"("schema": "")"), "schema: must not be empty"},
           {config(R"("target_table": "t_{topic")"), "target_table: "},
           {config(R"("payload_mode": "columns", "columns": [{"name": "a", "type": "money"}])"),
            "columns: 'a' has unknown type 'money' (text, int4, int8, float8, boolean, jsonb, bytea, timestamptz)"},
           {config(R"("payload_mode": "columns", "columns": [])"), "columns: no columns declared"},
           {config(R"("payload_mode": "columns", "columns": [{"type": "text"}])"),
            "columns: each item must be a table"},
           {R"({"connection_string": "postgres://u:s3cretpw@127.0.0.1:notaport/db"})",
            R"(connection_string: option "port": "notaport" is not a port number)"},
           {R"({"connection_string": "postgres://u:s3cretpw@127.0.0.1:5432/db?foo=bar"})",
            R"(connection_string: is not a valid libpq connection string: invalid URI query parameter: "foo")"},
           {R"({"connection_string": "host=x password=s3cretpw connect_timeout=10s"})",
            R"(connection_string: option "connect_timeout": "10s" is not an integer)"},
       }) {
    SCOPED_TRACE(c.json);
    const auto problems = host->check(c.json);
    ASSERT_EQ(problems.size(), 1u) << joined(problems);
    EXPECT_EQ(problems[0].rfind(c.expected, 0), 0u) << problems[0];
    EXPECT_EQ(problems[0].find("s3cretpw"), std::string::npos) << problems[0];
  }
  // Declared columns in both forms; a table's columns come in name order.
  EXPECT_TRUE(host->check(config(R"("payload_mode": "columns", "columns": {"b": "int8", "a": "text"})")).empty());
  EXPECT_TRUE(host->check(config(R"("payload_mode": "columns", "write_mode": "upsert", "upsert_key": ["id"],
                                     "columns": [{"name": "id", "type": "text"}, {"name": "v", "type": "float8"}])"))
                  .empty());
  EXPECT_TRUE(host->check(config(R"("payload_mode": "columns", "write_mode": "upsert", "upsert_key": ["id"])")).empty())
      << "inferred columns: the key column comes with the first batch";
}

// --check: every problem at its position in the definition file, and nothing connects (the
// server in the connection string does not exist).
TEST(PostgresConfigCheck, PicomqConnectCheckReportsTheSinksProblemsAtTheirFilePositions) {
  char dir_template[] = "/tmp/picomq-pgcheck-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir = dir_template;
  std::filesystem::create_directories(dir / "sinks.d");
  std::ofstream(dir / "runtime.toml") << "[broker]\nbootstrap_servers = \"127.0.0.1:9\"\n[plugins]\npath = [\""
                                      << PICOMQ_PLUGIN_DIR << "\"]\n[sinks]\ndir = \"sinks.d\"\n";
  const auto file = dir / "sinks.d" / "pg.toml";
  std::ofstream(file) << "type = \"sink\"\n"                                         // 1
                         "key = \"pg\"\n"                                            // 2
                         "path = \"libpicomq_connector_postgres_sink\"\n"            // 3
                         "[[topics]]\n"                                              // 4
                         "topics = [\"t\"]\n"                                        // 5
                         "[plugin_config]\n"                                         // 6
                         "connection_string = \"host=127.0.0.1 port=1 dbname=x\"\n"  // 7
                         "write_mode = \"append\"\n"                                 // 8
                         "upsert_key = [\"id\"]\n"                                   // 9
                         "auto_add_columns = true\n";                                // 10
  const std::string command =
      "'" + std::string(PICOMQ_CONNECT_BIN) + "' --config '" + (dir / "runtime.toml").string() + "' --check 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << out;
  EXPECT_NE(out.find("error: " + file.string() +
                     ":9:14: key 'plugin_config.upsert_key': is only for write_mode "
                     "'upsert' (write_mode is 'append')"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("error: " + file.string() +
                     ":10:20: key 'plugin_config.auto_add_columns': is only for "
                     "payload_mode 'columns'"),
            std::string::npos)
      << out;
}

}  // namespace
