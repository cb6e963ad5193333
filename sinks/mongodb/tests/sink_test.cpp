// The MongoDB sink in the kit's fake host (the runtime's option checks, outcomes, rejections,
// pending writes, flush) against the real FerretDB v1.24.2 server of this test process
// (sinks/mongodb/server.sh, started once), read back with libmongoc's own queries. No broker:
// kafka_test.cpp runs it through Kafka and the runtime.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "mongo_server.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;
using picomq::test::MongoServer;
using namespace std::chrono_literals;

namespace {

class MongoSink : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &MongoServer::shared();
    db_ = server_->fresh_database("sink");
    host_ = kt::FakeHost::load(MONGODB_SINK_PLUGIN);
  }
  void TearDown() override {
    if (host_ && host_->is_open()) host_->close();
  }
  json base() const {
    return {
        {"connection_uri", server_->uri()}, {"database", db_}, {"commit_interval", "50ms"}, {"retry_timeout", "2s"}};
  }
  void open(json config = json::object()) {
    const json defaults = base();  // items() of a temporary would dangle
    for (const auto& [k, v] : defaults.items())
      if (!config.contains(k)) config[k] = v;
    host_->open(config.dump());
  }
  std::vector<json> docs(const std::string& coll, const std::string& filter = "{}") {
    return server_->find(db_, coll, filter);
  }
  static std::vector<std::string> ids(const std::vector<json>& docs) {
    std::vector<std::string> out;
    out.reserve(docs.size());
    for (const auto& d : docs) out.push_back(d["_id"].is_string() ? d["_id"].get<std::string>() : d["_id"].dump());
    return out;
  }

  MongoServer* server_ = nullptr;
  std::string db_;
  std::unique_ptr<kt::FakeHost> host_;
};

