// Python sinks through the real broker and the runtime (one broker for the binary): the spec's three
// examples (examples/python), every outcome, overlapping writes with in-order commits, a slow and a
// CPU-bound Python sink beside a C++ sink, refusals at load, close at shutdown, pyarrow values.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "harness.h"

namespace picomq::test {
namespace {

const std::string kSource = PICOMQ_SOURCE_DIR;
const std::string kVenv = kSource + "/tools/venv";

std::string python_definition(const std::string& key, const std::string& topic, const std::string& klass,
                              const std::string& options, const std::string& extra = "",
                              const std::string& block_extra = "batch_length = 5\n") {
  return "type = \"sink\"\nkey = \"" + key +
         "\"\npath = \"libpicomq_connector_python_sink\"\n[[topics]]\ntopics = [\"" + topic + "\"]\n" + block_extra +
         "[plugin_config]\nclass = \"" + klass + "\"\npython_path = [\"" + kSource + "/examples/python\", \"" +
         kSource + "/sinks/python/tests/python\"]\nvirtualenv = \"" + kVenv + "\"\n" + extra + "options = " + options +
         "\n";
}

std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& p) {
  std::vector<nlohmann::json> out;
  if (!std::filesystem::exists(p)) return out;
  for (const auto& line : read_lines(p))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string out_option(const Runtime& rt, const std::string& name) {
  return "{ out = \"" + (rt.dir() / name).string() + "\" }";
}

// The spec's three examples, as shipped, through the broker: each sink on its own plane sees every
// record with its payload and metadata, and everything is committed. The Arrow one gets exact
// values and nulls in pyarrow.
TEST(PythonSpecExamples, MinimumShapeNativeBatchAndArrowBoundaryWriteEveryRecord) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("spec");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records;
  for (int i = 0; i < 12; ++i) {
    ProducedRecord r;
    r.value = i % 5 == 3 ? "{\"n\":null}"
                         : "{\"n\":" + std::to_string(i) + ",\"s\":\"v" + std::to_string(i) +
                               "\",\"f\":" + std::to_string(i) + ".5,\"ok\":" + (i % 2 ? "false" : "true") + "}";
    r.key = "k" + std::to_string(i);
    r.headers = {{"trace", "t" + std::to_string(i)}};
    r.partition = 0;
    records.push_back(r);
  }
  kafka.produce(topic, records);
  Runtime rt(kafka.bootstrap());
  rt.env("DEMO_SINK_OUT", (rt.dir() / "demo.jsonl").string());
  rt.add_definition("min.toml", python_definition("spec-min", topic, "minimum_shape:MySink", "{}"));
  rt.add_definition("batch.toml", python_definition("spec-batch", topic, "native_batch:MyBatchSinkDemo", "{}"));
  rt.add_definition("arrow.toml", python_definition("spec-arrow", topic, "arrow_boundary:MyArrowSinkDemo", "{}"));
  rt.start();
  for (const auto* key : {"spec-min", "spec-batch", "spec-arrow"})
    ASSERT_TRUE(
        wait_until([&] { return kafka.committed(std::string("picomq-connect-sink-") + key, topic) == 12; }, 60s))
        << key << "\n"
        << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_NE(rt.log().find("minimum_shape:MySink open; plane rows"), std::string::npos) << rt.log();
  EXPECT_NE(rt.log().find("native_batch:MyBatchSinkDemo open; plane batches"), std::string::npos);
  EXPECT_NE(rt.log().find("arrow_boundary:MyArrowSinkDemo open; plane arrow"), std::string::npos);

  std::map<std::string, std::vector<nlohmann::json>> by_call;
  for (auto& line : read_json_lines(rt.dir() / "demo.jsonl")) by_call[line["call"]].push_back(line["row"]);
  ASSERT_EQ(by_call["send"].size(), 12u) << "MySink.write(): one call per record";
  ASSERT_EQ(by_call["send_many"].size(), 12u) << "MyBatchSink.write_batch()";
  ASSERT_EQ(by_call["send_arrow"].size(), 12u) << "MyArrowSink.write_arrow_batch()";
  EXPECT_EQ(by_call["send_one"].size(), 0u) << "the Arrow sink is never downgraded to rows";
  for (const auto* call : {"send", "send_many", "send_arrow"}) {
    const auto& rows = by_call[call];
    for (int i = 0; i < 12; ++i) {
      const auto& row = rows[i];
      SCOPED_TRACE(std::string(call) + " record " + std::to_string(i) + ": " + row.dump());
      EXPECT_EQ(row["pico_offset"], i);
      EXPECT_EQ(row["pico_topic"], topic);
      EXPECT_EQ(row["pico_partition"], 0);
      EXPECT_EQ(row["pico_key"], "k" + std::to_string(i));
      EXPECT_EQ(row["pico_headers"], nlohmann::json::parse("[[\"trace\",\"t" + std::to_string(i) + "\"]]"));
      if (i % 5 == 3) {
        EXPECT_TRUE(row["n"].is_null());
        if (std::string(call) == "send_arrow")
          EXPECT_TRUE(row["s"].is_null()) << "a field absent from a record is null in Arrow";
        else EXPECT_FALSE(row.contains("s")) << "and absent from its dict";
      } else {
        EXPECT_EQ(row["n"], i);
        EXPECT_EQ(row["s"], "v" + std::to_string(i));
        EXPECT_DOUBLE_EQ(row["f"].get<double>(), i + 0.5);
        EXPECT_EQ(row["ok"], i % 2 == 0);
      }
    }
  }
  // Only Arrow has a timestamp column of datetimes; the dicts carry epoch milliseconds.
  EXPECT_TRUE(by_call["send"][0]["pico_timestamp"].is_number_integer());
  EXPECT_TRUE(by_call["send_arrow"][0]["pico_timestamp"].is_string());
}

// Rows of every payload shape: an object gives its fields, any other JSON value and a tombstone
// are under "payload", and a field that collides with a pico_* key rejects its record (here to the
// skip policy) while the others are written.
TEST(PythonRows, PayloadShapesTombstonesAndMetadataCollisions) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("shapes");
  kafka.create_topic(topic);
  std::vector<ProducedRecord> records(6);
  records[0].value = R"({"a":1})";
  records[1].value = "[1,2]";
  records[2].value = R"("text")";
  records[3].null_value = true;
  records[4].value = R"({"pico_offset":99,"a":5})";
  records[5].value = R"({"big":123456789012345678901234567890})";
  for (auto& r : records) r.partition = 0;
  kafka.produce(topic, records);
  Runtime rt(kafka.bootstrap());
  rt.env("DEMO_SINK_OUT", (rt.dir() / "demo.jsonl").string());
  rt.add_definition("shapes.toml", python_definition("py-shapes", topic, "native_batch:MyBatchSinkDemo", "{}", "",
                                                     "batch_length = 10\non_bad_record = \"skip\"\n"));
  rt.add_definition("bare.toml", python_definition("py-bare", topic, "test_sinks:Record", out_option(rt, "bare.jsonl"),
                                                   "include_metadata = false\n", "batch_length = 10\n"));
  rt.add_definition("zc.toml", python_definition("py-zc", topic, "test_sinks:ArrowCheck", out_option(rt, "zc.jsonl"),
                                                 "", "batch_length = 10\non_bad_record = \"skip\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-zc", topic) == 6; }, 30s)) << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-shapes", topic) == 6; }, 30s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-bare", topic) == 6; }, 30s)) << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  std::vector<nlohmann::json> rows;
  for (auto& line : read_json_lines(rt.dir() / "demo.jsonl")) rows.push_back(line["row"]);
  ASSERT_EQ(rows.size(), 5u) << "the colliding record is skipped";
  EXPECT_EQ(rows[0]["a"], 1);
  EXPECT_FALSE(rows[0].contains("payload"));
  EXPECT_EQ(rows[1]["payload"], nlohmann::json::parse("[1,2]"));
  EXPECT_EQ(rows[2]["payload"], "text");
  EXPECT_TRUE(rows[3].contains("payload") && rows[3]["payload"].is_null()) << "a tombstone";
  EXPECT_EQ(rows[3]["pico_offset"], 3);
  EXPECT_EQ(rows[4]["pico_offset"], 5);
  EXPECT_NE(read_file(rt.dir() / "demo.jsonl").find("\"big\": 123456789012345678901234567890"), std::string::npos)
      << "Python ints keep big numbers exact";
  EXPECT_NE(rt.log().find("field 'pico_offset' collides with a metadata column"), std::string::npos) << rt.log();

  // include_metadata = false: the payload alone, and no collision is possible.
  const auto bare = read_json_lines(rt.dir() / "bare.jsonl");
  ASSERT_EQ(bare.size(), 6u);
  EXPECT_EQ(bare[0]["row"], nlohmann::json::parse(R"({"a":1})"));
  EXPECT_EQ(bare[3]["row"], nlohmann::json::parse(R"({"payload":null})"));
  EXPECT_EQ(bare[4]["row"], nlohmann::json::parse(R"({"pico_offset":99,"a":5})"));

  // Arrow crosses without a copy: while the sink holds the batch, pyarrow's pool holds nothing.
  const auto zc = read_json_lines(rt.dir() / "zc.jsonl");
  ASSERT_FALSE(zc.empty());
  int64_t rows_seen = 0;
  for (auto& l : zc) {
    rows_seen += l["rows"].get<int64_t>();
    EXPECT_GT(l["nbytes"].get<int64_t>(), 0);
    EXPECT_EQ(l["pool_bytes"], 0) << "imported through the C Data Interface, not copied: " << l;
    EXPECT_EQ(l["columns"][0], "pico_topic");
  }
  EXPECT_EQ(rows_seen, 6) << "some payloads are not objects: the batch exports whole payloads, so nothing collides";
  EXPECT_EQ(zc.back()["columns"].back(), "payload");
}

