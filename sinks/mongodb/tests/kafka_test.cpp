// The MongoDB sink through a real Kafka broker and the runtime, into the real FerretDB v1.24.2
// server of the test process (sinks/mongodb/server.sh, started once), read back with libmongoc
// queries and the broker's committed offsets: documents of a 2-partition topic exactly once per
// record; a second consumer group replaying everything, and a SIGKILL mid-load with a restart,
// leave exactly the produced documents (record-id _id: the replay's 11000s count as written);
// an outage of FerretDB's PostgreSQL during a load commits nothing unwritten and loses nothing;
// a document the server refuses goes through each bad-record policy while the rest is written;
// tombstones delete; per id strategy, what a SIGKILL's replay leaves; two collections' bulk
// writes in flight at once while one is stalled by a lock in PostgreSQL; Debezium change events
// replayed after a SIGKILL end equal to the source. One broker and one FerretDB for the binary.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "harness.h"
#include "mongo_server.h"

namespace picomq::test {
namespace {

std::string definition(const std::string& key, const std::string& topic, const std::string& db,
                       const std::string& plugin_config, const std::string& block_extra = "") {
  return plugin_definition(
      key, "libpicomq_connector_mongodb_sink",
      "topics = [\"" + topic + "\"]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra,
      "connection_uri = \"" + MongoServer::shared().uri() + "\"\ndatabase = \"" + db + "\"\n" + plugin_config);
}

int64_t counter(Runtime& rt, const std::string& key, const std::string& name) {
  const auto s = rt.sink_status(key);
  if (!s.contains("counters") || !s["counters"].contains(name)) return 0;
  return s["counters"][name].get<int64_t>();
}

// Distinct (partition, n) pairs and the sum of n over a collection (what was produced, once
// each), computed here from the documents' two fields (FerretDB's $group over tens of thousands
// of documents is slow).
std::pair<int64_t, int64_t> distinct_and_sum(const std::string& db, const std::string& coll) {
  std::set<std::pair<int32_t, int64_t>> pairs;
  int64_t total = 0;
  for (const auto& d : MongoServer::shared().find(db, coll, "{}", "", R"({"_id": 0, "pico_partition": 1, "n": 1})")) {
    const auto n = d.at("n").get<int64_t>();
    if (pairs.emplace(d.at("pico_partition").get<int32_t>(), n).second) total += n;
  }
  return {static_cast<int64_t>(pairs.size()), total};
}

TEST(MongoSinkKafka, DocumentsOfEveryPartitionLandOnceAndASecondGroupsReplayIsAlreadyWritten) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mkafka");
  const auto topic = unique_name("mongo.orders");
  kafka.create_topic(topic, 2);
  std::vector<ProducedRecord> records;
  const int n = 3000;
  records.reserve(n);
  for (int i = 0; i < n; ++i)
    records.push_back({"{\"n\": " + std::to_string(i) + ", \"name\": \"order-" + std::to_string(i) + "\"}",
                       "k" + std::to_string(i),
                       {{"h", "v"}},
                       i % 2});
  kafka.produce(topic, records);
  const std::string config = "collection = \"orders\"";
  {
    Runtime rt(kafka.bootstrap(), "first");
    rt.add_definition("c.toml", definition("morders", topic, db, config, "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("morders"), topic, 2) == n; }, 90s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  EXPECT_EQ(mongo.count(db, "orders"), n);
  const auto d = mongo.find(db, "orders", R"({"n": 7})");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["_id"], topic + ":1:3");
  EXPECT_EQ(d[0]["name"], "order-7");
  EXPECT_EQ(d[0]["pico_key"]["$binary"]["base64"], "azc=");  // "k7"
  EXPECT_EQ(d[0]["pico_headers"], nlohmann::json::parse(R"({"h": "v"})"));
  EXPECT_TRUE(d[0]["pico_timestamp"].contains("$date"));
  EXPECT_EQ(distinct_and_sum(db, "orders"), (std::pair<int64_t, int64_t>{n, int64_t{n} * (n - 1) / 2}));

  // Another consumer group reads both partitions from the start into the same collection.
  {
    Runtime rt(kafka.bootstrap(), "replay");
    rt.add_definition("c.toml", definition("mreplay", topic, db, config, "batch_length = 250"));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of("mreplay"), topic, 2) == n; }, 90s)) << rt.log();
    EXPECT_TRUE(wait_until([&] { return counter(rt, "mreplay", "already_written_records") == n; }, 5s))
        << "every replayed record's 11000 counted as written: " << counter(rt, "mreplay", "already_written_records");
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  }
  EXPECT_EQ(mongo.count(db, "orders"), n) << "no duplicates";
}