TEST_F(MongoSink, OptionsAreCheckedBeforeAnythingConnects) {
  auto has = [](const std::vector<std::string>& problems, const std::string& what) {
    for (const auto& p : problems)
      if (p.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has(host_->check(R"({"database": "d"})"), "connection_uri")) << "connection_uri is required";
  EXPECT_TRUE(has(host_->check(R"({"connection_uri": "http://x", "database": "d"})"), "must start with mongodb://"));
  EXPECT_TRUE(has(host_->check(R"({"connection_uri": "mongodb://h", "database": "a.b"})"), "database"));
  EXPECT_TRUE(
      has(host_->check(R"({"connection_uri": "mongodb://h", "database": "d", "id_strategy": "field"})"), "id_field"));
  EXPECT_TRUE(has(host_->check(R"({"connection_uri": "mongodb://h", "database": "d", "business_key": ["a"]})"),
                  "business_key"));
  EXPECT_TRUE(has(host_->check(R"({"connection_uri": "mongodb://h", "database": "d", "delete_on_tombstone": true})"),
                  "delete_on_tombstone"));
  EXPECT_TRUE(
      has(host_->check(R"({"connection_uri": "mongodb://h:notaport", "database": "d"})"), "libmongoc cannot read it"));
  EXPECT_TRUE(host_->check(R"({"connection_uri": "mongodb://u:p@h:27017/?tls=true", "database": "d"})").empty());
}

TEST_F(MongoSink, DocumentsLandWithRecordIdsMetadataAndTypesReadBackExactly) {
  open();
  TestBatch b("shop.orders", 1,
              {TestRecord{.offset = 10,
                          .payload = R"({"n": 1, "price": 2.5, "tags": ["a"], "big": 9007199254740993})",
                          .key = std::string("k\xff", 2),
                          .headers = {{"h", "v"}},
                          .timestamp_ms = 1'700'000'000'000},
               TestRecord{.offset = 11, .payload = R"([1, 2])"}});
  auto outcome = host_->write(b);
  ASSERT_TRUE(outcome.ok()) << outcome.error;
  const auto d = docs("shop.orders");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], json::parse(R"({"_id": "shop.orders:1:10", "pico_topic": "shop.orders", "pico_partition": 1,
      "pico_offset": 10, "pico_timestamp": {"$date": "2023-11-14T22:13:20Z"},
      "pico_key": {"$binary": {"base64": "a/8=", "subType": "00"}}, "pico_headers": {"h": "v"},
      "n": 1, "price": 2.5, "tags": ["a"], "big": 9007199254740993})"));
  EXPECT_EQ(d[1]["payload"], json::parse("[1, 2]"));
  EXPECT_TRUE(d[1].contains("pico_key") && d[1]["pico_key"].is_null())
      << "no key: pico_key null, every document the same fields";
  // Queried by type too ($gte a date matches dates only: MongoDB compares within a BSON type).
  // ({"$type": ...} in a filter is read by libbson's Extended JSON parser as legacy binary.)
  EXPECT_EQ(server_->count(db_, "shop.orders", R"({"pico_timestamp": {"$gte": {"$date": "1970-01-01T00:00:00Z"}}})"),
            2);
  EXPECT_EQ(server_->count(db_, "shop.orders", R"({"pico_key": {"$binary": {"base64": "a/8=", "subType": "00"}}})"), 1);
}

TEST_F(MongoSink, AReplayOfTheSameRecordsIsAlreadyWrittenNotDuplicated) {
  open();
  std::vector<std::string> payloads;
  payloads.reserve(200);
  for (int i = 0; i < 200; ++i) payloads.push_back(R"({"i": )" + std::to_string(i) + "}");
  ASSERT_TRUE(host_->write(TestBatch::json("replay", 0, 0, payloads)).ok());
  // The same offsets again (a restart before the commit), overlapping 100 new ones.
  std::vector<std::string> more = payloads;
  for (int i = 200; i < 300; ++i) more.push_back(R"({"i": )" + std::to_string(i) + "}");
  auto again = host_->write(TestBatch::json("replay", 0, 0, more));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_TRUE(again.rejected.empty());
  EXPECT_EQ(server_->count(db_, "replay"), 300);
  EXPECT_EQ(host_->counter("already_written_records"), 200u) << "each replayed _id's 11000 counted as written";
}

TEST_F(MongoSink, ARefusedDocumentIsRejectedWithTheServersReasonAndTheRestIsWritten) {
  open();
  auto outcome = host_->write(TestBatch::json("bad", 0, 0, {R"({"a": 1})", R"({"$bad": 1})", R"({"a": 3})"}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_NE(outcome.rejected[0].reason.find("MongoDB refused the document (error 2)"), std::string::npos)
      << outcome.rejected[0].reason;
  EXPECT_EQ(ids(docs("bad")), (std::vector<std::string>{"bad:0:0", "bad:0:2"}));
}

TEST_F(MongoSink, ADocumentOver16MiBIsRejectedBeforeSendingAndTheRestIsWritten) {
  open();
  const std::string big = R"({"blob": ")" + std::string(17u << 20, 'x') + "\"}";
  auto outcome = host_->write(TestBatch::json("big", 0, 0, {R"({"a": 1})", big}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_NE(outcome.rejected[0].reason.find("16 MiB"), std::string::npos);
  EXPECT_EQ(server_->count(db_, "big"), 1);
}

TEST_F(MongoSink, ADuplicateOnAnotherUniqueIndexIsARejectionNotAWrite) {
  // FerretDB's 11000 names no index (MongoDB's has keyPattern {sku: 1}): the sink looks the _ids
  // up, so a conflict on another unique index is never taken for "already written".
  server_->command(db_,
                   R"({"createIndexes": "dup", "indexes": [{"key": {"sku": 1}, "name": "sku_u", "unique": true}]})");
  open();
  auto outcome = host_->write(TestBatch::json("dup", 0, 0, {R"({"sku": "A"})", R"({"sku": "A"})", R"({"sku": "B"})"}));
  ASSERT_EQ(outcome.status, PMQ_WRITE_REJECTED) << outcome.error;
  ASSERT_EQ(outcome.rejected.size(), 1u);
  EXPECT_EQ(outcome.rejected[0].record_index, 1u);
  EXPECT_NE(outcome.rejected[0].reason.find("11000"), std::string::npos) << outcome.rejected[0].reason;
  EXPECT_EQ(ids(docs("dup")), (std::vector<std::string>{"dup:0:0", "dup:0:2"}));
  // The same batch again (a replay): 0 and 2 are already written, 1 is refused again.
  auto replay = host_->write(TestBatch::json("dup", 0, 0, {R"({"sku": "A"})", R"({"sku": "A"})", R"({"sku": "B"})"}));
  ASSERT_EQ(replay.status, PMQ_WRITE_REJECTED);
  ASSERT_EQ(replay.rejected.size(), 1u);
  EXPECT_EQ(replay.rejected[0].record_index, 1u);
  EXPECT_EQ(host_->counter("already_written_records"), 2u);
}

TEST_F(MongoSink, IdStrategiesKeyFieldAndGenerated) {
  open({{"id_strategy", "key"}, {"collection", "by_key"}});
  TestBatch keyed("t", 0,
                  {TestRecord{.offset = 0, .payload = R"({"v": 1})", .key = "user-1"},
                   TestRecord{.offset = 1, .payload = R"({"v": 2})"}});
  auto k = host_->write(keyed);
  ASSERT_EQ(k.status, PMQ_WRITE_REJECTED);
  EXPECT_NE(k.rejected.at(0).reason.find("no key"), std::string::npos);
  EXPECT_EQ(ids(docs("by_key")), std::vector<std::string>{"user-1"});
  host_->close();

  host_ = kt::FakeHost::load(MONGODB_SINK_PLUGIN);
  open({{"id_strategy", "field"}, {"id_field", "order"}, {"collection", "by_field"}});
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"order": 7, "v": 1})", R"({"order": 8})"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"order": 7, "v": 1})"})).ok()) << "a replay";
  EXPECT_EQ(ids(docs("by_field")), (std::vector<std::string>{"7", "8"}));
  host_->close();

  host_ = kt::FakeHost::load(MONGODB_SINK_PLUGIN);
  open({{"id_strategy", "generated"}, {"collection", "gen"}});
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"v": 1})", R"({"v": 2})"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"v": 1})", R"({"v": 2})"})).ok());
  EXPECT_EQ(server_->count(db_, "gen"), 4) << "generated ids: a replay inserts the records again (documented)";
}

TEST_F(MongoSink, ReplaceUpsertsByIdAndByBusinessKeyLastRecordWins) {
  open({{"write_strategy", "replace"}, {"id_strategy", "key"}, {"collection", "rep"}});
  TestBatch b("t", 0,
              {TestRecord{.offset = 0, .payload = R"({"v": 1, "only_first": true})", .key = "a"},
               TestRecord{.offset = 1, .payload = R"({"v": 2})", .key = "b"},
               TestRecord{.offset = 2, .payload = R"({"v": 3})", .key = "a"}});
  ASSERT_TRUE(host_->write(b).ok());
  const auto d = docs("rep");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["_id"], "a");
  EXPECT_EQ(d[0]["v"], 3);
  EXPECT_FALSE(d[0].contains("only_first")) << "replaced, not merged";
  host_->close();

  host_ = kt::FakeHost::load(MONGODB_SINK_PLUGIN);
  open({{"write_strategy", "replace"},
        {"business_key", {"sku"}},
        {"collection", "rep_bk"},
        {"include_metadata", false}});
  ASSERT_TRUE(host_
                  ->write(TestBatch::json(
                      "t", 0, 0,
                      {R"({"sku": "X", "q": 1})", R"({"sku": "Y", "q": 1})", R"({"sku": "X", "q": 2})", R"({"q": 9})"}))
                  .rejected.size() == 1);
  const auto bk = docs("rep_bk", "{}");
  ASSERT_EQ(bk.size(), 2u);
  EXPECT_EQ(server_->count(db_, "rep_bk", R"({"sku": "X", "q": 2})"), 1);
  const auto idx = server_->command(db_, R"({"listIndexes": "rep_bk"})");
  EXPECT_NE(idx.dump().find("sku_1"), std::string::npos) << "business_key's unique index: " << idx.dump();
}

TEST_F(MongoSink, UpdateSetsFieldsKeepsOthersAndStampsInsertAndUpdateTimes) {
  open({{"write_strategy", "update"},
        {"id_strategy", "key"},
        {"collection", "upd"},
        {"include_metadata", false},
        {"inserted_at_field", "created"},
        {"updated_at_field", "modified"}});
  TestBatch first("t", 0, {TestRecord{.offset = 0, .payload = R"({"a": 1, "b": 1})", .key = "k"}});
  ASSERT_TRUE(host_->write(first).ok());
  const auto before = docs("upd");
  ASSERT_EQ(before.size(), 1u);
  std::this_thread::sleep_for(20ms);  // a later wall-clock millisecond for the second write
  TestBatch second("t", 0, {TestRecord{.offset = 1, .payload = R"({"b": 2})", .key = "k"}});
  ASSERT_TRUE(host_->write(second).ok());
  const auto after = docs("upd");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["a"], 1) << "a field the record does not carry is kept";
  EXPECT_EQ(after[0]["b"], 2);
  EXPECT_EQ(after[0]["created"], before[0]["created"]) << "inserted_at only on insert";
  EXPECT_NE(after[0]["modified"], before[0]["modified"]);
  EXPECT_TRUE(after[0]["modified"].contains("$date"));
}

TEST_F(MongoSink, TombstonesDeleteTheDocumentOfTheirKey) {
  open({{"write_strategy", "replace"}, {"id_strategy", "key"}, {"collection", "tomb"}, {"delete_on_tombstone", true}});
  TestBatch b("t", 0,
              {TestRecord{.offset = 0, .payload = R"({"v": 1})", .key = "a"},
               TestRecord{.offset = 1, .payload = R"({"v": 1})", .key = "b"},
               TestRecord{.offset = 2, .payload = std::nullopt, .key = "a"},
               TestRecord{.offset = 3, .payload = std::nullopt, .key = "never-written"}});
  ASSERT_TRUE(host_->write(b).ok());
  EXPECT_EQ(ids(docs("tomb")), std::vector<std::string>{"b"});
}

TEST_F(MongoSink, TimestampFieldsAreDates) {
  open({{"timestamp_fields", {"at"}}, {"collection", "ts"}});
  auto o = host_->write(TestBatch::json(
      "t", 0, 0, {R"({"at": "2026-12-01T15:04:05Z"})", R"({"at": 1700000000000})", R"({"at": "soon"})"}));
  ASSERT_EQ(o.status, PMQ_WRITE_REJECTED);
  EXPECT_EQ(server_->count(db_, "ts", R"({"at": {"$gte": {"$date": "1970-01-01T00:00:00Z"}}})"), 2);
  EXPECT_EQ(server_->count(db_, "ts", R"({"at": {"$date": "2026-12-01T15:04:05Z"}})"), 1);
}

TEST_F(MongoSink, CollectionsPerTopicAreSanitised) {
  open({{"collection", "c_{topic}"}});
  ASSERT_TRUE(host_->write(TestBatch::json("a$b", 0, 0, {"{}"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("system.x", 0, 0, {"{}"})).ok());
  EXPECT_EQ(server_->collections(db_), (std::vector<std::string>{"c_a_b", "c_system.x"}));
}

TEST_F(MongoSink, ADownServerFailsWritesAsRetryableAndNothingIsLostWhenItComesBack) {
  open({{"retry_timeout", "0s"}, {"collection", "outage"}});
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"i": 0})"})).ok());
  server_->backend_stop();  // FerretDB answers; its PostgreSQL is gone
  auto failed = host_->write(TestBatch::json("t", 0, 1, {R"({"i": 1})", R"({"i": 2})"}), 60s);
  server_->backend_start();
  EXPECT_TRUE(failed.status == PMQ_WRITE_RETRY || failed.status == PMQ_WRITE_PARTIAL)
      << failed.status << " " << failed.error;
  EXPECT_FALSE(failed.error.empty());
  // The runtime retries the same batch: it lands, once.
  auto again = host_->write(TestBatch::json("t", 0, 1, {R"({"i": 1})", R"({"i": 2})"}), 60s);
  EXPECT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(server_->count(db_, "outage"), 3);
}

TEST_F(MongoSink, AnOutageWithinRetryTimeoutIsResentHereAndTheWriteSucceeds) {
  open({{"retry_timeout", "60s"}, {"collection", "resend"}});
  ASSERT_TRUE(host_->write(TestBatch::json("t", 0, 0, {R"({"i": 0})"})).ok());
  server_->kill();  // FerretDB crashes
  auto w = host_->start_write(TestBatch::json("t", 0, 1, {R"({"i": 1})", R"({"i": 2})"}));
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(w->completed()) << "not acknowledged while the server is down";
  server_->start();
  auto o = w->wait(60s);
  EXPECT_TRUE(o.ok()) << o.error;
  EXPECT_GE(host_->counter("resends"), 1u);
  EXPECT_EQ(server_->count(db_, "resend"), 3);
}

TEST_F(MongoSink, TwoCollectionsBulkWritesAreInFlightAtOnceWhileOneIsStalled) {
  open({{"max_concurrent_writes", 2}, {"commit_interval", "20ms"}});
  ASSERT_TRUE(host_->write(TestBatch::json("slow", 0, 0, {R"({"n": 0})"})).ok());
  ASSERT_TRUE(host_->write(TestBatch::json("fast", 0, 0, {R"({"n": 0})"})).ok());
  MongoServer::TableLock lock(*server_, db_, "slow");
  auto slow = host_->start_write(TestBatch::json("slow", 0, 1, {R"({"n": 1})", R"({"n": 2})"}));
  for (int i = 0; i < 200 && server_->backend_locks(db_, lock.table(), false) == 0; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_GT(server_->backend_locks(db_, lock.table(), false), 0) << "the slow collection's insert waits on the lock";
  auto fast = host_->write(TestBatch::json("fast", 0, 1, {R"({"n": 1})"}), 10s);
  EXPECT_TRUE(fast.ok()) << "the fast collection's bulk write lands beside the stalled one: " << fast.error;
  EXPECT_EQ(server_->count(db_, "fast"), 2);
  EXPECT_EQ(server_->count(db_, "slow"), 1) << "still stalled";
  lock.release();
  auto s = slow->wait(30s);
  EXPECT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(server_->count(db_, "slow"), 3);
}

TEST_F(MongoSink, LibmongocsOwnLogLinesGoThroughTheHostLogNotStderr) {
  // libmongoc warns of a URI option it does not know while the sink opens: the line must reach
  // the host's log (the runtime's logger, with the sink's name), not libmongoc's stderr printer.
  const std::string uri = server_->uri();
  const std::string glue = uri.find('?') != std::string::npos ? "&" : uri.back() == '/' ? "?" : "/?";
  open({{"connection_uri", uri + glue + "picomqNoSuchOption=1"}});
  bool routed = false;
  for (const auto& line : host_->logs())
    routed =
        routed || (line.find("libmongoc") != std::string::npos && line.find("picomqnosuchoption") != std::string::npos);
  EXPECT_TRUE(routed) << "no libmongoc line in the host log";
}

// ------------------------------------------------------------------ change events (docs/changes.md)

// A change: op with the row (upsert, patch) or none (delete, truncate), its key as key_json and
// as the record key (as Debezium keys its records).
TestRecord change(int64_t offset, pmq_change_op op, const std::optional<std::string>& key_json,
                  std::optional<std::string> row = std::nullopt) {
  return TestRecord{.offset = offset, .payload = std::move(row), .key = key_json, .op = op, .key_json = key_json};
}

class MongoChanges : public MongoSink {
 protected:
  void SetUp() override {
    MongoSink::SetUp();
    host_->subscriptions(R"([{"topics": ["inv"], "pattern": null, "changes": "debezium"}])");
  }
  // The settings that apply change events; the documents as the source's rows (no metadata).
  void open_changes(json extra = json::object()) {
    json config = {{"write_strategy", "replace"}, {"id_strategy", "key"}, {"include_metadata", false}};
    for (const auto& [k, v] : extra.items()) config[k] = v;
    open(config);
  }
  void write_ok(const std::vector<TestRecord>& records, const std::string& topic = "inv") {
    auto o = host_->write(TestBatch(topic, 0, records));
    ASSERT_TRUE(o.ok()) << o.status << " " << o.error << (o.rejected.empty() ? "" : " " + o.rejected[0].reason);
  }
};

TEST_F(MongoChanges, UpsertsReplaceTheDocumentOfTheKeyWhoseIdIsTheKeysValue) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":7})", R"({"id": 7, "name": "ada", "email": "a@x", "n": 1})"),
            change(1, PMQ_OP_UPSERT, R"({"id":8})", R"({"id": 8, "name": "bob", "email": null, "n": 2})")});
  // An update of 7 that no longer carries `email`: the document is the row, replaced.
  write_ok({change(2, PMQ_OP_UPSERT, R"({"id":7})", R"({"id": 7, "name": "ada l.", "n": 3})")});
  EXPECT_EQ(docs("inv"),
            (std::vector<json>{json::parse(R"({"_id": 7, "id": 7, "name": "ada l.", "n": 3})"),
                               json::parse(R"({"_id": 8, "id": 8, "name": "bob", "email": null, "n": 2})")}));
  EXPECT_EQ(server_->count(db_, "inv", R"({"_id": {"$numberInt": "7"}})"), 1) << "_id is an Int32, as the key's 7";
  EXPECT_EQ(server_->count(db_, "inv", R"({"_id": "7"})"), 0);
}

TEST_F(MongoChanges, ACompositeKeyIsAnEmbeddedDocumentIdAndAStringKeyAString) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"order_id":1,"line":2})", R"({"order_id": 1, "line": 2, "qty": 5})"),
            change(1, PMQ_OP_UPSERT, R"({"order_id":1,"line":3})", R"({"order_id": 1, "line": 3, "qty": 6})"),
            change(2, PMQ_OP_DELETE, R"({"order_id":1,"line":3})")});
  EXPECT_EQ(
      docs("inv"),
      std::vector<json>{json::parse(R"({"_id": {"order_id": 1, "line": 2}, "order_id": 1, "line": 2, "qty": 5})")});
  write_ok({change(3, PMQ_OP_UPSERT, R"({"sku":"A-1"})", R"({"sku": "A-1", "q": 1})")}, "inv_sku");
  EXPECT_EQ(docs("inv_sku"), std::vector<json>{json::parse(R"({"_id": "A-1", "sku": "A-1", "q": 1})")});
}

