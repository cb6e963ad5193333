#include "clickhouse/errors.h"

#include <cctype>
#include <charconv>

namespace picomq::clickhouse {
namespace {

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int> exception_code(const kit::HttpResponse& response) {
  if (!response.completed()) return std::nullopt;
  if (auto h = response.headers.get("X-ClickHouse-Exception-Code")) {
    if (auto v = parse_int(*h)) return v;
  }
  // 18.16: "Code: 60, e.displayText() = DB::Exception: ..."; current: "Code: 60. DB::Exception: ...".
  std::string_view body = response.body;
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.front()))) body.remove_prefix(1);
  constexpr std::string_view kCode = "Code: ";
  if (body.substr(0, kCode.size()) != kCode) return std::nullopt;
  return parse_int(body.substr(kCode.size()));
}

kit::Outcome code_outcome(int code) {
  switch (code) {
    // Transient: what ClickHouse's own Kafka Connect sink retries.
    case 3:    // UNEXPECTED_END_OF_FILE (a connection cut mid-request)
    case 107:  // FILE_DOESNT_EXIST (a part being moved or merged)
    case 159:  // TIMEOUT_EXCEEDED
    case 164:  // READONLY (a replica or server in read-only mode for now)
    case 202:  // TOO_MANY_SIMULTANEOUS_QUERIES
    case 203:  // NO_FREE_CONNECTION
    case 209:  // SOCKET_TIMEOUT
    case 210:  // NETWORK_ERROR
    case 241:  // MEMORY_LIMIT_EXCEEDED
    case 242:  // TABLE_IS_READ_ONLY (replica lost its ZooKeeper / Keeper session)
    case 252:  // TOO_MANY_PARTS (merges behind: back off)
    case 285:  // TOO_FEW_LIVE_REPLICAS
    case 425:  // SYSTEM_ERROR
    case 999:  // KEEPER_EXCEPTION
      return kit::Outcome::Retry;
    case 319:  // UNKNOWN_STATUS_OF_INSERT: it may have been written
      return kit::Outcome::MaybeWritten;
    // The data: find the rows the server refuses (bisect) and reject them.
    case 6:    // CANNOT_PARSE_TEXT
    case 26:   // CANNOT_PARSE_QUOTED_STRING
    case 27:   // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    case 32:   // ATTEMPT_TO_READ_AFTER_EOF
    case 33:   // CANNOT_READ_ALL_DATA
    case 38:   // CANNOT_PARSE_DATE
    case 41:   // CANNOT_PARSE_DATETIME
    case 53:   // TYPE_MISMATCH
    case 69:   // ARGUMENT_OUT_OF_BOUND
    case 70:   // CANNOT_CONVERT_TYPE
    case 72:   // CANNOT_PARSE_NUMBER
    case 117:  // INCORRECT_DATA
    case 131:  // TOO_LARGE_STRING_SIZE
      return kit::Outcome::Rejected;
    default:
      // 60 UNKNOWN_TABLE, 81 UNKNOWN_DATABASE, 16 NO_SUCH_COLUMN_IN_TABLE, 192-194 and 516
      // authentication, 497 ACCESS_DENIED, 89 UNKNOWN_COMPRESSION_METHOD, 115 UNKNOWN_SETTING, 62
      // SYNTAX_ERROR...: configuration or schema, which no retry mends.
      return kit::Outcome::Fatal;
  }
}

std::string code_hint(int code) {
  switch (code) {
    case 60: return "the table does not exist";
    case 81: return "the database does not exist (create it, or set `database`)";
    case 16: return "a column the sink writes is not in the table (its columns changed?)";
    case 192:
    case 193:
    case 194:
    case 516: return "authentication failed: check user and password";
    case 497: return "the user may not do this (GRANT INSERT / CREATE on the database)";
    case 89: return "the server does not accept this Content-Encoding (18.16 takes gzip, not zstd)";
    case 115: return "the server does not know a setting the sink sent";
    case 252: return "too many parts: inserts come faster than merges (raise commit_interval / max_batch_records)";
    case 241: return "the server is out of memory for this insert (lower max_batch_bytes)";
    default: return {};
  }
}

kit::Classification classify(const kit::HttpResponse& response) {
  static const kit::OutcomeRules rules;
  kit::Classification c = rules.classify(response);
  if (!response.completed() || (response.status >= 200 && response.status < 300)) return c;
  const auto code = exception_code(response);
  if (!code) return c;  // a proxy's answer, or no ClickHouse: the kit's table decides
  c.outcome = code_outcome(*code);
  c.retry_after.reset();
  const std::string hint = code_hint(*code);
  c.reason = "ClickHouse error " + std::to_string(*code) + (hint.empty() ? "" : " (" + hint + ")") + ": " +
             response.method + " " + response.url + ": " + response.status_line + ": " + response.body_excerpt(400);
  return c;
}

}  // namespace picomq::clickhouse
