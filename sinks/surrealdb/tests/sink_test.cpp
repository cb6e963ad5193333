// The SurrealDB sink in the kit's fake host (the runtime's option checks, outcomes, rejections,
// pending writes) against the real SurrealDB 3.3.5 server of this test process
// (sinks/surrealdb/server.sh, started once), read back through POST /sql with JSON answers (the
// sink writes through /rpc in CBOR). No broker: kafka_test.cpp runs it through Kafka and the runtime.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "picomq/kit/testing/fake_host.hpp"
#include "surreal_server.h"

namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;
using picomq::test::SurrealServer;
using namespace std::chrono_literals;

namespace {

class SurrealSink : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SurrealServer::shared();
    if (!server_) return;
    ns_ = server_->fresh_namespace("sink");
    host_ = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  }
  void TearDown() override {
    if (host_ && host_->is_open()) host_->close();
  }
  json base() const {
    return {
        {"url", server_->url()}, {"namespace", ns_}, {"database", "db"}, {"password", "root"}, {"retry_timeout", "2s"}};
  }
  void open(json config = json::object()) {
    const json defaults = base();
    for (const auto& [k, v] : defaults.items())
      if (!config.contains(k)) config[k] = v;
    host_->open(config.dump());
  }
  json select(const std::string& text) const { return server_->result(ns_, "db", text); }
  int64_t count(const std::string& table) const {
    const json r = select("SELECT count() AS n FROM `" + table + "` GROUP ALL");
    return r.empty() ? 0 : r[0]["n"].get<int64_t>();
  }

  SurrealServer* server_ = nullptr;
  std::string ns_;
  std::unique_ptr<kt::FakeHost> host_;
};