TEST_F(MongoChanges, DeletesRemoveTheDocumentOfTheKeyAndAMissingKeyIsANoOp) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1})"),
            change(1, PMQ_OP_UPSERT, R"({"id":2})", R"({"id": 2})")});
  write_ok({change(2, PMQ_OP_DELETE, R"({"id":1})"), change(3, PMQ_OP_DELETE, R"({"id":99})")});
  EXPECT_EQ(ids(docs("inv")), std::vector<std::string>{"2"});
  EXPECT_EQ(host_->counter("deleted_records"), 1u) << "the missing key deleted nothing";
  write_ok({change(2, PMQ_OP_DELETE, R"({"id":1})")});  // a replay of the delete
  EXPECT_EQ(ids(docs("inv")), std::vector<std::string>{"2"});
}

TEST_F(MongoChanges, SeveralChangesToOneKeyInOneBatchApplyInOrder) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "a"})"), change(1, PMQ_OP_DELETE, R"({"id":1})"),
            change(2, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "b"})"),
            change(3, PMQ_OP_UPSERT, R"({"id":2})", R"({"id": 2, "v": "x"})"),
            change(4, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "c"})"), change(5, PMQ_OP_DELETE, R"({"id":2})"),
            change(6, PMQ_OP_PATCH, R"({"id":1})", R"({"w": 1})")});
  EXPECT_EQ(docs("inv"), std::vector<json>{json::parse(R"({"_id": 1, "id": 1, "v": "c", "w": 1})")});
  // The same batch again (a replay from the committed offset) ends the same.
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "a"})"), change(1, PMQ_OP_DELETE, R"({"id":1})"),
            change(2, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "b"})"),
            change(3, PMQ_OP_UPSERT, R"({"id":2})", R"({"id": 2, "v": "x"})"),
            change(4, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": "c"})"), change(5, PMQ_OP_DELETE, R"({"id":2})"),
            change(6, PMQ_OP_PATCH, R"({"id":1})", R"({"w": 1})")});
  EXPECT_EQ(docs("inv"), std::vector<json>{json::parse(R"({"_id": 1, "id": 1, "v": "c", "w": 1})")});
}

