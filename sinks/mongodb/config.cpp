#include "mongodb/config.h"

#include <algorithm>

#include "picomq/kit/option_values.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/kit/subscriptions.hpp"

namespace picomq::mongodb {
namespace {

using namespace std::chrono_literals;

// MongoDB's namespace limit (database.collection), in bytes; FerretDB's collection name limit,
// which is within it (so a name the sink makes is valid on both); the shortest cut name.
constexpr size_t kMaxNamespaceBytes = 255;
constexpr size_t kMaxCollectionBytes = 235;
constexpr size_t kMinCollectionBytes = 16;

std::optional<std::string> check_uri(const std::string& uri) {
  if (uri.rfind("mongodb://", 0) != 0 && uri.rfind("mongodb+srv://", 0) != 0)
    return "must start with mongodb:// or mongodb+srv:// (a MongoDB connection string)";
  return std::nullopt;
}

std::optional<std::string> check_database(const std::string& db) {
  if (db.empty()) return "must not be empty";
  if (db.size() >= 64) return "must be shorter than 64 bytes (MongoDB's limit for database names)";
  for (char c : db)
    if (c == '/' || c == '\\' || c == '.' || c == ' ' || c == '"' || c == '$' || c == '*' || c == '<' || c == '>' ||
        c == ':' || c == '|' || c == '?' || c == '\0')
      return "must not hold any of / \\ . space \" $ * < > : | ? (MongoDB's database name rules)";
  return std::nullopt;
}

std::optional<std::string> check_field_name(const std::string& f) {
  if (f.empty()) return "must not be empty";
  if (f[0] == '$') return "must not start with '$'";
  return std::nullopt;
}

std::optional<std::string> check_field_list(const std::vector<std::string>& fields) {
  for (const auto& f : fields)
    if (auto p = check_field_name(f)) return "field '" + f + "' " + *p;
  return std::nullopt;
}

}  // namespace

kit::Result<std::string> collection_name(std::string_view resolved, std::string_view db) {
  using R = kit::Result<std::string>;
  if (resolved.empty()) return R::failure("the collection name is empty");
  std::string out;
  out.reserve(resolved.size() + 1);
  for (char c : resolved) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7F || c == '$') ? '_' : c;
  }
  // system.* is MongoDB's own; a leading '.' is refused ("Invalid collection name").
  if (out.rfind("system.", 0) == 0 || out[0] == '.') out.insert(out.begin(), '_');
  if (db.size() + 1 + kMinCollectionBytes > kMaxNamespaceBytes)
    return R::failure("database '" + std::string(db) +
                      "' leaves no room for collection names in MongoDB's 255-byte namespace");
  return R::success(kit::fit_name(std::move(out), std::min(kMaxCollectionBytes, kMaxNamespaceBytes - db.size() - 1)));
}

kit::Result<std::vector<std::string>> parse_index(std::string_view spec) {
  using R = kit::Result<std::vector<std::string>>;
  std::vector<std::string> fields;
  size_t pos = 0;
  while (true) {
    const size_t comma = spec.find(',', pos);
    std::string_view f = spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!f.empty() && f.front() == ' ') f.remove_prefix(1);
    while (!f.empty() && f.back() == ' ') f.remove_suffix(1);
    if (f.empty()) return R::failure("index '" + std::string(spec) + "' has an empty field name");
    if (f[0] == '$') return R::failure("index '" + std::string(spec) + "': a field must not start with '$'");
    fields.emplace_back(f);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return R::success(std::move(fields));
}