bool has(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

TEST_F(SurrealSink, OptionsAreCheckedBeforeAnythingConnects) {
  SURREAL_OR_SKIP();
  EXPECT_TRUE(has(host_->check(R"({"password": "p"})"), "url"));
  EXPECT_TRUE(has(host_->check(R"({"url": "ftp://x", "password": "p"})"), "must start with http://"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x"})"), "password"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x", "password": "p", "namespace": "a-b"})"), "namespace"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x", "password": "p", "id": "field"})"), "id_field"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x", "password": "p", "tombstones": "delete"})"), "tombstones"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x", "password": "p", "auth_level": "database"})"), "signin"));
  EXPECT_TRUE(has(host_->check(R"({"url": "http://x", "password": "p", "compression": "gzip"})"), "does not decode"));
  EXPECT_TRUE(host_->check(R"({"url": "http://x", "auth": "none"})").empty());
}

TEST_F(SurrealSink, RecordsLandWithIdsMetadataAndTypesReadBackExactly) {
  SURREAL_OR_SKIP();
  open();
  EXPECT_TRUE(host_->logged("connected to SurrealDB"));
  TestBatch b("shop.orders", 1,
              {TestRecord{.offset = 10,
                          .payload = R"({"n": 1, "price": 2.5, "tags": ["a"], "id": 7})",
                          .key = std::string("k"),
                          .headers = {{"h", "v"}},
                          .timestamp_ms = 1'700'000'000'000},
               TestRecord{.offset = 11, .payload = R"([1, 2])"}});
  auto outcome = host_->write(b);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  const json rows = select("SELECT * FROM shop_orders ORDER BY pico_offset");
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0]["id"], "shop_orders:['shop.orders', 1, 10]");
  EXPECT_EQ(rows[0]["pico_topic"], "shop.orders");
  EXPECT_EQ(rows[0]["pico_partition"], 1);
  EXPECT_EQ(rows[0]["pico_offset"], 10);
  EXPECT_EQ(rows[0]["pico_timestamp"], 1'700'000'000'000);
  EXPECT_EQ(rows[0]["pico_key"], "aw==");
  EXPECT_EQ(rows[0]["pico_headers"], json::parse(R"({"h": "v"})"));
  EXPECT_EQ(rows[0]["n"], 1);
  EXPECT_EQ(rows[0]["price"], 2.5);
  EXPECT_EQ(rows[0]["tags"], json::parse(R"(["a"])"));
  EXPECT_EQ(rows[0]["pico_payload_id"], 7) << "the payload's own id is kept beside the record id";
  EXPECT_EQ(rows[1]["payload"], json::parse("[1, 2]"));
  EXPECT_TRUE(rows[1].contains("pico_key") && rows[1]["pico_key"].is_null())
      << "no key: pico_key NULL, every record the same fields";
  // The id is the array [topic, partition, offset]: a record is found by its position.
  EXPECT_EQ(select("SELECT VALUE n FROM type::record('shop_orders', ['shop.orders', 1, 10])"), json::parse("[1]"));
  EXPECT_EQ(host_->counter("written_records"), 2u);
}

TEST_F(SurrealSink, SurrealQlLookingContentAndHostileTopicsStayData) {
  SURREAL_OR_SKIP();
  open();
  const std::string evil =
      R"x({"ref": "t:0:1", "when": "2024-01-01T00:00:00Z", "u": "018cc251-3e2a-7000-8000-000000000000",)x"
      R"x( "q": "'; DELETE `weird_topic_x`; --", "b": "⟩`}])", "obj": {"id": "user:42"}})x";
  auto outcome = host_->write(TestBatch::json("weird topic;x", 0, 0, {evil, R"({"v": 2})"}));
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  const json rows = select(
      "SELECT *, type::is_string(ref) AS ref_is_string, type::is_string(when) AS when_is_string, "
      "type::is_string(u) AS u_is_string, type::is_string(obj.id) AS obj_id_is_string "
      "FROM weird_topic_x ORDER BY pico_offset");
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0]["ref"], "t:0:1") << "a string that looks like a record id stays that string";
  EXPECT_EQ(rows[0]["when"], "2024-01-01T00:00:00Z");
  EXPECT_EQ(rows[0]["q"], "'; DELETE `weird_topic_x`; --");
  EXPECT_EQ(rows[0]["b"], "⟩`}])");
  EXPECT_EQ(rows[0]["obj"]["id"], "user:42");
  EXPECT_EQ(rows[0]["ref_is_string"], true);
  EXPECT_EQ(rows[0]["when_is_string"], true);
  EXPECT_EQ(rows[0]["u_is_string"], true);
  EXPECT_EQ(rows[0]["obj_id_is_string"], true);
  EXPECT_EQ(rows[0]["pico_topic"], "weird topic;x");
}

TEST_F(SurrealSink, AReplayOfTheSameRecordsWritesNothingTwice) {
  SURREAL_OR_SKIP();
  open({{"max_request_records", 64}});
  std::vector<std::string> payloads;
  payloads.reserve(200);
  for (int i = 0; i < 200; ++i) payloads.push_back(R"({"i": )" + std::to_string(i) + "}");
  ASSERT_TRUE(host_->write(TestBatch::json("replay", 0, 0, payloads)).ok());
  EXPECT_GE(host_->counter("requests"), 4u) << "200 records, at most 64 a request";
  std::vector<std::string> more;
  more.reserve(300);
  for (int i = 0; i < 300; ++i) more.push_back(R"({"i": )" + std::to_string(i + 1000) + "}");
  auto again = host_->write(TestBatch::json("replay", 0, 0, more));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(count("replay"), 300);
  EXPECT_EQ(select("SELECT VALUE i FROM replay WHERE pico_offset = 5"), json::parse("[5]"))
      << "INSERT IGNORE: the first write of an id stays";
  EXPECT_EQ(select("SELECT VALUE i FROM replay WHERE pico_offset = 250"), json::parse("[1250]"));
}

TEST_F(SurrealSink, ARecordTheServerRefusesIsRejectedAloneAndTheRestIsWritten) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  select(
      "DEFINE TABLE strict SCHEMAFULL; DEFINE FIELD v ON strict TYPE int; DEFINE FIELD pico_topic ON strict TYPE "
      "string;"
      "DEFINE FIELD pico_partition ON strict TYPE int; DEFINE FIELD pico_offset ON strict TYPE int;"
      "DEFINE FIELD pico_timestamp ON strict TYPE int; DEFINE FIELD pico_key ON strict TYPE any;");
  open();
  auto outcome =
      host_->write(TestBatch::json("strict", 0, 0, {R"({"v": 1})", R"({"v": "not a number"})", R"({"v": 3})"}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_NE(outcome.rejected[0].reason.find("Expected `int`"), std::string::npos) << outcome.rejected[0].reason;
  EXPECT_EQ(select("SELECT VALUE v FROM strict ORDER BY pico_offset"), json::parse("[1, 3]"));
  EXPECT_EQ(host_->counter("record_hunts"), 1u);
}

TEST_F(SurrealSink, UpsertByKeyKeepsTheLastValueAndTombstonesDelete) {
  SURREAL_OR_SKIP();
  open({{"mode", "upsert"}, {"id", "key"}, {"tombstones", "delete"}, {"table", "users"}});
  TestBatch b("u", 0,
              {TestRecord{.offset = 0, .payload = R"({"v": 1})", .key = "a:1"},
               TestRecord{.offset = 1, .payload = R"({"v": 1})", .key = "b"},
               TestRecord{.offset = 2, .payload = R"({"v": 2})", .key = "a:1"},
               TestRecord{.offset = 3, .payload = std::nullopt, .key = "b"},
               TestRecord{.offset = 4, .payload = R"({"v": 9})"}});
  auto outcome = host_->write(b);
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 4u) << "no key";
  const json rows = select("SELECT record::id(id) AS k, v FROM users");
  EXPECT_EQ(rows, json::parse(R"([{"k": "a:1", "v": 2}])")) << "a key with ':' is one string id; b deleted";
  // Replayed: the same end state.
  ASSERT_EQ(host_->write(b).status, PMQ_WRITE_REJECTED);
  EXPECT_EQ(select("SELECT record::id(id) AS k, v FROM users"), rows);
}

TEST_F(SurrealSink, IdFromAPayloadField) {
  SURREAL_OR_SKIP();
  open({{"id", "field"}, {"id_field", "sku"}, {"table", "items"}});
  auto outcome =
      host_->write(TestBatch::json("t", 0, 0, {R"({"sku": "A-1", "n": 1})", R"({"n": 2})", R"({"sku": 5})"}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_EQ(select("SELECT VALUE record::id(id) FROM items ORDER BY pico_offset"), json::parse(R"(["A-1", 5])"));
}

TEST_F(SurrealSink, NamespaceAndDatabaseAreCreatedAndWrongCredentialsStopAtOpen) {
  SURREAL_OR_SKIP();
  open();
  EXPECT_EQ(server_->result(ns_, "db", "INFO FOR DB;").is_object(), true);
  host_->close();
  auto bad = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  json c = base();
  c["password"] = "wrong";
  try {
    bad->open(c.dump());
    FAIL() << "opened with a wrong password";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("authentication failed"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos) << "the password is never shown";
  }
  auto off = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  c = base();
  c["namespace"] = server_->fresh_namespace("absent");
  c["create_namespace"] = false;
  EXPECT_THROW(off->open(c.dump()), std::exception) << "a missing namespace stops the sink at open";
}

TEST_F(SurrealSink, SigninTokensForRootNamespaceAndDatabaseUsers) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  select("DEFINE USER writer ON DATABASE PASSWORD 'w-secret' ROLES EDITOR;");
  open({{"auth", "signin"},
        {"auth_level", "database"},
        {"user", "writer"},
        {"password", "w-secret"},
        {"create_namespace", false}});
  ASSERT_TRUE(host_->write(TestBatch::json("signed", 0, 0, {R"({"a": 1})"})).ok());
  EXPECT_EQ(host_->counter("signins"), 1u);
  EXPECT_EQ(count("signed"), 1);
  host_->close();
  server_->result(ns_, "", "DEFINE USER nsw ON NAMESPACE PASSWORD 'n-secret' ROLES EDITOR;");
  host_ = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  open({{"auth", "signin"},
        {"auth_level", "namespace"},
        {"user", "nsw"},
        {"password", "n-secret"},
        {"create_namespace", false}});
  ASSERT_TRUE(host_->write(TestBatch::json("signed", 0, 10, {R"({"a": 10})"})).ok()) << "a namespace user";
  host_->close();
  host_ = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  open({{"auth", "signin"}, {"token_refresh", "1ms"}});
  ASSERT_TRUE(host_->write(TestBatch::json("signed", 0, 1, {R"({"a": 2})"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("signed", 0, 2, {R"({"a": 3})"})).ok());
  EXPECT_GE(host_->counter("signins"), 3u) << "signed in again once the token is due";
  EXPECT_EQ(count("signed"), 4);
}

TEST_F(SurrealSink, AServerDownIsARetryAndAfterItsRestartNothingIsLost) {
  SURREAL_OR_SKIP();
  open({{"retry_timeout", "0s"}});
  ASSERT_TRUE(host_->write(TestBatch::json("outage", 0, 0, {R"({"a": 1})"})).ok());
  server_->kill();
  auto down = host_->write(TestBatch::json("outage", 0, 1, {R"({"a": 2})", R"({"a": 3})"}));
  EXPECT_EQ(down.status, PMQ_WRITE_RETRY) << down.error;
  server_->start();
  auto again = host_->write(TestBatch::json("outage", 0, 1, {R"({"a": 2})", R"({"a": 3})"}));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(select("SELECT VALUE a FROM outage ORDER BY pico_offset"), json::parse("[1, 2, 3]"))
      << "surrealkv storage: what was written before the crash is there, the retried batch once";
}

TEST_F(SurrealSink, ResendsWithinRetryTimeoutRideOutAShortOutage) {
  SURREAL_OR_SKIP();
  open({{"retry_timeout", "20s"}});
  ASSERT_TRUE(host_->write(TestBatch::json("blip", 0, 0, {R"({"a": 1})"})).ok());
  server_->kill();
  auto w = host_->start_write(TestBatch::json("blip", 0, 1, {R"({"a": 2})"}));
  std::this_thread::sleep_for(700ms);
  server_->start();
  auto outcome = w->wait(30s);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_GE(host_->counter("resends"), 1u);
  EXPECT_EQ(count("blip"), 2);
}

TEST_F(SurrealSink, AServerDownAtOpenIsAWarningAndTheNamespaceIsMadeByTheFirstWriteAfterIt) {
  SURREAL_OR_SKIP();
  server_->kill();
  open({{"retry_timeout", "0s"}});
  EXPECT_TRUE(host_->logged("the server is not reachable now"));
  EXPECT_EQ(host_->write(TestBatch::json("late", 0, 0, {R"({"a": 1})"})).status, PMQ_WRITE_RETRY);
  server_->start();
  auto outcome = host_->write(TestBatch::json("late", 0, 0, {R"({"a": 1})"}));
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  EXPECT_EQ(count("late"), 1) << "namespace " << ns_ << " created once the server answered";
}

TEST_F(SurrealSink, TablesAreDefinedOnFirstUseWithTheOptionalOffsetIndex) {
  SURREAL_OR_SKIP();
  open({{"index_offsets", true}, {"table", "idx_{topic}"}});
  ASSERT_TRUE(host_->write(TestBatch::json("a.b", 0, 0, {R"({"v": 1})"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("a.b", 0, 1, {R"({"v": 2})"})).ok());
  EXPECT_EQ(host_->counter("created_tables"), 1u) << "once per topic";
  const json info = select("INFO FOR TABLE idx_a_b;");
  ASSERT_TRUE(info["indexes"].contains("pico_offsets")) << info.dump();
  EXPECT_NE(info["indexes"]["pico_offsets"].get<std::string>().find("pico_topic, pico_partition, pico_offset"),
            std::string::npos);
  EXPECT_EQ(count("idx_a_b"), 2);
}

TEST_F(SurrealSink, AnExpiredTokenIsARetryAndTheNextAttemptSignsInAgain) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  select("DEFINE USER brief ON DATABASE PASSWORD 'b-secret' ROLES EDITOR DURATION FOR TOKEN 1s, FOR SESSION 1s;");
  open({{"auth", "signin"},
        {"auth_level", "database"},
        {"user", "brief"},
        {"password", "b-secret"},
        {"create_namespace", false},
        {"retry_timeout", "0s"}});
  ASSERT_TRUE(host_->write(TestBatch::json("expiring", 0, 0, {R"({"a": 1})"})).ok());
  std::this_thread::sleep_for(2200ms);  // the token expires (the server answers 401 "The token has expired")
  const TestBatch second = TestBatch::json("expiring", 0, 1, {R"({"a": 2})"});
  auto refused = host_->write(second);
  EXPECT_EQ(refused.status, PMQ_WRITE_RETRY) << refused.error;
  EXPECT_NE(refused.error.find("signing in again"), std::string::npos) << refused.error;
  auto again = host_->write(second);  // the runtime's retry
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(host_->counter("signins"), 2u);
  EXPECT_EQ(select("SELECT VALUE a FROM expiring ORDER BY pico_offset"), json::parse("[1, 2]"));
  EXPECT_EQ(refused.error.find("b-secret"), std::string::npos);
}

TEST_F(SurrealSink, RequestsGoOutSeveralAtOnceUpToMaxInFlight) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  // Each record takes the server 300 ms (an event that sleeps): 8 requests of one record take
  // 2.4 s one at a time, about a quarter of that four at a time.
  select("DEFINE TABLE slow SCHEMALESS; DEFINE EVENT nap ON TABLE slow WHEN $event = 'CREATE' THEN { sleep(300ms) };");
  std::vector<std::string> payloads;
  payloads.reserve(8);
  for (int i = 0; i < 8; ++i) payloads.push_back(R"({"i": )" + std::to_string(i) + "}");
  auto timed = [&](int in_flight, int64_t first) {
    if (host_->is_open()) host_->close();
    host_ = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
    open({{"max_request_records", 1}, {"max_in_flight", in_flight}});
    const auto start = std::chrono::steady_clock::now();
    auto outcome = host_->write(TestBatch::json("slow", 0, first, payloads));
    EXPECT_TRUE(outcome.ok()) << outcome.error;
    EXPECT_EQ(host_->counter("requests"), 8u);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double one = timed(1, 0), four = timed(4, 100);
  std::cout << "[          ] 8 requests of 300 ms: one at a time " << one << " s, four at a time " << four << " s\n";
  EXPECT_GT(one, 2.3) << "max_in_flight 1: one request at a time";
  EXPECT_LT(four, one * 0.6) << "one at a time " << one << " s, four at a time " << four << " s";
  EXPECT_EQ(count("slow"), 16);
}

TEST_F(SurrealSink, ABodyOverTheServersLimitIsSplitAndARecordOverItAloneIsRejected) {
  SURREAL_OR_SKIP();
  // The server's /rpc body limit is between 3 and 5 MB here (a 5 MB body: 413 "length limit
  // exceeded"). max_request_bytes set far above it: the 413 splits the request.
  open({{"max_request_bytes", "64MiB"}});
  const std::string mb = R"({"blob": ")" + std::string(1u << 20, 'x') + "\"}";
  const std::string huge = R"({"blob": ")" + std::string(6u << 20, 'y') + "\"}";
  auto outcome = host_->write(TestBatch::json("large", 0, 0, {mb, mb, mb, mb, mb, mb, huge}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 6u);
  EXPECT_NE(outcome.rejected[0].reason.find("413"), std::string::npos) << outcome.rejected[0].reason;
  EXPECT_GE(host_->counter("splits"), 2u);
  EXPECT_EQ(count("large"), 6);
}

TEST_F(SurrealSink, InUpsertModeTooARefusedRecordIsRejectedAloneAndTheOthersApplyInOrder) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  select(
      "DEFINE TABLE kv SCHEMAFULL; DEFINE FIELD v ON kv TYPE int; DEFINE FIELD pico_topic ON kv TYPE string;"
      "DEFINE FIELD pico_partition ON kv TYPE int; DEFINE FIELD pico_offset ON kv TYPE int;"
      "DEFINE FIELD pico_timestamp ON kv TYPE int; DEFINE FIELD pico_key ON kv TYPE any;");
  open({{"mode", "upsert"}, {"id", "key"}, {"tombstones", "delete"}, {"table", "kv"}});
  TestBatch b("kv", 0,
              {TestRecord{.offset = 0, .payload = R"({"v": 1})", .key = "a"},
               TestRecord{.offset = 1, .payload = R"({"v": "bad"})", .key = "a"},
               TestRecord{.offset = 2, .payload = R"({"v": 3})", .key = "b"},
               TestRecord{.offset = 3, .payload = std::nullopt, .key = "b"},
               TestRecord{.offset = 4, .payload = R"({"v": 5})", .key = "c"}});
  auto outcome = host_->write(b);
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_EQ(host_->counter("record_hunts"), 1u);
  EXPECT_EQ(select("SELECT record::id(id) AS k, v FROM kv ORDER BY k"),
            json::parse(R"([{"k": "a", "v": 1}, {"k": "c", "v": 5}])"));
}

TEST_F(SurrealSink, IntegersKeepTheirValuesAndOnesBeyondInt64AreRefusedNotWrapped) {
  SURREAL_OR_SKIP();
  open();
  auto outcome =
      host_->write(TestBatch::json("ints", 0, 0,
                                   {R"({"a": 9223372036854775807, "b": -9223372036854775808, "c": 9007199254740993})",
                                    R"({"a": 18446744073709551615})"}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_EQ(select("SELECT a, b, c FROM ints"),
            json::parse(R"([{"a": 9223372036854775807, "b": -9223372036854775808, "c": 9007199254740993}])"));
}

// ------------------------------------------------------------------ change events (docs/changes.md)

constexpr const char* kDebezium = R"([{"topics": ["shop.public.customers"], "pattern": null, "changes": "debezium"}])";

TestRecord upsert(int64_t offset, const std::string& key, const std::string& row) {
  return {.offset = offset, .payload = row, .op = PMQ_OP_UPSERT, .key_json = key};
}
TestRecord patch(int64_t offset, const std::string& key, const std::string& columns) {
  return {.offset = offset, .payload = columns, .op = PMQ_OP_PATCH, .key_json = key};
}
TestRecord erase(int64_t offset, const std::string& key) {
  return {.offset = offset, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = key};
}
TestRecord truncate(int64_t offset) { return {.offset = offset, .op = PMQ_OP_TRUNCATE}; }

std::string reasons(const kt::WriteOutcome& out) {
  return out.error + (out.rejected.empty() ? "" : " / " + out.rejected[0].reason);
}

class SurrealChanges : public SurrealSink {
 protected:
  // A sink on a block with changes = "debezium", writing into table `customers`.
  void open_changes(json config = json::object()) {
    host_->subscriptions(kDebezium);
    if (!config.contains("table")) config["table"] = "customers";
    open(std::move(config));
  }
  kt::WriteOutcome write(std::vector<TestRecord> records) {
    return host_->write(TestBatch("shop.public.customers", 0, std::move(records)));
  }
  // The table's rows: the record id's key as k, the row's fields without the pico_* metadata.
  json rows(const std::string& table = "customers") const {
    json out = json::array();
    for (json row : select("SELECT record::id(id) AS k, * OMIT id FROM `" + table + "` ORDER BY k")) {
      for (const char* f : {"pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key", "pico_headers",
                            "pico_op", "pico_row_key"})
        row.erase(f);
      out.push_back(row);
    }
    return out;
  }
};

TEST_F(SurrealChanges, UpsertsReplaceDeletesRemoveAndAMissingKeyIsNoError) {
  SURREAL_OR_SKIP();
  open_changes();
  EXPECT_EQ(host_->max_in_flight(), 1u) << "one batch at a time per block: a later change never lands first";
  auto out = write({upsert(0, R"({"id":1})", R"({"id":1,"name":"Ann","email":"a@x"})"),
                    upsert(1, R"({"id":2})", R"({"id":2,"name":"Bob"})"),
                    upsert(2, R"({"id":3})", R"({"id":3,"name":"Cy"})")});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  out =
      write({upsert(3, R"({"id":1})", R"({"id":1,"name":"Anne"})"), erase(4, R"({"id":2})"), erase(5, R"({"id":99})")});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  EXPECT_TRUE(out.rejected.empty());
  // An upsert replaces the whole record (no email left); the row's own `id` is kept as
  // pico_payload_id (id is the record id, customers:1).
  EXPECT_EQ(rows(), json::parse(R"([{"k":1,"name":"Anne","pico_payload_id":1},
                                   {"k":3,"name":"Cy","pico_payload_id":3}])"));
  EXPECT_EQ(select("SELECT VALUE name FROM customers:1"), json::parse(R"(["Anne"])")) << "the id is the key's value";
}

TEST_F(SurrealChanges, ATombstoneDeletesTheRecordOfItsKey) {
  SURREAL_OR_SKIP();
  open_changes();
  ASSERT_EQ(write({upsert(10, R"({"id":"a"})", R"({"v":1})")}).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(), json::parse(R"([{"k":"a","v":1}])"));
  // A tombstone under `changes`: no payload, the key, PMQ_OP_DELETE (the runtime's doing).
  const auto out = write({TestRecord{.offset = 11,
                                     .payload = std::nullopt,
                                     .key = R"({"id":"a"})",
                                     .op = PMQ_OP_DELETE,
                                     .key_json = R"({"id":"a"})"}});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  EXPECT_EQ(rows(), json::array());
}

TEST_F(SurrealChanges, SeveralChangesOfOneKeyInOneBatchApplyInOrderAcrossItsRequests) {
  SURREAL_OR_SKIP();
  open_changes({{"max_request_records", 3}});
  auto out = write({upsert(0, R"({"id":1})", R"({"v":"first"})"), erase(1, R"({"id":1})"),
                    upsert(2, R"({"id":1})", R"({"v":"again","w":1})"), upsert(3, R"({"id":2})", R"({"v":"x"})"),
                    patch(4, R"({"id":1})", R"({"v":"patched"})"), erase(5, R"({"id":2})"),
                    upsert(6, R"({"id":3})", R"({"v":"y"})"), erase(7, R"({"id":3})")});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  EXPECT_EQ(rows(), json::parse(R"([{"k":1,"v":"patched","w":1}])"));
  // 40 changes of four keys, three a request: 14 requests, each after the one before.
  std::vector<TestRecord> records;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "{\"n\":" + std::to_string(i % 4) + "}";
    if (i % 7 == 3) records.push_back(erase(100 + i, key));
    else records.push_back(upsert(100 + i, key, "{\"i\":" + std::to_string(i) + "}"));
  }
  const auto before = host_->counter("requests");
  out = write(records);
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  // The last change of each key: 0 -> 36, 1 -> 37, 2 -> 38 (a delete), 3 -> 39 (customers:1 of
  // the batch before is the same record as the key {"n":1}: replaced whole).
  EXPECT_EQ(rows(), json::parse(R"([{"k":0,"i":36},{"k":1,"i":37},{"k":3,"i":39}])"));
  EXPECT_GE(host_->counter("requests") - before, 14u);
}

TEST_F(SurrealChanges, ATruncateEmptiesTheTableBetweenTheRowsBeforeAndAfterIt) {
  SURREAL_OR_SKIP();
  open_changes();
  ASSERT_EQ(write({upsert(0, R"({"id":9})", R"({"a":9})"), upsert(1, R"({"id":8})", R"({"a":8})")}).status,
            PMQ_WRITE_OK);
  auto out = write({upsert(2, R"({"id":1})", R"({"v":"old"})"), upsert(3, R"({"id":2})", R"({"v":2})"), truncate(4),
                    upsert(5, R"({"id":3})", R"({"v":3})"), upsert(6, R"({"id":1})", R"({"v":"new"})")});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  EXPECT_EQ(rows(), json::parse(R"([{"k":1,"v":"new"},{"k":3,"v":3}])"));
  // A truncate that ends its batch.
  out = write({upsert(7, R"({"id":4})", R"({"v":4})"), truncate(8)});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  EXPECT_EQ(rows(), json::array());
  EXPECT_EQ(select("INFO FOR DB")["tables"].count("customers"), 1u) << "the table stays, emptied";
}

TEST_F(SurrealChanges, APatchKeepsTheFieldsItDoesNotNameAndInsertsAMissingRecord) {
  SURREAL_OR_SKIP();
  open_changes();
  const std::string body(8000, 'b');
  ASSERT_EQ(write({upsert(0, R"({"id":1})",
                          R"({"title":"draft","body":")" + body + R"(","meta":{"lang":"en","tags":["a"]},"n":5})")})
                .status,
            PMQ_WRITE_OK);
  const auto out = write({patch(1, R"({"id":1})", R"({"title":"final","meta":{"tags":["b"]},"n":null})"),
                          patch(2, R"({"id":2})", R"({"title":"new"})")});
  ASSERT_EQ(out.status, PMQ_WRITE_OK) << reasons(out);
  const json one = select("SELECT * FROM customers:1")[0];
  EXPECT_EQ(one["title"], "final");
  EXPECT_EQ(one["body"], body) << "the column the patch does not name keeps its value";
  EXPECT_EQ(one["meta"], json::parse(R"({"tags":["b"]})"))
      << "a column the patch names takes its new value whole (an object column is not merged key by key)";
  EXPECT_TRUE(one["n"].is_null()) << "set to null, not removed";
  EXPECT_EQ(one["pico_offset"], 1) << "the metadata of the last change";
  EXPECT_EQ(rows()[1], json::parse(R"({"k":2,"title":"new"})")) << "a patch of a missing record inserts what it names";
}

TEST_F(SurrealChanges, CompositeKeysAreArrayIdsInKeyOrder) {
  SURREAL_OR_SKIP();
  open_changes();
  const auto out = write({upsert(0, R"({"order_id":1,"line":2})", R"({"qty":5})"),
                          upsert(1, R"({"order_id":1,"line":3})", R"({"qty":1})"),
                          erase(2, R"({"order_id":1,"line":3})"), upsert(3, R"({"order_id":"x","line":1.5})", "{}"),
                          upsert(4, R"({"id":null})", "{}"), upsert(5, R"({"id":18446744073709551615})", "{}")});
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 2u);
  EXPECT_EQ(out.rejected[0].record_index, 4u);
  EXPECT_NE(out.rejected[0].reason.find("is null"), std::string::npos) << out.rejected[0].reason;
  EXPECT_EQ(out.rejected[1].record_index, 5u);
  EXPECT_EQ(rows(), json::parse(R"([{"k":[1,2],"qty":5},{"k":["x",1.5]}])"));
  EXPECT_EQ(select("SELECT VALUE qty FROM customers:[1, 2]"), json::parse("[5]"));
}

TEST_F(SurrealChanges, ARecordTheServerRefusesGoesToThePolicyAndTheOthersApplyInOrder) {
  SURREAL_OR_SKIP();
  server_->create(ns_, "db");
  select("DEFINE TABLE customers SCHEMALESS; DEFINE FIELD v ON customers TYPE option<int>;");
  open_changes();
  const auto out = write({upsert(0, R"({"id":1})", R"({"v":1})"), upsert(1, R"({"id":1})", R"({"v":"bad"})"),
                          upsert(2, R"({"id":2})", R"({"v":2})"), patch(3, R"({"id":1})", R"({"w":1})")});
  ASSERT_EQ(out.status, PMQ_WRITE_REJECTED) << out.error;
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].record_index, 1u);
  EXPECT_EQ(host_->counter("record_hunts"), 1u);
  EXPECT_EQ(rows(), json::parse(R"([{"k":1,"v":1,"w":1},{"k":2,"v":2}])"));
}

TEST_F(SurrealChanges, AReplayFromTheCommittedOffsetEndsEqualToTheSource) {
  SURREAL_OR_SKIP();
  open_changes();
  const TestBatch a("shop.public.customers", 0,
                    {upsert(0, R"({"id":1})", R"({"v":1})"), upsert(1, R"({"id":2})", R"({"v":1})"), truncate(2),
                     upsert(3, R"({"id":3})", R"({"v":1})"), erase(4, R"({"id":3})")});
  const TestBatch b("shop.public.customers", 0,
                    {upsert(5, R"({"id":3})", R"({"v":2})"), patch(6, R"({"id":3})", R"({"w":"p"})"),
                     upsert(7, R"({"id":4})", R"({"v":1})"), erase(8, R"({"id":1})")});
  ASSERT_EQ(host_->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host_->write(b).status, PMQ_WRITE_OK);
  const json source = rows();
  EXPECT_EQ(source, json::parse(R"([{"k":3,"v":2,"w":"p"},{"k":4,"v":1}])"));
  // The runtime restarted (a SIGKILL) and re-reads from the offset it committed: both again.
  host_->close();
  host_ = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  open_changes();
  ASSERT_EQ(host_->write(a).status, PMQ_WRITE_OK);
  ASSERT_EQ(host_->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(), source);
  // Or only the second (committed after the first).
  ASSERT_EQ(host_->write(b).status, PMQ_WRITE_OK);
  EXPECT_EQ(rows(), source);
}

TEST_F(SurrealChanges, OptionsThatNameOrNestRecordsOtherwiseAreRefused) {
  SURREAL_OR_SKIP();
  host_->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"},
                           {"topics": ["shop.public.customers"], "pattern": null, "changes": "keyed"}])");
  const std::string base = R"("url": "http://x", "password": "p")";
  auto check = [&](const std::string& extra) { return host_->check("{" + base + ", " + extra + "}"); };
  EXPECT_TRUE(has(check(R"("id": "field", "id_field": "sku")"),
                  "id: change events (changes = ... in [[topics]]) name each record by its row's key"));
  EXPECT_TRUE(has(check(R"("document": "envelope")"), "document: change events"));
  EXPECT_TRUE(host_->check("{" + base + "}").empty());
  // The host fills defaults in: mode = "insert", id = "record", tombstones = "skip" are the
  // defaults' values; they and id = "key", tombstones = "delete", mode = "upsert" are not read.
  EXPECT_TRUE(check(R"("mode": "insert", "id": "record", "tombstones": "skip", "document": "flat")").empty());
  EXPECT_TRUE(check(R"("mode": "upsert", "tombstones": "delete")").empty());
  // Without changes the same options are the sink's usual ones.
  auto plain = kt::FakeHost::load(SURREALDB_SINK_PLUGIN);
  plain->subscriptions(R"([{"topics": ["a"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(plain->check("{" + base + R"(, "id": "field", "id_field": "sku", "document": "envelope"})").empty());
}

}  // namespace
