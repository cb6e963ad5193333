// The S3 sink's pure pieces: where objects end (rotation by records, bytes, record time, the
// key's time fields), their keys, option checks across options, URLs, S3 error documents. No server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "picomq/kit/testing/fake_host.hpp"
#include "s3/avro.h"
#include "s3/client.h"
#include "s3/config.h"
#include "s3/csv.h"
#include "s3/objects.h"

namespace picomq::s3 {
namespace {

struct Built {
  std::string key;
  int64_t first, last;
  std::string body, why;
  std::vector<std::string> chunks;
};

class Objects {
 public:
  Objects(Rotation rotation, const std::string& tmpl = "{topic}/{partition}/{start_offset}.{ext}")
      : key_(kit::ObjectKeyTemplate::parse(tmpl).value()),
        objects_("t.x", 2, rotation, KeyContext{.key_template = &key_, .prefix = "p/", .sink_key = "k", .ext = "json"},
                 [this](const std::shared_ptr<Object>& o) {
                   Built b{o->key, o->first_offset, o->last_offset, "", o->sealed_by, {}};
                   for (const auto& c : o->chunks) {
                     b.body += c.data;
                     b.chunks.push_back(c.data);
                   }
                   built.push_back(std::move(b));
                 }) {}
  void add(int64_t offset, int64_t ts, const std::string& bytes) { objects_.append(offset, ts, bytes, owner_); }
  void flush() { objects_.seal("flush"); }
  std::vector<Built> built;

