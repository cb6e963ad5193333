#pragma once
// The Meilisearch sink's options, each declared once (kit::OptionTable: the runtime's option
// table, the generated table in docs/sinks/meilisearch.md, value checks), with the kit's shared
// HTTP and TLS groups; the checks across options (plan()), shared by validate()
// (`picomq-connect --check`) and open(); and the index uid rule. No I/O.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/sdk.hpp"

namespace picomq::meilisearch {

inline constexpr size_t kMaxIdBytes = 511;        // Meilisearch's document id limit
inline constexpr size_t kMaxIndexUidBytes = 400;  // and its index uid limit

enum class IdMode { Record, Key, Field };
enum class Method { Replace, Update };
enum class Tombstones { Skip, Delete };

struct Settings {
  std::string url;
  std::string index;
  std::string primary_key;
  IdMode id = IdMode::Record;
  Method method = Method::Replace;
  Tombstones tombstones = Tombstones::Skip;
  kit::JsonLayout document = kit::JsonLayout::Flat;
  bool create_index = true;
  kit::JsonValue index_settings;
  std::optional<std::string> api_key;
  kit::RequestSettings requests;  // max_request_bytes, max_request_records, max_in_flight, retry_timeout
  std::chrono::milliseconds task_timeout{};
  kit::HttpSettings http;
  kit::TlsSettings tls;
  // A [[topics]] block hands the sink change events (docs/changes.md): documents named by their
  // row's key, applied in record order, one batch at a time. Not an option: the host's blocks.
  bool changes = false;
};

const kit::OptionTable<Settings>& option_table();

// The options read and checked against each other; nullopt with `problems` filled when they do
// not hold. The url loses its trailing slashes.
std::optional<Settings> plan(const sdk::Config& config, sdk::ConfigProblems& problems);

// Meilisearch's index uid rules: every byte outside [A-Za-z0-9_-] becomes '_', at most 400 bytes
// (a hash suffix when cut), never empty.
std::string index_uid(const std::string& resolved);

}  // namespace picomq::meilisearch