// A SIGKILL as soon as a bulk write landed (its offsets not yet committed), then a restart that
// replays the window, per id strategy: record_id, key and field write exactly the produced
// documents (the replay's 11000s count as written); generated inserts the replayed window a
// second time — exactly that window, which is what docs/sinks/mongodb.md says it does.
class MongoKill : public ::testing::TestWithParam<std::string> {};

TEST_P(MongoKill, SigkillMidLoadThenRestartReplaysTheWindowAsTheIdStrategySays) {
  const std::string strategy = GetParam();
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mkill");
  const auto topic = unique_name("mongo.kill");
  kafka.create_topic(topic, 2);
  const int chunk = 20000;
  int64_t produced = 0;  // per partition
  // Every record has a key and a payload field "uid" unique to it ("p<partition>-<n>").
  auto produce_chunk = [&] {
    std::vector<ProducedRecord> records;
    for (int p = 0; p < 2; ++p)
      for (int64_t n = produced; n < produced + chunk; ++n) {
        const std::string uid = "p" + std::to_string(p) + "-" + std::to_string(n);
        records.push_back({"{\"n\": " + std::to_string(n) + ", \"uid\": \"" + uid + "\"}", uid, {}, p});
      }
    kafka.produce(topic, records);
    produced += chunk;
  };
  // A group and static member of its own per strategy: a static member that stopped stays in its
  // group for session.timeout.ms, and the next case subscribes another topic.
  const std::string key = "mkill_" + strategy;
  const std::string block =
      "batch_length = 500\nproperties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
  std::string config = "collection = \"t\"\ncommit_interval = \"300ms\"\nid_strategy = \"" + strategy + "\"";
  if (strategy == "field") config += "\nid_field = \"uid\"";
  auto docs = [&] { return mongo.count(db, "t"); };
  // The count once FerretDB finished what it had received before the kill.
  auto settled = [&] {
    int64_t last = docs();
    for (int stable = 0; stable < 4;) {
      std::this_thread::sleep_for(250ms);
      const int64_t now = docs();
      stable = now == last ? stable + 1 : 0;
      last = now;
    }
    return last;
  };
  int64_t window = 0, at_kill = 0;
  for (int run = 0; run < 6 && window <= 0; ++run) {
    produce_chunk();
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(run));
    rt.add_definition("c.toml", definition(key, topic, db, config, block));
    rt.start();
    // Killed as soon as a bulk write landed: its offsets are committed only after it.
    const int64_t before = docs();
    const auto until = std::chrono::steady_clock::now() + scaled(60s);
    while (docs() <= before && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
    ASSERT_GT(docs(), before) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
    at_kill = settled();
    window = at_kill - committed_sum(kafka, group_of(key), topic, 2);
    std::cout << "[          ] " << strategy << " run " << run << ": killed with " << at_kill << " documents, "
              << committed_sum(kafka, group_of(key), topic, 2) << " committed\n";
  }
  ASSERT_GT(window, 0) << "no kill left written documents uncommitted";
  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("c.toml", definition(key, topic, db, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed_sum(kafka, group_of(key), topic, 2) == 2 * produced; }, 120s))
      << rt.log();
  if (strategy == "generated") {
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    EXPECT_EQ(counter(rt, key, "already_written_records"), 0) << "new ObjectIds: nothing is found already there";
    EXPECT_EQ(docs(), 2 * produced + window) << "the replayed window inserted a second time, and nothing else";
  } else {
    EXPECT_TRUE(wait_until([&] { return counter(rt, key, "already_written_records") >= window; }, 5s))
        << "the replayed window's documents were already there: " << counter(rt, key, "already_written_records")
        << " < " << window;
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    EXPECT_EQ(docs(), 2 * produced) << "exactly the produced documents, no duplicates";
  }
  // Every produced value at least once per partition (the test producer is not idempotent: n is
  // not always the offset, so count values, not offsets).
  EXPECT_EQ(distinct_and_sum(db, "t"), (std::pair<int64_t, int64_t>{2 * produced, produced * (produced - 1)}));
  if (strategy == "key" || strategy == "field") {
    const auto d = mongo.find(db, "t", R"({"uid": "p1-7"})");
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0]["_id"], "p1-7") << "the " << strategy << " is the _id";
  }
}

