#pragma once
// The MongoDB sink's I/O: a libmongoc client pool (thread-safe: commits run on the accumulator's
// committer thread and on flush()'s caller), bulk writes of prepared operations, and commands.
// No retry decisions here: the sink reads the outcome (mongodb/errors.h) and decides.
#include <mongoc/mongoc.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "mongodb/document.h"
#include "mongodb/errors.h"

namespace picomq::mongodb {

using BulkResult = BulkAttempt;  // mongodb/errors.h: the decision on it is judge_attempt

// A connection string with its defaults: serverSelectionTimeoutMS 5000 unless it sets one (a
// server that is down fails a write in seconds, then the retry decides), appname picomq-connect.
// nullptr with `error` set when libmongoc cannot read it (the message names no credentials).
mongoc_uri_t* parse_uri(const std::string& text, std::string& error);
// "host1:27017,host2:27017" of a URI (what the logs show instead of the secret URI).
std::string uri_hosts(const mongoc_uri_t* uri);

// While alive, libmongoc's log lines (one handler per process: mongoc_log_set_handler) go to
// `forward` instead of libmongoc's default stderr printer. Several sinks in a process: the oldest
// live route gets the lines; with none left, libmongoc's default printer again.
class LibraryLogRoute {
 public:
  using Forward = std::function<void(mongoc_log_level_t level, const std::string& line)>;
  explicit LibraryLogRoute(Forward forward);
  ~LibraryLogRoute();
  LibraryLogRoute(const LibraryLogRoute&) = delete;
  LibraryLogRoute& operator=(const LibraryLogRoute&) = delete;

 private:
  uint64_t id_;
};

class Client {
 public:
  // Takes `uri` (parse_uri's).
  Client(mongoc_uri_t* uri, std::string database);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One bulk write of `ops` (ordered or not) into `collection`.
  BulkResult bulk(const std::string& collection, bool ordered, std::span<const Op* const> ops);
  // A command on the database; `reply` filled when given. False with `error` (and its domain /
  // code) on failure.
  bool command(const bson_t& cmd, bson_t* reply, std::string& error, uint32_t* domain = nullptr,
               uint32_t* code = nullptr);
  // Which of the documents' _ids are in `collection` now (one find with $in), in their order;
  // nullopt with `error` when the query fails.
  std::optional<std::vector<bool>> ids_present(const std::string& collection, std::span<const bson_t* const> docs,
                                               std::string& error);
  const std::string& database() const { return database_; }

 private:
  mongoc_client_pool_t* pool_ = nullptr;
  mongoc_uri_t* uri_ = nullptr;
  std::string database_;
};

}  // namespace picomq::mongodb