 private:
  kit::ObjectKeyTemplate key_;
  PartitionObjects objects_;
  std::shared_ptr<Owner> owner_ = std::make_shared<Owner>();
};

std::vector<std::string> keys(const std::vector<Built>& b) {
  std::vector<std::string> out;
  out.reserve(b.size());
  for (const auto& o : b) out.push_back(o.key);
  return out;
}

TEST(S3Objects, MaxRecordsCutsEveryNRecordsWhateverTheBatches) {
  Objects o({.max_records = 3});
  for (int i = 0; i < 7; ++i) o.add(10 + i, 0, "r" + std::to_string(i) + "\n");
  o.flush();
  ASSERT_EQ(o.built.size(), 3u);
  EXPECT_EQ(keys(o.built),
            (std::vector<std::string>{"p/t.x/2/00000000000000000010.json", "p/t.x/2/00000000000000000013.json",
                                      "p/t.x/2/00000000000000000016.json"}));
  EXPECT_EQ(o.built[0].body, "r0\nr1\nr2\n");
  EXPECT_EQ(o.built[0].why, "max_records");
  EXPECT_EQ(o.built[2].body, "r6\n");
  EXPECT_EQ(o.built[2].why, "flush");
}

TEST(S3Objects, MaxBytesKeepsObjectsUnderTheLimitAndALargeRecordAlone) {
  Objects o({.max_bytes = 10});
  o.add(0, 0, "aaaa\n");              // 5
  o.add(1, 0, "bbbb\n");              // 10: full
  o.add(2, 0, "cc\n");                // 3
  o.add(3, 0, "dddddddddddddddd\n");  // 17 > 10: cuts before, alone, full at once
  o.add(4, 0, "e\n");
  o.flush();
  ASSERT_EQ(o.built.size(), 4u);
  EXPECT_EQ(o.built[0].body, "aaaa\nbbbb\n");
  EXPECT_EQ(o.built[1].body, "cc\n");
  EXPECT_EQ(o.built[2].body, "dddddddddddddddd\n");
  EXPECT_EQ(o.built[3].body, "e\n");
  EXPECT_EQ(o.built[3].first, 4);
}

TEST(S3Objects, RotateIntervalCutsAtEpochAlignedRecordTimeWindowsForwardOnly) {
  Objects o({.interval_ms = 1000});
  o.add(0, 1500, "a\n");
  o.add(1, 1999, "b\n");
  o.add(2, 1200, "late\n");  // earlier than the window's end: stays
  o.add(3, 2000, "c\n");     // reaches the end of [1000, 2000)
  o.add(4, 5000, "d\n");
  o.flush();
  ASSERT_EQ(o.built.size(), 3u);
  EXPECT_EQ(o.built[0].body, "a\nb\nlate\n");
  EXPECT_EQ(o.built[0].why, "rotate_interval");
  EXPECT_EQ(o.built[1].body, "c\n");
  EXPECT_EQ(o.built[2].first, 4);
}

TEST(S3Objects, TimeFieldsOfTheKeyComeFromTheFirstRecordAndARecordOfAnotherHourStartsAnObject) {
  Objects o({}, "{year}/{month}/{day}/{hour}/{partition}-{start_offset}");
  const int64_t h22 = 1'700'000'000'000;  // 2023-11-14T22:13:20Z
  o.add(0, h22, "a\n");
  o.add(1, h22 + 60'000, "b\n");
  o.add(2, h22 + 3'600'000, "c\n");  // 23h
  o.add(3, h22, "d\n");              // back in 22h: its own object, under 22
  o.flush();
  EXPECT_EQ(keys(o.built), (std::vector<std::string>{"p/2023/11/14/22/2-00000000000000000000",
                                                     "p/2023/11/14/23/2-00000000000000000002",
                                                     "p/2023/11/14/22/2-00000000000000000003"}));
  EXPECT_EQ(o.built[1].why, "time_field");
}

TEST(S3Objects, TheSameRecordsInOtherBatchesMakeTheSameObjects) {
  // Rotation depends on records only: the batch boundaries (and how often write_batch runs) do not matter.
  auto build = [](const std::vector<size_t>& batch_sizes) {
    Objects o({.max_records = 4, .max_bytes = 12});
    int64_t offset = 0;
    for (size_t n : batch_sizes)
      for (size_t i = 0; i < n; ++i, ++offset) o.add(offset, offset * 10, std::string(1 + offset % 5, 'x') + "\n");
    o.flush();
    return o.built;
  };
  const auto a = build({20}), b = build({1, 3, 7, 9}), c = build({5, 5, 5, 5});
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key, b[i].key);
    EXPECT_EQ(a[i].body, b[i].body);
    EXPECT_EQ(a[i].key, c[i].key);
    EXPECT_EQ(a[i].body, c[i].body);
  }
}

TEST(S3Objects, ChunksAreCutAfterTheRecordThatReachesTheirSizeWhateverTheBatches) {
  // Streaming: an object goes up in chunks (each compressed on its own) as it grows; where a chunk
  // ends is a function of the records, so a replay cuts (and compresses) the same chunks.
  Objects o({.max_records = 6, .chunk_bytes = 5});
  for (int i = 0; i < 8; ++i) o.add(i, 0, std::string(1 + i % 3, 'a' + i) + "\n");
  o.flush();
  ASSERT_EQ(o.built.size(), 2u);
  EXPECT_EQ(o.built[0].chunks, (std::vector<std::string>{"a\nbb\n", "ccc\nd\n", "ee\nfff\n"}));
  EXPECT_EQ(o.built[1].chunks, (std::vector<std::string>{"g\nhh\n"}));
}

kit::testing::FakeHost& host() {
  static auto h = kit::testing::FakeHost::load(S3_SINK_PLUGIN);
  return *h;
}

std::string problems(const nlohmann::json& config) {
  std::string out;
  for (const auto& p : host().check(config.dump())) out += p + "\n";
  return out;
}

// Avro from the topic: a container file has one writer schema, so a record of another schema
// ends the open object, and each object's head is the container header of its own schema.
TEST(S3Objects, ARecordOfAnotherWriterSchemaEndsTheObjectAndEachHeadIsOfItsSchema) {
  auto key = kit::ObjectKeyTemplate::parse("{topic}/{start_offset}.{ext}").value();
  std::vector<std::shared_ptr<Object>> built;
  KeyContext keys{.key_template = &key, .prefix = "", .sink_key = "k", .ext = "avro"};
  keys.container_header = [](const std::string& k, const std::string& schema) { return "H(" + k + "|" + schema + ")"; };
  PartitionObjects objects("t", 0, Rotation{.max_records = 3}, keys,
                           [&](const std::shared_ptr<Object>& o) { built.push_back(o); });
  auto owner = std::make_shared<Owner>();
  const std::string v1 = "{v1}", v2 = "{v2}";
  objects.append(0, 0, "a", owner, v1);
  objects.append(1, 0, "b", owner, std::string(v1));  // the same text elsewhere: the same schema
  objects.append(2, 0, "c", owner, v2);
  objects.append(3, 0, "d", owner, v2);
  objects.append(4, 0, "e", owner, v1);
  objects.seal("flush");
  ASSERT_EQ(built.size(), 3u);
  EXPECT_EQ(built[0]->first_offset, 0);
  EXPECT_EQ(built[0]->last_offset, 1);
  EXPECT_EQ(built[0]->sealed_by, "schema");
  EXPECT_EQ(built[0]->head, "H(t/00000000000000000000.avro|{v1})");
  EXPECT_EQ(built[1]->first_offset, 2);
  EXPECT_EQ(built[1]->head, "H(t/00000000000000000002.avro|{v2})");
  EXPECT_EQ(built[1]->sealed_by, "schema");
  EXPECT_EQ(built[2]->first_offset, 4);
  EXPECT_EQ(built[2]->schema, v1);
  EXPECT_EQ(built[2]->sealed_by, "flush");
}

TEST(S3Config, CrossOptionProblemsNameTheirKey) {
  const nlohmann::json ok = {
      {"bucket", "b"}, {"endpoint", "http://127.0.0.1:9"}, {"aws_access_key_id", "a"}, {"aws_secret_access_key", "s"}};
  EXPECT_EQ(problems(ok), "");
  auto with = [&](const char* k, const nlohmann::json& v) {
    auto c = ok;
    c[k] = v;
    return problems(c);
  };
  EXPECT_NE(with("key_template", "{topic}/{partition}.json").find("key_template: must hold {start_offset}"),
            std::string::npos);
  EXPECT_NE(with("key_template", "{topic}/{start_offset}").find("key_template: must hold {partition}"),
            std::string::npos);
  EXPECT_NE(with("key_template", "{topic}/{offset}").find("unknown placeholder '{offset}'"), std::string::npos);
  EXPECT_NE(with("endpoint", "ftp://h").find("endpoint: 'ftp://h' must start with http:// or https://"),
            std::string::npos);
  EXPECT_NE(with("bucket", "a/b").find("bucket: 'a/b' has a character"), std::string::npos);
  EXPECT_NE(with("compression", "lz4").find("compression"), std::string::npos);
  auto no_secret = ok;
  no_secret.erase("aws_secret_access_key");
  EXPECT_NE(problems(no_secret).find("aws_secret_access_key: is required with aws_access_key_id"), std::string::npos);
  const std::string secret_shown = with("aws_session_token", "line1\nTOPSECRET");
  EXPECT_NE(secret_shown.find("aws_session_token: must be one line"), std::string::npos);
  EXPECT_EQ(secret_shown.find("TOPSECRET"), std::string::npos) << "a secret's value is never in a message";
}

TEST(S3Config, CredentialsComeFromTheEnvironmentWhenTheConfigHasNone) {
  const nlohmann::json c = {{"bucket", "b"}, {"endpoint", "http://127.0.0.1:9"}};
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_NE(problems(c).find("no credentials: set aws_access_key_id"), std::string::npos);
  setenv("AWS_ACCESS_KEY_ID", "from-env", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
  EXPECT_EQ(problems(c), "");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST(S3Etags, OnePutAndMultipart) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  // The multipart ETag (MD5 of the parts' binary MD5s, "-<parts>"), checked against Python's hashlib.
  EXPECT_EQ(multipart_etag("abcdef", 4), "fa40dffba3d56c6098e0477379f300bd-2");
  EXPECT_EQ(multipart_etag("abc", 4), "af5da9f45af7a300e3aded972f8ff687-1");
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    out += "0123456789abcdef"[c >> 4];
    out += "0123456789abcdef"[c & 15];
  }
  return out;
}

// The bytes of Avro's binary encoding (Avro 1.11 spec), value by value.
TEST(S3Avro, DatumsByTheDeclaredSchemaByteForByte) {
  AvroEncoder avro(R"({"type":"record","name":"R","fields":[
      {"name":"n","type":"long"},
      {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
      {"name":"day","type":{"type":"int","logicalType":"date"}},
      {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
      {"name":"u","type":["null","long","string"]},
      {"name":"opt","type":["null","int"]},
      {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]},"default":"B"},
      {"name":"pico_partition","type":"int"},
      {"name":"pico_key","type":["null","bytes"]}]})",
                   kit::Compression::None);
  kit::testing::TestBatch batch(
      "t", 3,
      {{.offset = 1,
        .payload = R"({"n":-1,"d":"-1.00","day":"1970-01-02","at":"1970-01-01T00:00:01.5Z","u":"x"})",
        .key = "k"},
       {.offset = 2, .payload = R"({"n":64,"d":"1.5","day":3,"at":7,"u":5,"opt":1,"e":"A","pico_partition":9})"},
       {.offset = 3, .payload = R"({"n":"one","d":"1","day":0,"at":0,"u":null})"},
       {.offset = 4, .payload = R"({"n":1,"d":"1.234","day":0,"at":0,"u":null})"},
       {.offset = 5, .payload = R"({"n":1,"d":"1","day":0,"at":0,"u":[1]})"}});
  const auto& b = batch.raw();
  std::string out;
  ASSERT_FALSE(avro.append(out, b, b.records[0]));
  // n -1: 01; d -100 as two's complement 9c: 02 9c; day 1: 02; at 1500: b8 17; u branch 2 "x":
  // 04 02 78; opt missing, null branch: 00; e default B: 02; pico_partition 3: 06; pico_key "k": 02 02 6b.
  EXPECT_EQ(hex(out),
            "01"
            "029c"
            "02"
            "b817"
            "040278"
            "00"
            "02"
            "06"
            "02026b");
  out.clear();
  ASSERT_FALSE(avro.append(out, b, b.records[1]));
  // n 64: 8001; d 150: 02 0096 (a leading 0: 150 has its top bit set); day 3: 06; at 7: 0e; u
  // branch 1 long 5: 02 0a; opt branch 1 int 1: 02 02; e A: 00; pico_partition from the payload 9: 12; no key: 00.
  EXPECT_EQ(hex(out),
            "8001"
            "04"
            "0096"
            "06"
            "0e"
            "020a"
            "0202"
            "00"
            "12"
            "00");
  EXPECT_EQ(avro.append(out, b, b.records[2]).value_or(""), "avro: field 'n': expected long, got a string");
  EXPECT_EQ(avro.append(out, b, b.records[3]).value_or(""), "avro: field 'd': '1.234' is no decimal of scale 2");
  EXPECT_EQ(avro.append(out, b, b.records[4]).value_or(""),
            "avro: field 'u': no branch of the union [null, long, string] takes an array");
  // The header: magic, the metadata map (codec, schema), the sync marker from the key.
  const std::string h = avro.header("k/1");
  EXPECT_EQ(h.substr(0, 4), std::string("Obj\x01", 4));
  EXPECT_NE(h.find("avro.codec\x08null"), std::string::npos);
  EXPECT_EQ(h.substr(h.size() - 16), AvroEncoder::sync_marker("k/1"));
  EXPECT_NE(AvroEncoder::sync_marker("k/1"), AvroEncoder::sync_marker("k/2"));
}