INSTANTIATE_TEST_SUITE_P(IdStrategies, MongoKill, ::testing::Values("record_id", "key", "field", "generated"));

// Two topics (two topic blocks of one sink) into two collections: a PostgreSQL lock on the first
// collection's table (FerretDB keeps each collection as one) stalls its bulk write on the server.
// With max_concurrent_writes 2 the second collection's bulk write goes on beside it, lands and
// commits its offsets while the first one waits; with 1 it queues behind it. Either way the stalled collection's
// offsets are not committed before its own write lands, and nothing is lost once the lock goes.
class MongoConcurrentWrites : public ::testing::TestWithParam<int> {};

TEST_P(MongoConcurrentWrites, ASecondCollectionsBulkWriteIsInFlightBesideAStalledOne) {
  const int writers = GetParam();
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mconc");
  const auto slow = unique_name("mongo.slow"), fast = unique_name("mongo.fast");
  kafka.create_topic(slow);
  kafka.create_topic(fast);
  const std::string key = "mconc" + std::to_string(writers);
  Runtime rt(kafka.bootstrap());
  // Two topic blocks: each its own delivery window (the runtime takes one block's write outcomes
  // in order, so within one block the fast collection's offsets would wait for the stalled write
  // even though its documents landed), one sink instance for both.
  const std::string block = "schema = \"json\"\npoll_interval = \"100ms\"";
  rt.add_definition("c.toml", plugin_definition(key, "libpicomq_connector_mongodb_sink",
                                                "topics = [\"" + slow + "\"]\n" + block +
                                                    "\n\n[[topics]]\ntopics = [\"" + fast + "\"]\n" + block,
                                                "connection_uri = \"" + mongo.uri() + "\"\ndatabase = \"" + db +
                                                    "\"\nmax_concurrent_writes = " + std::to_string(writers)));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
  // Each block's consumer group, from the log ("topics[i]: consumer group '...'").
  std::string slow_group, fast_group;
  ASSERT_TRUE(wait_until(
      [&] {
        auto group_of_block = [&](int i) {
          const std::string log = rt.log(), tag = "topics[" + std::to_string(i) + "]: consumer group '";
          const auto at = log.find(tag);
          if (at == std::string::npos) return std::string();
          return log.substr(at + tag.size(), log.find('\'', at + tag.size()) - at - tag.size());
        };
        slow_group = group_of_block(0);
        fast_group = group_of_block(1);
        return !slow_group.empty() && !fast_group.empty();
      },
      30s))
      << rt.log();
  auto committed = [&](const std::string& topic) {
    return kafka.committed(topic == slow ? slow_group : fast_group, topic);
  };
  // First writes: both collections (and their tables) exist.
  kafka.produce_values(slow, json_values(0, 100));
  kafka.produce_values(fast, json_values(0, 100));
  ASSERT_TRUE(wait_until([&] { return committed(slow) == 100 && committed(fast) == 100; }, 60s)) << rt.log();
  MongoServer::TableLock lock(mongo, db, slow);
  auto waiting = [&] { return mongo.backend_locks(db, lock.table(), false); };
  kafka.produce_values(slow, json_values(100, 300));
  ASSERT_TRUE(wait_until([&] { return waiting() > 0; }, 30s)) << "the slow collection's bulk write waits on the lock\n"
                                                              << rt.log();
  kafka.produce_values(fast, json_values(100, 300));
  if (writers > 1) {
    EXPECT_TRUE(wait_until([&] { return committed(fast) == 300; }, 30s))
        << "the fast collection's write lands beside the stalled one: committed " << committed(fast) << "\n"
        << rt.log();
    EXPECT_EQ(mongo.count(db, fast), 300);
  } else {
    std::this_thread::sleep_for(scaled(4s));
    EXPECT_EQ(committed(fast), 100) << "one writer: the fast collection waits its turn";
    EXPECT_EQ(mongo.count(db, fast), 100);
  }
  EXPECT_GT(waiting(), 0) << "still stalled";
  EXPECT_EQ(committed(slow), 100) << "nothing of the stalled write is committed";
  EXPECT_EQ(mongo.count(db, slow), 100);
  lock.release();
  ASSERT_TRUE(wait_until([&] { return committed(slow) == 300 && committed(fast) == 300; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(mongo.count(db, slow), 300);
  EXPECT_EQ(mongo.count(db, fast), 300);
  EXPECT_EQ(distinct_and_sum(db, slow), (std::pair<int64_t, int64_t>{300, 300 * 299 / 2}));
  EXPECT_EQ(distinct_and_sum(db, fast), (std::pair<int64_t, int64_t>{300, 300 * 299 / 2}));
}

INSTANTIATE_TEST_SUITE_P(Writers, MongoConcurrentWrites, ::testing::Values(2, 1));

TEST(MongoSinkKafka, AnOutageOfTheBackingDatabaseCommitsNothingUnwrittenAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("moutage");
  const auto topic = unique_name("mongo.outage");
  kafka.create_topic(topic);
  const std::string key = "moutage";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, "collection = \"t\"\nretry_timeout = \"60s\""));
  rt.start();
  ASSERT_TRUE(rt.wait_assigned(key, 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 500));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 500; }, 60s)) << rt.log();
  mongo.backend_stop();  // FerretDB keeps answering; every write fails
  kafka.produce_values(topic, json_values(500, 1500));
  std::this_thread::sleep_for(scaled(3s));
  const int64_t during = kafka.committed(group_of(key), topic);
  mongo.backend_start();
  EXPECT_EQ(during, 500) << "nothing committed while the database is down";
  EXPECT_EQ(rt.sink_state(key), "running") << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1500; }, 90s)) << rt.log();
  EXPECT_TRUE(wait_until([&] { return counter(rt, key, "resends") > 0; }, 5s)) << "resent here\n" << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(mongo.count(db, "t"), 1500);
  EXPECT_EQ(distinct_and_sum(db, "t"), (std::pair<int64_t, int64_t>{1500, 1500 * 1499 / 2}));
}

