// The PostgreSQL sink when things go wrong, through a real Kafka broker and a real PostgreSQL 15
// server: replays after SIGKILL (no failed attempt, every row once), a duplicate key on the
// direct path, outages (time to Error, one warning, SIGTERM during one, a server that accepts
// and never answers), the start-up health check (credentials, database, pg_hba.conf, schema,
// privileges, unreachable), notices, and one COPY stream per table.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <thread>

#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

using Rows = std::vector<Postgres::Row>;
using Clock = std::chrono::steady_clock;

// A definition of the postgres sink; `conninfo` empty: the test server's for `db`.
std::string definition(const std::string& key, const std::string& topics, const std::string& db,
                       const std::string& plugin_config, const std::string& block_extra = "",
                       const std::string& conninfo = "") {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_postgres_sink\"\n[[topics]]\ntopics = [" + topics +
         "]\nschema = \"json\"\npoll_interval = \"100ms\"\n" + block_extra + "\n[plugin_config]\n" +
         "connection_string = \"" + (conninfo.empty() ? Postgres::shared().conninfo(db) : conninfo) + "\"\n" +
         plugin_config + "\n";
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The sink's counter in the status file (0 when absent).
int64_t counter(Runtime& rt, const std::string& key, const std::string& name) {
  const auto s = rt.sink_status(key);
  if (!s.contains("counters") || !s["counters"].contains(name)) return 0;
  return s["counters"][name].get<int64_t>();
}

// The status file is rewritten once a second: after this, it shows what happened before the call.
void let_status_catch_up() { std::this_thread::sleep_for(1500ms); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Waits (up to `timeout`) for a line with `text` that the runtime logs after this call, reading
// only what its stderr gains (every millisecond): true as soon as one comes.
bool wait_for_new_log_line(Runtime& rt, const std::string& text, std::chrono::milliseconds timeout) {
  std::ifstream log(rt.dir() / "stderr.log");
  log.seekg(0, std::ios::end);
  std::string pending, chunk(1 << 16, '\0');
  for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    log.clear();
    log.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (log.gcount() == 0) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    pending.append(chunk.data(), static_cast<size_t>(log.gcount()));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1))
      if (std::string_view(pending).substr(0, nl).find(text) != std::string_view::npos) return true;
  }
  return false;
}

// ------------------------------------------------------------------ replays

