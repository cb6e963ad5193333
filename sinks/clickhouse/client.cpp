#include "clickhouse/client.h"

#include "clickhouse/errors.h"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/resend.hpp"

namespace picomq::clickhouse {

using namespace std::chrono_literals;

std::string quote_identifier(std::string_view name) {
  std::string out = "`";
  for (char c : name) {
    if (c == '`') out += "``";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out + "`";
}

std::string quote_string(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

Client::Client(kit::HttpClientOptions options, std::string base_url, std::string database)
    : http_(std::move(options)), base_url_(std::move(base_url)), database_(std::move(database)) {}

QueryResult Client::classify(kit::HttpResponse response) {
  QueryResult r;
  r.code = exception_code(response);
  r.outcome = clickhouse::classify(response);
  r.body = std::move(response.body);
  return r;
}

QueryResult Client::query(const std::string& sql, std::optional<std::chrono::milliseconds> timeout,
                          const std::string& extra_params) {
  kit::HttpRequest request{
      .method = "POST", .url = base_url_ + "/?database=" + kit::percent_encode(database_) + extra_params, .body = sql};
  request.headers.set("Content-Type", "text/plain; charset=utf-8");
  request.timeout = timeout;
  return classify(http_.send(std::move(request)));
}

std::string Client::insert_url(const std::string& insert_sql, const std::string& extra_params) const {
  return base_url_ + "/?database=" + kit::percent_encode(database_) + "&query=" + kit::percent_encode(insert_sql) +
         extra_params;
}

std::future<QueryResult> Client::insert_streamed(const std::string& insert_sql, std::shared_ptr<kit::BodyStream> stream,
                                                 const std::string& extra_params, std::chrono::milliseconds timeout,
                                                 std::function<void()> ended) {
  kit::HttpRequest request{.method = "POST",
                           .url = insert_url(insert_sql, extra_params),
                           .body = kit::HttpBody::streamed(std::move(stream))};
  request.headers.set("Content-Type", "application/octet-stream");
  request.timeout = timeout;
  auto result = std::make_shared<std::promise<QueryResult>>();
  std::future<QueryResult> answer = result->get_future();
  http_.send_async(std::move(request), [this, result, ended = std::move(ended)](kit::HttpResponse r) {
    if (ended) ended();
    result->set_value(classify(std::move(r)));
  });
  return answer;
}

QueryResult Client::insert(const std::string& insert_sql, std::string_view body, Clock::time_point deadline,
                           const std::string& extra_params, uint64_t* resends) {
  const std::string url = insert_url(insert_sql, extra_params);
  kit::RetryWait retry(stop_, deadline, {.initial = 200ms, .max = 5s});
  bool maybe = false;
  for (;;) {
    kit::HttpRequest request{.method = "POST", .url = url, .body = kit::HttpBody::borrowed(body)};
    request.headers.set("Content-Type", "application/octet-stream");
    QueryResult r = classify(http_.send(std::move(request)));
    r.earlier_maybe_written = maybe;
    const auto o = r.outcome.outcome;
    maybe = maybe || o == kit::Outcome::MaybeWritten;
    if (o != kit::Outcome::Retry && o != kit::Outcome::MaybeWritten) return r;
    // MaybeWritten is resent too: the same rows again, which the table's ReplacingMergeTree
    // folds (docs/sinks/clickhouse.md, "Replays").
    if (!retry.wait()) return r;
    if (resends) ++*resends;
  }
}

}  // namespace picomq::clickhouse
