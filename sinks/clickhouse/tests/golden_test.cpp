// Golden tests of the RowBinary the sink sends, read by an independent, current ClickHouse: chDB
// (PyPI `chdb`, engine 26.x, in tools/venv; chdb_golden.py). Covers the types 18.16 cannot
// check (Bool, DateTime64, LowCardinality) beside the rest, and shows the insert-deduplication
// semantics of current servers that docs/sinks/clickhouse.md ("Behaviour under replay") states.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clickhouse/changes.h"
#include "clickhouse/native.h"
#include "clickhouse/row_binary.h"
#include "clickhouse/types.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace ch = picomq::clickhouse;
namespace kt = picomq::kit::testing;
using nlohmann::json;

namespace {

struct Result {
  int status = -1;
  std::string out;
};

Result run_command(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  r.status = pclose(p);
  return r;
}

// A shell word: '...' with each ' as '\''.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("picomq-golden-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string body_file(const std::string& body) {
    auto path = (dir_ / "body.bin").string();
    std::ofstream(path, std::ios::binary) << body;
    return path;
  }
  static std::string structure(const std::vector<ch::Column>& cols) {
    std::string s;
    for (const auto& c : cols) s += (s.empty() ? "" : ", ") + c.name + " " + c.type.name();
    return s;
  }
  std::vector<json> parse(const std::string& body, const std::vector<ch::Column>& cols,
                          const std::string& format = "RowBinary") {
    const Result r = run_command(std::string(PICOMQ_CHDB_PYTHON) + " " + PICOMQ_CHDB_GOLDEN + " parse " +
                                 body_file(body) + " " + quoted(structure(cols)) + " " + format);
    EXPECT_EQ(r.status, 0) << r.out;
    std::vector<json> rows;
    size_t pos = 0;
    while (pos < r.out.size()) {
      size_t nl = r.out.find('\n', pos);
      if (nl == std::string::npos) nl = r.out.size();
      if (nl > pos) rows.push_back(json::parse(r.out.substr(pos, nl - pos)));
      pos = nl + 1;
    }
    return rows;
  }

  std::filesystem::path dir_;
};

ch::Column col(const std::string& name, const std::string& type, ch::Source source = ch::Source::Field) {
  return {name, ch::parse_type(type).value(), source, name};
}

// Every type the sink writes, and two records: one with a value of each, one with defaults.
std::vector<ch::Column> every_type_columns() {
  return {
      col("pico_topic", "LowCardinality(String)", ch::Source::Topic),
      col("pico_offset", "Int64", ch::Source::Offset),
      col("pico_timestamp", "DateTime64(3, 'UTC')", ch::Source::Timestamp),
      col("pico_key", "Nullable(String)", ch::Source::Key),
      col("s", "String"),
      col("lc", "LowCardinality(Nullable(String))"),
      col("fs", "FixedString(3)"),
      col("i8", "Int8"),
      col("i16", "Int16"),
      col("i32", "Int32"),
      col("u8", "UInt8"),
      col("u16", "UInt16"),
      col("u32", "UInt32"),
      col("u64", "UInt64"),
      col("f32", "Float32"),
      col("f64", "Float64"),
      col("b", "Bool"),
      col("d", "Date"),
      col("dt", "DateTime('UTC')"),
      col("dt64", "DateTime64(6, 'UTC')"),
      col("u", "UUID"),
      col("n", "Nullable(Int64)"),
      col("a", "Array(Nullable(String))"),
      col("aa", "Array(Array(Int32))"),
      col("nested", "String"),
  };
}
kt::TestBatch every_type_batch() {
  std::vector<kt::TestRecord> records(2);
  records[0].offset = 41;
  records[0].key = std::string("k\x01", 2);
  records[0].payload = R"j({"s": "é\"\n", "lc": "red", "fs": "ab", "i8": -128, "i16": -32768, "i32": 2147483647,
      "u8": 255, "u16": 65535, "u32": 4294967295, "u64": 18446744073709551615, "f32": 0.5, "f64": -1.25e-7,
      "b": true, "d": "2149-06-06", "dt": "2106-02-07T06:28:15Z", "dt64": "2026-12-01T15:04:05.123456+01:00",
      "u": "aabbccdd-eeff-0011-2233-445566778899", "n": -9223372036854775808, "a": ["x", null, ""],
      "aa": [[1, 2], [], [3]], "nested": {"k": [true, null]}})j";
  records[1].offset = 42;
  records[1].payload = R"j({"lc": null, "b": false, "dt64": 1, "n": null})j";
  records[1].timestamp_ms = 1'700'000'000'123;
  return kt::TestBatch("shop.orders", 0, records);
}