// SIGKILL in the middle of a load over two partitions, then a restart with the same group: the
// replayed window (written, not committed) streams through staging at once. Not one write
// attempt fails (the runtime logs each, the sink counts them), and every record is there once.
TEST(PostgresRecovery, SigkillMidLoadThenRestartReplaysWithoutAFailedAttemptAndEveryRowOnce) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgreplay");
  const auto topic = unique_name("replaypg");
  // Per partition, produced before each run: there is always a load to kill, and it lasts longer
  // than a look at the committed offsets (two consumer clients, ~0.3 s) at the sink's speed.
  const int chunk = 100000;
  int64_t produced = 0;  // per partition
  kafka.create_topic(topic, 2);
  auto produce_chunk = [&] {
    for (int p = 0; p < 2; ++p)
      kafka.produce_values(topic, json_values(static_cast<int>(produced), static_cast<int>(produced) + chunk), p);
    produced += chunk;
  };
  const std::string key = "pgreplay";
  const std::string block =
      "batch_length = 200\nproperties = { \"group.instance.id\" = \"" + key + "\", \"session.timeout.ms\" = \"6000\" }";
  auto committed = [&] {
    int64_t sum = 0;
    for (int p = 0; p < 2; ++p) sum += std::max<int64_t>(0, kafka.committed(group_of(key), topic, p));
    return sum;
  };
  auto rows = [&] { return std::stoll(*pg.query("SELECT count(*) FROM t", db)[0][0]); };
  // Kill until the table holds rows whose offsets were not committed: a replay is certain. The
  // sink logs a segment's COMMIT (at debug) before it completes the segment's writes, so a kill
  // on that line lands before the runtime can commit their offsets, unless it beats the kill
  // by a millisecond or two (then the next run tries again).
  int64_t window = 0;
  for (int run = 0; run < 12 && window <= 0; ++run) {
    produce_chunk();
    Runtime rt(kafka.bootstrap(), "kill" + std::to_string(run));
    rt.log_level("debug");
    rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\"", block));
    rt.start();
    const int64_t before = committed();
    ASSERT_TRUE(wait_until([&] { return committed() > before + 1000; }, 60s)) << rt.log();
    wait_for_new_log_line(rt, "batches in one COPY", 10s);  // a segment's COMMIT (or, after 10 s, any moment)
    rt.kill_hard();
    rt.wait_exit(30s);
    window = rows() - committed();
    std::cout << "[          ] run " << run << ": killed with " << rows() << " rows, " << committed() << " committed\n";
  }
  ASSERT_GT(window, 0) << "no kill left written rows uncommitted";
  produce_chunk();  // records after the replayed window: the replay ends and straight COPY resumes

  Runtime rt(kafka.bootstrap(), "restart");
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\"", block));
  const auto started = Clock::now();
  rt.start();
  ASSERT_TRUE(wait_until([&] { return committed() == 2 * produced; }, 120s)) << rt.log();
  std::cout << "[          ] replayed window " << window << " rows; restart to all committed " << seconds_since(started)
            << " s\n";
  let_status_catch_up();
  const std::string log = rt.log();
  EXPECT_EQ(log.find("failed (attempt"), std::string::npos) << "a write attempt failed\n" << log;
  EXPECT_EQ(counter(rt, key, "failed_writes"), 0) << log;
  EXPECT_EQ(counter(rt, key, "conflict_redos"), 0) << "the replay was seen coming, not met\n" << log;
  EXPECT_GT(counter(rt, key, "already_written_records"), 0) << log;
  EXPECT_NE(log.find("was written before (a replay"), std::string::npos) << log;
  EXPECT_NE(log.find("is past the replay; straight COPY again"), std::string::npos) << log;
  EXPECT_EQ(log.find("NOTICE:"), std::string::npos) << "a raw libpq notice on stderr\n" << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(
      pg.query("SELECT count(*), count(DISTINCT pico_id), count(DISTINCT (pico_partition, pico_offset)) FROM t", db),
      (Rows{{std::to_string(2 * produced), std::to_string(2 * produced), std::to_string(2 * produced)}}));
}

// A row already there that no assignment announced (another writer put it there): the direct
// COPY meets it (23505), and the stream is written again through staging in the same write. No
// attempt fails, the stranger's row stays as it was, every other record lands once.
TEST(PostgresRecovery, ADuplicateKeyOnTheDirectPathIsRedoneThroughStagingWithoutAFailedAttempt) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgdup");
  const auto topic = unique_name("duppg");
  kafka.create_topic(topic);
  const std::string key = "pgdup";
  // The table as the sink makes it, with a row for offset 150 put there by someone else.
  {
    Runtime rt(kafka.bootstrap());
    rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\""));
    rt.start();
    ASSERT_TRUE(rt.wait_state(key, "running", 30s)) << rt.log();
    kafka.produce_values(topic, json_values(0, 1));
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1; }, 30s)) << rt.log();
    rt.signal(SIGTERM);
    ASSERT_EQ(rt.wait_exit(30s), 0);
  }
  pg.exec("INSERT INTO t (pico_id, pico_topic, pico_partition, pico_offset, pico_headers, payload) VALUES ('" + topic +
              ":0:150', '" + topic + "', 0, 150, '{}', '{\"stranger\": true}')",
          db);
  kafka.produce_values(topic, json_values(1, 400));
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\"", "batch_length = 50"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 400; }, 60s)) << rt.log();
  let_status_catch_up();
  const std::string log = rt.log();
  EXPECT_EQ(log.find("failed (attempt"), std::string::npos) << log;
  EXPECT_EQ(counter(rt, key, "failed_writes"), 0) << log;
  EXPECT_GE(counter(rt, key, "conflict_redos"), 1) << log;
  EXPECT_EQ(counter(rt, key, "already_written_records"), 1) << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_offset), min(pico_offset), max(pico_offset) FROM t", db),
            (Rows{{"400", "400", "0", "399"}}));
  EXPECT_EQ(pg.query("SELECT payload::text FROM t WHERE pico_offset = 150", db), (Rows{{R"({"stranger": true})"}}));
}

