#pragma once
// The S3 sink's options, each declared once (kit::OptionTable: the runtime's option table, the
// generated table in docs/sinks/s3.md, value checks) with the kit's TLS group; and the checks
// across options (plan()), shared by validate() (`picomq-connect --check`) and open(). No I/O,
// except reading the standard AWS environment variables for credentials the config leaves out.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/compression.hpp"
#include "picomq/kit/object_key.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/parquet.hpp"
#include "picomq/kit/s3.hpp"
#include "picomq/sdk.hpp"

namespace picomq::s3 {

enum class Format { JsonLines, Raw, Csv, Avro, Parquet };
enum class Addressing { Auto, Path, Virtual };

struct Settings {
  std::string bucket;
  std::optional<std::string> endpoint;
  std::string region;
  Addressing addressing = Addressing::Auto;
  std::optional<std::string> access_key_id, secret_access_key, session_token;
  std::string prefix;
  std::string key_template;
  Format format = Format::JsonLines;
  bool include_metadata = true;
  std::string raw_separator;
  std::vector<std::string> csv_columns;
  bool csv_header = true;
  std::optional<std::string> avro_schema;
  std::optional<kit::JsonValue> parquet_columns;
  std::string parquet_compression;
  int64_t parquet_row_group_records = 0;
  bool parquet_dictionary = true;
  kit::Compression compression = kit::Compression::Gzip;
  int64_t compression_level = 0;
  int64_t max_object_records = 0;
  kit::ByteSize max_object_bytes{};
  std::chrono::milliseconds rotate_interval{};
  bool conditional_create = true;
  kit::ByteSize part_size{};
  int64_t parts_in_flight = 0;
  kit::ByteSize chunk_size{};
  int64_t max_uploads_in_flight = 0;
  std::chrono::milliseconds retry_timeout{};
  std::chrono::milliseconds timeout{};
  std::chrono::milliseconds connect_timeout{};
  kit::TlsSettings tls;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  kit::ObjectKeyTemplate key;
  std::string prefix;      // "" or ending in '/'
  kit::s3::Bucket bucket;  // name, region, endpoint, addressing; credentials: config, else AWS_* environment
  std::string ext;         // "json.gz", "bin.zst", "avro"...
  kit::Compression object_compression =
      kit::Compression::None;        // of the chunks (None for Avro: its blocks have the codec)
  int object_compression_level = 0;  // its level (0: the codec's default)
  std::string content_type;
  // parquet: the writer's settings and the declared columns (none: inferred from each object's records).
  kit::ParquetOptions parquet;
  std::optional<std::vector<arrow::DeclaredColumn>> parquet_columns;
};

// The plan, or nullopt with every problem added to `problems` under its option's key.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

}  // namespace picomq::s3