TEST_F(Golden, ACurrentClickHouseReadsEveryTypeAsTheSinkMeantIt) {
  const std::vector<ch::Column> cols = every_type_columns();
  ch::RowBinaryEncoder encoder(cols);
  kt::TestBatch batch = every_type_batch();
  ch::Encoded e = encoder.encode(batch.raw());
  ASSERT_TRUE(e.ok()) << e.error;
  ASSERT_TRUE(e.rejected.empty()) << e.rejected[0].reason;
  const auto rows = parse(e.data, cols);
  ASSERT_EQ(rows.size(), 2u);
  const json first = {{"pico_topic", "shop.orders"},
                      {"pico_offset", 41},
                      {"pico_timestamp", "2023-11-14 22:13:20.000"},
                      {"pico_key", "k\u0001"},
                      {"s", "é\"\n"},
                      {"lc", "red"},
                      {"fs", std::string("ab\0", 3)},
                      {"i8", -128},
                      {"i16", -32768},
                      {"i32", 2147483647},
                      {"u8", 255},
                      {"u16", 65535},
                      {"u32", 4294967295u},
                      {"u64", 18446744073709551615ull},
                      {"f32", 0.5},
                      {"f64", -1.25e-7},
                      {"b", true},
                      {"d", "2149-06-06"},
                      {"dt", "2106-02-07 06:28:15"},
                      {"dt64", "2026-12-01 14:04:05.123456"},
                      {"u", "aabbccdd-eeff-0011-2233-445566778899"},
                      {"n", INT64_MIN},
                      {"a", {"x", nullptr, ""}},
                      {"aa", {{1, 2}, json::array(), {3}}},
                      {"nested", R"j({"k":[true,null]})j"}};
  EXPECT_EQ(rows[0], first) << rows[0].dump(1);
  const json second = {{"pico_topic", "shop.orders"},
                       {"pico_offset", 42},
                       {"pico_timestamp", "2023-11-14 22:13:20.123"},
                       {"pico_key", nullptr},
                       {"s", ""},
                       {"lc", nullptr},
                       {"fs", std::string(3, '\0')},
                       {"i8", 0},
                       {"i16", 0},
                       {"i32", 0},
                       {"u8", 0},
                       {"u16", 0},
                       {"u32", 0},
                       {"u64", 0},
                       {"f32", 0},
                       {"f64", 0},
                       {"b", false},
                       {"d", "1970-01-01"},
                       {"dt", "1970-01-01 00:00:00"},
                       {"dt64", "1970-01-01 00:00:00.000001"},
                       {"u", "00000000-0000-0000-0000-000000000000"},
                       {"n", nullptr},
                       {"a", json::array()},
                       {"aa", json::array()},
                       {"nested", ""}};
  EXPECT_EQ(rows[1], second) << rows[1].dump(1);
}

// The same rows as a Native block (the sink's `format = "Native"`): a current ClickHouse reads
// them exactly as it reads the RowBinary, for every type but LowCardinality (a dictionary in
// Native, which the sink does not write: such tables stay RowBinary).
TEST_F(Golden, ANativeBlockOfTheRowsReadsAsTheSameRowsAsTheirRowBinary) {
  std::vector<ch::Column> cols = every_type_columns();
  EXPECT_NE(ch::native_unsupported(cols), "");
  for (auto& c : cols)
    if (c.type.kind == ch::Kind::LowCardinality) c.type = *c.type.inner;
  ASSERT_EQ(ch::native_unsupported(cols), "");
  ch::RowBinaryEncoder encoder(cols);
  kt::TestBatch batch = every_type_batch();
  ch::Encoded e = encoder.encode(batch.raw());
  ASSERT_TRUE(e.ok()) << e.error;
  auto native = ch::native_block(cols, e.data, e.rows.size());
  ASSERT_TRUE(native) << native.error();
  const auto from_row_binary = parse(e.data, cols);
  ASSERT_EQ(from_row_binary.size(), 2u);
  EXPECT_EQ(parse(native.value(), cols, "Native"), from_row_binary);
  // One row of the two (a bisection's half), cut from the RowBinary by its byte range.
  auto second = ch::native_block(cols, std::string_view(e.data).substr(e.rows[0].end), 1);
  ASSERT_TRUE(second) << second.error();
  const auto one = parse(second.value(), cols, "Native");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], from_row_binary[1]);
  // Rows that end early, or bytes left over, are refused (not sent as other rows).
  EXPECT_FALSE(ch::native_block(cols, std::string_view(e.data).substr(0, e.data.size() - 1), 2));
  EXPECT_FALSE(ch::native_block(cols, e.data, 1));
}

TEST_F(Golden, ACutShortBodyIsRefusedByTheParserNotReadAsOtherRows) {
  std::vector<ch::Column> cols{col("n", "Int64"), col("s", "String")};
  ch::RowBinaryEncoder encoder(cols);
  ch::Encoded e = encoder.encode(kt::TestBatch::json("t", 0, 0, {R"j({"n": 1, "s": "abc"})j"}).raw());
  ASSERT_TRUE(e.ok());
  const Result r = run_command(std::string(PICOMQ_CHDB_PYTHON) + " " + PICOMQ_CHDB_GOLDEN + " parse " +
                               body_file(e.data.substr(0, e.data.size() - 1)) + " " + quoted(structure(cols)));
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("CANNOT_READ_ALL_DATA"), std::string::npos) << r.out;
}

