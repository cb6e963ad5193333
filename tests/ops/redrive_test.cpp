// The redrive that writes (docs/operations.md, "Dead letters"), through the tests' Kafka into a
// real PostgreSQL: dead letters of two stages, a redrive before the fix that dead-letters them
// again with their history, the fix (the table's column widened), a redrive that writes each
// exactly once; a redrive SIGKILLed half-way and resumed by its id, nothing doubled; a sink that
// keeps exactly once by high-water marks refused.
#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <map>
#include <set>

#include "api.h"
#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

// The postgres sink in inferred columns mode into table `t`, bad records to `dead`.
std::string pg_redrive_definition(const std::string& key, const std::string& topic, const std::string& db,
                                  const std::string& dead) {
  return postgres_definition(key, "\"" + topic + "\"", db,
                             "schema = \"json\"\npoll_interval = \"100ms\"\non_bad_record = \"dead_letter\"\n"
                             "dead_letter_topic = \"" +
                                 dead + "\"\n",
                             "target_table = \"t\"\npayload_mode = \"columns\"\ncommit_interval = \"100ms\"\n");
}

std::string row(int id, const std::string& qty) { return "{\"id\": " + std::to_string(id) + ", \"qty\": " + qty + "}"; }

// Waits for the redrive to end; its last progress.
json wait_redrive(const Api& api, const std::string& sink, const std::string& id, Millis timeout = 120s) {
  json p;
  EXPECT_TRUE(wait_until(
      [&] {
        p = api.get("/sinks/" + sink + "/redrives/" + id).doc();
        return p.is_object() && p.value("state", "") != "running";
      },
      timeout))
      << p.dump();
  return p;
}

int64_t count(Postgres& pg, const std::string& db, const std::string& where = "true") {
  return std::stoll(*pg.query("SELECT count(*) FROM t WHERE " + where, db).at(0).at(0));
}