TEST_F(MongoChanges, ChangesAcrossBatchesGatheredInOneBulkWriteKeepTheirOrder) {
  open_changes({{"commit_interval", "500ms"}});
  std::vector<std::shared_ptr<kt::Write>> writes;
  for (int i = 0; i < 20; ++i) {
    const std::string v = std::to_string(i);
    writes.push_back(host_->start_write(
        TestBatch("inv", 0,
                  {change(2 * i, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": )" + v + "}"),
                   change(2 * i + 1, i % 2 ? PMQ_OP_UPSERT : PMQ_OP_DELETE, R"({"id":2})",
                          i % 2 ? std::optional<std::string>(R"({"id": 2, "v": )" + v + "}") : std::nullopt)})));
  }
  for (auto& w : writes) {
    auto o = w->wait(30s);
    ASSERT_TRUE(o.ok()) << o.error;
  }
  EXPECT_EQ(docs("inv"), (std::vector<json>{json::parse(R"({"_id": 1, "id": 1, "v": 19})"),
                                            json::parse(R"({"_id": 2, "id": 2, "v": 19})")}));
}

TEST_F(MongoChanges, ATombstoneTurnedIntoADeleteRemovesTheDocument) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":5})", R"({"id": 5, "v": 1})"),
            change(1, PMQ_OP_UPSERT, R"({"id":6})", R"({"id": 6, "v": 1})")});
  // Debezium's delete, then its tombstone (null value): both arrive as deletes of the key; the
  // second deletes what is gone.
  write_ok(
      {TestRecord{
           .offset = 2, .payload = std::nullopt, .key = R"({"id":5})", .op = PMQ_OP_DELETE, .key_json = R"({"id":5})"},
       TestRecord{.offset = 3,
                  .payload = std::nullopt,
                  .key = R"({"id":5})",
                  .op = PMQ_OP_DELETE,
                  .key_json = R"({"id":5})"}});
  EXPECT_EQ(docs("inv"), std::vector<json>{json::parse(R"({"_id": 6, "id": 6, "v": 1})")})
      << "5 is gone, and no document was written for the tombstone";
}