// An Arrow class's batches are exported by the runtime (the plugin chose the Arrow plane at open,
// ABI 2.5), so the block's declared arrow_schema shapes them, a record it cannot hold is the
// runtime's rejection (here to skip), and include_metadata = false leaves no pico_* column.
TEST(PythonArrow, TheRuntimesExportWithTheDeclaredSchemaAndWithoutMetadataColumns) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("arrow-declared");
  kafka.create_topic(topic);
  kafka.produce_values(topic, {R"({"n":1,"s":"a"})", R"({"n":"two","s":"b"})", R"({"n":3,"s":"c","extra":true})"});
  Runtime rt(kafka.bootstrap());
  rt.add_definition(
      "a.toml",
      python_definition("py-arrow-declared", topic, "test_sinks:ArrowCheck", out_option(rt, "a.jsonl"),
                        "include_metadata = false\n",
                        "batch_length = 10\non_bad_record = \"skip\"\n"
                        "arrow_schema = [ { name = \"n\", type = \"int64\" }, { name = \"s\", type = \"utf8\" } ]\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-arrow-declared", topic) == 3; }, 30s))
      << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto batches = read_json_lines(rt.dir() / "a.jsonl");
  int64_t rows = 0;
  for (const auto& b : batches) {
    rows += b["rows"].get<int64_t>();
    EXPECT_EQ(b["columns"], nlohmann::json::parse(R"(["n","s"])")) << b;
    EXPECT_EQ(b["pool_bytes"], 0) << b;
  }
  EXPECT_EQ(rows, 2) << "the record whose n is a string is skipped";
  EXPECT_NE(rt.log().find("expected int64, found string"), std::string::npos) << rt.log();
  EXPECT_NE(rt.log().find("plane arrow"), std::string::npos) << rt.log();
}