const kit::OptionTable<Settings>& option_table() {
  static const kit::OptionTable<Settings> table{
      kit::option("connection_uri", &Settings::uri)
          .required()
          .secret()
          .check(check_uri)
          .help("MongoDB connection string: mongodb://[user:password@]host[:port][,...]/?options. TLS "
                "(tls=true, tlsCAFile=...), authentication (authSource, authMechanism) and timeouts go in its "
                "options. Secret: never logged (the log shows the hosts only)."),
      kit::option("database", &Settings::database)
          .required()
          .check(check_database)
          .help("Database of the target collections (created by MongoDB on the first write)."),
      kit::option("collection", &Settings::collection)
          .fallback(std::string("{topic}"))
          .check(kit::valid_name_template())
          .help("Collection name template, resolved once per topic: {topic}, {topic_segment[N]}. Sanitised to "
                "MongoDB's namespace rules: control characters and '$' become '_', a name starting with "
                "\"system.\" or '.' gets a '_' in front; a name longer than 235 bytes (FerretDB's limit) or than "
                "MongoDB's 255-byte namespace database.collection allows is cut, with a hash of the whole name "
                "appended."),
      kit::option("id_strategy", &Settings::id_strategy)
          .choices({{"record_id", IdStrategy::RecordId},
                    {"key", IdStrategy::Key},
                    {"field", IdStrategy::Field},
                    {"generated", IdStrategy::Generated}})
          .fallback(IdStrategy::RecordId)
          .help(
              "Where _id comes from. record_id: \"topic:partition:offset\" (a replay writes the same _id: with "
              "write_strategy insert its duplicate-key error 11000 counts as already written). key: the record "
              "key (a string when valid UTF-8, else BinData; a record without a key is rejected). field: the "
              "payload field id_field (a record without it is rejected). generated: an ObjectId made by the "
              "sink (resends within one write keep it; a replay after a crash inserts duplicates, as MongoDB's "
              "own Kafka connector does by default). Change events (changes = ... in [[topics]]) need key: _id is then "
              "the row's key, a one-field key's value ({\"id\": 7} -> 7) or a composite key as an embedded "
              "document."),
      kit::option("id_field", &Settings::id_field)
          .check(check_field_name)
          .help("id_strategy field: the top-level payload field whose value becomes _id (kept in the document "
                "too)."),
      kit::option("write_strategy", &Settings::write_strategy)
          .choices({{"insert", WriteStrategy::Insert},
                    {"replace", WriteStrategy::Replace},
                    {"update", WriteStrategy::Update}})
          .fallback(WriteStrategy::Insert)
          .help("insert: unordered bulk inserts (the fastest; 11000 on _id = already written). replace: replaceOne "
                "with upsert, filtered by _id or by business_key "
                "(the last record of a key wins). update: updateOne with upsert and $set of the document's fields "
                "(fields the record does not carry are kept), plus inserted_at_field / updated_at_field. replace "
                "and update write one batch at a time per topic block, in order. Change events need replace (an "
                "upsert replaces the document, a patch is $set, a delete deleteOne, a truncate deleteMany)."),
      kit::option("business_key", &Settings::business_key)
          .check(check_field_list)
          .help("write_strategy replace / update: top-level payload fields whose values identify the document "
                "(the filter) instead of _id; a record missing one is rejected. replace: the replacement has no _id "
                "(a new document gets the server's ObjectId); update: the id strategy's _id is set on insert only. "
                "The sink creates a unique index on these fields at first use."),
      kit::option("delete_on_tombstone", &Settings::delete_on_tombstone)
          .fallback(false)
          .help("A tombstone (null payload) deletes its document: deleteOne by _id with id_strategy key (the "
                "record key is the _id), or by business_key read from the record key as a JSON object "
                "({\"sku\": \"A\"}). Off: a tombstone is written as a document with payload null. (Under change "
                "events the runtime makes a tombstone a delete of its key already.)"),
      kit::option("include_metadata", &Settings::include_metadata)
          .fallback(true)
          .help("Add pico_topic, pico_partition, pico_offset, pico_timestamp (BSON Date), pico_key (BinData "
                "subtype 0, the key's bytes) and pico_headers (an object, the shared headers rendering) to each "
                "document. Under change events they describe the document's last change; false keeps a document "
                "to _id and the row's fields."),
      kit::option("payload_field", &Settings::payload_field)
          .check(check_field_name)
          .help("Put the payload under this field instead of merging its fields into the document. Unset: a JSON "
                "object payload's fields are the document's; any other payload (array, scalar, text, bytes) goes "
                "under \"payload\"."),
      kit::option("timestamp_fields", &Settings::timestamp_fields)
          .check(check_field_list)
          .help("Top-level payload fields written as BSON Date: an integer (epoch milliseconds) or an ISO-8601 "
                "string; a value that is neither rejects the record. Extended JSON ({\"$date\": ...}, "
                "{\"$numberLong\": \"...\"}) in payloads is always read as the BSON type it names."),
      kit::option("inserted_at_field", &Settings::inserted_at_field)
          .check(check_field_name)
          .help("write_strategy update: a field set to the write's time when the document is inserted "
                "($setOnInsert)."),
      kit::option("updated_at_field", &Settings::updated_at_field)
          .check(check_field_name)
          .help("write_strategy update: a field set to the write's time on every write ($set)."),
      kit::option("indexes", &Settings::indexes)
          .check([](const std::vector<std::string>& v) -> std::optional<std::string> {
            for (const auto& spec : v)
              if (auto r = parse_index(spec); !r) return r.error();
            return std::nullopt;
          })
          .help("Indexes created on a collection at its first use (createIndexes; one that exists is kept): each "
                "\"field\" or \"field1,field2\" (ascending, compound). With business_key, that key's index is "
                "created unique."),
      kit::option("retry_timeout", &Settings::retry_timeout)
          .fallback(30s)
          .help("How long the unacknowledged part of a bulk write (network errors, write-concern errors, "
                "NotWritablePrimary, RetryableWriteError labels) is resent here (back-off 100 ms to 5 s) before "
                "the write fails and the runtime's retry takes over. 0: not resent here."),
      kit::option("max_open_collections", &Settings::max_open_collections)
          .fallback(4)
          .check(kit::at_least(1))
          .help("Collections with a bulk write being gathered at once; a batch for another collection commits "
                "the oldest."),
      kit::option("max_concurrent_writes", &Settings::max_concurrent_writes)
          .fallback(2)
          .check(kit::at_least(1))
          .help("Bulk writes in flight at once, each for a different collection (the bulk writes of one "
                "collection go one after another, in order)."),
      kit::group(&Settings::batching, kit::batching_options(200ms, kit::ByteSize{32u << 20}, 20000)),
  };
  return table;
}

