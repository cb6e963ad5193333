#include "picomq/kit/postgres/connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace picomq::kit::pg {

namespace {

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// SQLSTATE classes (docs/sinks/postgres.md): connection loss, serialization failure, deadlock,
// insufficient resources and server shutdowns are worth a retry; everything else is not.
bool retryable(std::string_view sqlstate, bool connection_bad) {
  if (connection_bad) return true;
  if (sqlstate.empty()) return false;
  return sqlstate.starts_with("08") || sqlstate == "40001" || sqlstate == "40P01" || sqlstate.starts_with("53") ||
         sqlstate.starts_with("57P0");
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace

ConnectFailure classify_connect_failure(std::string_view m) {
  if (is_connection_option_error(m)) return ConnectFailure::BadOption;
  // The server answered and said no: retrying cannot help. "the database system is starting up
  // / shutting down" is the server restarting: wait for it.
  if (contains(m, "authentication failed") || contains(m, "password") ||
      (contains(m, "database") && contains(m, "does not exist")) || contains(m, "no pg_hba.conf entry") ||
      contains(m, "pg_hba.conf rejects") || (contains(m, "role") && contains(m, "does not exist")) ||
      contains(m, "not permitted to log in") || contains(m, "permission denied for database"))
    return ConnectFailure::Refused;
  return ConnectFailure::Unreachable;
}

Connection::Connection(std::string conninfo, const ConnOptions& options, LogFn log, ConnectionExtras extras)
    : conninfo_(std::move(conninfo)), options_(options), log_(std::move(log)), extras_(std::move(extras)) {
  for (const auto& [key, value] : options_)
    if (key == "connect_timeout") {
      // libpq's rule: an integer number of seconds; 0 or less means none; under 2 counts as 2.
      const long s = std::strtol(value.c_str(), nullptr, 10);
      if (s > 0) connect_timeout_ = std::chrono::seconds(std::max(2L, s));
    }
}

void Connection::disconnect() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  in_copy_ = false;
}

std::optional<ConnectError> Connection::connect(Clock::time_point deadline, const kit::StopSignal& stop) {
  disconnect();
  if (connect_timeout_) deadline = std::min(deadline, Clock::now() + *connect_timeout_);
  auto failed = [&](ConnectFailure kind, const std::string& raw) {
    // The string's password and one the sink gave as a parameter.
    std::string message = redact_secrets(redact_secrets(trim(raw), conninfo_, &options_), {}, &extras_.parameters);
    ConnectError e{kind, std::move(message)};
    disconnect();
    return e;
  };
  // The string as dbname, expanded (libpq: its options, then the later keywords over them).
  std::vector<const char*> keys{"dbname"}, values{conninfo_.c_str()};
  for (const auto& [key, value] : extras_.parameters) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectStartParams(keys.data(), values.data(), 1);
  if (!conn_) return ConnectError{ConnectFailure::Unreachable, "out of memory"};
  PQsetNoticeReceiver(conn_, &Connection::on_notice, this);
  if (PQstatus(conn_) == CONNECTION_BAD) {
    const std::string raw = PQerrorMessage(conn_);
    return failed(classify_connect_failure(raw), raw);
  }
  // The non-blocking handshake (libpq docs, PQconnectStartParams): wait for the socket as
  // PQconnectPoll asks, in slices, so a stop or the deadline ends it.
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  while (state != PGRES_POLLING_OK) {
    if (state == PGRES_POLLING_FAILED) {
      const std::string raw = PQerrorMessage(conn_);
      return failed(classify_connect_failure(raw), raw);
    }
    const int fd = PQsocket(conn_);
    bool ready = false;
    while (!ready) {
      if (stop.stopped()) return failed(ConnectFailure::Stopped, "the sink is closing");
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return failed(ConnectFailure::Unreachable, "timeout expired while connecting");
      pollfd p{fd, static_cast<short>(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
      ready = n != 0;  // ready, or an error PQconnectPoll will report
    }
    state = PQconnectPoll(conn_);
  }
  if (PQsetClientEncoding(conn_, "UTF8") != 0) return failed(ConnectFailure::Unreachable, PQerrorMessage(conn_));
  return std::nullopt;
}

// libpq's default notice processor prints to stderr ("NOTICE: relation ... already exists,
// skipping" on every restart). Into the sink's log instead: the sink's own IF NOT EXISTS
// notes at debug, other notices at info, warnings as warnings.
void Connection::on_notice(void* self, const PGresult* res) {
  auto* c = static_cast<Connection*>(self);
  if (!c->log_) return;
  const char* sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  const std::string severity = sev ? sev : "NOTICE", sqlstate = state ? state : "";
  sdk::LogLevel level = sdk::LogLevel::Info;
  if (severity == "WARNING") level = sdk::LogLevel::Warn;
  else if (severity == "DEBUG" || severity == "LOG") level = sdk::LogLevel::Debug;
  // duplicate table / column / object / schema: "already exists, skipping"
  if (sqlstate == "42P07" || sqlstate == "42701" || sqlstate == "42710" || sqlstate == "42P06")
    level = sdk::LogLevel::Debug;
  c->log_(level, "PostgreSQL " + severity + ": " + trim(PQresultErrorMessage(res)));
}

std::string Connection::error_message() const { return conn_ ? trim(PQerrorMessage(conn_)) : "not connected"; }

void Connection::fail(const PGresult* res, const std::string& what, bool maybe_committed) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  std::string message = res ? trim(PQresultErrorMessage(res)) : "";
  if (message.empty()) message = error_message();
  const bool bad = !ok();
  bool retry = retryable(sqlstate, bad) || (extras_.retryable && extras_.retryable(sqlstate, message));
  last_copy_line_ = 0;
  if (const char* context = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : nullptr) {
    const char* at = std::strstr(context, ", line ");
    if (at && std::strncmp(context, "COPY ", 5) == 0) last_copy_line_ = std::strtoll(at + 7, nullptr, 10);
  }
  // CREATE TABLE / ADD COLUMN IF NOT EXISTS racing another session (another block, another
  // runtime) for the same name fails on the catalog's unique index instead of waiting; the
  // retry finds the object and goes on.
  if (in_ddl_ && (sqlstate == "23505" || sqlstate == "42P07" || sqlstate == "42701" || sqlstate == "42710"))
    retry = true;
  if (bad || sqlstate.starts_with("57P0")) disconnect();
  last_sqlstate_ = sqlstate;
  const std::string text =
      what + " failed" + (sqlstate.empty() ? std::string() : " (SQLSTATE " + sqlstate + ")") + ": " + message;
  if (!retry) throw sdk::FatalError(text);
  if (maybe_committed) throw sdk::PartialWriteError(text + " (the batch may have been committed)");
  throw sdk::RetryableError(text);
}

void Connection::check(const PGresult* res, ExecStatusType expected, const std::string& what) {
  if (!res || PQresultStatus(res) != expected) fail(res, what);
}

void Connection::run(const std::string& sql, const std::string& what) {
  if (!conn_) throw sdk::RetryableError(what + " failed: not connected to PostgreSQL");
  ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
  check(res.get(), PGRES_COMMAND_OK, what);
}

size_t Connection::run_counting(const std::string& sql, const std::string& what) {
  if (!conn_) throw sdk::RetryableError(what + " failed: not connected to PostgreSQL");
  ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
  check(res.get(), PGRES_COMMAND_OK, what);
  return std::strtoull(PQcmdTuples(res.get()), nullptr, 10);
}

std::vector<Connection::Row> Connection::query(const std::string& sql, const std::vector<std::string>& params,
                                               const std::string& what) {
  if (!conn_) throw sdk::RetryableError(what + " failed: not connected to PostgreSQL");
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  ResultPtr res(
      PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0),
      &PQclear);
  check(res.get(), PGRES_TUPLES_OK, what);
  std::vector<Row> rows;
  for (int r = 0; r < PQntuples(res.get()); ++r) {
    Row& row = rows.emplace_back();
    for (int c = 0; c < PQnfields(res.get()); ++c)
      row.push_back(PQgetisnull(res.get(), r, c) ? std::nullopt
                                                 : std::optional<std::string>(PQgetvalue(res.get(), r, c)));
  }
  return rows;
}

void Connection::run_ddl(const std::string& sql, const std::string& what) {
  in_ddl_ = true;
  try {
    run(sql, what);
  } catch (...) {
    in_ddl_ = false;
    throw;
  }
  in_ddl_ = false;
}

void Connection::begin_copy(const std::string& sql, const std::string& what) {
  if (!conn_) throw sdk::RetryableError(what + " failed: not connected to PostgreSQL");
  ResultPtr res(PQexec(conn_, sql.c_str()), &PQclear);
  check(res.get(), PGRES_COPY_IN, what);
  in_copy_ = true;
}

bool Connection::put_copy_data(std::string_view data) {
  constexpr size_t kChunk = 1 << 20;
  if (!conn_) return false;
  for (size_t pos = 0; pos < data.size(); pos += kChunk)
    if (PQputCopyData(conn_, data.data() + pos, static_cast<int>(std::min(kChunk, data.size() - pos))) != 1)
      return false;
  return true;
}

void Connection::end_copy(bool sent, const std::string& what) {
  if (!conn_) throw sdk::RetryableError(what + " failed: the connection to PostgreSQL was lost");
  in_copy_ = false;
  // A COPY that broke while sending still needs its end, or the server's error stays unread.
  const bool ended = PQputCopyEnd(conn_, sent ? nullptr : "the sink could not send the rows") == 1;
  ResultPtr res(PQgetResult(conn_), &PQclear);
  while (PGresult* more = PQgetResult(conn_)) PQclear(more);
  if (res && PQresultStatus(res.get()) != PGRES_COMMAND_OK) fail(res.get(), what);
  if (!ended || !sent || !res) fail(res.get(), what);
}

void Connection::commit(const std::string& what) {
  if (!conn_) throw sdk::RetryableError("COMMIT of " + what + " failed: the connection to PostgreSQL was lost");
  ResultPtr res(PQexec(conn_, "COMMIT"), &PQclear);
  // Lost while committing: the server may or may not have committed.
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) fail(res.get(), "COMMIT of " + what, true);
}

void Connection::rollback() {
  if (!ok()) return;
  if (in_copy_) {
    in_copy_ = false;
    if (PQputCopyEnd(conn_, "abandoned by the sink") != 1) return disconnect();
    while (PGresult* res = PQgetResult(conn_)) PQclear(res);  // the COPY's (expected) error
  }
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  ResultPtr res(PQexec(conn_, "ROLLBACK"), &PQclear);
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) disconnect();
}

}  // namespace picomq::kit::pg