TEST(S3Avro, SchemaProblemsAreNamed) {
  EXPECT_THROW(AvroEncoder("{\"type\":\"record\"}", kit::Compression::None), std::invalid_argument);
  try {
    const AvroEncoder refused(R"({"type":"record","name":"R","fields":[{"name":"x","type":"nope"}]})",
                              kit::Compression::None);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("avro_schema: invalid Avro schema"), std::string::npos) << e.what();
  }
  // Without avro_schema, each record's writer schema from an avro topic is used.
  EXPECT_EQ(problems({{"bucket", "b"}, {"aws_access_key_id", "a"}, {"aws_secret_access_key", "s"}, {"format", "avro"}}),
            "");
  EXPECT_NE(problems({{"bucket", "b"},
                      {"aws_access_key_id", "a"},
                      {"aws_secret_access_key", "s"},
                      {"format", "avro"},
                      {"avro_schema", "{\"type\":\"nope\"}"}})
                .find("avro_schema: invalid Avro schema"),
            std::string::npos);
}

TEST(S3Csv, DeclaredColumnsFromPayloadFieldsAndMetadataWithRfc4180Quoting) {
  kit::testing::TestBatch batch(
      "t", 3,
      {{.offset = 7,
        .payload = R"({"id": 1, "name": "a, \"b\"", "tags": [1, 2], "note": null, "ok": true})",
        .key = "k",
        .timestamp_ms = 1700000000000},
       {.offset = 8, .payload = R"({"name": "line\nbreak"})"},
       {.offset = 9, .payload = R"([1, 2])"},
       {.offset = 10, .payload = std::nullopt}});
  CsvEncoder csv({"pico_offset", "id", "name", "tags", "note", "missing", "ok", "pico_key", "pico_partition"});
  EXPECT_EQ(csv.header(), "pico_offset,id,name,tags,note,missing,ok,pico_key,pico_partition\n");
  std::string out;
  EXPECT_FALSE(csv.append(out, batch.raw(), batch.raw().records[0]));
  EXPECT_FALSE(csv.append(out, batch.raw(), batch.raw().records[1]));
  EXPECT_EQ(out, "7,1,\"a, \"\"b\"\"\",\"[1,2]\",,,true,aw==,3\n8,,\"line\nbreak\",,,,,,3\n");
  const auto not_object = csv.append(out, batch.raw(), batch.raw().records[2]);
  ASSERT_TRUE(not_object);
  EXPECT_EQ(*not_object, "csv: the payload is not a JSON object");
  EXPECT_TRUE(csv.append(out, batch.raw(), batch.raw().records[3]));
  EXPECT_EQ(out.size(), std::string("7,1,\"a, \"\"b\"\"\",\"[1,2]\",,,true,aw==,3\n8,,\"line\nbreak\",,,,,,3\n").size())
      << "a refused record leaves nothing behind";
}