TEST(Redrive, AfterAFixEachDeadLetterIsWrittenOnceAndOneBadAgainIsDeadLetteredWithItsHistory) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("redrive");
  const auto topic = unique_name("redrive-src");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic, 2);
  kafka.create_topic(dead);
  Runtime rt(kafka.bootstrap(), "redrive");
  with_api(rt);
  rt.add_definition("pg.toml", pg_redrive_definition("pg", topic, db, dead));
  rt.start();
  // Good rows first: the table is made from them (qty bigint).
  std::vector<ProducedRecord> good;
  good.reserve(20);
  for (int i = 0; i < 20; ++i) good.push_back({row(i, std::to_string(i)), "k" + std::to_string(i), {}, i % 2});
  kafka.produce(topic, good);
  ASSERT_TRUE(wait_until([&] { return kafka.all_committed(group_of("pg"), topic, 2, 10); }, 60s)) << rt.log();
  // Then ten the table refuses (a text qty: the sink's stage) and one that is not JSON (decode).
  std::vector<ProducedRecord> bad;
  bad.reserve(11);
  for (int i = 0; i < 10; ++i)
    bad.push_back({row(100 + i, "\"five-" + std::to_string(i) + "\""),
                   "b" + std::to_string(i),
                   {{"trace", "t-" + std::to_string(i)}},
                   i % 2});
  bad.push_back({"{\"id\": 200, broken", std::string("b-broken"), {}, 0});
  kafka.produce(topic, bad);
  ASSERT_TRUE(wait_until(
      [&] {
        return kafka.committed(group_of("pg"), topic, 0) == 16 && kafka.committed(group_of("pg"), topic, 1) == 15;
      },
      60s))
      << rt.log();
  Api api(rt);
  auto counts = api.get("/sinks/pg/dead-letters/counts").doc();
  ASSERT_EQ(counts["matched"], 11) << counts.dump();
  EXPECT_EQ(count(pg, db), 20);

  // A redrive before the fix: each is bad again at the sink and dead-lettered again, with the
  // redrive's id and its earlier failure; nothing is written.
  auto started = api.post("/sinks/pg/dead-letters/redrive?stage=sink", "{}");
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string first_id = started.doc()["id"];
  auto p = wait_redrive(api, "pg", first_id);
  EXPECT_EQ(p["state"], "done") << p.dump();
  EXPECT_EQ(p["selected"], 10) << p.dump();
  EXPECT_EQ(p["written"], 0) << p.dump();
  EXPECT_EQ(p["bad_again"], 10) << p.dump();
  EXPECT_EQ(count(pg, db), 20);
  auto again = api.get("/sinks/pg/dead-letters?stage=sink&limit=100").doc();
  ASSERT_EQ(again["records"].size(), 20u) << again.dump();
  std::map<std::string, std::string> first_dead_letter;  // source "partition:offset" -> its first dead letter's id
  for (size_t i = 0; i < 10; ++i) {
    const auto& d = again["records"][i];
    EXPECT_FALSE(d.contains("redrive")) << d.dump();
    first_dead_letter[d["source"]["partition"].dump() + ":" + d["source"]["offset"].dump()] = d["id"];
  }
  for (size_t i = 10; i < 20; ++i) {
    const auto& d = again["records"][i];
    EXPECT_EQ(d["redrive"], first_id) << d.dump();
    ASSERT_EQ(d["history"].size(), 1u) << d.dump();
    EXPECT_EQ(d["history"][0]["stage"], "sink");
    EXPECT_NE(d["history"][0]["reason"].get<std::string>().find("qty"), std::string::npos) << d.dump();
    EXPECT_EQ(d["history"][0]["dead_letter"],
              first_dead_letter[d["source"]["partition"].dump() + ":" + d["source"]["offset"].dump()])
        << "its first dead letter, at the same source coordinates: " << d.dump();
    EXPECT_EQ(d["source"]["topic"], topic);
    EXPECT_EQ(d["headers"].size(), 1u) << "its own headers are kept, not the pico_error_* ones: " << d.dump();
  }

  // The fix: the column takes text now. A redrive of everything, through ctl, in chunks of 7: the
  // ten (each dead-lettered twice by now: the newer copy is the one redriven) are written once
  // each at their own coordinates; the record that is not JSON is bad again, with its history.
  pg.exec("ALTER TABLE t ALTER COLUMN qty TYPE text USING qty::text", db);
  const auto run = ctl({api.url}, "dead-letters redrive pg --chunk 7");
  EXPECT_EQ(run.exit_code, 1) << "one is bad again: " << run.out;
  EXPECT_NE(run.out.find(" done: 10 written, 1 bad again"), std::string::npos) << run.out;
  const auto list = api.get("/sinks/pg/redrives").doc();
  ASSERT_EQ(list["redrives"].size(), 2u) << list.dump();
  p = list["redrives"][1];
  EXPECT_EQ(p["state"], "done") << p.dump();
  EXPECT_EQ(p["selected"], 21) << p.dump();
  EXPECT_EQ(p["superseded"], 10) << "each first dead letter of the ten gives way to its newer copy: " << p.dump();
  EXPECT_EQ(p["written"], 10) << p.dump();
  EXPECT_EQ(p["bad_again"], 1) << p.dump();
  EXPECT_EQ(count(pg, db), 30);
  EXPECT_EQ(count(pg, db, "qty LIKE 'five-%'"), 10);
  const auto rows = pg.query(
      "SELECT pico_topic, pico_partition::text, pico_offset::text, convert_from(pico_key, 'UTF8'), pico_headers::text "
      "FROM t WHERE id = 103",
      db);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (Postgres::Row{topic, "1", "11", "b3", R"({"trace": "t-3"})"}))
      << "written at its source coordinates, key and headers";
  EXPECT_EQ(std::stoll(*pg.query("SELECT count(DISTINCT pico_id) FROM t", db).at(0).at(0)), 30);

  const auto decode = api.get("/sinks/pg/dead-letters?stage=decode&limit=100").doc();
  ASSERT_EQ(decode["records"].size(), 2u) << decode.dump();
  const auto& last = decode["records"][1];
  EXPECT_EQ(last["redrive"], p["id"]);
  ASSERT_EQ(last["history"].size(), 1u) << last.dump();
  EXPECT_EQ(last["history"][0]["stage"], "decode");
  EXPECT_EQ(last["history"][0]["dead_letter"], decode["records"][0]["id"]);
  EXPECT_EQ(last["source"]["offset"], 15);

  // The same redrive again changes nothing: the ten are written again and are in the table
  // already (pico_id).
  started = api.post("/sinks/pg/dead-letters/redrive?stage=sink", "{}");
  ASSERT_EQ(started.status, 202) << started.body;
  p = wait_redrive(api, "pg", started.doc()["id"]);
  EXPECT_EQ(p["state"], "done") << p.dump();
  EXPECT_EQ(p["written"], 10) << p.dump();
  EXPECT_EQ(p["superseded"], 10) << p.dump();
  EXPECT_EQ(count(pg, db), 30);
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// One good row (the table is made from it: qty bigint), then `count` rows the table refuses (a
// text qty), dead-lettered by a runtime of sink `key` that is stopped again.
void dead_letter_rows(const std::string& topic, const std::string& db, const std::string& dead, const std::string& key,
                      int count) {
  auto& kafka = Kafka::shared();
  kafka.produce_values(topic, {row(0, "0")});
  Runtime rt(kafka.bootstrap(), key + "-load");
  rt.add_definition("pg.toml", pg_redrive_definition(key, topic, db, dead));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1; }, 60s)) << rt.log();
  std::vector<std::string> bad;
  bad.reserve(static_cast<size_t>(count));
  for (int i = 1; i <= count; ++i) bad.push_back(row(i, "\"n-" + std::to_string(i) + "\""));
  kafka.produce_values(topic, bad);
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == count + 1; }, 120s)) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