// libpq prints notices ("relation ... already exists, skipping" on every restart) to stderr by
// default; the sink routes them into the runtime's log: its own IF NOT EXISTS notes at debug,
// others (a trigger's RAISE NOTICE) at info, warnings as warnings.
TEST(PostgresRecovery, NoticesGoThroughTheRuntimeLogNotRawToStderr) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgnotice");
  const auto topic = unique_name("noticepg");
  kafka.create_topic(topic);
  const std::string key = "pgnotice";
  for (int run = 0; run < 2; ++run) {
    kafka.produce_values(topic, json_values(run * 5, run * 5 + 5));
    Runtime rt(kafka.bootstrap(), "notice" + std::to_string(run));
    rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\""));
    rt.start();
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == run * 5 + 5; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    const std::string log = rt.log();
    for (const std::string& line : read_lines(rt.dir() / "stderr.log")) {
      EXPECT_FALSE(line.starts_with("NOTICE:") || line.starts_with("WARNING:")) << "raw libpq output: " << line;
      EXPECT_EQ(line.find("already exists, skipping"), std::string::npos) << "not at info level: " << line;
    }
    if (run == 0) {
      pg.exec(
          "CREATE FUNCTION say() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
          "RAISE NOTICE 'row % arrived', NEW.pico_offset; RAISE WARNING 'careful with %', NEW.pico_offset; "
          "RETURN NEW; END $$; CREATE TRIGGER say BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION say()",
          db);
    } else {
      EXPECT_NE(log.find("PostgreSQL NOTICE: NOTICE:  row 5 arrived"), std::string::npos) << log;
      EXPECT_NE(log.find("PostgreSQL WARNING: WARNING:  careful with 9"), std::string::npos) << log;
    }
  }
}