// A document the server refuses ("$bad" is not a field name MongoDB stores), through each policy.
class MongoBadRecords : public ::testing::TestWithParam<std::string> {};

TEST_P(MongoBadRecords, ARefusedDocumentGoesThroughThePolicyAndTheRestIsWritten) {
  const std::string policy = GetParam();
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mbad");
  const auto topic = unique_name("mongo.bad"), dead = unique_name("mongo.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  auto values = json_values(0, 50);
  values[17] = R"({"$bad": 17})";
  kafka.produce_values(topic, values);
  const std::string key = "mbad" + policy;
  std::string block = "on_bad_record = \"" + policy + "\"";
  if (policy == "dead_letter") block += "\ndead_letter_topic = \"" + dead + "\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, "collection = \"t\"", block));
  rt.start();
  if (policy == "fail") {
    ASSERT_TRUE(rt.wait_state(key, "error", 60s)) << rt.log();
    const std::string message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find("MongoDB refused the document (error 2)"), std::string::npos) << message;
    EXPECT_LE(kafka.committed(group_of(key), topic), 17) << "nothing at or after the refused record is committed";
    EXPECT_EQ(mongo.count(db, "t", R"({"pico_offset": 17})"), 0);
  } else {
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 50; }, 60s)) << rt.log();
    EXPECT_EQ(mongo.count(db, "t"), 49);
    EXPECT_EQ(mongo.count(db, "t", R"({"pico_offset": 17})"), 0);
    if (policy == "dead_letter") {
      const auto dlq = kafka.consume(dead, 1, 20s);
      ASSERT_EQ(dlq.size(), 1u);
      EXPECT_EQ(dlq[0].value, values[17]) << "the original bytes";
      EXPECT_EQ(dlq[0].header("pico_error_offset"), "17");
      EXPECT_NE(dlq[0].header("pico_error_reason").value_or("").find("error 2"), std::string::npos);
    }
  }
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

