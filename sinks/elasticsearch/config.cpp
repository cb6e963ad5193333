#include "elasticsearch/config.h"

#include <simdjson.h>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::elasticsearch {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "the cluster's HTTP endpoint, e.g. http://127.0.0.1:9200",
            .credentials = "use auth = \"basic\" with auth_user / auth_password, or auth = \"api_key\"",
            .query = "the sink sets the query; use the options"});
}

// A JSON object option (index_settings, index_mappings): null (unset) or an object.
std::optional<std::string> check_object(const kit::JsonValue& v) {
  if (v.text == "null") return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(v.text).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
    return std::string("must be a table (a JSON object)");
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Action a) { return a == Action::Create ? "create" : "index"; }

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("The cluster's HTTP endpoint: http(s)://host:9200, optionally with a path prefix (a proxy). No "
                "query or credentials."),
      kit::option("index", &Settings::index)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Index (or data stream) name template, resolved once per topic: {topic}, {topic_segment[N]}; "
                "sanitised to the index-name rules (lower case, characters outside [a-z0-9._-] as '_', no "
                "leading '-', '_', '+' or '.', at most 255 bytes with a hash suffix when cut): topic Shop.Orders "
                "is index shop.orders."),
      kit::option("action", &Settings::action)
          .choices({{"index", Action::Index}, {"create", Action::Create}})
          .fallback(Action::Index)
          .help("Bulk action: index (write or overwrite the document of that id) or create (write it only if no "
                "document has that id: a replay finds it there, counted as already written)."),
      kit::option("id", &Settings::id)
          .choices({{"record", IdMode::Record}, {"key", IdMode::Key}, {"none", IdMode::None}})
          .fallback(IdMode::Record)
          .help("Document _id: record = topic:partition:offset (a replay overwrites, nothing doubles); key = the "
                "record key as UTF-8 text (a record without one, or with one that is not UTF-8 or longer than 512 "
                "bytes, is refused); none = the cluster makes one up (a replay writes the records again). Under change "
                "events (changes in [[topics]]) the row's key names the document: record and key mean it, none "
                "is refused."),
      kit::option("version_type", &Settings::version_type)
          .choices({{"internal", VersionType::Internal}, {"external", VersionType::External}})
          .fallback(VersionType::Internal)
          .help("id = key with action = index: external sends the record offset as the document version, so a "
                "replay of an older record never overwrites a newer document (the cluster's version conflict is "
                "counted as already written)."),
      kit::option("tombstones", &Settings::tombstones)
          .choices({{"skip", Tombstones::Skip}, {"delete", Tombstones::Delete}})
          .fallback(Tombstones::Skip)
          .help(
              "Records with a null payload: skip them, or (id = key) delete the document of their key (a "
              "document already gone counts as deleted). Not read under change events: a tombstone is a delete there."),
      kit::document_option(&Settings::document),
      kit::option("data_stream", &Settings::data_stream)
          .fallback(false)
          .help("Write into data streams: action create only, each document gets @timestamp = the record "
                "timestamp (epoch ms). The stream's index template must exist; the sink creates nothing."),
      kit::option("auto_create_index", &Settings::auto_create_index)
          .fallback(true)
          .help("Create a topic's index on its first batch when it does not exist (PUT <index> with "
                "index_settings / index_mappings). Off: a missing index is left to the cluster (its "
                "action.auto_create_index and index templates)."),
      kit::option("index_settings", &Settings::index_settings)
          .check(check_object)
          .help("Settings of the indices the sink creates, e.g. { number_of_shards = 1, number_of_replicas = 0 }."),
      kit::option("index_mappings", &Settings::index_mappings)
          .check(check_object)
          .help("Mappings of the indices the sink creates, e.g. { properties = { amount = { type = \"double\" } } }. "
                "A mapping the cluster refuses stops the sink naming the index."),
      kit::option("index_template", &Settings::index_template)
          .check([](const kit::JsonValue& v) -> std::optional<std::string> {
            if (v.text == "null") return std::nullopt;
            simdjson::dom::parser parser;
            simdjson::dom::element root;
            simdjson::dom::array patterns;
            if (parser.parse(v.text).get(root) || root["index_patterns"].get_array().get(patterns))
              return std::string("must be a table with index_patterns (the body of PUT _index_template/<name>)");
            return std::nullopt;
          })
          .help("A composable index template the sink puts (PUT _index_template/<index_template_name>) before "
                "its first write, e.g. { index_patterns = [\"logs-*\"], data_stream = {}, template = { settings = "
                "{ ... }, mappings = { ... } } }: how indices the cluster creates itself, and data streams, get their "
                "settings and mappings. Replaces a template of that name. Unset: none."),
      kit::option("index_template_name", &Settings::index_template_name)
          .help("Name of index_template. Empty: picomq-<sink key>."),
      kit::option("pipeline", &Settings::pipeline).help("Ingest pipeline every document goes through (empty: none)."),
      kit::option("routing_field", &Settings::routing_field)
          .help("Dotted path of a payload field whose value (string or number) is the document's routing (e.g. "
                "customer.id). A record without it is routed by its id. Empty: no routing."),
      kit::option("refresh", &Settings::refresh)
          .choices({{"false", Refresh::False}, {"true", Refresh::True}, {"wait_for", Refresh::WaitFor}})
          .fallback(Refresh::False)
          .help("The bulk requests' refresh: false (the index's refresh_interval), true (a refresh after each "
                "request: costly), or wait_for (a write completes once the index's next refresh made it searchable: "
                "up to refresh_interval later; never with refresh_interval -1)."),
      kit::option("compatible_with", &Settings::compatible_with)
          .fallback(0)
          .check([](const int64_t& v) -> std::optional<std::string> {
            if (v != 0 && v != 7 && v != 8) return std::string("must be 0, 7 or 8");
            return std::nullopt;
          })
          .help("Elasticsearch 8 / 9 REST compatibility: 7 or 8 sends Accept and Content-Type "
                "application/vnd.elasticsearch+json;compatible-with=N. 0: plain JSON media types (OpenSearch, "
                "Elasticsearch 7 and 8)."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{5u << 20},
                                       .max_request_records = 1000,
                                       .items = "documents",
                                       .item = "document",
                                       .request = "_bulk request",
                                       .transient = "429, es_rejected_execution_exception, 5xx, transport errors; "
                                                    "only the refused items",
                                       .bytes_note = "Keep it below the cluster's http.max_content_length."})),
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
  // Change events (docs/changes.md): each document is named by its row's key, written whole
  // (index), updated (patch), deleted, or emptied with its index (truncate), in order.
  const bool changes = kit::has_changes(config);
  if (changes) {
    const std::string under = "change events (changes = ... in [[topics]]) ";
    // The host fills defaults in, so id = "record" (the default) cannot be told from no id: under
    // changes id and tombstones are not read; only id = "none" says something else.
    if (s.id == IdMode::None)
      problems.add("id", under +
                             "name each document by its row's key: \"none\" (ids made up by the cluster) "
                             "cannot replace or delete them; leave id out");
    if (s.action == Action::Create)
      problems.add("action", under +
                                 "replace and delete documents: create writes a document only once; leave "
                                 "action out (or \"index\")");
    if (s.version_type == VersionType::External)
      problems.add("version_type", under +
                                       "are applied in offset order without versions (a patch is an update, "
                                       "which takes no external version): leave version_type out");
    if (s.data_stream)
      problems.add("data_stream", under +
                                      "update and delete documents by _id, which a data stream (append-only) "
                                      "does not allow: write them to an index");
    if (!s.routing_field.empty())
      problems.add("routing_field", under +
                                        "delete documents by key alone (a delete has no payload to route by): "
                                        "leave routing_field out");
    if (!problems.empty()) return std::nullopt;
  }
  if (s.auth.type == kit::AuthType::OAuth2ClientCredentials)
    problems.add("auth", "oauth2 is not supported by this sink (use basic, api_key, bearer or aws_sigv4)");
  if (s.version_type == VersionType::External && s.id != IdMode::Key)
    problems.add("version_type", "external needs id = \"key\" (the offset versions the document of a key)");
  if (s.version_type == VersionType::External && s.action == Action::Create)
    problems.add("version_type", "external needs action = \"index\" (create supports internal versioning only)");
  if (s.tombstones == Tombstones::Delete && s.id != IdMode::Key && !changes)
    problems.add("tombstones", "delete needs id = \"key\" (a tombstone names the document by its key)");
  if (s.data_stream && s.action != Action::Create)
    problems.add("data_stream", "needs action = \"create\" (data streams take create only)");
  if (s.data_stream && s.tombstones == Tombstones::Delete)
    problems.add("tombstones", "delete is not possible in a data stream");
  if (s.data_stream && s.document == kit::JsonLayout::PayloadOnly)
    problems.add("document", "payload cannot carry @timestamp in a data stream: use flat or envelope");
  if (s.data_stream && (s.index_settings.text != "null" || s.index_mappings.text != "null"))
    problems.add("data_stream",
                 "index_settings / index_mappings are for indices; a data stream's come from its "
                 "index template");
  if (!problems.empty()) return std::nullopt;
  kit::NameTemplate index = kit::NameTemplate::parse(s.index).value();
  Plan p{std::move(s), {}, std::move(index), {}, {}, {}, changes};
  p.base_url = p.settings.url;
  p.base_url = kit::base_url(std::move(p.base_url));
  // Only what the sink reads of each item: the response of a large bulk shrinks to a few bytes per item.
  p.bulk_query =
      "?filter_path=errors,items.*.status,items.*.result,items.*.error.type,items.*.error.reason,"
      "items.*.error.caused_by.type,items.*.error.caused_by.reason";
  if (!p.settings.pipeline.empty()) p.bulk_query += "&pipeline=" + kit::percent_encode(p.settings.pipeline);
  if (p.settings.refresh == Refresh::True) p.bulk_query += "&refresh=true";
  if (p.settings.refresh == Refresh::WaitFor) p.bulk_query += "&refresh=wait_for";
  if (p.settings.index_settings.text != "null" || p.settings.index_mappings.text != "null") {
    p.create_body = "{";
    if (p.settings.index_settings.text != "null") p.create_body += "\"settings\":" + p.settings.index_settings.text;
    if (p.settings.index_mappings.text != "null")
      p.create_body +=
          std::string(p.create_body.size() > 1 ? "," : "") + "\"mappings\":" + p.settings.index_mappings.text;
    p.create_body += "}";
  }
  for (size_t from = 0; !p.settings.routing_field.empty();) {
    const size_t dot = p.settings.routing_field.find('.', from);
    p.routing_path.push_back(p.settings.routing_field.substr(from, dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return p;
}

}  // namespace picomq::elasticsearch