TEST_F(MongoChanges, ATruncateEmptiesTheCollectionBetweenTheBatchsEarlierAndLaterChanges) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1})"),
            change(1, PMQ_OP_UPSERT, R"({"id":2})", R"({"id": 2})")});
  write_ok({change(2, PMQ_OP_UPSERT, R"({"id":3})", R"({"id": 3})"), change(3, PMQ_OP_TRUNCATE, std::nullopt),
            change(4, PMQ_OP_UPSERT, R"({"id":4})", R"({"id": 4})")});
  EXPECT_EQ(ids(docs("inv")), std::vector<std::string>{"4"});
  write_ok({change(5, PMQ_OP_UPSERT, R"({"id":5})", R"({"id": 5})")}, "other");
  write_ok({change(6, PMQ_OP_TRUNCATE, std::nullopt)});  // a truncate that ends its batch
  EXPECT_EQ(server_->count(db_, "inv"), 0);
  EXPECT_EQ(server_->count(db_, "other"), 1) << "only the record's own collection";
}

TEST_F(MongoChanges, APatchSetsTheFieldsItNamesAndKeepsTheOthers) {
  open_changes();
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "title": "a", "body": "long text", "n": 1})")});
  // Debezium could not read `body` (an unchanged TOAST value): the patch names the rest.
  write_ok({change(1, PMQ_OP_PATCH, R"({"id":1})", R"({"id": 1, "title": "b", "n": 2})")});
  EXPECT_EQ(docs("inv"),
            std::vector<json>{json::parse(R"({"_id": 1, "id": 1, "title": "b", "body": "long text", "n": 2})")});
}

