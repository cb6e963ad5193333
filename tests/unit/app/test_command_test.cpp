// `picomq-connect test FIXTURE...` run as an author runs it, on temp definitions and fixtures: no
// broker, no destination. What each test observes is the command's exit code and its report.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "picomq/kit/testing/shell.hpp"
#include "temp_dir.h"

namespace {

using picomq::config::testing::TempDir;
namespace kit = picomq::kit;

class TestCommand : public ::testing::Test {
 protected:
  // `args` after `test`; the build's plugins are searched.
  kit::testing::ShellRun run(const std::string& args) {
    return kit::testing::run_shell_status("'" + std::string(PICOMQ_CONNECT_BIN) + "' test --plugins '" +
                                          PICOMQ_PLUGIN_DIR + "' " + args);
  }
  std::string fixture(const std::string& name, const std::string& text) { return dir.write(name, text).string(); }

  TempDir dir;
};

// The definition most tests use: orders into stdout, a filter and a field added.
const char* kOrders = R"(type = "sink"
key = "orders"
path = "libpicomq_connector_stdout_sink"

[[topics]]
topics = ["orders.eu"]
on_bad_record = "dead_letter"
dead_letter_topic = "orders.dlq"

[[transforms]]
type = "filter"
drop_when = { field = "status", equals = "test" }

[[transforms]]
type = "add_fields"
fields = [ { path = "region", value = "eu" } ]
)";

TEST_F(TestCommand, PassingFixturesExitZeroAndSayWhatEachTestSaw) {
  dir.write("sinks.d/orders.toml", kOrders);
  fixture("tests/orders.toml", R"(definition = "../sinks.d/orders.toml"
[[tests]]
name = "a paid order gets its region; a test order is dropped"
expect_filtered = 1
  [[tests.input]]
  key = "o-1"
  headers = { trace = "t1" }
  json = { id = 1, status = "paid" }
  [[tests.input]]
  json = { id = 2, status = "test" }
  [[tests.expect]]
  offset = 0
  key = "o-1"
  headers = { trace = "t1" }
  json = { id = 1, status = "paid", region = "eu" }
)");
  const auto r = run("'" + (dir.path() / "tests").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(
                "ok    a paid order gets its region; a test order is dropped (2 in: 1 to the sink, 0 bad, 1 filtered)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 test(s): 1 passed, 0 failed"), std::string::npos) << r.out;
}

TEST_F(TestCommand, AWrongExpectationExitsOneWithEachDifferenceByPath) {
  dir.write("orders.toml", kOrders);
  const auto f = fixture("orders.test.toml", R"(definition = "orders.toml"
[[tests]]
name = "expects what the chain does not do"
  [[tests.input]]
  key = "o-1"
  json_text = '{"id": 1, "status": "paid", "items": [1, 2, 3]}'
  [[tests.input]]
  json = { id = 2, status = "paid" }
  [[tests.expect]]
  key = "o-2"
  json = { id = 1.0, status = "PAID", items = [1, 2], region = "eu", extra = true }
)");
  const auto r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const char* line :
       {"FAIL  expects what the chain does not do", "records to the sink: expected 1, got 2",
        "tests[0].expect[0] (record 1 of 2 to the sink, offset 0):", "payload.status: expected \"PAID\", got \"paid\"",
        "payload.items: expected 2 items, got 3", "payload.extra: missing (expected true)",
        "key: expected \"o-2\", got \"o-1\"", "record 2 of 2 to the sink, not expected: {\"offset\":1,\"payload\":{",
        "the sink is called with (orders.eu[0], block 0):"})
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
  // 1 and 1.0 are the same number, and the region is there.
  EXPECT_EQ(r.out.find("payload.id"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("payload.region"), std::string::npos) << r.out;
}

TEST_F(TestCommand, BadRecordsAreMatchedByOffsetStageAndReasonUnderEachPolicy) {
  dir.write("orders.toml", kOrders);
  const std::string tests = R"(
[[tests]]
name = "a payload that is not JSON"
  [[tests.input]]
  json = { id = 1 }
  [[tests.input]]
  text = "not json"
  [[tests.input]]
  json = { id = 3 }
)";
  // dead_letter: the bad record goes aside and the one after it is written.
  auto f = fixture("dl.toml", "definition = \"orders.toml\"\n" + tests + R"(
  [[tests.expect]]
  json = { id = 1, region = "eu" }
  [[tests.expect]]
  json = { id = 3, region = "eu" }
  [[tests.expect_bad]]
  offset = 1
  stage = "decode"
  reason = "not valid JSON"
)");
  auto r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(3 in: 2 to the sink, 1 bad, 0 filtered)"), std::string::npos) << r.out;

  // fail (the default): the sink stops at it, and nothing after it is written.
  std::string fail_definition = kOrders;
  const std::string policy = "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"orders.dlq\"\n";
  fail_definition.replace(fail_definition.find(policy), policy.size(), "");
  dir.write("orders_fail.toml", fail_definition);
  f = fixture("fail.toml", "definition = \"orders_fail.toml\"\n" + tests + R"(
  [[tests.expect]]
  json = { id = 1, region = "eu" }
  [[tests.expect_bad]]
  offset = 1
  stage = "decode"
)");
  r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(3 in: 1 to the sink, 1 bad, 0 filtered, the sink stops)"), std::string::npos) << r.out;

  // The same fixture expecting another stage, and a bad record where there is none.
  f = fixture("wrong.toml", "definition = \"orders.toml\"\n" + tests + R"(
  [[tests.expect_bad]]
  offset = 1
  stage = "transform"
  [[tests.expect_bad]]
  offset = 2
)");
  r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tests[0].expect_bad[0]: offset 1 went bad at the decode stage, not transform"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tests[0].expect_bad[1]: expected the record at offset 2 to be bad, but it went to the sink"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bad at offset 1 (decode), dead-lettered: schema json: payload is not valid JSON"),
            std::string::npos)
      << r.out;
}