// Outcomes: an exception is retried with the offset held, FatalError stops the sink in Error, a
// transient failure is retried until it passes, rejected records follow the bad-record policy.
TEST(PythonOutcomes, RetryFatalFlakyAndRejectedRecords) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("outcomes");
  const auto dead = unique_name("outcomes.dead");
  kafka.create_topic(topic);
  kafka.create_topic(dead);
  kafka.produce_values(topic, json_values(0, 10), 0);
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("keep_running_on_error = true");
  auto options = [&](const std::string& name, const std::string& mode, int at) {
    return "{ out = \"" + (rt.dir() / (name + ".jsonl")).string() + "\", mode = \"" + mode +
           "\", at = " + std::to_string(at) + " }";
  };
  rt.add_definition("retry.toml",
                    python_definition("py-retry", topic, "test_sinks:Outcomes", options("retry", "retry", 6)));
  rt.add_definition("fatal.toml",
                    python_definition("py-fatal", topic, "test_sinks:Outcomes", options("fatal", "fatal", 7)));
  rt.add_definition("flaky.toml",
                    python_definition("py-flaky", topic, "test_sinks:Outcomes", options("flaky", "flaky", 2)));
  rt.add_definition(
      "reject.toml",
      python_definition("py-reject", topic, "test_sinks:Outcomes", options("reject", "reject", 8), "",
                        "batch_length = 5\non_bad_record = \"dead_letter\"\ndead_letter_topic = \"" + dead + "\"\n"));
  rt.add_definition("rejectfail.toml", python_definition("py-rejectfail", topic, "test_sinks:Outcomes",
                                                         options("rejectfail", "reject", 8)));
  rt.start();

  ASSERT_TRUE(rt.wait_state("py-fatal", "error", 30s)) << rt.log();
  EXPECT_NE(rt.sink_status("py-fatal").dump().find("FatalError: table dropped at offset 7"), std::string::npos)
      << rt.sink_status("py-fatal");
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-flaky", topic) == 10; }, 30s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-reject", topic) == 10; }, 30s))
      << rt.log();
  ASSERT_TRUE(rt.wait_state("py-rejectfail", "error", 30s)) << rt.log();
  ASSERT_TRUE(rt.wait_state("py-retry", "error", 60s)) << "retries run out: " << rt.log();
  EXPECT_NE(rt.sink_status("py-retry").dump().find("RetryableError: destination busy at offset 6"), std::string::npos)
      << rt.sink_status("py-retry");
  rt.signal(SIGTERM);
  rt.wait_exit(30s);

  EXPECT_EQ(kafka.committed("picomq-connect-sink-py-retry", topic), 5) << "the failing batch's offset is held";
  const auto retries = read_json_lines(rt.dir() / "retry.jsonl");
  EXPECT_EQ(std::count_if(retries.begin(), retries.end(), [](auto& l) { return l["first"] == 5; }), 5)
      << "the same batch, 5 attempts";
  EXPECT_EQ(kafka.committed("picomq-connect-sink-py-fatal", topic), 5) << "offsets 0..4 written, 5..9 held";
  const auto fatal = read_json_lines(rt.dir() / "fatal.jsonl");
  ASSERT_EQ(fatal.size(), 2u) << "batch 0..4 written, batch 5..9 failed once: a fatal outcome is not retried";
  EXPECT_EQ(fatal[1]["status"], "fatal");

  // With two writes in flight the second batch may land between the retries of the first.
  std::set<int64_t> flaky_written;
  int flaky_retries = 0;
  for (auto& l : read_json_lines(rt.dir() / "flaky.jsonl")) {
    if (l["status"] == "retry") {
      ++flaky_retries;
      EXPECT_EQ(l["first"], 0);
    } else {
      for (auto& o : l["offsets"]) EXPECT_TRUE(flaky_written.insert(o.get<int64_t>()).second) << "written once: " << o;
    }
  }
  EXPECT_EQ(flaky_retries, 2);
  EXPECT_EQ(flaky_written.size(), 10u);

  const auto dead_letters = kafka.consume(dead, 1, 20s);
  ASSERT_EQ(dead_letters.size(), 1u);
  EXPECT_EQ(dead_letters[0].value.value_or(""), "{\"n\":8}");
  EXPECT_NE(rt.sink_status("py-rejectfail").dump().find("offset 8"), std::string::npos)
      << rt.sink_status("py-rejectfail");
  EXPECT_NE(rt.sink_status("py-rejectfail").dump().find("offset 8 is too large for the destination"), std::string::npos)
      << rt.sink_status("py-rejectfail");
  EXPECT_EQ(kafka.committed("picomq-connect-sink-py-rejectfail", topic), 8)
      << "fail policy: records before the rejected one";
}

