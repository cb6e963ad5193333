#include "influxdb/config.h"

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_values.hpp"

namespace picomq::influxdb {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(url, {.what = "the server's HTTP endpoint, e.g. http://127.0.0.1:8086",
                                   .credentials = "use token, or auth = \"basic\" with auth_user / auth_password",
                                   .query = "the sink sets the query; use the options"});
}

}  // namespace

std::string_view to_string(Api api) {
  switch (api) {
    case Api::V1: return "v1";
    case Api::V2: return "v2";
    case Api::V3: return "v3";
  }
  return "v2";
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("The server's HTTP endpoint: http(s)://host:8086 (3.x: :8181), optionally with a path prefix (a "
                "proxy). No query or credentials."),
      kit::option("api", &Settings::api)
          .choices({{"v1", Api::V1}, {"v2", Api::V2}, {"v3", Api::V3}})
          .fallback(Api::V2)
          .help("Write API: v1 = POST /write?db=&rp=&precision= (InfluxDB 1.x; basic auth with auth = \"basic\"); "
                "v2 = POST /api/v2/write?org=&bucket=&precision= (InfluxDB 2.x, Cloud; Authorization: Token); v3 = "
                "POST /api/v3/write_lp?db=&precision= (InfluxDB 3 Core / Enterprise; Authorization: Bearer)."),
      kit::option("database", &Settings::database)
          .help("v1 and v3: the database written to (it must exist: the sink creates nothing)."),
      kit::option("retention_policy", &Settings::retention_policy)
          .help("v1: the retention policy written to (empty: the database's default)."),
      kit::option("org", &Settings::org).help("v2: the organization (name or ID) that owns the bucket."),
      kit::option("bucket", &Settings::bucket).help("v2: the bucket written to (it must exist)."),
      kit::option("token", &Settings::token)
          .secret()
          .help("v2: an API token with write access to the bucket (sent as Authorization: Token ...); v3: a "
                "database token (Authorization: Bearer ...). Empty: no token (v1 uses auth = \"basic\")."),
      kit::option("measurement", &Settings::measurement)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Measurement name template, resolved once per topic: {topic}, {topic_segment[N]} (used when "
                "measurement_field is empty)."),
      kit::option("measurement_field", &Settings::measurement_field)
          .help("Dotted path of a payload field whose string value is the point's measurement; a record "
                "without it is rejected. Empty: the measurement template."),
      kit::option("tags", &Settings::tags)
          .help("Dotted paths of payload fields written as tags (named by the path, '.' as field_separator); "
                "strings, numbers and booleans as text; a missing or null field adds no tag; an object or "
                "array is a rejected record."),
      kit::option("tag_key", &Settings::tag_key)
          .help("Name of a tag holding the record key (UTF-8; a key that is not is a rejected record; no key: no "
                "tag). Empty: the key is not written."),
      kit::option("tag_headers", &Settings::tag_headers)
          .help("Record headers written as tags of the same name (the first header of that name; not UTF-8: a "
                "rejected record)."),
      kit::option("tag_metadata", &Settings::tag_metadata)
          .check([](const std::vector<std::string>& v) -> std::optional<std::string> {
            for (const auto& name : v)
              if (name != "pico_topic" && name != "pico_partition" && name != "pico_offset")
                return "unknown metadata \"" + name + "\" (pico_topic, pico_partition or pico_offset)";
            return std::nullopt;
          })
          .help("Record metadata written as tags: pico_topic, pico_partition, pico_offset (pico_offset makes every "
                "record its own series: mind the series cardinality)."),
      kit::option("metadata_fields", &Settings::metadata_fields)
          .check([](const std::vector<std::string>& v) -> std::optional<std::string> {
            for (const auto& name : v)
              if (name != "pico_topic" && name != "pico_partition" && name != "pico_offset" &&
                  name != "pico_timestamp" && name != "pico_key" && name != "pico_headers")
                return "unknown metadata \"" + name +
                       "\" (pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key or pico_headers)";
            return std::nullopt;
          })
          .help("Record metadata written as fields: pico_topic (string), pico_partition, pico_offset, pico_timestamp "
                "(epoch ms; integers), pico_key (the key as base64, no key: none), pico_headers (the headers as a JSON "
                "object string: UTF-8 values as they are, others base64)."),
      kit::option("fields", &Settings::fields)
          .help("Dotted paths of the payload fields written as fields (an object is flattened below its path). "
                "Empty: every scalar field not used as a tag, measurement or timestamp, nested objects flattened "
                "with field_separator, arrays by index (a_0, a_1); nulls are left out."),
      kit::option("field_separator", &Settings::field_separator)
          .fallback(std::string("_"))
          .help("Joins the names of nested fields and array indices: {\"cpu\": {\"user\": 1}} is field cpu_user."),
      kit::option("timestamp_field", &Settings::timestamp_field)
          .help("Dotted path of the payload field holding the point's time: a number (epoch in timestamp_unit), "
                "or a string (RFC 3339 / ISO 8601 date-time, UTC when it has no offset). A record without it, or "
                "with a value that is neither, is rejected. Empty: the record timestamp (a record without one is "
                "rejected)."),
      kit::option("timestamp_unit", &Settings::timestamp_unit)
          .choices({{"ns", Precision::Ns}, {"us", Precision::Us}, {"ms", Precision::Ms}, {"s", Precision::S}})
          .fallback(Precision::Ms)
          .help("Unit of numeric timestamp_field values: ns, us, ms or s (a fraction of a number is kept down to "
                "precision)."),
      kit::option("precision", &Settings::precision)
          .choices({{"ns", Precision::Ns}, {"us", Precision::Us}, {"ms", Precision::Ms}, {"s", Precision::S}})
          .fallback(Precision::Ms)
          .help("Precision of the written timestamps (and of the write request): ns, us, ms or s. Times finer "
                "than this are rounded down. Points of a series with the same time overwrite each other."),
      kit::option("numbers", &Settings::numbers)
          .choices({{"auto", Numbers::Auto}, {"float", Numbers::Float}})
          .fallback(Numbers::Auto)
          .help("JSON numbers as fields: auto = integers as integers (i; above 2^63-1 as unsigned u on v2 / v3, as "
                "float on v1), others as floats; float = every number as a float (a field that is sometimes 1 and "
                "sometimes 1.5 then never conflicts)."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{8u << 20},
                                       .max_request_records = 5000,
                                       .records_key = "max_request_lines",
                                       .items = "lines (points)",
                                       .item = "line",
                                       .request = "write request",
                                       .transient = "429, 503 with Retry-After, other 5xx, transport errors",
                                       .bytes_note = "413 answers are split further.",
                                       .records_note = "InfluxDB's advice: 5000"})),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
      kit::group(&Settings::auth, kit::auth_options()),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  kit::validate_auth(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  if (s.auth.type != kit::AuthType::None && s.auth.type != kit::AuthType::Basic)
    problems.add("auth", "only basic is supported by this sink (v1 user and password); v2 / v3 use token");
  if (s.auth.type == kit::AuthType::Basic && !s.token.empty())
    problems.add("token", "set either token or auth = \"basic\", not both (both use the Authorization header)");
  if (s.http.compression != kit::Compression::None && s.http.compression != kit::Compression::Gzip)
    problems.add("compression", "InfluxDB takes gzip request bodies only: use \"none\" or \"gzip\"");
  switch (s.api) {
    case Api::V1:
      if (s.database.empty()) problems.add("database", "api = \"v1\" needs the database to write to");
      if (!s.org.empty() || !s.bucket.empty())
        problems.add("bucket", "org / bucket are for api = \"v2\"; v1 uses database");
      break;
    case Api::V2:
      if (s.org.empty()) problems.add("org", "api = \"v2\" needs the organization (name or ID)");
      if (s.bucket.empty()) problems.add("bucket", "api = \"v2\" needs the bucket to write to");
      if (!s.database.empty())
        problems.add("database", "database is for api = \"v1\" / \"v3\"; v2 uses org and bucket");
      break;
    case Api::V3:
      if (s.database.empty()) problems.add("database", "api = \"v3\" needs the database to write to");
      if (!s.org.empty() || !s.bucket.empty())
        problems.add("bucket", "org / bucket are for api = \"v2\"; v3 uses database");
      break;
  }
  if (!s.retention_policy.empty() && s.api != Api::V1) problems.add("retention_policy", "is for api = \"v1\"");
  if (s.field_separator.empty()) problems.add("field_separator", "must not be empty");
  if (!problems.empty()) return std::nullopt;
  kit::NameTemplate measurement = kit::NameTemplate::parse(s.measurement).value();
  Plan p{std::move(s), {}, {}, std::move(measurement)};
  p.base_url = p.settings.url;
  p.base_url = kit::base_url(std::move(p.base_url));
  const Settings& t = p.settings;
  switch (t.api) {
    case Api::V1:
      p.write_url = p.base_url + "/write?db=" + kit::percent_encode(t.database);
      if (!t.retention_policy.empty()) p.write_url += "&rp=" + kit::percent_encode(t.retention_policy);
      p.write_url += "&precision=" + std::string(precision_name(t.precision));
      break;
    case Api::V2:
      p.write_url = p.base_url + "/api/v2/write?org=" + kit::percent_encode(t.org) +
                    "&bucket=" + kit::percent_encode(t.bucket) +
                    "&precision=" + std::string(precision_name(t.precision));
      break;
    case Api::V3:
      // accept_partial=true (the default, written out): the valid lines are written and the
      // refused ones come back by line number.
      p.write_url = p.base_url + "/api/v3/write_lp?db=" + kit::percent_encode(t.database) +
                    "&precision=" + std::string(precision_v3_name(t.precision)) + "&accept_partial=true";
      break;
  }
  return p;
}

}  // namespace picomq::influxdb