TEST(S3Config, CsvNeedsItsColumns) {
  const nlohmann::json ok = {
      {"bucket", "b"}, {"endpoint", "http://127.0.0.1:9"}, {"aws_access_key_id", "a"}, {"aws_secret_access_key", "s"}};
  auto c = ok;
  c["format"] = "csv";
  EXPECT_NE(problems(c).find("csv_columns: is required with format = \"csv\""), std::string::npos);
  c["csv_columns"] = {"id"};
  EXPECT_EQ(problems(c), "");
  auto j = ok;
  j["csv_columns"] = {"id"};
  EXPECT_NE(problems(j).find("csv_columns: is only for format = \"csv\""), std::string::npos);
}

// The plugin finds libpicomq_parquet.so beside it; a copy of the plugin alone in a directory
// (a light install without the `parquet` component) says what is missing and how to install it.
// The other parquet problems name their key.
TEST(S3Config, ParquetProblemsAndAMissingWriterAreNamed) {
  const nlohmann::json ok = {{"bucket", "b"},
                             {"endpoint", "http://127.0.0.1:9"},
                             {"aws_access_key_id", "a"},
                             {"aws_secret_access_key", "s"},
                             {"format", "parquet"}};
  EXPECT_EQ(problems(ok), "");
  const auto alone = std::filesystem::temp_directory_path() / ("s3-light-" + std::to_string(getpid()));
  std::filesystem::create_directories(alone);
  const auto copy = alone / std::filesystem::path(S3_SINK_PLUGIN).filename();
  std::filesystem::copy_file(S3_SINK_PLUGIN, copy, std::filesystem::copy_options::overwrite_existing);
  auto light = kit::testing::FakeHost::load(copy.string());
  std::string missing;
  for (const auto& p : light->check(ok.dump())) missing += p + "\n";
  std::filesystem::remove_all(alone);
  EXPECT_NE(
      missing.find("format: the Parquet writer (libpicomq_parquet.so, picomq-connect's heavy component `parquet`: "
                   "cmake --install <build> --component parquet) is not installed; tried:"),
      std::string::npos)
      << missing;
  auto with = [&](const char* k, const nlohmann::json& v) {
    auto c = ok;
    c[k] = v;
    return problems(c);
  };
  EXPECT_NE(
      with("compression", "zstd").find("compression: parquet files compress their pages: set parquet_compression"),
      std::string::npos);
  EXPECT_NE(with("max_object_bytes", "0B").find("max_object_bytes: parquet: an object is made in memory"),
            std::string::npos)
      << with("max_object_bytes", "0B");
  EXPECT_NE(with("chunk_size", "2MiB").find("chunk_size: parquet: a Parquet file is written whole"), std::string::npos);
  EXPECT_NE(with("parquet_compression", "gzip").find("parquet_compression: 'gzip' is not one of zstd, snappy, none"),
            std::string::npos);
  EXPECT_NE(with("compression_level", 30).find("compression_level: parquet: zstd's levels are 1-22"),
            std::string::npos);
  EXPECT_NE(with("parquet_columns", nlohmann::json{{"id", "integer"}})
                .find("parquet_columns: column 'id': type 'integer' is not one of bool, int64, float64, utf8, binary, "
                      "timestamp_ms, json"),
            std::string::npos);
  EXPECT_NE(
      with("parquet_columns", nlohmann::json{{"pico_offset", "int64"}}).find("'pico_offset' is a metadata column"),
      std::string::npos);
  auto lines = ok;
  lines.erase("format");
  lines["parquet_row_group_records"] = 10;
  EXPECT_NE(problems(lines).find("parquet_row_group_records: is only for format = \"parquet\""), std::string::npos);
}

}  // namespace
}  // namespace picomq::s3