// A batch of a partition that replays comes for a table whose direct stream is open (another
// topic's, into the same table): the stream becomes a staged one in place, in the same write.
// Nothing fails, the replayed rows are skipped (the rows already there stay as they were), every
// other row lands once. To have the direct stream open when the replayed batch comes, the test
// holds a lock on the table that the COPY waits for: the other topic's rows (~24 MB, more than
// the socket buffers hold) stop being sent, the sink's writer waits inside its COPY, and the
// replayed records are produced and fetched meanwhile; once the lock goes, the runtime hands
// their batch over right after the other topic's last, into the stream still open.
TEST(PostgresRecovery, AReplayedBatchJoiningADirectStreamTurnsItIntoAStagedOneInTheSameWrite) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgjoin");
  const auto a = unique_name("joina"), b = unique_name("joinb");
  kafka.create_topic(a);
  kafka.create_topic(b);
  const std::string key = "pgjoin";
  auto define = [&](Runtime& rt) {
    rt.add_definition("pg.toml",
                      "type = \"sink\"\nkey = \"" + key +
                          "\"\npath = \"libpicomq_connector_postgres_sink\"\n"
                          "[[topics]]\ntopics = [\"" +
                          a + "\", \"" + b +
                          "\"]\nschema = \"json\"\n"
                          "batch_length = 1000\npoll_interval = \"300ms\"\n[plugin_config]\nconnection_string = \"" +
                          pg.conninfo(db) + "\"\ntarget_table = \"t\"\ncommit_interval = \"30s\"\n");
  };
  {  // the table, as the sink makes it
    Runtime rt(kafka.bootstrap(), "create");
    define(rt);
    rt.start();
    kafka.produce_values(a, json_values(0, 1));
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), a) == 1; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    ASSERT_EQ(rt.wait_exit(30s), 0);
  }
  // b's first 100 records are in the table already (as another writer put them there).
  pg.exec("INSERT INTO t (pico_id, pico_topic, pico_partition, pico_offset, pico_headers, payload) SELECT '" + b +
              ":0:' || n, '" + b + "', 0, n, '{}', '{\"before\": true}' FROM generate_series(0, 99) n",
          db);
  // The lock a COPY waits for (ROW EXCLUSIVE against SHARE), held by a session of the test's own.
  PGconn* holder = PQconnectdb(pg.conninfo(db).c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK) << PQerrorMessage(holder);
  PGresult* locked = PQexec(holder, "BEGIN; LOCK TABLE t IN SHARE MODE");
  ASSERT_EQ(PQresultStatus(locked), PGRES_COMMAND_OK) << PQerrorMessage(holder);
  PQclear(locked);
  kafka.produce_values(a, json_values(1, 60001, 400));  // 60 batches: one stream (fewer than 64)
  Runtime rt(kafka.bootstrap(), "join");
  rt.log_level("debug");  // the segments' commits in the log, should it fail
  define(rt);
  rt.start();
  const bool waiting = wait_until(
      [&] {
        return !pg.query("SELECT 1 FROM pg_stat_activity WHERE datname = '" + db +
                         "' AND query LIKE 'COPY %' AND "
                         "wait_event_type = 'Lock'")
                    .empty();
      },
      60s);
  if (waiting) {
    kafka.produce_values(b, json_values(0, 100));
    // Fetched (the block's position on b is past them), then one poll_interval (300 ms) for their
    // bucket to close and queue its batch behind the waiting writer.
    const bool fetched = wait_until(
        [&] {
          const auto s = rt.sink_status(key);
          if (!s.contains("blocks")) return false;
          for (const auto& block : s["blocks"])
            for (const auto& l : block["lag"])
              if (l["topic"] == b && l["position"].get<int64_t>() >= 100) return true;
          return false;
        },
        60s);
    EXPECT_TRUE(fetched) << "b's records were never fetched\n" << rt.log();
    std::this_thread::sleep_for(1500ms);
  }
  PQclear(PQexec(holder, "COMMIT"));
  PQfinish(holder);
  ASSERT_TRUE(waiting) << "the COPY never waited for the lock\n" << rt.log();
  ASSERT_TRUE(wait_until(
      [&] { return kafka.committed(group_of(key), a) == 60001 && kafka.committed(group_of(key), b) == 100; }, 120s))
      << rt.log();
  let_status_catch_up();
  const std::string log = rt.log();
  EXPECT_NE(log.find("[0], which replays, joins the COPY"), std::string::npos) << log;
  EXPECT_EQ(log.find("failed (attempt"), std::string::npos) << log;
  EXPECT_EQ(counter(rt, key, "failed_writes"), 0) << log;
  EXPECT_EQ(counter(rt, key, "conflict_redos"), 0) << log;
  EXPECT_EQ(counter(rt, key, "already_written_records"), 100) << log;
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_id), count(*) FILTER (WHERE payload ? 'before') FROM t", db),
            (Rows{{"60101", "60101", "100"}}));
}

// ------------------------------------------------------------------ outages

// One rule for the time to Error: every write attempt waits reconnect_timeout for the server,
// the runtime makes five with 0.2 + 0.4 + 0.8 + 1.6 s between them: 5 x 2 s + 3 s = 13 s after
// the first write that found the server gone. One warning for the whole outage.
TEST(PostgresOutage, TimeToErrorIsFiveReconnectTimeoutsPlusTheRuntimeBackoffsWithOneWarning) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgtte");
  const auto topic = unique_name("ttepg");
  kafka.create_topic(topic);
  const std::string key = "pgtte";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml",
                    definition(key, "\"" + topic + "\"", db, "target_table = \"t\"\nreconnect_timeout = \"2s\""));
  rt.start();
  kafka.produce_values(topic, json_values(0, 5));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 5; }, 60s)) << rt.log();
  pg.stop();
  kafka.produce_values(topic, json_values(5, 10));
  const auto produced = Clock::now();
  const bool errored = rt.wait_state(key, "error", 60s);
  const double took = seconds_since(produced);
  pg.start();
  ASSERT_TRUE(errored) << rt.log();
  std::cout << "[          ] time to Error with reconnect_timeout 2s: " << took << " s (rule: 13 s)\n";
  EXPECT_GE(took, 10.0) << rt.log();
  EXPECT_LE(took, 13.0 + 7.0 * (scaled(1000ms).count() / 1000.0)) << rt.log();
  const std::string log = rt.log();
  EXPECT_EQ(occurrences(log, "PostgreSQL is unreachable"), 1u) << log;
  EXPECT_EQ(occurrences(log, "failed (attempt"), 4u) << "five attempts: four retried, the fifth stops\n" << log;
  EXPECT_EQ(counter(rt, key, "destination_unreachable"), 1) << log;
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
  EXPECT_EQ(kafka.committed(group_of(key), topic), 5);
}

