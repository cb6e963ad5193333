#include "redshift/config.h"

#include <cctype>

#include "picomq/kit/option_values.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::redshift {

using namespace std::chrono_literals;

namespace {

// [schema.]table, unquoted: the names go into statements as they are.
std::optional<std::string> check_table(const std::string& v) {
  if (v.empty()) return "must not be empty";
  int dots = 0;
  for (unsigned char c : v) {
    if (c == '.') {
      ++dots;
      continue;
    }
    if (!(std::isalnum(c) || c == '_') || c >= 0x80)
      return "must be [schema.]table of letters, digits and '_' (no quoting)";
  }
  if (dots > 1 || v.front() == '.' || v.back() == '.') return "must be table or schema.table";
  return std::nullopt;
}

}  // namespace

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("connection_string", &Settings::connection_string)
          .required()
          .secret()
          .check([](const std::string& v) { return kit::pg::parse_connection_string(v).problem(); })
          .help("libpq connection string of the cluster: \"host=... port=5439 dbname=dev user=... "
                "sslmode=verify-full\" (TLS by "
                "sslmode / sslrootcert; IAM: a temporary password from GetClusterCredentials in password)."),
      kit::option("password", &Settings::password)
          .secret()
          .help("The user's password (or an IAM temporary password); given to libpq over the connection string's own "
                "(no quoting needed; a postgresql:// URI works too)."),
      kit::option("target_table", &Settings::target_table)
          .required()
          .check(check_table)
          .help("[schema.]table the records are merged into (pico_id, pico_topic, pico_partition, pico_offset, "
                "pico_timestamp, pico_key, pico_headers, payload)."),
      kit::option("offsets_table", &Settings::offsets_table)
          .fallback(std::string("picomq_offsets"))
          .check(check_table)
          .help("[schema.]table recording each loaded offset range (sink, topic, partition, first_offset, "
                "last_offset), written in the load's transaction."),
      kit::option("create_tables", &Settings::create_tables)
          .fallback(true)
          .help("Create the target and offsets tables when missing (CREATE TABLE IF NOT EXISTS, the layout above; "
                "payload VARCHAR(65535))."),
      kit::option("merge_key", &Settings::merge_key)
          .choices({{"record", MergeKey::Record}, {"key", MergeKey::Key}})
          .fallback(MergeKey::Record)
          .help("pico_id, the MERGE key: record = topic:partition:offset in the kit's reversible encoding (a replay "
                "merges to the "
                "same rows); key = the record key (base64; one row per key, the latest record wins; a record without a "
                "key is refused)."),
      kit::option("dialect", &Settings::dialect)
          .choices({{"redshift", Dialect::Redshift}, {"postgres_shim", Dialect::PostgresShim}})
          .fallback(Dialect::Redshift)
          .help(
              "redshift: COPY ... FROM 's3://...' MANIFEST. postgres_shim (tests, PostgreSQL 15 as the stand-in): that "
              "COPY is "
              "done by the sink (manifest and files read from S3, COPY FROM STDIN), every other statement unchanged."),
      kit::option("s3_bucket", &Settings::s3_bucket)
          .required()
          .check(kit::not_empty())
          .help("Bucket the batches are staged in."),
      kit::option("s3_prefix", &Settings::s3_prefix)
          .fallback(std::string("picomq-staging"))
          .help("Key prefix of the staged files: {s3_prefix}/{sink}/{topic}/{partition}/{first}-{last}.{token}.csv.gz "
                "and .manifest (token: random, of the load: a key is written once)."),
      kit::option("s3_region", &Settings::s3_region)
          .fallback(std::string("us-east-1"))
          .check(kit::not_empty())
          .help("Region of the bucket (SigV4)."),
      kit::option("s3_endpoint", &Settings::s3_endpoint)
          .help("S3 endpoint, path-style (default https://s3.{s3_region}.amazonaws.com)."),
      kit::option("aws_access_key_id", &Settings::aws_access_key_id)
          .help("Key the sink stages with (and, without iam_role, that COPY reads with)."),
      kit::option("aws_secret_access_key", &Settings::aws_secret_access_key).secret().help("Its secret."),
      kit::option("iam_role", &Settings::iam_role)
          .help("IAM_ROLE 'arn:...' for COPY (otherwise ACCESS_KEY_ID / SECRET_ACCESS_KEY)."),
      kit::option("max_errors", &Settings::max_errors)
          .fallback(0)
          .check(kit::at_least(0))
          .help(
              "COPY MAXERROR: rows Redshift refuses are read from STL_LOAD_ERRORS and rejected through the bad-record "
              "policy (0: COPY fails on the first; the refused line is rejected and the batch reloaded without it)."),
      kit::option("max_field_bytes", &Settings::max_field_bytes)
          .fallback(kit::ByteSize{65535})
          .help("Largest payload / key text; a longer record is refused before staging (VARCHAR(65535))."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long a transient failure (connection loss, serialization conflict, S3 5xx) is retried here before "
                "the write fails and the runtime's retry takes over."),
      kit::option("keep_staged_files", &Settings::keep_staged_files)
          .fallback(false)
          .help("Keep the staged files after the commit (default: deleted)."),
  };
  return table;
}

std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  if (!s.aws_access_key_id != !s.aws_secret_access_key)
    problems.add("aws_access_key_id", "aws_access_key_id and aws_secret_access_key go together");
  if (!s.aws_access_key_id)
    problems.add("aws_access_key_id", "the sink stages files in S3 with these credentials: set both");
  // Change events: pico_id is the row's key, so one target table holds one source table's rows.
  if (const auto blocks = kit::subscriptions(config); blocks && kit::has_changes(*blocks)) {
    s.changes = true;
    if (s.merge_key != MergeKey::Key)
      problems.add("merge_key",
                   "change events (a block's `changes`) are rows named by their key: set merge_key = \"key\"");
    size_t topics = 0;
    for (const auto& b : *blocks) {
      if (b.changes == "none") continue;
      if (b.pattern)
        problems.add("target_table",
                     "a block with `changes` names its topic, not a pattern: the one "
                     "target table holds one source table's rows by key");
      topics += b.topics.size();
    }
    if (topics > 1)
      problems.add("target_table", "the blocks with `changes` name " + std::to_string(topics) +
                                       " topics: the one target table holds one source table's rows by key (one "
                                       "definition per source table)");
  }
  if (!problems.empty()) return std::nullopt;
  while (!s.s3_prefix.empty() && s.s3_prefix.back() == '/') s.s3_prefix.pop_back();
  s.conn_options = kit::pg::parse_connection_string(s.connection_string).value();
  s.stage = {.name = s.s3_bucket,
             .region = s.s3_region,
             .path_style = true,
             .access_key_id = *s.aws_access_key_id,
             .secret_access_key = *s.aws_secret_access_key};
  if (auto problem =
          kit::s3::set_endpoint(s.stage, s.s3_endpoint.value_or("https://s3." + s.s3_region + ".amazonaws.com"))) {
    problems.add("s3_endpoint", *problem);
    return std::nullopt;
  }
  return s;
}

}  // namespace picomq::redshift
