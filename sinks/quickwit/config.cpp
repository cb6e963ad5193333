#include "quickwit/config.h"

#include <simdjson.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/sanitize.hpp"
#include "quickwit/index_config_yaml.h"

namespace picomq::quickwit {

using namespace std::chrono_literals;

namespace {

std::optional<std::string> check_url(const std::string& url) {
  return kit::check_base_url(
      url, {.what = "Quickwit's REST address, e.g. http://127.0.0.1:7280", .credentials = "use the auth options"});
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return !in.bad();
}

// A YAML index config's problem, or nullopt (checked as it will be sent, with a stand-in id).
std::optional<std::string> check_yaml(const std::string& yaml) {
  try {
    (void)yaml_index_config_for(yaml, "index-id");
    return std::nullopt;
  } catch (const YamlConfigError& e) {
    return std::string("index config ") + e.what();
  }
}

}  // namespace

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("url", &Settings::url)
          .required()
          .check(check_url)
          .help("Quickwit's REST address: http(s)://host:7280 (a path prefix for a proxy is kept; the sink adds "
                "/api/v1)."),
      kit::option("index", &Settings::index)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Index id template, resolved once per topic: {topic}, {topic_segment[N]}; sanitised to Quickwit's "
                "index id rules (^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$: other bytes become '_', a leading non-letter gets "
                "the prefix 'i', a shorter id is padded with '_', a longer one cut with a hash suffix)."),
      kit::option("commit", &Settings::commit)
          .choices({{"auto", Commit::Auto}, {"wait_for", Commit::WaitFor}, {"force", Commit::Force}})
          .fallback(Commit::Auto)
          .help("The ingest's commit mode, and so what a completed write means: auto = the documents are in "
                "Quickwit's write-ahead log (searchable after the index's commit_timeout_secs); wait_for = they are "
                "committed and searchable (the answer waits for the next commit: up to commit_timeout_secs); force = "
                "a commit is forced at once and awaited (costly with small batches)."),
      kit::option("endpoint", &Settings::endpoint)
          .choices({{"ingest", Endpoint::Ingest}, {"elastic_bulk", Endpoint::ElasticBulk}})
          .fallback(Endpoint::Ingest)
          .help(
              "Where documents go: ingest = POST /api/v1/<index>/ingest with detailed_response, so documents Quickwit "
              "cannot parse are rejected one by one through the bad-record policy; elastic_bulk = the "
              "Elasticsearch-compatible POST /api/v1/_elastic/<index>/_bulk (create actions, refresh = false / "
              "wait_for / true for commit auto / wait_for / force), for fronts that allow only that API: Quickwit "
              "reports no per-document errors there, so a document its mapping refuses is dropped by Quickwit (its "
              "log says so) and counted as written here."),
      kit::document_option(&Settings::document,
                           {.first = "id_field, ", .payload_adds = " (plus id_field unless empty)"}),
      kit::option("id_field", &Settings::id_field)
          .fallback(std::string("pico_id"))
          .help("A field holding the record id topic:partition:offset, first in every document: Quickwit keeps no "
                "document ids, so a replay writes records again and readers drop the repeats by this field. Empty: "
                "none (the pico_* fields of flat and envelope still identify a record)."),
      kit::option("index_config", &Settings::index_config)
          .check([](const kit::JsonValue& v) -> std::optional<std::string> {
            if (v.text == "null") return std::nullopt;
            simdjson::dom::parser parser;
            simdjson::dom::element root;
            simdjson::dom::object mapping;
            if (parser.parse(v.text).get(root) || root.type() != simdjson::dom::element_type::OBJECT)
              return std::string("must be a table (Quickwit's index config)");
            if (root["doc_mapping"].get_object().get(mapping))
              return std::string("must hold doc_mapping (Quickwit's index config, without index_id: the sink sets it)");
            return std::nullopt;
          })
          .help(
              "Quickwit's index config as a table (version, doc_mapping, indexing_settings, search_settings, "
              "retention), e.g. { version = \"0.8\", doc_mapping = { mode = \"dynamic\", field_mappings = [...] } }: a "
              "topic's index that does not exist is created with it on its first batch (POST /api/v1/indexes; the sink "
              "sets index_id, version 0.8 when not given). Unset, like index_config_yaml and index_config_file: "
              "indexes "
              "must exist; a missing one stops the sink naming it."),
      kit::option("index_config_yaml", &Settings::index_config_yaml)
          .check([](const std::string& yaml) -> std::optional<std::string> {
            if (yaml.empty()) return std::nullopt;
            return check_yaml(yaml);
          })
          .help(
              "The same index config as YAML text (Quickwit's own format, e.g. a TOML multi-line string), sent as "
              "application/yaml with index_id replaced by the sink's (and version 0.8 added when absent); every scalar "
              "is passed as written, so Quickwit reads its types itself."),
      kit::option("index_config_file", &Settings::index_config_file)
          .check([](const std::string& path) -> std::optional<std::string> {
            if (path.empty()) return std::nullopt;
            std::string text;
            if (!read_file(path, text)) return "cannot read " + path;
            if (auto problem = check_yaml(text)) return path + ": " + *problem;
            return std::nullopt;
          })
          .help("A file holding Quickwit's index config as YAML (or JSON), e.g. the one given to `quickwit index "
                "create --index-config`; read when the sink opens, used as index_config is (index_id replaced)."),
      kit::group(&Settings::requests,
                 kit::request_options({.max_request_bytes = kit::ByteSize{8u << 20},
                                       .max_request_records = 10000,
                                       .items = "documents",
                                       .item = "document",
                                       .request = "ingest request",
                                       .transient = "429 rate limited or write-ahead log full, 503, 5xx, transport "
                                                    "errors",
                                       .max_request_bytes_limit = kMaxBody,
                                       .limit_text = "10 MiB (Quickwit's ingest limit)"})),
      kit::group(&Settings::http, kit::http_options()),
      kit::group(&Settings::tls, kit::tls_options()),
      kit::group(&Settings::auth, kit::auth_options()),
  };
  return table;
}