INSTANTIATE_TEST_SUITE_P(Policies, MongoBadRecords, ::testing::Values("fail", "skip", "dead_letter"));

TEST(MongoSinkKafka, TombstonesDeleteTheDocumentOfTheirKeyAndReplaceKeepsTheLastValue) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mtomb");
  const auto topic = unique_name("mongo.users");
  kafka.create_topic(topic);
  kafka.produce(topic, {{R"({"name": "a1"})", "a"},
                        {R"({"name": "b1"})", "b"},
                        {R"({"name": "a2"})", "a"},
                        {"", "b", {}, -1, true},
                        {R"({"name": "c1"})", "c"}});
  const std::string key = "mtomb";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db,
                                         "collection = \"users\"\nid_strategy = \"key\"\nwrite_strategy = \"replace\"\n"
                                         "delete_on_tombstone = true"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 5; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  const auto users = mongo.find(db, "users");
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[0]["_id"], "a");
  EXPECT_EQ(users[0]["name"], "a2");
  EXPECT_EQ(users[1]["_id"], "c");
}

TEST(MongoSinkKafka, UpdateByBusinessKeySetsTheFieldsOfEachRecordAndKeepsTheOthers) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mupdate");
  const auto topic = unique_name("mongo.stock");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {R"({"sku": "A", "qty": 1})", R"({"sku": "B", "qty": 2})", R"({"sku": "A", "price": 5})",
                               R"({"sku": "A", "qty": 3})"});
  const std::string key = "mupdate";
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "c.toml",
      definition(key, topic, db,
                 "collection = \"stock\"\nwrite_strategy = \"update\"\nbusiness_key = [\"sku\"]\n"
                 "include_metadata = false\ninserted_at_field = \"created\"\nupdated_at_field = \"updated\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 4; }, 60s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  const auto stock = mongo.find(db, "stock", "{}", R"({"sku": 1})");
  ASSERT_EQ(stock.size(), 2u);
  EXPECT_EQ(stock[0]["sku"], "A");
  EXPECT_EQ(stock[0]["qty"], 3) << "the last record's value";
  EXPECT_EQ(stock[0]["price"], 5) << "a field a later record does not carry is kept";
  EXPECT_TRUE(stock[0]["created"].contains("$date") && stock[0]["updated"].contains("$date"));
  EXPECT_EQ(stock[1]["sku"], "B");
  EXPECT_EQ(stock[1]["qty"], 2);
}

TEST(MongoSinkKafka, AServerThatIsDownAtStartIsAWarningAndTheRecordsLandWhenItIsBack) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mdown");
  const auto topic = unique_name("mongo.down");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 20));
  mongo.kill();
  const std::string key = "mdown";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", definition(key, topic, db, "collection = \"t\"\nretry_timeout = \"60s\""));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return rt.log().find("is not reachable now") != std::string::npos; }, 30s)) << rt.log();
  EXPECT_LE(kafka.committed(group_of(key), topic), 0) << "nothing committed while the server is down";
  mongo.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 20; }, 90s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(mongo.count(db, "t"), 20);
}