// A server that accepts connections and never answers (a hung host, a black-holing proxy):
// libpq's blocking connect would wait for connect_timeout (here 10 s) per attempt, or forever
// without one. Each attempt is bounded by reconnect_timeout instead: 5 x 1 s + 3 s.
TEST(PostgresOutage, AServerThatAcceptsAndNeverAnswersStillReachesErrorOnTheRule) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("blackholepg");
  kafka.create_topic(topic);
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 64), 0);  // never accept()ed: the kernel completes handshakes, nobody answers
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string conninfo =
      "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) + " user=postgres dbname=x connect_timeout=10";
  const std::string key = "pgblackhole";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", "", "reconnect_timeout = \"1s\"", "", conninfo));
  rt.start();
  ASSERT_TRUE(rt.wait_state(key, "running", 30s)) << rt.log();
  kafka.produce_values(topic, json_values(0, 3));
  const auto produced = Clock::now();
  const bool errored = rt.wait_state(key, "error", 60s);
  const double took = seconds_since(produced);
  ::close(listener);
  ASSERT_TRUE(errored) << rt.log();
  std::cout << "[          ] time to Error against a silent server, reconnect_timeout 1s: " << took
            << " s (rule: 8 s; libpq's connect_timeout alone: 53 s)\n";
  EXPECT_GE(took, 5.0) << rt.log();
  EXPECT_LE(took, 8.0 + 7.0 * (scaled(1000ms).count() / 1000.0)) << rt.log();
  EXPECT_EQ(occurrences(rt.log(), "PostgreSQL is unreachable"), 1u) << rt.log();
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

// SIGTERM while writes wait for a server that is down: the stop waits for the attempt in
// progress only (at most reconnect_timeout), exits 0, and the batch is delivered again later.
TEST(PostgresOutage, SigtermDuringAnOutageExitsWithinSecondsWithZeroAndLosesNothing) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgterm");
  const auto topic = unique_name("termpg");
  kafka.create_topic(topic);
  const std::string key = "pgterm";
  const std::string config = "target_table = \"t\"\nreconnect_timeout = \"3s\"";
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, config));
  rt.start();
  kafka.produce_values(topic, json_values(0, 5));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 5; }, 60s)) << rt.log();
  pg.stop();
  kafka.produce_values(topic, json_values(5, 10));
  const bool waiting = wait_until([&] { return rt.log().find("PostgreSQL is unreachable") != std::string::npos; }, 30s);
  if (!waiting) pg.start();
  ASSERT_TRUE(waiting) << rt.log();
  std::this_thread::sleep_for(1500ms);  // in the middle of an attempt's wait
  const auto signalled = Clock::now();
  rt.signal(SIGTERM);
  const auto code = rt.wait_exit(30s);
  const double took = seconds_since(signalled);
  pg.start();
  std::cout << "[          ] SIGTERM during an outage (reconnect_timeout 3s): exit " << (code ? *code : -1) << " after "
            << took << " s\n";
  EXPECT_EQ(code, 0) << rt.log();
  EXPECT_LE(took, 3.0 + 3.0 * (scaled(1000ms).count() / 1000.0)) << rt.log();
  EXPECT_EQ(kafka.committed(group_of(key), topic), 5);
  // The next run writes what the stopped one could not.
  Runtime again(kafka.bootstrap(), "again");
  again.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, config));
  again.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 10; }, 60s)) << again.log();
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_offset) FROM t", db), (Rows{{"10", "10"}}));
}

