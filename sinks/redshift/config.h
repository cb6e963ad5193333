#pragma once
// The Redshift sink's options, each declared once (kit::OptionTable: the runtime's option table,
// the generated table in docs/sinks/redshift.md, value checks), and the checks across options
// (plan()), shared by validate() (`picomq-connect --check`) and open(). No I/O.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "picomq/kit/options.hpp"
#include "picomq/kit/postgres/connection.hpp"
#include "picomq/kit/s3.hpp"
#include "picomq/sdk.hpp"

namespace picomq::redshift {

enum class Dialect { Redshift, PostgresShim };
enum class MergeKey { Record, Key };

struct Settings {
  std::string connection_string;
  kit::pg::ConnOptions conn_options;  // connection_string parsed (plan()); holds the password too: never logged
  std::optional<std::string> password;
  std::string target_table;
  std::string offsets_table;
  bool create_tables = true;
  MergeKey merge_key = MergeKey::Record;
  Dialect dialect = Dialect::Redshift;
  std::string s3_bucket;
  std::string s3_prefix;
  std::string s3_region;
  std::optional<std::string> s3_endpoint;
  kit::s3::Bucket stage;  // the bucket, its endpoint and the credentials (plan())
  std::optional<std::string> aws_access_key_id;
  std::optional<std::string> aws_secret_access_key;
  std::optional<std::string> iam_role;
  int64_t max_errors = 0;
  kit::ByteSize max_field_bytes{};
  std::chrono::milliseconds retry_timeout{};
  bool keep_staged_files = false;
  bool changes = false;  // a [[topics]] block hands the sink change events (docs/changes.md)
};

const kit::OptionTable<Settings>& option_table();

// The options parsed and checked together; nullopt with `problems` filled when they do not fit.
std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

}  // namespace picomq::redshift