TEST(MongoSinkKafka, RefusedCredentialsPutTheSinkInErrorAtStartAndThePasswordIsNeverShown) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mauth");
  const auto topic = unique_name("mongo.auth");
  kafka.create_topic(topic);
  // FerretDB refuses SCRAM (libmongoc's default mechanism) with 18 AuthenticationFailed.
  const std::string uri = "mongodb://picomq:wrong-secret-42@127.0.0.1:" + std::to_string(mongo.port()) + "/";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("c.toml", plugin_definition("mauth", "libpicomq_connector_mongodb_sink",
                                                "topics = [\"" + topic + "\"]\nschema = \"json\"",
                                                "connection_uri = \"" + uri + "\"\ndatabase = \"" + db + "\""));
  rt.start();
  ASSERT_TRUE(rt.wait_state("mauth", "error", 30s)) << rt.log();
  const std::string error = rt.sink_status("mauth").value("message", "");
  EXPECT_NE(error.find("connecting to MongoDB at 127.0.0.1:" + std::to_string(mongo.port())), std::string::npos)
      << error;
  EXPECT_NE(error.find("uthentication"), std::string::npos) << error;
  EXPECT_EQ(rt.log().find("wrong-secret-42"), std::string::npos) << "the password is never shown";
  EXPECT_EQ(error.find("wrong-secret-42"), std::string::npos);
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// Change events through the runtime (changes = "debezium"): Debezium's envelopes of one table —
// inserts, updates, deletes each followed by its tombstone, a truncate — keyed {"id": n} as
// Debezium keys them. The runtime catches up and is killed with SIGKILL; the group's offset is
// then set back before the truncate (what a crash leaves when applied changes were not yet
// committed, at its widest), and a restart replays from there, over documents that already hold
// later versions: the collection then equals the source table, document for row.
TEST(MongoSinkKafka, DebeziumChangesReplayedAfterASigkillEndEqualToTheSource) {
  auto& kafka = Kafka::shared();
  auto& mongo = MongoServer::shared();
  const auto db = mongo.fresh_database("mchanges");
  const auto topic = unique_name("mongo.inventory.customers");
  kafka.create_topic(topic);             // one partition: the truncate is ordered with every row's changes
  std::map<int, nlohmann::json> source;  // the table: id -> row
  std::mt19937 rng(55);
  int64_t produced = 0, version = 0;
  auto produce_chunk = [&](bool truncate_midway) {
    std::vector<ProducedRecord> records;
    for (int i = 0; i < 3000; ++i) {
      if (truncate_midway && i == 1500) {
        records.push_back({R"({"before": null, "after": null, "op": "t", "ts_ms": 1})", std::nullopt});
        source.clear();
      }
      const int id = static_cast<int>(rng() % 400);
      const std::string key = "{\"id\": " + std::to_string(id) + "}";
      if (source.count(id) && rng() % 4 == 0) {
        const nlohmann::json envelope = {{"before", source[id]}, {"after", nullptr}, {"op", "d"}, {"ts_ms", 1}};
        records.push_back({envelope.dump(), key});
        records.push_back({"", key, {}, -1, true});  // the tombstone Debezium sends after a delete
        source.erase(id);
        continue;
      }
      const nlohmann::json row = {
          {"id", id}, {"version", ++version}, {"name", "n" + std::to_string(rng() % 1000)}, {"note", nullptr}};
      const nlohmann::json envelope = {
          {"before", nullptr}, {"after", row}, {"op", source.count(id) ? "u" : "c"}, {"ts_ms", 1}};
      records.push_back({envelope.dump(), key});
      source[id] = row;
    }
    kafka.produce(topic, records);
    produced += static_cast<int64_t>(records.size());
  };
  const std::string key = "mchanges";
  const std::string block = "changes = \"debezium\"\nbatch_length = 400\nproperties = { \"group.instance.id\" = \"" +
                            key + "\", \"session.timeout.ms\" = \"6000\" }";
  const std::string config =
      "collection = \"customers\"\nwrite_strategy = \"replace\"\nid_strategy = \"key\"\ninclude_metadata = false\n"
      "commit_interval = \"300ms\"";
  produce_chunk(false);
  produce_chunk(true);  // a truncate past offset 4500
  {
    Runtime rt(kafka.bootstrap(), "changes_first");
    rt.add_definition("c.toml", definition(key, topic, db, config, block));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == produced; }, 120s)) << rt.log();
    rt.kill_hard();
    rt.wait_exit(30s);
  }
  auto expect_equal_to_source = [&](const std::string& when) {
    std::vector<nlohmann::json> expected;
    for (const auto& [id, row] : source) {
      nlohmann::json doc = row;
      doc["_id"] = id;
      expected.push_back(doc);
    }
    const auto actual = mongo.find(db, "customers");
    EXPECT_EQ(actual.size(), expected.size()) << when;
    EXPECT_EQ(actual, expected) << when << ": the collection equals the source table";
  };
  expect_equal_to_source("caught up");
  std::this_thread::sleep_for(scaled(7s));      // the static member's session (6 s) ends
  kafka.commit(group_of(key), topic, 0, 1000);  // replay from offset 1000: both chunks, the truncate
  produce_chunk(false);
  Runtime rt(kafka.bootstrap(), "changes_restart");
  rt.add_definition("c.toml", definition(key, topic, db, config, block));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == produced; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
  expect_equal_to_source("after the replay");
}

}  // namespace
}  // namespace picomq::test