// Several writes in flight: their coroutines overlap on the one loop, and offsets are committed in
// order: while the first (slow) write is pending, later completed writes commit nothing. close()
// runs after the last write completed; a close() that hangs is cut off by close_timeout.
TEST(PythonAsync, WritesOverlapCommitsStayInOrderAndCloseComesLast) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("overlap");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 20), 0);
  Runtime rt(kafka.bootstrap());
  const auto out = rt.dir() / "overlap.jsonl";
  rt.add_definition(
      "overlap.toml",
      python_definition("py-overlap", topic, "test_sinks:Overlap",
                        "{ out = \"" + out.string() + "\", delay = 0.2, first_delay = 4.0 }", "max_in_flight = 4\n"));
  rt.add_definition("hang.toml", python_definition("py-hang", topic, "test_sinks:HangingClose",
                                                   out_option(rt, "hang.jsonl"), "close_timeout = \"1s\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        auto lines = read_json_lines(out);
        return std::count_if(lines.begin(), lines.end(), [](auto& l) { return l["event"] == "end"; }) >= 3;
      },
      30s))
      << rt.log();
  EXPECT_EQ(kafka.committed("picomq-connect-sink-py-overlap", topic), -1001)
      << "batches after the first completed, but the first is still pending: nothing is committed";
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-overlap", topic) == 20; }, 30s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-hang", topic) == 20; }, 30s)) << rt.log();
  const auto stop = std::chrono::steady_clock::now();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 10s) << "the hanging close() was bounded";
  EXPECT_NE(rt.log().find("close() of test_sinks:HangingClose did not finish within close_timeout (1000 ms)"),
            std::string::npos)
      << rt.log();

  auto lines = read_json_lines(out);
  int running = 0, most = 0;
  std::set<int64_t> written;
  for (auto& l : lines) {
    if (l["event"] == "start") most = std::max(most, ++running);
    if (l["event"] == "end") {
      --running;
      for (auto& o : l["offsets"]) written.insert(o.get<int64_t>());
    }
  }
  EXPECT_GE(most, 3) << "writes overlap (max_in_flight = 4)";
  EXPECT_EQ(written.size(), 20u);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["event"], "close") << "close() after every write completed";
}