// ------------------------------------------------------------------ start-up health check

// The server's pg_hba.conf with lines of a test put first (first match wins), restored after.
class HbaLines {
 public:
  HbaLines(Postgres& pg, const std::string& lines) : pg_(pg), path_(pg.dir() / "data" / "pg_hba.conf") {
    original_ = read_file(path_);
    std::ofstream(path_, std::ios::trunc) << lines << "\n" << original_;
    pg_.exec("SELECT pg_reload_conf()");
    std::this_thread::sleep_for(300ms);  // the postmaster reloads on SIGHUP, asynchronously
  }
  ~HbaLines() {
    std::ofstream(path_, std::ios::trunc) << original_;
    pg_.exec("SELECT pg_reload_conf()");
  }

 private:
  Postgres& pg_;
  std::filesystem::path path_;
  std::string original_;
};

// Wrong password, missing database, a pg_hba.conf that rejects, a missing schema, a schema
// without USAGE or CREATE: each stops the sink at start on an empty topic, with a message that
// says what is wrong and holds no password. The right credentials run.
TEST(PostgresHealth, ConfigurationMistakesFailTheSinkAtStartOnAnEmptyTopic) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pghealth");
  const auto rejected_db = pg.create_database("pghealthrej");
  const auto topic = unique_name("healthpg");
  kafka.create_topic(topic);
  const std::string suffix = std::to_string(getpid());
  const std::string pw_role = "pico_pw_" + suffix, plain_role = "pico_plain_" + suffix;
  pg.exec("DROP ROLE IF EXISTS " + pw_role + "; DROP ROLE IF EXISTS " + plain_role + "; CREATE ROLE " + pw_role +
          " LOGIN PASSWORD 'right-s3cret'; CREATE ROLE " + plain_role + " LOGIN");
  pg.exec("CREATE SCHEMA locked; CREATE SCHEMA readonly; GRANT USAGE ON SCHEMA readonly TO " + plain_role +
              "; GRANT ALL ON SCHEMA public TO " + pw_role + ", " + plain_role,
          db);
  HbaLines hba(pg, "host " + db + " " + pw_role + " 127.0.0.1/32 scram-sha-256\nhost " + rejected_db +
                       " all 127.0.0.1/32 reject");
  const std::string base = "host=127.0.0.1 port=" + std::to_string(pg.port());
  struct Case {
    std::string conninfo, config, expected;
  };
  auto conninfo = [&](const std::string& dbname, const std::string& user, std::string_view extra = "") {
    std::string out = base;
    out.append(" dbname=").append(dbname).append(" user=").append(user).append(extra);
    return out;
  };
  for (const Case& c : std::vector<Case>{
           {conninfo(db, pw_role, " password=wrong-s3cret"), "", "password authentication failed"},
           {conninfo("no_such_db_" + suffix, "postgres"), "", "does not exist"},
           {conninfo(rejected_db, "postgres"), "", "pg_hba.conf rejects connection"},
           {conninfo(db, "postgres"), "schema = \"nowhere\"", "schema \"nowhere\" does not exist"},
           {conninfo(db, plain_role), "schema = \"locked\"", "has no USAGE privilege on schema"},
           {conninfo(db, plain_role), "schema = \"readonly\"", "has no CREATE privilege"},
       }) {
    SCOPED_TRACE(c.expected);
    const std::string key = "pghealthbad";
    Runtime rt(kafka.bootstrap());
    rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, c.config, "", c.conninfo));
    const auto started = Clock::now();
    rt.start();
    ASSERT_TRUE(rt.wait_state(key, "error", 30s)) << rt.log();
    EXPECT_LT(seconds_since(started), 10.0) << "at start, not after retries";
    const auto message = rt.sink_status(key).value("message", "");
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    rt.signal(SIGTERM);
    rt.wait_exit(30s);
    EXPECT_EQ(rt.log().find("s3cret"), std::string::npos) << "a password in the log\n" << rt.log();
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  }
  // The right password, and a role that may use and create in the schema: running.
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", definition("pghealthok", "\"" + topic + "\"", db, "", "",
                                          base + " dbname=" + db + " user=" + pw_role + " password=right-s3cret"));
  rt.start();
  ASSERT_TRUE(rt.wait_state("pghealthok", "running", 30s)) << rt.log();
  // The server's major version (15 or 18: PICOMQ_PG_VERSION, sinks/postgres/server.sh).
  const int major = std::stoi(*Postgres::shared().query("SHOW server_version_num")[0][0]) / 10000;
  EXPECT_NE(rt.log().find("connected to PostgreSQL " + std::to_string(major)), std::string::npos) << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
}