// What docs/sinks/clickhouse.md says of current servers' insert deduplication: a resend of the
// same insert with the same token is dropped, but a replay cut into other inserts is not; the
// ReplacingMergeTree by record id folds both with FINAL.
TEST_F(Golden, OnACurrentServerATokenDropsAnIdenticalResendButNotARecutReplayWhichFinalFolds) {
  std::vector<ch::Column> cols{col("pico_topic", "String", ch::Source::Topic),
                               col("pico_partition", "Int32", ch::Source::Partition),
                               col("pico_offset", "Int64", ch::Source::Offset), col("n", "Int64")};
  ch::RowBinaryEncoder encoder(cols);
  std::vector<std::string> payloads;
  payloads.reserve(10);
  for (int i = 0; i < 10; ++i) payloads.push_back("{\"n\": " + std::to_string(i) + "}");
  ch::Encoded e = encoder.encode(kt::TestBatch::json("t", 0, 0, payloads).raw());
  ASSERT_TRUE(e.ok());
  std::string cuts;
  for (const auto& row : e.rows) cuts += (cuts.empty() ? "" : ",") + std::to_string(row.end);
  const Result r = run_command(std::string(PICOMQ_CHDB_PYTHON) + " " + PICOMQ_CHDB_GOLDEN + " dedup " +
                               body_file(e.data) + " " + cuts + " " + quoted(structure(cols)));
  ASSERT_EQ(r.status, 0) << r.out;
  const json got = json::parse(r.out.substr(r.out.find('{')));
  std::cout << "[          ] chDB " << got["version"] << ": " << got.dump() << "\n";
  EXPECT_EQ(got["MergeTree"]["after_same_token_twice"], 10) << "the resend with the same token is dropped";
  EXPECT_EQ(got["MergeTree"]["after_recut_replay"], 20) << "a replay cut differently is written again";
  EXPECT_EQ(got["ReplacingMergeTree"]["after_recut_replay"], 20);
  EXPECT_EQ(got["ReplacingMergeTree"]["final"], 10) << "FINAL: one row per record id";
}

TEST_F(Golden, OnACurrentServerTheTableOfChangesKeepsEachKeysLatestRowAndDropsDeletedKeys) {
  // The sink's own table of changes (from 23.2: ReplacingMergeTree(pico_version, pico_deleted)) and
  // its rows, inserted newest first, as a replay of older changes after newer ones lands.
  const std::vector<ch::Column> key{col("id", "Int64")};
  const std::vector<ch::Column> payload{col("name", "Nullable(String)")};
  const std::string create = ch::create_change_table_sql("d.t", key, payload, false, {26, 9});
  ASSERT_NE(create.find("ReplacingMergeTree(`pico_version`, `pico_deleted`)"), std::string::npos) << create;
  std::vector<ch::Column> cols{col("id", "Int64"),
                               col("name", "Nullable(String)"),
                               col("pico_version", "UInt64", ch::Source::Version),
                               col("pico_deleted", "UInt8", ch::Source::Deleted),
                               col("pico_topic", "String", ch::Source::Topic),
                               col("pico_partition", "Int32", ch::Source::Partition),
                               col("pico_offset", "Int64", ch::Source::Offset)};
  ch::RowBinaryEncoder encoder(cols);
  auto body = [&](std::vector<kt::TestRecord> records, const std::string& name) {
    ch::Encoded e = encoder.encode(kt::TestBatch("t", 0, std::move(records)).raw());
    EXPECT_TRUE(e.ok() && e.rejected.empty()) << e.error;
    auto path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << e.data;
    return path;
  };
  const std::string newer =
      body({{.offset = 5, .payload = R"({"id":1,"name":"b"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":1})"},
            {.offset = 6, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = R"({"id":2})"}},
           "newer.bin");
  const std::string older =
      body({{.offset = 1, .payload = R"({"id":1,"name":"a"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":1})"},
            {.offset = 2, .payload = R"({"id":2,"name":"x"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":2})"},
            {.offset = 3, .payload = R"({"id":3,"name":"c"})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":3})"}},
           "older.bin");
  const Result r = run_command(std::string(PICOMQ_CHDB_PYTHON) + " " + PICOMQ_CHDB_GOLDEN + " changes " +
                               quoted(create) + " " + quoted(structure(cols)) + " " + newer + " " + older);
  ASSERT_EQ(r.status, 0) << r.out;
  const json got = json::parse(r.out.substr(r.out.find('{')));
  std::cout << "[          ] chDB " << got["version"] << "\n";
  for (const char* when : {"final", "optimized"}) {
    SCOPED_TRACE(when);
    ASSERT_EQ(got[when].size(), 2u) << got.dump() << ": key 2's delete (offset 6) hides it, the replayed 2 is older";
    EXPECT_EQ(got[when][0]["id"], 1);
    EXPECT_EQ(got[when][0]["name"], "b") << "the replayed offset 1 is older than 5";
    EXPECT_EQ(got[when][0]["pico_version"], 5);
    EXPECT_EQ(got[when][1]["id"], 3);
  }
}

}  // namespace