std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems) {
  const auto& table = option_table();
  table.validate(config, problems);
  if (!problems.empty()) return std::nullopt;
  Settings s = table.parse(config);
  auto collection = kit::NameTemplate::parse(s.collection);
  if (s.id_strategy == IdStrategy::Field && !s.id_field) problems.add("id_field", "is required with id_strategy field");
  if (s.id_strategy != IdStrategy::Field && s.id_field) problems.add("id_field", "is only for id_strategy field");
  if (!s.business_key.empty() && s.write_strategy == WriteStrategy::Insert)
    problems.add("business_key", "is for write_strategy replace or update");
  if ((s.inserted_at_field || s.updated_at_field) && s.write_strategy != WriteStrategy::Update)
    problems.add(s.inserted_at_field ? "inserted_at_field" : "updated_at_field", "is for write_strategy update");
  if (s.delete_on_tombstone && s.business_key.empty() && s.id_strategy != IdStrategy::Key)
    problems.add("delete_on_tombstone",
                 "needs an _id a tombstone can name: id_strategy key, or a business_key (read from the record key's "
                 "JSON)");
  if (s.payload_field && !s.business_key.empty())
    problems.add("business_key", "reads top-level payload fields; it cannot be combined with payload_field");
  if (s.payload_field && s.id_strategy == IdStrategy::Field)
    problems.add("id_field", "reads a top-level payload field; it cannot be combined with payload_field");
  // Change events (docs/changes.md) are applied by the row's key: the key is _id, an upsert
  // replaces the document with the row, a delete removes it, in order.
  const bool changes = kit::has_changes(config);
  if (changes) {
    const std::string why = "change events (changes = ... in [[topics]]) are applied by the row's key";
    if (s.write_strategy != WriteStrategy::Replace)
      problems.add("write_strategy",
                   why +
                       ": set write_strategy = \"replace\" (an upsert replaces the document with the row, a "
                       "delete removes it; write_strategy is '" +
                       std::string(s.write_strategy == WriteStrategy::Insert ? "insert" : "update") + "'" +
                       (s.write_strategy == WriteStrategy::Insert
                            ? ", which would add a document per change and never delete)"
                            : ", which would keep fields a row no longer has; a patch is applied as $set anyway)"));
    if (s.id_strategy != IdStrategy::Key)
      problems.add("id_strategy", why +
                                      ": set id_strategy = \"key\" (_id is the row's key: a one-field key's "
                                      "value, a composite key as an embedded document; '" +
                                      std::string(s.id_strategy == IdStrategy::RecordId ? "record_id"
                                                  : s.id_strategy == IdStrategy::Field  ? "field"
                                                                                        : "generated") +
                                      "' ignores the key)");
    if (!s.business_key.empty())
      problems.add("business_key", why +
                                       ", which is the document's _id: leave business_key out (index the key's "
                                       "fields with `indexes` to query them)");
    if (s.payload_field)
      problems.add("payload_field", why +
                                        ": a row's fields are the document's (a patch sets the fields it names): "
                                        "leave payload_field out");
  }
  if (!problems.empty() || !collection) return std::nullopt;
  Plan p{std::move(s), std::move(collection).value(), {}, changes};
  for (const auto& spec : p.settings.indexes) p.indexes.push_back(parse_index(spec).value());
  return p;
}

}  // namespace picomq::mongodb
