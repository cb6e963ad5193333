#pragma once
// A client of the schema registry REST API that Confluent Schema Registry, Karapace, Redpanda
// and Apicurio (ccompat) implement: GET {url}/schemas/ids/{id} -> {"schema": "<writer schema>"}.
//
// Writer schemas are cached by id for the life of the process (an id never changes meaning),
// up to `max_entries` per registry client (then an arbitrary entry is dropped). The cache is
// shared by every thread of a [[topics]] block. Outcomes of a lookup:
//  - ok: the schema (from the cache, or fetched and compiled);
//  - bad_record: the registry answered that the id does not exist (404), or the schema it
//    returned is not Avro or does not parse: the record that named it cannot be decoded;
//  - retry: the registry could not be asked or did not answer properly (connection refused,
//    timeout, 5xx, 429, 401/403, a body that is not the expected JSON): not the record's fault.
// User info in the URL (https://user:password@host) becomes HTTP basic auth; it is never
// logged or put in an error message (redacted_url() shows "https://***@host").
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "decoders/schema_decoder.h"

namespace picomq::decoders {

class AvroSchema;

class SchemaRegistry {
 public:
  // Checks the URL: http or https, a host, no query or fragment. Null + `error` otherwise (the
  // error never repeats the credentials).
  static std::shared_ptr<SchemaRegistry> create(const std::string& url, std::string& error, size_t max_entries = 1000);

  Status lookup(uint32_t id, std::shared_ptr<const AvroSchema>& schema, std::string& error);
  const std::string& redacted_url() const { return redacted_; }
  size_t cached() const;
  // Outbound HTTP requests made so far (for tests of the cache).
  uint64_t requests() const;

 private:
  SchemaRegistry() = default;
  Status fetch(uint32_t id, std::string& body, std::string& error);

  std::string base_;  // without user info and without a trailing '/'
  std::string redacted_;
  std::string user_, password_;
  bool has_auth_ = false;
  size_t max_entries_ = 1000;
  mutable std::mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<const AvroSchema>> cache_;
  uint64_t requests_ = 0;
};

// The URL with any user info replaced by "***" (for logs and errors).
std::string redact_url(std::string_view url);

}  // namespace picomq::decoders