TEST_F(MongoChanges, APatchOfAMissingKeyInsertsWhatItNamesWithTheKey) {
  open_changes();
  write_ok({change(0, PMQ_OP_PATCH, R"({"order_id":3,"line":1})", R"({"title": "t"})"),
            change(1, PMQ_OP_PATCH, R"({"id":9})", R"({"id": 9, "title": "u"})")});
  EXPECT_EQ(docs("inv"), (std::vector<json>{
                             json::parse(R"({"_id": 9, "id": 9, "title": "u"})"),
                             json::parse(R"({"_id": {"order_id": 3, "line": 1}, "order_id": 3, "line": 1,
                                             "title": "t"})"),
                         }));
}

TEST_F(MongoChanges, MetadataFieldsDescribeTheLastChangeOfTheDocument) {
  open_changes({{"include_metadata", true}});
  write_ok({change(0, PMQ_OP_UPSERT, R"({"id":1})", R"({"id": 1, "v": 1})")});
  write_ok({change(1, PMQ_OP_PATCH, R"({"id":1})", R"({"v": 2})")});
  const auto d = docs("inv");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["_id"], 1);
  EXPECT_EQ(d[0]["v"], 2);
  EXPECT_EQ(d[0]["pico_offset"], 1) << d[0].dump();
  EXPECT_EQ(d[0]["pico_topic"], "inv");
}