TEST_F(TestCommand, ChangeEventsReachTheSinkAsOperationsWithTheirKeys) {
  dir.write("customers.toml", R"(type = "sink"
key = "customers"
path = "libpicomq_connector_postgres_sink"

[[topics]]
topics = ["dbserver.public.customers"]
changes = "debezium"

[plugin_config]
connection_string = "host=127.0.0.1 port=9 dbname=x"
write_mode = "upsert"
payload_mode = "columns"
)");
  const auto f = fixture("customers.test.toml", R"(definition = "customers.toml"
[[tests]]
name = "an update is an upsert of the row after it, a delete and its tombstone name the key"
  [[tests.input]]
  key_json = { id = 7 }
  json_text = '{"before": {"id": 7, "name": "Ann"}, "after": {"id": 7, "name": "Anna"}, "op": "u", "source": {}}'
  [[tests.input]]
  key_json = { id = 7 }
  json_text = '{"before": {"id": 7, "name": "Anna"}, "after": null, "op": "d", "source": {}}'
  [[tests.input]]
  key_json = { id = 7 }
  tombstone = true
  [[tests.expect]]
  op = "upsert"
  key_json = { id = 7 }
  json = { id = 7, name = "Anna" }
  [[tests.expect]]
  op = "delete"
  key_json = { id = 7 }
  tombstone = true
  # Debezium's tombstone after a delete deletes again (docs/changes.md): harmless on replay.
  [[tests.expect]]
  offset = 2
  op = "delete"
)");
  const auto r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("ok    an update is an upsert"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not found"), std::string::npos) << "the postgres plugin is checked: " << r.out;
}

TEST_F(TestCommand, AFixtureOrDefinitionThatDoesNotLoadExitsTwoNamingWhere) {
  dir.write("orders.toml", kOrders);
  auto f = fixture("broken.toml", R"(definition = "orders.toml"
[[tests]]
name = "no expectation"
  [[tests.input]]
  jsn = { id = 1 }
)");
  auto r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("broken.toml:2:1: key 'tests[0]': test 'no expectation' expects nothing"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("key 'tests[0].input[0].jsn': unknown key 'jsn' (did you mean 'json'?)"), std::string::npos)
      << r.out;

  dir.write("bad_def.toml", "type = \"sink\"\nkey = \"x\"\npath = \"libpicomq_connector_stdout_sink\"\n");
  f = fixture("uses_bad_def.toml",
              "definition = \"bad_def.toml\"\n[[tests]]\nname = \"n\"\nexpect = []\n"
              "  [[tests.input]]\n  json = 1\n");
  r = run("'" + f + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("its definition"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not load"), std::string::npos) << r.out;
}

TEST_F(TestCommand, DefinitionOptionTestsAnotherDefinitionWithTheSameFixtures) {
  dir.write("orders.toml", kOrders);
  std::string upper = kOrders;
  upper.replace(upper.find("value = \"eu\""), std::string("value = \"eu\"").size(), "value = \"EU\"");
  dir.write("orders_upper.toml", upper);
  const auto f = fixture("t.toml", R"(definition = "orders.toml"
[[tests]]
name = "region"
  [[tests.input]]
  json = { id = 1 }
  [[tests.expect]]
  json = { id = 1, region = "eu" }
)");
  EXPECT_EQ(run("'" + f + "'").exit_code, 0);
  const auto r = run("--definition '" + (dir.path() / "orders_upper.toml").string() + "' '" + f + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("payload.region: expected \"eu\", got \"EU\""), std::string::npos) << r.out;
}

TEST_F(TestCommand, ShowPrintsWhatTheSinkIsCalledWithInPassingTests) {
  dir.write("orders.toml", kOrders);
  const auto f = fixture("t.toml", R"(definition = "orders.toml"
[[tests]]
name = "region"
  [[tests.input]]
  key_base64 = "/wA="
  json = { id = 1 }
  [[tests.expect]]
  json = { id = 1, region = "eu" }
)");
  const auto r = run("--show '" + f + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(R"({"offset":0,"key":{"base64":"/wA="},"payload":{"id":1,"region":"eu"}})"), std::string::npos)
      << r.out;
}

TEST_F(TestCommand, TheQuickstartsFixturesPass) {
  const auto r = run("'" + std::string(PICOMQ_SOURCE_DIR) + "/examples/quickstart/tests'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 test(s): 2 passed, 0 failed"), std::string::npos) << r.out;
}

}  // namespace
