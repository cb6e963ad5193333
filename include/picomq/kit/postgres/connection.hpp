#pragma once
// One libpq connection (the PostgreSQL sink's pool holds them; the Redshift sink loads over one): a connection attempt
// bounded by a deadline and cut short by a stop signal (libpq's blocking PQconnectdb waits as long as the server's TCP
// stack lets it: forever for a server that accepts and never answers, connect_timeout otherwise), the classification of
// what went wrong (docs/sinks/postgres.md, "Errors"), statements and binary COPY, and the server's notices routed to
// the sink's log instead of libpq's default, stderr. Failures of statements are thrown as the SDK's outcomes
// (RetryableError, PartialWriteError, FatalError).
#include <libpq-fe.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/postgres/conninfo.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit::pg {

using Clock = std::chrono::steady_clock;
using LogFn = std::function<void(sdk::LogLevel, const std::string&)>;

// Why a connection attempt failed.
enum class ConnectFailure {
  Unreachable,  // refused, no route, timed out, server starting or shutting down: wait and retry
  Refused,      // the server answered no: authentication, missing database, pg_hba.conf
  BadOption,    // a connection option value libpq refused before contacting any server
  Stopped,      // the sink is closing
};

struct ConnectError {
  ConnectFailure kind = ConnectFailure::Unreachable;
  std::string message;  // libpq's, secrets redacted
};

// Classifies libpq's message of a failed connection (libpq gives no SQLSTATE for one).
ConnectFailure classify_connect_failure(std::string_view libpq_message);

// What a sink adds to its connection string.
struct ConnectionExtras {
  // libpq keywords set over the string's own (password, application_name...): given to libpq
  // as parameters, so no value needs quoting and a postgresql:// URI works alike. Secret values
  // are redacted from messages like the string's password.
  ConnOptions parameters;
  // Failures worth a retry beyond SQLSTATE's (connection loss, serialization failure, deadlock,
  // resources, shutdown): e.g. Redshift's serializable isolation violation, XX000.
  std::function<bool(std::string_view sqlstate, std::string_view message)> retryable;
};

class Connection {
 public:
  // conninfo: the user's string (secret); options: it parsed (for redaction and connect_timeout).
  Connection(std::string conninfo, const ConnOptions& options, LogFn log, ConnectionExtras extras = {});
  ~Connection() { disconnect(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One connection attempt, over by `deadline` (and by connect_timeout when the string sets
  // one), polling `stop` every 100 ms. Sets client_encoding to UTF8. nullopt: connected.
  std::optional<ConnectError> connect(Clock::time_point deadline, const kit::StopSignal& stop);
  bool ok() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }
  void disconnect();

  // Statements; a failure throws its outcome (and drops a connection that is gone).
  void run(const std::string& sql, const std::string& what);
  size_t run_counting(const std::string& sql, const std::string& what);  // rows affected
  // The rows of a parameterised query, every value as text (nullopt: NULL).
  using Row = std::vector<std::optional<std::string>>;
  std::vector<Row> query(const std::string& sql, const std::vector<std::string>& params, const std::string& what);
  // The server's version (e.g. 150018), 0 when not connected.
  int server_version() const { return conn_ ? PQserverVersion(conn_) : 0; }
  // Schema changes the sink makes on its own (IF NOT EXISTS): losing a race with another
  // session creating the same name is retryable, not fatal.
  void run_ddl(const std::string& sql, const std::string& what);

  void begin_copy(const std::string& sql, const std::string& what);
  bool put_copy_data(std::string_view data);  // false: the COPY broke (see end_copy)
  // Ends the COPY in progress (`sent`: all its data went out); throws its failure, after
  // draining what the server says (its error, if it sent one).
  void end_copy(bool sent, const std::string& what);
  void commit(const std::string& what);  // lost during COMMIT: PartialWriteError
  // Discards the transaction, whatever state it is in: a COPY in progress is ended with an
  // error first; nothing to do on a connection with no transaction (no "no transaction in
  // progress" warning). Never throws; a connection that cannot do it is closed.
  void rollback();
  // Inside a transaction (or a COPY), or in a state nobody can tell: not fit to hand on.
  bool in_transaction() const { return conn_ && (in_copy_ || PQtransactionStatus(conn_) != PQTRANS_IDLE); }

  const std::string& last_sqlstate() const { return last_sqlstate_; }
  // The line of a COPY's data the last failure names ("CONTEXT: COPY t, line 7"), 0 for none:
  // the row the server refused.
  int64_t last_copy_line() const { return last_copy_line_; }
  std::string error_message() const;

 private:
  [[noreturn]] void fail(const PGresult* res, const std::string& what, bool maybe_committed = false);
  void check(const PGresult* res, ExecStatusType expected, const std::string& what);
  static void on_notice(void* self, const PGresult* res);

  std::string conninfo_;  // secret: never logged
  const ConnOptions& options_;
  LogFn log_;
  ConnectionExtras extras_;
  std::optional<std::chrono::milliseconds> connect_timeout_;  // the string's connect_timeout
  PGconn* conn_ = nullptr;
  bool in_ddl_ = false;
  bool in_copy_ = false;  // begin_copy() succeeded and end_copy() has not run
  std::string last_sqlstate_;
  int64_t last_copy_line_ = 0;
};

}  // namespace picomq::kit::pg