std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  kit::validate_auth(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  if (int(s.index_config.text != "null") + int(!s.index_config_yaml.empty()) + int(!s.index_config_file.empty()) > 1)
    problems.add("index_config_file", "set one of index_config, index_config_yaml and index_config_file, not several");
  if (s.auth.type == kit::AuthType::OAuth2ClientCredentials)
    problems.add(
        "auth",
        "oauth2 is not supported by this sink (Quickwit has no auth of its own: a proxy's basic, bearer or api_key)");
  if (s.http.compression != kit::Compression::None)
    problems.add("compression",
                 "must be \"none\": compressed ingest bodies are not part of Quickwit's documented REST API");
  if (!problems.empty()) return std::nullopt;
  s.url = kit::base_url(std::move(s.url));
  return s;
}

std::string index_id(const std::string& resolved) {
  std::string out;
  for (unsigned char c : resolved)
    out += c < 0x80 && (std::isalnum(c) || c == '-' || c == '_' || c == '.') ? static_cast<char>(c) : '_';
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) out = "i" + out;
  while (out.size() < 3) out += '_';
  return kit::fit_name(std::move(out), 255);
}

std::string write_path(const Settings& s) { return s.endpoint == Endpoint::Ingest ? "/api/v1/" : "/api/v1/_elastic/"; }

std::string write_query(const Settings& s) {
  if (s.endpoint == Endpoint::Ingest)
    return std::string("/ingest?detailed_response=true&commit=") + (s.commit == Commit::Auto      ? "auto"
                                                                    : s.commit == Commit::WaitFor ? "wait_for"
                                                                                                  : "force");
  return std::string("/_bulk?refresh=") + (s.commit == Commit::Auto      ? "false"
                                           : s.commit == Commit::WaitFor ? "wait_for"
                                                                         : "true");
}

IndexConfig index_config(const Settings& s) {
  IndexConfig out;
  if (!s.index_config_yaml.empty()) {
    out.yaml = s.index_config_yaml;
  } else if (!s.index_config_file.empty()) {
    std::string text;
    if (!read_file(s.index_config_file, text))
      throw sdk::FatalError("index_config_file: cannot read " + s.index_config_file);
    if (auto problem = check_yaml(text))
      throw sdk::FatalError("index_config_file: " + s.index_config_file + ": " + *problem);
    out.yaml = std::move(text);
  } else if (s.index_config.text != "null") {
    simdjson::dom::parser parser;
    simdjson::dom::object root;
    if (parser.parse(s.index_config.text).get_object().get(root)) throw sdk::FatalError("index_config: not a table");
    bool has_version = false;
    for (auto [k, v] : root) {
      if (k == "index_id") continue;  // the sink's
      if (k == "version") has_version = true;
      out.json_members += ',';
      kit::append_json_escaped(out.json_members, k);
      out.json_members += ":" + simdjson::minify(v);
    }
    if (!has_version) out.json_members += ",\"version\":\"0.8\"";
  }
  return out;
}

}  // namespace picomq::quickwit
