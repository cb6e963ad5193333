#pragma once
// The sink's connections to PostgreSQL: a small pool, each connection leased to one user at a
// time (a COPY segment for its transaction, or a write preparing a table), so a segment that
// commits holds its connection while the next segment streams on another. Connecting follows the
// outage rule of docs/sinks/postgres.md: a write attempt that finds the server gone keeps
// reconnecting (back-off 250 ms to 2 s) until its deadline, reconnect_timeout after it started;
// one warning per outage and one line when it ends; while the server is away and nothing is
// connected, a background attempt now and then (back-off 1 s to 10 s), so the recovery is seen
// even when no record comes.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/health.hpp"
#include "picomq/kit/postgres/connection.hpp"
#include "picomq/kit/scheduler.hpp"

namespace picomq::postgres {

// A connection to the server is the kit's (shared with the Redshift sink).
using kit::pg::Clock;
using kit::pg::ConnectError;
using kit::pg::ConnectFailure;
using kit::pg::Connection;
using kit::pg::ConnOptions;
using kit::pg::LogFn;

class ConnectionPool {
 public:
  struct Hooks {
    LogFn log;                                         // the sink's log
    std::function<void(const char*, uint64_t)> count;  // the sink's counters
  };

  // A connection on loan; back to the pool when the lease ends. A connection that is not idle
  // then (a transaction left open by a failure) is closed rather than handed on.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) { other.pool_ = nullptr; }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { release(); }
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }
    explicit operator bool() const { return conn_ != nullptr; }
    void release();

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    ConnectionPool* pool_ = nullptr;
    std::unique_ptr<Connection> conn_;
  };

  // `max`: connections at most. conninfo is secret; options is it parsed.
  ConnectionPool(std::string conninfo, ConnOptions options, size_t max, std::chrono::milliseconds reconnect_timeout,
                 Hooks hooks);
  ~ConnectionPool();  // close()
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A connected connection: an idle one, else a new one while there are fewer than max, else
  // the first one given back. Until `deadline` an unreachable server is tried again; then
  // RetryableError. A refusal (credentials, database, pg_hba.conf) or a bad option: FatalError.
  Lease acquire(Clock::time_point deadline);

  // Start-up health check: one connection attempt of up to `wait`. Connected: the connection,
  // for the caller's own checks (then back to the pool with the lease). Refused or a bad option:
  // FatalError. Unreachable: no lease, one warning, and the background attempts begin.
  Lease connect_at_start(std::chrono::milliseconds wait);

  // A lease found its connection gone (a statement, a COPY): the outage is noted and `conn` is
  // connected again, waiting for the server until `deadline` (default: reconnect_timeout after
  // the outage began), so a write attempt lasts its reconnect_timeout however the outage was
  // found. Never throws: the caller then fails with its own error.
  void await_server(Connection& conn, const std::string& message,
                    std::optional<Clock::time_point> deadline = std::nullopt);
  // A failure to reach the server: one warning per outage (and destination_unreachable), and the
  // background attempts while it lasts.
  void note_unreachable(const std::string& message);
  // reconnect_timeout after the current outage began (now, when there is none).
  Clock::time_point outage_deadline() const;

  // Ends every wait (a reconnect, a connection attempt, a wait for a free connection) at once;
  // acquire() fails from now on. Leases still work: what is open can still commit.
  void stop();
  // stop(), the background attempts joined, the idle connections closed. Idempotent.
  void close();
  // Connections open now (idle and leased).
  size_t size() const;

 private:
  void give_back(std::unique_ptr<Connection> conn);
  std::unique_ptr<Connection> make_connection() const;
  // Connects `conn` with the outage rule (see acquire()).
  void connect(Connection& conn, Clock::time_point deadline);
  void note_connected();
  void schedule_probe(std::chrono::milliseconds delay);
  void probe();

  const std::string conninfo_;  // secret: never logged
  const ConnOptions options_;   // conninfo_ parsed (holds the password too: never logged)
  const size_t max_;
  const std::chrono::milliseconds reconnect_timeout_;
  Hooks hooks_;
  kit::StopSignal stop_;
  kit::Outage outage_;
  mutable std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t leased_ = 0;
  bool probing_ = false;  // a background attempt is scheduled
  kit::Backoff probe_backoff_{{.initial = std::chrono::milliseconds(1000), .max = std::chrono::milliseconds(10000)}};
  kit::Scheduler scheduler_;  // the background attempts; last member: joined first
};

}  // namespace picomq::postgres