TEST_F(MongoChanges, AChangeWithoutAKeyIsARejection) {
  open_changes();
  auto o = host_->write(
      TestBatch("inv", 0,
                {change(0, PMQ_OP_UPSERT, std::nullopt, R"({"id": 1})"),
                 change(1, PMQ_OP_UPSERT, R"({"id":2})", R"({"id": 2})"), change(2, PMQ_OP_DELETE, "{}")}));
  ASSERT_EQ(o.status, PMQ_WRITE_REJECTED) << o.error;
  ASSERT_EQ(o.rejected.size(), 2u);
  EXPECT_NE(o.rejected[0].reason.find("no key"), std::string::npos) << o.rejected[0].reason;
  EXPECT_NE(o.rejected[1].reason.find("names no field"), std::string::npos) << o.rejected[1].reason;
  EXPECT_EQ(ids(docs("inv")), std::vector<std::string>{"2"});
}

TEST_F(MongoChanges, SettingsThatCannotApplyChangesAreRefusedNamingTheOption) {
  auto problem = [&](const json& extra, const std::string& option) -> std::string {
    json config = {{"connection_uri", "mongodb://h"}, {"database", "d"}};
    for (const auto& [k, v] : extra.items()) config[k] = v;
    for (const auto& p : host_->check(config.dump()))
      if (p.rfind(option + ":", 0) == 0) return p;
    return "";
  };
  const json ok = {{"write_strategy", "replace"}, {"id_strategy", "key"}};
  EXPECT_TRUE(host_
                  ->check(json{
                      {"connection_uri", "mongodb://h"},
                      {"database", "d"},
                      {"write_strategy", "replace"},
                      {"id_strategy",
                       "key"}}.dump())
                  .empty());
  EXPECT_NE(problem({{"id_strategy", "key"}}, "write_strategy").find("write_strategy = \"replace\""), std::string::npos)
      << "the default insert";
  EXPECT_NE(problem({{"id_strategy", "key"}, {"write_strategy", "update"}}, "write_strategy"), "");
  EXPECT_NE(problem({{"write_strategy", "replace"}}, "id_strategy").find("id_strategy = \"key\""), std::string::npos)
      << "the default record_id ignores the key";
  EXPECT_NE(problem({{"write_strategy", "replace"}, {"id_strategy", "generated"}}, "id_strategy"), "");
  EXPECT_NE(problem({{"write_strategy", "replace"}, {"id_strategy", "field"}, {"id_field", "id"}}, "id_strategy"), "");
  json bk = ok;
  bk["business_key"] = {"sku"};
  EXPECT_NE(problem(bk, "business_key"), "");
  json pf = ok;
  pf["payload_field"] = "row";
  EXPECT_NE(problem(pf, "payload_field"), "");
  EXPECT_THROW(host_->open(json{{"connection_uri", server_->uri()}, {"database", db_}}.dump()), std::runtime_error)
      << "open() refuses them too";
  // Without changes the same settings are fine.
  auto plain = kt::FakeHost::load(MONGODB_SINK_PLUGIN);
  plain->subscriptions(R"([{"topics": ["inv"], "pattern": null, "changes": "none"}])");
  EXPECT_TRUE(plain->check(R"({"connection_uri": "mongodb://h", "database": "d"})").empty());
}

}  // namespace