// A server that cannot be reached at start is not a configuration error: the sink starts, the
// log warns once and the status shows destination_unreachable; once the server is up the sink
// connects on its own (destination_reconnected), and records land.
TEST(PostgresHealth, AnUnreachableServerAtStartIsAWarningAndACounterAndTheSinkConnectsLater) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgunreach");
  const auto topic = unique_name("unreachpg");
  kafka.create_topic(topic);
  const std::string key = "pgunreach";
  pg.stop();
  Runtime rt(kafka.bootstrap());
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, "target_table = \"t\""));
  rt.start();
  const bool running = rt.wait_state(key, "running", 30s);
  const bool counted = wait_until([&] { return counter(rt, key, "destination_unreachable") == 1; }, 10s);
  pg.start();
  ASSERT_TRUE(running) << rt.log();
  ASSERT_TRUE(counted) << rt.status().dump();
  EXPECT_EQ(occurrences(rt.log(), "PostgreSQL is unreachable"), 1u) << rt.log();
  ASSERT_TRUE(wait_until([&] { return counter(rt, key, "destination_reconnected") == 1; }, 30s)) << rt.log();
  EXPECT_NE(rt.log().find("reconnected to PostgreSQL after"), std::string::npos) << rt.log();
  kafka.produce_values(topic, json_values(0, 5));
  ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 5; }, 60s)) << rt.log();
  EXPECT_EQ(rt.sink_state(key), "running");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*) FROM t", db), (Rows{{"5"}}));
}

// ------------------------------------------------------------------ streams per table

// Two topics into two tables, batches interleaved: each table keeps a COPY stream of its own
// on a connection of its own (few transactions per table), instead of committing at every
// switch; max_open_tables = 1 makes them take turns. The connections are a pool: one per stream
// open at once, plus one for a stream committing beside them, never more than max_open_tables + 1.
TEST(PostgresStreams, EachTableKeepsItsOwnStreamOnItsOwnConnectionUpToMaxOpenTables) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto a = unique_name("streama"), b = unique_name("streamb");
  kafka.create_topic(a);
  kafka.create_topic(b);
  kafka.produce_values(a, json_values(0, 4000));
  kafka.produce_values(b, json_values(0, 4000));
  for (const int open_tables : {4, 1}) {
    SCOPED_TRACE(open_tables);
    const auto db = pg.create_database("pgstreams");
    const std::string key = "pgstreams" + std::to_string(open_tables);
    Runtime rt(kafka.bootstrap(), key);
    std::string topics = "\"";
    topics.append(a).append("\", \"").append(b).append("\"");
    std::string options = "target_table = \"t_{topic_segment[0]}\"\ncommit_interval = \"30s\"\nmax_open_tables = ";
    options += std::to_string(open_tables);
    rt.add_definition("pg.toml", definition(key, topics, db, options, "batch_length = 200"));
    rt.start();
    ASSERT_TRUE(wait_until(
        [&] { return kafka.committed(group_of(key), a) == 4000 && kafka.committed(group_of(key), b) == 4000; }, 60s))
        << rt.log();
    const auto connections =
        pg.query("SELECT count(*) FROM pg_stat_activity WHERE datname = '" + db + "' AND pid <> pg_backend_pid()");
    ASSERT_EQ(connections.size(), 1u);
    std::cout << "[          ] max_open_tables " << open_tables << ": " << *connections[0][0] << " connections\n";
    EXPECT_GE(std::stoi(*connections[0][0]), 1);
    EXPECT_LE(std::stoi(*connections[0][0]), std::min(open_tables, 2) + 1)
        << "a connection per stream open at once (two tables), and one committing";
    rt.signal(SIGTERM);
    EXPECT_EQ(rt.wait_exit(30s), 0);
    for (const auto& topic : {a, b}) {
      const std::string table = "\"t_" + topic.substr(0, topic.find('.')) + "\"";
      const auto rows =
          pg.query("SELECT count(*), count(DISTINCT pico_id), count(DISTINCT xmin::text) FROM " + table, db);
      ASSERT_EQ(rows.size(), 1u);
      EXPECT_EQ(rows[0][0], "4000");
      EXPECT_EQ(rows[0][1], "4000");
      std::cout << "[          ] max_open_tables " << open_tables << ": " << table << " in " << *rows[0][2]
                << " transactions\n";
      if (open_tables == 4) EXPECT_LE(std::stoi(*rows[0][2]), 6) << "20 batches should share one or a few transactions";
    }
  }
}