TEST(Redrive, ASigkilledRedriveResumesByItsIdAndWritesNothingTwice) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("redrivekill");
  const auto topic = unique_name("redrive-kill");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  constexpr int kBad = 3000;
  ASSERT_NO_FATAL_FAILURE(dead_letter_rows(topic, db, dead, "pgk", kBad));
  pg.exec("ALTER TABLE t ALTER COLUMN qty TYPE text USING qty::text", db);

  std::string id;
  {
    Runtime rt(kafka.bootstrap(), "redrive-kill");
    with_api(rt);
    rt.add_definition("pg.toml", pg_redrive_definition("pgk", topic, db, dead));
    rt.start();
    Api api(rt);
    const auto started = api.post("/sinks/pgk/dead-letters/redrive", R"({"chunk": 50})");
    ASSERT_EQ(started.status, 202) << started.body;
    id = started.doc()["id"];
    const std::string group = "picomq-connect-redrive-pgk-" + id;
    // Killed once some chunks are committed, well before the end.
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group, dead) >= 500; }, 60s)) << rt.log();
    rt.kill_hard();
    const int64_t at = kafka.committed(group, dead);
    ASSERT_LT(at, kBad) << "the redrive ended before the kill";
    std::cout << "redrive " << id << " SIGKILLed at dead-letter offset " << at << " of " << kBad << ", "
              << count(pg, db) - 1 << " written\n";
    EXPECT_GE(count(pg, db), at + 1) << "what the committed position covers is written";
  }
  Runtime rt(kafka.bootstrap(), "redrive-resume");
  with_api(rt);
  rt.add_definition("pg.toml", pg_redrive_definition("pgk", topic, db, dead));
  rt.start();
  Api api(rt);
  // The new runtime finds the cut redrive in Kafka, with its position short of its end.
  const auto listed = api.get("/sinks/pgk/redrives").doc();
  ASSERT_EQ(listed["redrives"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["redrives"][0]["id"], id) << listed.dump();
  EXPECT_EQ(listed["redrives"][0]["state"], "interrupted") << listed.dump();
  EXPECT_EQ(listed["redrives"][0]["end"], "0:" + std::to_string(kBad)) << listed.dump();
  EXPECT_EQ(listed["redrives"][0]["selection"]["chunk"], 50) << listed.dump();
  EXPECT_EQ(api.post("/sinks/pgk/dead-letters/redrive", R"({"resume": "no-such-redrive"})").status, 404);
  const auto resumed = api.post("/sinks/pgk/dead-letters/redrive", "{\"resume\": \"" + id + "\"}");
  ASSERT_EQ(resumed.status, 202) << resumed.body;
  const auto p = wait_redrive(api, "pgk", id);
  EXPECT_EQ(p["state"], "done") << p.dump() << rt.log();
  EXPECT_LT(p["scanned"].get<int64_t>(), kBad) << "resumed from its position, not from the start";
  std::cout << "resumed: " << p["scanned"] << " scanned, " << p["written"] << " written\n";
  EXPECT_EQ(count(pg, db), kBad + 1);
  EXPECT_EQ(std::stoll(*pg.query("SELECT count(DISTINCT pico_offset) FROM t", db).at(0).at(0)), kBad + 1);
  EXPECT_EQ(kafka.committed("picomq-connect-redrive-pgk-" + id, dead), kBad) << "its position at the end";
  const auto after = api.get("/sinks/pgk/redrives").doc();
  ASSERT_EQ(after["redrives"].size(), 1u) << "this process's, not twice: " << after.dump();
  EXPECT_EQ(after["redrives"][0]["state"], "done") << after.dump();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// A redrive stopped through the API ends after the chunk it writes, committed, and resumes.
TEST(Redrive, AStoppedRedriveEndsAfterItsChunkAndResumesWhereItStopped) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("redrivestop");
  const auto topic = unique_name("redrive-stop");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  constexpr int kBad = 400;
  ASSERT_NO_FATAL_FAILURE(dead_letter_rows(topic, db, dead, "pgs", kBad));
  pg.exec("ALTER TABLE t ALTER COLUMN qty TYPE text USING qty::text", db);
  Runtime rt(kafka.bootstrap(), "redrive-stop");
  with_api(rt);
  rt.add_definition("pg.toml", pg_redrive_definition("pgs", topic, db, dead));
  rt.start();
  Api api(rt);
  const auto started = api.post("/sinks/pgs/dead-letters/redrive", R"({"chunk": 1})");
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.doc()["id"];
  EXPECT_EQ(api.post("/sinks/pgs/dead-letters/redrive", "{}").status, 409) << "one at a time";
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-redrive-pgs-" + id, dead) >= 20; }, 60s));
  const auto stopped = ctl({api.url}, "dead-letters redrive pgs --stop " + id);
  EXPECT_EQ(stopped.exit_code, 1) << "stopped, not done: " << stopped.out;
  EXPECT_NE(stopped.out.find(" stopped: "), std::string::npos) << stopped.out;
  auto p = api.get("/sinks/pgs/redrives/" + id).doc();
  EXPECT_EQ(p["state"], "stopped") << p.dump();
  const int64_t at = kafka.committed("picomq-connect-redrive-pgs-" + id, dead);
  EXPECT_LT(at, kBad) << p.dump();
  EXPECT_EQ(p["position"], "0:" + std::to_string(at)) << "its last chunk committed: " << p.dump();
  EXPECT_EQ(count(pg, db), at + 1) << "written exactly up to its position";
  const auto resumed = ctl({api.url}, "dead-letters redrive pgs --resume " + id);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(count(pg, db), kBad + 1);
  EXPECT_EQ(api.get("/sinks/pgs/redrives/" + id).doc()["scanned"], kBad - at) << "from where it stopped";
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

// A sink that does not declare takes_redrives (ABI 2.9) is not redriven into: its dry run still works.
TEST(Redrive, ASinkThatDoesNotTakeRedrivesIsRefusedAndOneWithChangeEventsOnlyWhenToldTo) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("redrive-refused");
  const auto dead = topic + ".dead";
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  Runtime rt(kafka.bootstrap(), "redrive-refused");
  with_api(rt);
  rt.add_definition("l.toml", plugin_definition("lc", "libpicomq_connector_lifecycle_sink",
                                                "topics = [\"" + topic +
                                                    "\"]\npoll_interval = \"50ms\"\non_bad_record = \"dead_letter\"\n"
                                                    "dead_letter_topic = \"" +
                                                    dead + "\"",
                                                "events_path = \"" + (rt.dir() / "lc.events").string() + "\"\n"));
  kafka.produce_values(topic, {"{\"n\": 1", "{\"n\": 2}"});
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("lc"), topic) == 2; }, 60s)) << rt.log();
  Api api(rt);
  const auto refused = api.post("/sinks/lc/dead-letters/redrive", "{}");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("does not take redrives"), std::string::npos) << refused.body;
  const auto dry = api.post("/sinks/lc/dead-letters/redrive", R"({"dry_run": true})");
  EXPECT_EQ(dry.status, 200) << dry.body;
  EXPECT_EQ(dry.doc()["summary"]["bad"], 1) << dry.body;

  // A sink that applies change events is redriven into only when the caller says so: an old
  // change would overwrite the newer ones of its key.
  const auto changes_topic = topic + ".changes";
  kafka.create_topic(changes_topic);
  rt.add_definition("chg.toml", plugin_definition("chg", "libpicomq_connector_stdout_sink",
                                                  "topics = [\"" + changes_topic +
                                                      "\"]\nchanges = \"keyed\"\nkey = { schema = \"text\" }\n"
                                                      "on_bad_record = \"dead_letter\"\ndead_letter_topic = \"" +
                                                      dead + "\"",
                                                  ""));
  ASSERT_EQ(api.post("/reload").status, 200);
  kafka.produce(changes_topic, {{R"({"sku":"B-2","qty":1})", std::nullopt, {}}});  // no key: dead-lettered
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of("chg"), changes_topic) == 1; }, 60s)) << rt.log();
  const auto unsaid = api.post("/sinks/chg/dead-letters/redrive", "{}");
  EXPECT_EQ(unsaid.status, 409) << unsaid.body;
  EXPECT_NE(unsaid.body.find("applies change events"), std::string::npos) << unsaid.body;
  const auto said = ctl({api.url}, "dead-letters redrive chg --apply-changes");
  EXPECT_EQ(said.exit_code, 1) << "still no key: bad again: " << said.out;
  EXPECT_NE(said.out.find(" done: 0 written, 1 bad again"), std::string::npos) << said.out;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0) << rt.log();
}

}  // namespace
}  // namespace picomq::test
