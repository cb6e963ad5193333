#include "surrealdb/config.h"

#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::surrealdb {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "the server's HTTP endpoint, e.g. http://127.0.0.1:8000", .credentials = "use user / password"});
}

// Namespace and database names are written into DEFINE statements: plain identifiers only.
std::optional<std::string> check_identifier(const std::string& v) {
  if (v.empty()) return "must not be empty";
  if (v.size() > 63) return "must be at most 63 bytes";
  for (unsigned char c : v)
    if (!(std::isalnum(c) || c == '_')) return "may hold only the characters A-Z, a-z, 0-9 and _";
  return std::nullopt;
}

}  // namespace

std::string table_identifier(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    size_t len = 1;
    if (c >= 0xC0 && c < 0xE0) len = 2;
    else if (c >= 0xE0 && c < 0xF0) len = 3;
    else if (c >= 0xF0 && c < 0xF8) len = 4;
    if (i + len > name.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(name[i + k]) & 0xC0) != 0x80) len = 1;
    out += (len == 1 && (std::isalnum(c) || c == '_')) ? static_cast<char>(c) : '_';
    i += len;
  }
  if (out.empty()) out = "_";
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), 't');
  return kit::fit_name(std::move(out), 63);
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("The server's HTTP endpoint: http(s)://host:8000, optionally with a path prefix (a proxy). The sink "
                "posts to <url>/rpc (CBOR) and <url>/signin."),
      kit::option("namespace", &Settings::ns)
          .fallback(std::string("main"))
          .check(check_identifier)
          .help("Namespace ([A-Za-z0-9_]). Sent as the surreal-ns header."),
      kit::option("database", &Settings::database)
          .fallback(std::string("main"))
          .check(check_identifier)
          .help("Database ([A-Za-z0-9_]). Sent as the surreal-db header."),
      kit::option("table", &Settings::table)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Table name template, resolved once per topic: {topic}, {topic_segment[N]}; sanitised to a SurrealDB "
                "identifier: every character outside [A-Za-z0-9_] becomes '_', a leading digit gets the prefix 't', "
                "at most 63 bytes (cut with a hash suffix). Topic shop.orders-eu is table shop_orders_eu."),
      kit::option("mode", &Settings::mode)
          .choices({{"insert", Mode::Insert}, {"upsert", Mode::Upsert}})
          .fallback(Mode::Insert)
          .help("insert: INSERT IGNORE (a record whose id exists is left as it is: a replay writes nothing twice); "
                "upsert: UPSERT type::record(table, id) CONTENT record (the last record of an id wins; with id = key "
                "or field a table of current values). Not read under change events (changes in [[topics]]): each "
                "change is applied by its row's key."),
      kit::option("id", &Settings::id)
          .choices({{"record", IdMode::Record}, {"key", IdMode::Key}, {"field", IdMode::Field}})
          .fallback(IdMode::Record)
          .help("Record id: record = the array [topic, partition, offset] (table:['shop.orders', 0, 42]); key = the "
                "record key as a string (a record without one, or with one that is not UTF-8, is refused); field = "
                "the payload field id_field (a string or an integer; a record without it is refused). Under change "
                "events the row's key names the record: record and key mean it, field is refused."),
      kit::option("id_field", &Settings::id_field)
          .help("id = field: the top-level payload field whose value is the record id (kept in the record as its id)."),
      kit::option("tombstones", &Settings::tombstones)
          .choices({{"skip", Tombstones::Skip}, {"delete", Tombstones::Delete}})
          .fallback(Tombstones::Skip)
          .help("Records with a null payload: skip them (counted), or (id = key) DELETE the record of their key (one "
                "already gone counts as deleted). Not read under change events: a tombstone is a delete there."),
      kit::document_option(
          &Settings::document,
          {.more = "A payload field `id` is kept as pico_payload_id, since id is the record id.", .payload = false}),
      kit::option("create_namespace", &Settings::create_namespace)
          .fallback(true)
          .help("At start, DEFINE NAMESPACE IF NOT EXISTS / DEFINE DATABASE IF NOT EXISTS (SurrealDB creates neither "
                "implicitly; needs a root or namespace user). A missing namespace or database stops the sink."),
      kit::option("define_table", &Settings::define_table)
          .fallback(true)
          .help("DEFINE TABLE IF NOT EXISTS <table> SCHEMALESS on a topic's first batch (a table defined before, "
                "e.g. SCHEMAFULL, is kept as it is)."),
      kit::option("index_offsets", &Settings::index_offsets)
          .fallback(false)
          .help("With define_table: also DEFINE INDEX IF NOT EXISTS pico_offsets ON <table> FIELDS pico_topic, "
                "pico_partition, pico_offset (queries by position; costs write throughput)."),
      kit::option("auth", &Settings::auth)
          .choices({{"basic", AuthMode::Basic}, {"signin", AuthMode::Signin}, {"none", AuthMode::None}})
          .fallback(AuthMode::Basic)
          .help("basic: HTTP basic auth with user / password on every request (root users only); signin: POST /signin "
                "once for a token "
                "(Authorization: Bearer), signed in again after token_refresh or when the server answers 401; none: "
                "anonymous (a server started with --unauthenticated)."),
      kit::option("auth_level", &Settings::auth_level)
          .choices({{"root", AuthLevel::Root}, {"namespace", AuthLevel::Namespace}, {"database", AuthLevel::Database}})
          .fallback(AuthLevel::Root)
          .help("auth = signin: where the user is defined (DEFINE USER ... ON ROOT / NAMESPACE / DATABASE); the "
                "signin names the namespace / database accordingly."),
      kit::option("user", &Settings::user).fallback(std::string("root")).help("User name."),
      kit::option("password", &Settings::password).secret().help("The user's password."),
      kit::option("token_refresh", &Settings::token_refresh)
          .fallback(30min)
          .help("auth = signin: sign in again after this long (keep it below the user's token / session duration)."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{1u << 20},
                                       .max_request_records = 1000,
                                       .transient = "transaction conflict, timeout, 408, 429, 5xx, transport errors",
                                       .bytes_note = "Bodies are CBOR."})),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  // Change events (docs/changes.md): each record is named by its row's key, replaced whole
  // (upsert), extended (patch), deleted, or emptied with its table (truncate), in record order.
  // The host fills defaults in, so mode = "insert", id = "record" and tombstones = "skip" cannot
  // be told from options left out: they are not read, and only what says something else is refused.
  s.changes = kit::has_changes(config);
  if (s.changes) {
    const std::string under = "change events (changes = ... in [[topics]]) ";
    if (s.id == IdMode::Field)
      problems.add("id", under +
                             "name each record by its row's key (a delete has no payload to read a field of): "
                             "leave id and id_field out");
    if (s.document == kit::JsonLayout::Envelope)
      problems.add("document", under +
                                   "merge a patch's columns into the record's own fields, which the envelope puts "
                                   "under `payload`: use \"flat\"");
    if (!problems.empty()) return std::nullopt;
  }
  if (s.id == IdMode::Field && s.id_field.empty()) problems.add("id_field", "id = \"field\" needs id_field");
  if (s.id != IdMode::Field && !s.id_field.empty()) problems.add("id_field", "is for id = \"field\"");
  if (s.tombstones == Tombstones::Delete && s.id != IdMode::Key && !s.changes)
    problems.add("tombstones", "delete needs id = \"key\" (a tombstone names its record by its key)");
  if (s.auth != AuthMode::None && s.password.empty())
    problems.add("password",
                 "is required with auth = \"" + std::string(s.auth == AuthMode::Basic ? "basic" : "signin") + "\"");
  if (s.index_offsets && !s.define_table) problems.add("index_offsets", "needs define_table = true");
  if (s.http.compression != kit::Compression::None)
    problems.add("compression",
                 "SurrealDB 3.3.5 does not decode compressed request bodies (a gzip body is "
                 "answered 400 \"Parse error\"): leave it \"none\"");
  if (s.auth == AuthMode::Basic && s.auth_level != AuthLevel::Root)
    problems.add("auth_level",
                 "namespace and database users need auth = \"signin\" (SurrealDB 3.3.5 answers 401 to "
                 "basic auth of a user that is not a root user)");
  if (!problems.empty()) return std::nullopt;
  kit::NameTemplate t = kit::NameTemplate::parse(s.table).value();
  Plan p{std::move(s), {}, std::move(t)};
  p.base_url = p.settings.url;
  p.base_url = kit::base_url(std::move(p.base_url));
  return p;
}

}  // namespace picomq::surrealdb
