#include "meilisearch/config.h"

#include <simdjson.h>

#include <cctype>

#include "picomq/kit/http_client.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::meilisearch {

using namespace std::chrono_literals;

namespace {

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "Meilisearch's address, e.g. http://127.0.0.1:7700", .credentials = "use api_key"});
}

}  // namespace

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("Meilisearch's address: http(s)://host:7700 (a path prefix for a proxy is kept)."),
      kit::option("index", &Settings::index)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Index uid template, resolved once per topic: {topic}, {topic_segment[N]}; every byte outside "
                "[A-Za-z0-9_-] becomes '_', at most 400 bytes (a hash suffix when cut): topic shop.orders is index "
                "shop_orders."),
      kit::option("primary_key", &Settings::primary_key)
          .fallback(std::string("pico_id"))
          .check(kit::not_empty())
          .help("The index's primary key: the document field holding the id. The sink creates indexes with it and "
                "stops when an existing index has another."),
      kit::option("id", &Settings::id)
          .choices({{"record", IdMode::Record}, {"key", IdMode::Key}, {"field", IdMode::Field}})
          .fallback(IdMode::Record)
          .help("Document id: record = the record id topic:partition:offset in the kit's reversible encoding "
                "(orders.eu, 0, 42 -> orders_2Eeu-0-42: a replay replaces the same documents); key = the record key "
                "in the same encoding (a record without a key is refused); field = the payload's own primary_key "
                "field, sent as it is (an id Meilisearch refuses rejects its record). record and key ids longer than "
                "511 bytes are refused. Under change events (changes in [[topics]]) the row's key names the "
                "document: record and key mean it, field is refused."),
      kit::option("method", &Settings::method)
          .choices({{"replace", Method::Replace}, {"update", Method::Update}})
          .fallback(Method::Replace)
          .help("replace: POST documents (add or replace: a document of the same id is replaced whole); update: "
                "PUT documents (add or update: fields merged into the document of the same id). Under change events an "
                "upsert replaces and a patch updates: update is refused."),
      kit::option("tombstones", &Settings::tombstones)
          .choices({{"skip", Tombstones::Skip}, {"delete", Tombstones::Delete}})
          .fallback(Tombstones::Skip)
          .help("Records with a null payload: skip them, or (id = key) delete the document of their key "
                "(documents/delete-batch; a document not there is no error). Not read under change events: a tombstone "
                "is a delete there."),
      kit::document_option(&Settings::document,
                           {.first = "the primary key, ", .payload_adds = " (plus the primary key unless id = field)"}),
      kit::option("create_index", &Settings::create_index)
          .fallback(true)
          .help("Create a topic's index on its first batch when it does not exist (POST /indexes with the primary "
                "key, waiting for its task). Off: the first document addition creates it (Meilisearch does), with "
                "?primaryKey."),
      kit::option("index_settings", &Settings::index_settings)
          .check([](const kit::JsonValue& v) -> std::optional<std::string> {
            if (v.text == "null") return std::nullopt;
            simdjson::dom::parser parser;
            simdjson::dom::element root;
            if (parser.parse(v.text).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
              return std::string("must be a table (the body of PATCH /indexes/{uid}/settings)");
            return std::nullopt;
          })
          .help("Settings applied once to each index the sink writes (PATCH /indexes/{uid}/settings, waiting for its "
                "task), e.g. { filterableAttributes = [\"pico_topic\"] }. Settings Meilisearch refuses stop the sink "
                "naming the index."),
      kit::option("api_key", &Settings::api_key)
          .secret()
          .help("API key (Authorization: Bearer). Needs the actions documents.add (and documents.delete with "
                "tombstones = delete), tasks.get, indexes.get, indexes.create (create_index) and settings.update "
                "(index_settings)."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{10u << 20},
                                       .max_request_records = 10000,
                                       .max_in_flight = 8,
                                       .items = "documents",
                                       .item = "document",
                                       .transient = "429, 5xx, transport errors, a task failed as internal",
                                       .bytes_note = "Each request is one task. Keep it below the server's "
                                                     "--http-payload-size-limit (100 MB by default).",
                                       .in_flight_help = "Batches pending at once (their tasks enqueued and awaited "
                                                         "together); offsets still commit in order."})),
      kit::option("task_timeout", &Settings::task_timeout)
          .fallback(120s)
          .help("How long a task is awaited (polled with back-off, 10 ms to 1 s) before its write fails as maybe "
                "written (the runtime retries it; the same ids are replaced)."),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
  };
  return table;
}

std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  // Change events (docs/changes.md): each document is named by its row's key, replaced whole
  // (upsert), merged (patch), deleted, or emptied with its index (truncate), in record order. The
  // host fills defaults in, so id = "record", method = "replace" and tombstones = "skip" cannot be
  // told from options left out: only the values that say something else are refused.
  s.changes = kit::has_changes(config);
  if (s.changes) {
    const std::string under = "change events (changes = ... in [[topics]]) ";
    if (s.id == IdMode::Field)
      problems.add("id", under +
                             "name each document by its row's key (a delete has no payload to read a field "
                             "of): leave id out");
    if (s.method == Method::Update)
      problems.add("method", under +
                                 "replace a document whole on an upsert (a patch is merged by itself): leave "
                                 "method out (or \"replace\")");
    if (s.document == kit::JsonLayout::Envelope)
      problems.add("document", under +
                                   "merge a patch's columns into the document's own fields, which the envelope "
                                   "puts under `payload`: use \"flat\" or \"payload\"");
    if (!problems.empty()) return std::nullopt;
  }
  if (s.tombstones == Tombstones::Delete && s.id != IdMode::Key && !s.changes)
    problems.add("tombstones", "delete needs id = \"key\" (a tombstone names the document by its key)");
  if (s.id == IdMode::Field && s.document == kit::JsonLayout::Envelope)
    problems.add(
        "id",
        "field needs document = \"flat\" or \"payload\" (the envelope puts the payload's fields under `payload`)");
  if (s.http.compression != kit::Compression::None && s.http.compression != kit::Compression::Gzip)
    problems.add("compression", "Meilisearch takes gzip, deflate or br request bodies: use \"gzip\" or \"none\"");
  if (!problems.empty()) return std::nullopt;
  s.url = kit::base_url(std::move(s.url));
  return s;
}

std::string index_uid(const std::string& resolved) {
  std::string out;
  for (unsigned char c : resolved)
    out += (std::isalnum(c) || c == '-' || c == '_') && c < 0x80 ? static_cast<char>(c) : '_';
  if (out.empty()) out = "_";
  return kit::fit_name(std::move(out), kMaxIndexUidBytes);
}

}  // namespace picomq::meilisearch
