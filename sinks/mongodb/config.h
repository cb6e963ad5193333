#pragma once
// The MongoDB sink's options, each declared once (kit::OptionTable: the runtime's option table,
// the generated table in docs/sinks/mongodb.md, value checks), with the kit's batching group;
// and the checks across options (plan()), shared by validate() (`picomq-connect --check`) and
// open(). No I/O.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::mongodb {

// Where a document's _id comes from.
enum class IdStrategy {
  RecordId,   // "topic:partition:offset" (the default: a replay re-inserts the same _id)
  Key,        // the record key (as a string when it is UTF-8, else BinData)
  Field,      // a payload field (id_field)
  Generated,  // an ObjectId made by the sink (replays after a crash duplicate)
};
// What a record does to its collection.
enum class WriteStrategy {
  Insert,   // insertOne; 11000 on a deterministic _id = already written
  Replace,  // replaceOne upsert, filter by _id or by business_key
  Update,   // updateOne upsert with $set of the document's fields (+ timestamps)
};

struct Settings {
  std::string uri;  // secret: may hold credentials
  std::string database;
  std::string collection;
  IdStrategy id_strategy = IdStrategy::RecordId;
  std::optional<std::string> id_field;
  WriteStrategy write_strategy = WriteStrategy::Insert;
  std::vector<std::string> business_key;
  bool delete_on_tombstone = false;
  bool include_metadata = true;
  std::optional<std::string> payload_field;
  std::vector<std::string> timestamp_fields;
  std::optional<std::string> inserted_at_field;
  std::optional<std::string> updated_at_field;
  std::vector<std::string> indexes;
  std::chrono::milliseconds retry_timeout{};
  int64_t max_open_collections = 0;
  int64_t max_concurrent_writes = 0;
  kit::BatchingSettings batching;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  kit::NameTemplate collection;
  std::vector<std::vector<std::string>> indexes;  // each a list of fields (ascending)
  // A [[topics]] block hands change events (changes = ..., docs/changes.md): upserts, patches,
  // deletes and truncates by the row's key, applied in order (write_strategy replace, _id = key).
  bool changes = false;
};

// The plan, or nullopt with every problem added to `problems` under its option's key (under
// change events: the settings that cannot apply them, each naming what to set).
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// A MongoDB collection name for `resolved` in database `db` (MongoDB's namespace rules: no '$',
// no NUL, not "system.*" or ".*", the namespace db.collection at most 255 bytes; FerretDB's
// collection names at most 235 bytes): control characters and '$' become '_', a name starting
// with "system." or '.' gets a '_' in front, one too long is cut with a hash
// (kit::fit_name). Empty is an error. Idempotent.
kit::Result<std::string> collection_name(std::string_view resolved, std::string_view db);

// "field1,field2" -> {"field1", "field2"}; an error for an empty field.
kit::Result<std::vector<std::string>> parse_index(std::string_view spec);

}  // namespace picomq::mongodb
