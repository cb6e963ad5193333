#pragma once
// The sink's conversation with ClickHouse's HTTP interface, on the kit's HTTP client: queries
// (DESCRIBE, CREATE, SELECT version()) and RowBinary inserts, each classified by the server's
// exception code (clickhouse/errors.h). Inserts that meet a transient error are resent here with
// a back-off until the attempt's deadline, unless the sink is closing.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::clickhouse {

using Clock = std::chrono::steady_clock;

// `name` quoted as a ClickHouse identifier: `a``b` (backticks doubled, backslashes escaped).
std::string quote_identifier(std::string_view name);
// A string literal: 'it\'s'.
std::string quote_string(std::string_view text);

struct ServerVersion {
  int major = 0, minor = 0;
  bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
};

struct QueryResult {
  kit::Classification outcome;  // Written: `body` holds the answer
  std::optional<int> code;      // ClickHouse's exception code, if any
  std::string body;
  bool earlier_maybe_written = false;  // insert(): an earlier attempt may have written the rows
};

class Client {
 public:
  Client(kit::HttpClientOptions options, std::string base_url, std::string database);

  // A query sent as the request body; the answer is the body of a 2xx.
  QueryResult query(const std::string& sql, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                    const std::string& extra_params = "");
  // INSERT with `body` as its data; resends transient failures until `deadline`. `extra_params`:
  // "&name=value..." settings for the URL.
  QueryResult insert(const std::string& insert_sql, std::string_view body, Clock::time_point deadline,
                     const std::string& extra_params, uint64_t* resends = nullptr);

  // INSERT whose body is `stream`, sent now and made while it goes up (kit::BodyStream); one
  // attempt, since a stream cannot be sent again: the future holds its result once the stream
  // finished (or failed) and the server answered. `timeout`: the whole request's, stream included.
  // `ended` runs (on the client's I/O thread) when the request is over, before the future is ready.
  std::future<QueryResult> insert_streamed(const std::string& insert_sql, std::shared_ptr<kit::BodyStream> stream,
                                           const std::string& extra_params, std::chrono::milliseconds timeout,
                                           std::function<void()> ended = nullptr);

  void stop() { stop_.stop(); }
  bool stopping() const { return stop_.stopped(); }
  const kit::StopSignal& stop_signal() const { return stop_; }  // for the sink's own waits
  void close() { http_.close(std::chrono::seconds(5)); }
  const kit::Redactor& redactor() const { return http_.redactor(); }

 private:
  QueryResult classify(kit::HttpResponse response);
  std::string insert_url(const std::string& insert_sql, const std::string& extra_params) const;

  kit::HttpClient http_;
  std::string base_url_;
  std::string database_;
  kit::StopSignal stop_;
};

}  // namespace picomq::clickhouse