// close_timeout is the plugin's own, graceful bound (the coroutine is cancelled); above the
// runtime's shutdown_timeout the runtime's bound comes first: the process does not wait longer.
TEST(PythonAsync, AHangingCloseIsBoundedByTheRuntimesShutdownTimeout) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("hangclose");
  kafka.create_topic(topic);
  kafka.produce_values(topic, json_values(0, 5), 0);
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("shutdown_timeout = \"2s\"");
  rt.add_definition("hang.toml", python_definition("py-hang-long", topic, "test_sinks:HangingClose",
                                                   out_option(rt, "hang.jsonl"), "close_timeout = \"60s\"\n"));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-hang-long", topic) == 5; }, 30s))
      << rt.log();
  const auto stop = std::chrono::steady_clock::now();
  rt.signal(SIGTERM);
  const auto code = rt.wait_exit(30s);
  ASSERT_TRUE(code.has_value()) << rt.log();
  EXPECT_EQ(*code, 3) << rt.log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 10s) << "shutdown_timeout (2 s), not close_timeout (60 s)";
  EXPECT_NE(rt.log().find("the plugin's close() did not return within shutdown_timeout (2000 ms)"), std::string::npos)
      << rt.log();
}

// A Python sink that holds the GIL for 10 s in a pure-Python loop does not stall a C++ sink of the
// same process, and the consumer keeps serving its group: with session.timeout.ms = 6000 the
// member is never dropped (no partition lost or revoked, each record written once).
TEST(PythonGil, ACpuBoundPythonSinkStallsNeitherACppSinkNorItsConsumerGroup) {
  auto& kafka = Kafka::shared();
  const auto busy_topic = unique_name("busy");
  const auto cxx_topic = unique_name("cxx");
  kafka.create_topic(busy_topic);
  kafka.create_topic(cxx_topic);
  kafka.produce_values(busy_topic, json_values(0, 10), 0);
  kafka.produce_values(cxx_topic, json_values(0, 50), 0);
  Runtime rt(kafka.bootstrap());
  const auto out = rt.dir() / "busy.jsonl";
  rt.add_definition("busy.toml", python_definition("py-busy", busy_topic, "test_sinks:CpuBound",
                                                   "{ out = \"" + out.string() + "\", seconds = 10.0 }", "",
                                                   "batch_length = 5\nproperties = { \"session.timeout.ms\" = 6000, "
                                                   "\"heartbeat.interval.ms\" = 500 }\n"));
  rt.add_definition("cxx.toml", testkit_definition("cxx", "topics = [\"" + cxx_topic + "\"]\nbatch_length = 10\n",
                                                   testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until(
      [&] {
        auto l = read_json_lines(out);
        return !l.empty() && l[0]["event"] == "burning";
      },
      30s))
      << rt.log();
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-cxx", cxx_topic) == 50; }, 8s))
      << "the C++ sink writes while the Python one holds the GIL: " << rt.log();
  EXPECT_EQ(kafka.committed("picomq-connect-sink-py-busy", busy_topic), -1001) << "the Python sink is still busy";
  ASSERT_TRUE(wait_until([&] { return kafka.committed("picomq-connect-sink-py-busy", busy_topic) == 10; }, 40s))
      << rt.log();
  rt.signal(SIGTERM);
  ASSERT_EQ(rt.wait_exit(30s), 0) << rt.log();
  const auto log = rt.log();
  size_t assigned = 0, lost = 0;
  for (const auto& line : read_lines(rt.dir() / "stderr.log"))
    if (line.find(busy_topic) != std::string::npos) {
      assigned += line.find(": assigned ") != std::string::npos;
      lost += line.find(": lost ") != std::string::npos;
    }
  EXPECT_EQ(lost, 0u) << log;
  EXPECT_EQ(assigned, 1u) << "one assignment, never taken away: " << log;
  std::vector<int64_t> offsets;
  for (auto& l : read_json_lines(out))
    if (l["event"] == "row") offsets.push_back(l["offset"]);
  EXPECT_EQ(offsets.size(), 10u) << "each record once: the group never rebalanced";
}

// A class the runtime refuses never starts: the sink is in Error with the reason; the others run.
TEST(PythonRefusals, LegacyFlagsUnimplementedAndUnacceptedPlanesAndBadClassesAreRefusedAtLoad) {
  auto& kafka = Kafka::shared();
  const auto topic = unique_name("refuse");
  kafka.create_topic(topic);
  Runtime rt(kafka.bootstrap());
  rt.runtime_settings("keep_running_on_error = true");
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"r-legacy", {"test_sinks:Legacy", "Legacy sets the legacy flag 'supports_arrow'"}},
      {"r-arrow",
       {"test_sinks:UnimplementedArrow",
        "UnimplementedArrow declares native data plane 'arrow_batches' but does not implement write_arrow_batch()"}},
      {"r-accept",
       {"test_sinks:NotAccepted", "NotAccepted declares native data plane 'python_batches' but does not accept it"}},
      {"r-module", {"no_such_module:Sink", "cannot import module 'no_such_module'"}},
      {"r-class", {"test_sinks:Nope", "module 'test_sinks'"}},
      {"r-notsink", {"json:JSONDecoder", "'json:JSONDecoder' is not a subclass of picomq_connect.BaseSink"}},
  };
  for (const auto& [key, c] : cases) rt.add_definition(key + ".toml", python_definition(key, topic, c.first, "{}"));
  rt.add_definition("ok.toml", python_definition("r-ok", topic, "native_batch:MyBatchSinkDemo", "{}"));
  rt.start();
  for (const auto& [key, c] : cases) {
    ASSERT_TRUE(rt.wait_state(key, "error", 30s)) << key << rt.log();
    const auto message = rt.sink_status(key).dump();
    EXPECT_NE(message.find(c.second), std::string::npos) << key << ": " << message;
  }
  EXPECT_TRUE(rt.wait_state("r-ok", "running", 30s)) << rt.sink_status("r-ok");
  rt.signal(SIGTERM);
  rt.wait_exit(30s);
}

}  // namespace
}  // namespace picomq::test
