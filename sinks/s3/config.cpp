#include "s3/config.h"

#include <cctype>
#include <cstdlib>

#include "picomq/kit/declared_columns.hpp"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "s3/avro.h"

namespace picomq::s3 {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// An S3 bucket name as AWS allows it (3-63 of [a-z0-9.-], starting and ending with a letter or
// digit); other S3 implementations accept a subset or more, so only what can break a URL is
// refused outright.
std::optional<std::string> bucket_problem(const std::string& b) {
  if (b.empty()) return "must not be empty";
  for (char c : b)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      return "'" + b + "' has a character S3 bucket names cannot have (letters, digits, '.', '-')";
  return std::nullopt;
}

// Defaults the parquet checks compare with (an option with a default is always "set").
constexpr kit::Compression kDefaultCompression = kit::Compression::Gzip;
constexpr int kDefaultGzipLevel = 1;
const kit::ByteSize kDefaultChunkSize{1u << 20};
const std::string kDefaultParquetCodec = "zstd";
constexpr int64_t kDefaultRowGroupRecords = int64_t{1} << 20;

// parquet_columns: the kit's declared-columns shape with the Arrow exporter's type names.
kit::Result<std::vector<arrow::DeclaredColumn>> parse_parquet_columns(const std::string& json) {
  using R = kit::Result<std::vector<arrow::DeclaredColumn>>;
  auto declared = kit::parse_declared_columns(json);
  if (!declared) return R::failure(declared.error());
  std::vector<arrow::DeclaredColumn> out;
  for (const kit::DeclaredColumn& d : declared.value()) {
    auto type = arrow::parse_column_type(d.type);
    if (!type)
      return R::failure("column '" + d.name + "': type '" + d.type +
                        "' is not one of bool, int64, float64, utf8, binary, timestamp_ms, json");
    if (d.name.rfind("pico_", 0) == 0)
      return R::failure("column '" + d.name + "' is a metadata column (include_metadata adds it)");
    out.push_back({d.name, *type, true});
  }
  return R::success(std::move(out));
}

}  // namespace

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("bucket", &Settings::bucket)
          .required()
          .check(kit::not_empty())
          .help("The bucket objects are written to; it must exist."),
      kit::option("endpoint", &Settings::endpoint)
          .help("Endpoint URL of an S3-compatible server (http://127.0.0.1:8333, https://minio.internal:9000). "
                "Unset: AWS, https://s3.<region>.amazonaws.com."),
      kit::option("region", &Settings::region)
          .fallback("us-east-1")
          .check(kit::not_empty())
          .help("Region the requests are signed for (SigV4)."),
      kit::option("addressing", &Settings::addressing)
          .choices({{"auto", Addressing::Auto}, {"path", Addressing::Path}, {"virtual", Addressing::Virtual}})
          .fallback(Addressing::Auto)
          .help("path: <endpoint>/<bucket>/<key>; virtual: <bucket>.<endpoint host>/<key>; auto: virtual on AWS, path "
                "with an endpoint."),
      kit::option("aws_access_key_id", &Settings::access_key_id)
          .help("Access key id; unset: the AWS_ACCESS_KEY_ID environment variable."),
      kit::option("aws_secret_access_key", &Settings::secret_access_key)
          .secret()
          .help("Secret access key; unset: AWS_SECRET_ACCESS_KEY. Never logged."),
      kit::option("aws_session_token", &Settings::session_token)
          .secret()
          .help("Session token of temporary credentials; unset: AWS_SESSION_TOKEN (when the key id also comes from the "
                "environment)."),
      kit::option("prefix", &Settings::prefix).fallback("").help("Prepended to every key ('/' added between them)."),
      kit::option("key_template", &Settings::key_template)
          .fallback("{topic}/partition={partition}/{topic}+{partition}+{start_offset}.{ext}")
          .help("Object key, resolved from each object's first record: {topic}, {topic_segment[N]}, {partition}, "
                "{start_offset} (20 digits), {sink_key}, {year} {month} {day} {hour} (UTC, of the record timestamp), "
                "{ext}. Must hold {start_offset} and {partition}."),
      kit::option("format", &Settings::format)
          .choices({{"json_lines", Format::JsonLines},
                    {"raw", Format::Raw},
                    {"csv", Format::Csv},
                    {"avro", Format::Avro},
                    {"parquet", Format::Parquet}})
          .fallback(Format::JsonLines)
          .help(
              "json_lines: one JSON document per record and line; raw: each payload's bytes followed by raw_separator; "
              "csv: the csv_columns of each record, one line each (RFC 4180 quoting); avro: an Avro object container "
              "file of avro_schema, or of the writer schema of an avro topic's records (compression as its codec: "
              "deflate, zstandard); parquet: a Parquet file per object (parquet_* options), by the Parquet writer "
              "libpicomq_parquet.so (shipped with the light sinks)."),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("json_lines: each record as {pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key, "
                "pico_headers, payload}. Off: the payload alone."),
      kit::option("raw_separator", &Settings::raw_separator)
          .fallback("\n")
          .help("raw: the bytes written after each payload."),
      kit::option("csv_columns", &Settings::csv_columns)
          .help(
              "csv: the columns, in order: top-level fields of the JSON object payload (strings as text, other values "
              "as JSON, null or missing empty) or pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key "
              "(base64), pico_headers (JSON). A record whose payload is not a JSON object is refused (bad-record "
              "policy)."),
      kit::option("csv_header", &Settings::csv_header)
          .fallback(true)
          .help("csv: each object starts with the header line."),
      kit::option("avro_schema", &Settings::avro_schema)
          .help("avro: the writer schema (Avro JSON) the JSON payloads are encoded by; top-level fields pico_topic, "
                "pico_partition, pico_offset, pico_timestamp, pico_key the payload lacks come from the record. A "
                "record that does not fit is refused (bad-record policy). Unset: each record's writer schema from "
                "an avro topic (schema = \"avro\", plain or registry framing); an object holds records of one "
                "schema and ends where the schema changes."),
      kit::option("parquet_columns", &Settings::parquet_columns)
          .check([](const kit::JsonValue& v) { return parse_parquet_columns(v.text).problem(); })
          .help(
              "parquet: the payload columns, as [{ name = \"id\", type = \"int64\" }, ...] or { id = \"int64\", ... }, "
              "types bool, int64, float64, utf8, binary, timestamp_ms, json (docs/arrow.md, declared schema); a "
              "record that does not convert is refused (bad-record policy). Unset: inferred from each object's "
              "records (docs/arrow.md, inference)."),
      kit::option("parquet_compression", &Settings::parquet_compression)
          .fallback(kDefaultParquetCodec)
          .check([](const std::string& v) -> std::optional<std::string> {
            if (kit::parse_parquet_codec(v)) return std::nullopt;
            return "'" + v + "' is not one of zstd, snappy, none";
          })
          .help("parquet: the codec of the pages (zstd, snappy, none); compression_level sets zstd's level."),
      kit::option("parquet_row_group_records", &Settings::parquet_row_group_records)
          .fallback(kDefaultRowGroupRecords)
          .check(kit::at_least(1))
          .help("parquet: rows per row group at most."),
      kit::option("parquet_dictionary", &Settings::parquet_dictionary)
          .fallback(true)
          .help("parquet: dictionary encoding of the columns (statistics are always written)."),
      kit::option("compression", &Settings::compression)
          .choices(
              {{"none", kit::Compression::None}, {"gzip", kit::Compression::Gzip}, {"zstd", kit::Compression::Zstd}})
          .fallback(kDefaultCompression)
          .help("Of each object (a .gz / .zst file of gzip members / zstd frames, one per chunk; no Content-Encoding); "
                "avro: the container's codec (gzip: deflate, zstd: zstandard)."),
      kit::option("compression_level", &Settings::compression_level)
          .fallback(0)
          .help("The codec's level (gzip 1-12, zstd 1-19); 0: gzip objects 1 (the fastest: ~20% larger than 6), "
                "zstd 3, avro's deflate 6."),
      kit::option("max_object_records", &Settings::max_object_records)
          .fallback(0)
          .check(kit::at_least(0))
          .help("Rotation: an object holds at most this many records. 0: no limit."),
      kit::option("max_object_bytes", &Settings::max_object_bytes)
          .fallback(kit::ByteSize{64u << 20})
          .help("Rotation: an object's encoded records (before compression) stay under this size (a larger record is "
                "an object of its own). 0: no limit."),
      kit::option("rotate_interval", &Settings::rotate_interval)
          .fallback(0ms)
          .help(
              "Rotation by record time: a record whose timestamp reaches the end of its object's window (windows "
              "aligned to the epoch, of this length, from the first record's timestamp) starts a new object. 0: off."),
      kit::option("conditional_create", &Settings::conditional_create)
          .fallback(true)
          .help(
              "The first upload of a key wins: PUT and CompleteMultipartUpload with If-None-Match: *, so a killed "
              "run's upload landing late never replaces an object. A 412 counts as written when the object there has "
              "this object's bytes (same ETag); when it holds other records (another cut), the records after its last "
              "offset go into the next object. Checked once per start (a probe object under <prefix>_picomq/): a "
              "store that ignores If-None-Match stops the sink. false: overwrite (docs/sinks/s3.md, Behaviour under "
              "replay and crashes)."),
      kit::option("part_size", &Settings::part_size)
          .fallback(kit::ByteSize{16u << 20})
          .help("An object larger than this (as uploaded, after compression) goes up as a multipart upload of parts of "
                "this size (at least 5MiB, S3's minimum) while it grows, one part at a time per upload, the upload "
                "aborted if it fails."),
      kit::option("parts_in_flight", &Settings::parts_in_flight)
          .fallback(2)
          .check(kit::at_least(1))
          .help("Memory: a partition's writes wait while its objects hold more than parts_in_flight x part_size bytes "
                "not yet uploaded (compressed parts, and chunks not compressed yet)."),
      kit::option("chunk_size", &Settings::chunk_size)
          .fallback(kDefaultChunkSize)
          .help("Objects are compressed and uploaded as they grow, in chunks of about this size of encoded records "
                "(cut after the record that reaches it): each chunk is a gzip member, a zstd frame or an Avro block."),
      kit::option("max_uploads_in_flight", &Settings::max_uploads_in_flight)
          .fallback(4)
          .check(kit::at_least(1))
          .help("Objects uploaded at once (of different partitions: one partition's objects go in order)."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long an upload refused with 5xx / 503 SlowDown / 429 or cut by a transport error is resent here "
                "(back-off 200 ms to 5 s) before its batches fail and the runtime's retry takes over."),
      kit::option("timeout", &Settings::timeout).fallback(60s).help("Total time of one request."),
      kit::option("connect_timeout", &Settings::connect_timeout).fallback(10s).help("Time to connect."),
      kit::group(&Settings::tls, kit::tls_options()),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Plan p{.settings = table.parse(config), .key = kit::ObjectKeyTemplate::parse("{start_offset}").value()};
  const Settings& s = p.settings;
  bool ok = true;
  auto problem = [&](const char* key, const std::string& message) {
    problems.add(key, message);
    ok = false;
  };
  if (auto b = bucket_problem(s.bucket)) problem("bucket", *b);

  auto key = kit::ObjectKeyTemplate::parse(s.key_template);
  if (!key) {
    problem("key_template", key.error());
  } else {
    using F = kit::ObjectKeyTemplate::Field;
    if (!key.value().uses(F::StartOffset))
      problem("key_template", "must hold {start_offset}: without it two objects of a partition get the same key");
    if (!key.value().uses(F::Partition))
      problem("key_template", "must hold {partition}: without it objects of two partitions can get the same key");
    // A restart finds the object it resumes in among the keys that start with the text before
    // {start_offset}: that text must name one topic-partition and time bucket.
    for (F f : key.value().after_start_offset())
      if (f != F::Ext)
        problem("key_template", "{" + std::string(kit::ObjectKeyTemplate::name(f)) +
                                    "} comes after {start_offset}: after a restart the sink finds the object it "
                                    "resumes in among the keys that start with the text before {start_offset}, "
                                    "which must then name one topic-partition and hour; move it before "
                                    "{start_offset} (only {ext} may follow)");
    if (auto blocks = kit::subscriptions(config))
      if (auto why = key.value().topics_problem(*blocks)) problem("key_template", *why);
    p.key = std::move(key).value();
  }
  if (!s.prefix.empty()) {
    if (s.prefix.front() == '/') problem("prefix", "may not start with '/'");
    for (char c : s.prefix)
      if (static_cast<unsigned char>(c) < 0x20) problem("prefix", "may not hold control characters");
    p.prefix = s.prefix.back() == '/' ? s.prefix : s.prefix + "/";
  }

  p.bucket.name = s.bucket;
  p.bucket.region = s.region;
  if (auto problem_text =
          kit::s3::set_endpoint(p.bucket, s.endpoint.value_or("https://s3." + s.region + ".amazonaws.com")))
    problem("endpoint", *problem_text);
  p.bucket.path_style =
      s.addressing == Addressing::Path || (s.addressing == Addressing::Auto && s.endpoint.has_value());
  if (!p.bucket.path_style && s.bucket.find('.') != std::string::npos && p.bucket.scheme == "https")
    problem("addressing",
            "virtual-hosted addressing with a dotted bucket name breaks TLS host checks: use addressing = \"path\"");

  // Credentials: the config's, else the standard environment variables (as the AWS SDKs read them).
  if (s.access_key_id) {
    p.bucket.access_key_id = *s.access_key_id;
    p.bucket.secret_access_key = s.secret_access_key.value_or("");
    p.bucket.session_token = s.session_token.value_or("");
    if (!s.secret_access_key) problem("aws_secret_access_key", "is required with aws_access_key_id");
  } else {
    p.bucket.access_key_id = env("AWS_ACCESS_KEY_ID").value_or("");
    p.bucket.secret_access_key = s.secret_access_key ? *s.secret_access_key : env("AWS_SECRET_ACCESS_KEY").value_or("");
    p.bucket.session_token = s.session_token ? *s.session_token : env("AWS_SESSION_TOKEN").value_or("");
    if (p.bucket.access_key_id.empty() || p.bucket.secret_access_key.empty())
      problem("aws_access_key_id",
              "no credentials: set aws_access_key_id and aws_secret_access_key, or the environment variables "
              "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  if (p.bucket.session_token.find_first_of("\r\n") != std::string::npos)
    problem("aws_session_token", "must be one line");

  if (s.compression_level != 0 && s.format == Format::Parquet) {
    if (s.compression_level < 1 || s.compression_level > 22)
      problem("compression_level", "parquet: zstd's levels are 1-22");
  } else if (s.compression_level != 0) {
    try {
      kit::Compressor probe(s.compression, static_cast<int>(s.compression_level));
    } catch (const std::exception& e) {
      problem("compression_level", e.what());
    }
  }
  if (s.part_size.bytes < (5u << 20)) problem("part_size", "must be at least 5MiB (S3's smallest part)");
  if (s.part_size.bytes > (5ull << 30)) problem("part_size", "must be at most 5GiB (S3's largest part)");
  if (s.chunk_size.bytes < 1024) problem("chunk_size", "must be at least 1KiB");
  if (s.format == Format::Avro) {
    if (s.avro_schema) {
      try {
        AvroEncoder probe(*s.avro_schema, s.compression);
      } catch (const std::invalid_argument& e) {
        std::string m = e.what();
        if (m.rfind("avro_schema: ", 0) == 0) m = m.substr(13);
        problem("avro_schema", m);
      }
    }
  }
  if (s.format == Format::Parquet) {
    if (s.compression != kDefaultCompression)
      problem("compression",
              "parquet files compress their pages: set parquet_compression (zstd, snappy, none) instead");
    if (s.max_object_bytes.bytes == 0)
      problem("max_object_bytes",
              "parquet: an object is made in memory from its records, so it needs a size limit (not 0)");
    if (s.chunk_size.bytes != kDefaultChunkSize.bytes)
      problem("chunk_size", "parquet: a Parquet file is written whole when its object ends, not in chunks");
    p.parquet = {.codec = *kit::parse_parquet_codec(s.parquet_compression),
                 .level = static_cast<int>(s.compression_level),
                 .row_group_records = static_cast<uint64_t>(s.parquet_row_group_records),
                 .dictionary = s.parquet_dictionary,
                 .statistics = true};
    if (s.parquet_columns) p.parquet_columns = parse_parquet_columns(s.parquet_columns->text).value();
    if (auto missing = kit::parquet_available()) problem("format", *missing);
  } else {
    auto only_parquet = [&](const char* key, bool set) {
      if (set) problem(key, "is only for format = \"parquet\"");
    };
    only_parquet("parquet_columns", s.parquet_columns.has_value());
    only_parquet("parquet_compression", s.parquet_compression != kDefaultParquetCodec);
    only_parquet("parquet_row_group_records", s.parquet_row_group_records != kDefaultRowGroupRecords);
    only_parquet("parquet_dictionary", !s.parquet_dictionary);
  }
  if (s.format != Format::Avro && s.avro_schema) problem("avro_schema", "is only for format = \"avro\"");
  if (s.format == Format::Csv && s.csv_columns.empty()) problem("csv_columns", "is required with format = \"csv\"");
  if (s.format != Format::Csv && !s.csv_columns.empty()) problem("csv_columns", "is only for format = \"csv\"");
  for (const auto& c : s.csv_columns)
    if (c.empty()) problem("csv_columns", "a column name is empty");
  p.ext = s.format == Format::JsonLines ? "json"
          : s.format == Format::Csv     ? "csv"
          : s.format == Format::Avro    ? "avro"
          : s.format == Format::Parquet ? "parquet"
                                        : "bin";
  p.content_type = s.format == Format::JsonLines ? "application/x-ndjson"
                   : s.format == Format::Csv     ? "text/csv"
                   : s.format == Format::Avro    ? "application/avro"
                   : s.format == Format::Parquet ? "application/vnd.apache.parquet"
                                                 : "application/octet-stream";
  if (s.format != Format::Avro && s.format != Format::Parquet) {
    p.object_compression = s.compression;
    // gzip objects at libdeflate's level 1 unless set: level 6 (zlib's default) costs ~3x the CPU
    // for objects ~20% smaller and held the sink to half of boto3's upload rate (bench/README.md).
    p.object_compression_level = s.compression_level != 0                  ? static_cast<int>(s.compression_level)
                                 : s.compression == kit::Compression::Gzip ? kDefaultGzipLevel
                                                                           : 0;
    if (s.compression == kit::Compression::Gzip) {
      p.ext += ".gz";
      p.content_type = "application/gzip";
    }
    if (s.compression == kit::Compression::Zstd) {
      p.ext += ".zst";
      p.content_type = "application/zstd";
    }
  }
  if (!ok) return std::nullopt;
  return p;
}

}  // namespace picomq::s3
