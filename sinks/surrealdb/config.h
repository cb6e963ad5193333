#pragma once
// The SurrealDB sink's options and the plan made of them (pure, no I/O).
#include <chrono>
#include <optional>
#include <string>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::surrealdb {

enum class Mode { Insert, Upsert };
enum class IdMode { Record, Key, Field };
enum class Tombstones { Skip, Delete };
enum class AuthMode { Basic, Signin, None };
enum class AuthLevel { Root, Namespace, Database };

struct Settings {
  std::string url;
  std::string ns;
  std::string database;
  std::string table;
  Mode mode = Mode::Insert;
  IdMode id = IdMode::Record;
  std::string id_field;
  Tombstones tombstones = Tombstones::Skip;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  bool create_namespace = true;
  bool define_table = true;
  bool index_offsets = false;
  AuthMode auth = AuthMode::Basic;
  AuthLevel auth_level = AuthLevel::Root;
  std::string user;
  std::string password;
  std::chrono::milliseconds token_refresh{};
  kit::RequestSettings requests;  // max_request_bytes, max_request_records, max_in_flight, retry_timeout
  kit::HttpSettings http;
  kit::TlsSettings tls;
  // A [[topics]] block hands the sink change events (docs/changes.md): records named by their
  // row's key, applied in record order, one batch and one request at a time. Not an option: the
  // host's blocks.
  bool changes = false;
};

const kit::OptionTable<Settings>& option_table();

struct Plan {
  Settings settings;
  std::string base_url;  // url without a trailing '/'
  kit::NameTemplate table;
};

// The plan, or nullopt with every problem added to `problems` under its option's key.
std::optional<Plan> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// A destination name as a SurrealDB table identifier: every byte outside [A-Za-z0-9_] becomes
// '_' (a multi-byte UTF-8 character one '_'), a leading digit gets the prefix 't', at most 63
// bytes (longer: cut, with '_' and 8 hex digits of a hash of the whole). Never empty (a name of
// nothing but replaced characters stays, as underscores). Idempotent.
std::string table_identifier(std::string_view name);

}  // namespace picomq::surrealdb