// A COMMIT that takes its time (a deferred constraint trigger sleeps in it, once per 5,000 rows)
// does not hold the table's next COPY back: the next stream opens on another connection and the
// server works on both at once. Every row lands once.
TEST(PostgresStreams, TheNextCopyIntoATableStreamsWhileItsPreviousCommitRuns) {
  auto& kafka = Kafka::shared();
  auto& pg = Postgres::shared();
  const auto db = pg.create_database("pgoverlap");
  const auto topic = unique_name("overlappg");
  kafka.create_topic(topic);
  const std::string key = "pgoverlap";
  const std::string config = "target_table = \"t\"\ncommit_interval = \"30s\"";
  {  // the table, as the sink makes it
    Runtime rt(kafka.bootstrap(), "create");
    rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, config));
    rt.start();
    kafka.produce_values(topic, json_values(0, 1));
    ASSERT_TRUE(wait_until([&] { return kafka.committed(group_of(key), topic) == 1; }, 60s)) << rt.log();
    rt.signal(SIGTERM);
    ASSERT_EQ(rt.wait_exit(30s), 0);
  }
  pg.exec(
      "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); "
      "RETURN NULL; END $$; CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON t DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW WHEN (NEW.pico_offset % 5000 = 0) EXECUTE FUNCTION slow_commit()",
      db);
  kafka.produce_values(topic, json_values(1, 30001));
  Runtime rt(kafka.bootstrap(), "load");
  rt.add_definition("pg.toml", definition(key, "\"" + topic + "\"", db, config, "batch_length = 100"));
  rt.start();
  // pg_stat_activity while it loads: a COMMIT running (in the trigger's sleep) and a COPY at once.
  bool overlap = false;
  const auto deadline = Clock::now() + scaled(60s);
  while (kafka.committed(group_of(key), topic) < 30001 && Clock::now() < deadline) {
    for (int i = 0; i < 20 && !overlap; ++i) {
      const auto r = pg.query(
          "SELECT count(*) FILTER (WHERE query = 'COMMIT'), count(*) FILTER (WHERE query LIKE "
          "'COPY %') FROM pg_stat_activity WHERE datname = '" +
          db + "' AND state = 'active'");
      overlap = r.size() == 1 && r[0][0] != "0" && r[0][1] != "0";
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_EQ(kafka.committed(group_of(key), topic), 30001) << rt.log();
  EXPECT_TRUE(overlap) << "never a COPY beside a COMMIT\n" << rt.log();
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(pg.query("SELECT count(*), count(DISTINCT pico_id), min(pico_offset), max(pico_offset) FROM t", db),
            (Rows{{"30001", "30001", "0", "30000"}}));
}

}  // namespace
}  // namespace picomq::test
