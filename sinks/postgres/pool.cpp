#include "postgres/pool.h"

#include <algorithm>

#include "picomq/kit/resend.hpp"
#include "picomq/sdk.hpp"

namespace picomq::postgres {
namespace {

using namespace std::chrono_literals;

// A connection attempt gets at least this long, even when the write's deadline has (almost)
// run out: a server that is up must get a fair chance to answer.
constexpr auto kMinConnectAttempt = 1s;
// A background attempt while the server is away.
constexpr auto kProbeAttempt = 2s;

// A connection the server (or libpq, for an option value) refused: no retry can mend it.
void throw_if_refused(const ConnectError& error) {
  if (error.kind == ConnectFailure::BadOption)
    throw sdk::FatalError("connection_string: " + error.message + " (a configuration error, not retried)");
  if (error.kind == ConnectFailure::Refused) throw sdk::FatalError("cannot connect to PostgreSQL: " + error.message);
}

}  // namespace

ConnectionPool::Lease& ConnectionPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    conn_ = std::move(other.conn_);
    other.pool_ = nullptr;
  }
  return *this;
}

void ConnectionPool::Lease::release() {
  if (pool_ && conn_) pool_->give_back(std::move(conn_));
  pool_ = nullptr;
  conn_.reset();
}

ConnectionPool::ConnectionPool(std::string conninfo, ConnOptions options, size_t max,
                               std::chrono::milliseconds reconnect_timeout, Hooks hooks)
    : conninfo_(std::move(conninfo)),
      options_(std::move(options)),
      max_(std::max<size_t>(max, 1)),
      reconnect_timeout_(reconnect_timeout),
      hooks_(std::move(hooks)) {}

ConnectionPool::~ConnectionPool() { close(); }

std::unique_ptr<Connection> ConnectionPool::make_connection() const {
  return std::make_unique<Connection>(conninfo_, options_, hooks_.log);
}

void ConnectionPool::give_back(std::unique_ptr<Connection> conn) {
  // A transaction left open (a failure between BEGIN and its end) must not reach the next user.
  if (conn->in_transaction()) conn->disconnect();
  {
    std::lock_guard lock(mutex_);
    --leased_;
    idle_.push_back(std::move(conn));
  }
  returned_.notify_one();
}

ConnectionPool::Lease ConnectionPool::acquire(Clock::time_point deadline) {
  std::unique_ptr<Connection> conn;
  {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stop_.stopped()) throw sdk::RetryableError("cannot connect to PostgreSQL: the sink is closing");
      if (!idle_.empty()) {
        // A connected one first: the others were lost and would have to connect again.
        auto it = std::find_if(idle_.begin(), idle_.end(), [](const auto& c) { return c->ok(); });
        if (it == idle_.end()) it = idle_.end() - 1;
        conn = std::move(*it);
        idle_.erase(it);
        break;
      }
      if (leased_ < max_) {
        conn = make_connection();
        break;
      }
      // Every connection is on loan: one comes back when a segment commits.
      if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && leased_ >= max_)
        throw sdk::RetryableError("cannot get a connection to PostgreSQL: all " + std::to_string(max_) +
                                  " are in use by transactions that did not end within reconnect_timeout");
    }
    ++leased_;
  }
  Lease lease(this, std::move(conn));
  connect(*lease, deadline);
  return lease;
}

// An unreachable server is tried again until `deadline` (back-off 250 ms to 2 s): a server
// restart takes longer than the runtime's own retries (about 3 s in all) would wait.
void ConnectionPool::connect(Connection& conn, Clock::time_point deadline) {
  if (conn.ok()) return;
  kit::RetryWait retry(stop_, deadline, {.initial = 250ms, .max = 2000ms});
  for (;;) {
    auto error = conn.connect(std::max(deadline, Clock::now() + kMinConnectAttempt), stop_);
    if (!error) {
      note_connected();
      return;
    }
    throw_if_refused(*error);
    if (error->kind == ConnectFailure::Stopped)
      throw sdk::RetryableError("cannot connect to PostgreSQL: the sink is closing");
    note_unreachable(error->message);
    // (An attempt that ran to the deadline ends a hair before it: that is the end too.)
    if (deadline - Clock::now() < 50ms || !retry.wait_until_deadline()) {
      if (retry.stopped()) throw sdk::RetryableError("cannot connect to PostgreSQL: the sink is closing");
      throw sdk::RetryableError("cannot connect to PostgreSQL (tried for reconnect_timeout, " +
                                kit::format_duration(reconnect_timeout_) + "): " + error->message);
    }
  }
}

ConnectionPool::Lease ConnectionPool::connect_at_start(std::chrono::milliseconds wait) {
  auto conn = make_connection();
  if (auto error = conn->connect(Clock::now() + wait, stop_)) {
    throw_if_refused(*error);
    note_unreachable(error->message + "; the sink starts and connects when it can");  // or closing already
    return {};
  }
  std::lock_guard lock(mutex_);
  ++leased_;
  return Lease(this, std::move(conn));
}

void ConnectionPool::await_server(Connection& conn, const std::string& message,
                                  std::optional<Clock::time_point> deadline) {
  conn.disconnect();
  note_unreachable("the connection was lost: " + message);
  try {
    connect(conn, deadline ? *deadline : outage_.since().value_or(Clock::now()) + reconnect_timeout_);
  } catch (const std::exception& e) {
    if (hooks_.log) hooks_.log(sdk::LogLevel::Debug, std::string("still waiting for PostgreSQL: ") + e.what());
  }
}

// One warning per outage (and a counter in the status file), not one per attempt.
void ConnectionPool::note_unreachable(const std::string& message) {
  if (outage_.failed()) {
    if (hooks_.count) hooks_.count("destination_unreachable", 1);
    if (hooks_.log)
      hooks_.log(sdk::LogLevel::Warn, "PostgreSQL is unreachable (" + message + "); each write attempt waits up to " +
                                          "reconnect_timeout (" + kit::format_duration(reconnect_timeout_) +
                                          ") for it, and the sink stops in Error after the runtime's 5 attempts " +
                                          "(about 5 x reconnect_timeout + 3 s)");
  } else if (hooks_.log) {
    hooks_.log(sdk::LogLevel::Debug, "PostgreSQL still unreachable: " + message);
  }
  std::lock_guard lock(mutex_);
  schedule_probe(probe_backoff_.next());
}

void ConnectionPool::note_connected() {
  const uint64_t attempts = outage_.attempts();
  if (auto lasted = outage_.recovered()) {
    if (hooks_.count) hooks_.count("destination_reconnected", 1);
    if (hooks_.log)
      hooks_.log(sdk::LogLevel::Info, "reconnected to PostgreSQL after " + kit::format_duration(*lasted) +
                                          " unreachable (" + std::to_string(attempts) + " failed attempts)");
    std::lock_guard lock(mutex_);
    probe_backoff_.reset();
  }
}

// mutex_ held. One background attempt at a time.
void ConnectionPool::schedule_probe(std::chrono::milliseconds delay) {
  if (probing_ || stop_.stopped()) return;
  probing_ = true;
  scheduler_.after(delay, [this](bool run) {
    if (run) {
      probe();
    } else {
      std::lock_guard lock(mutex_);
      probing_ = false;
    }
  });
}

// While an outage lasts, a connection attempt of its own: writes go on meanwhile (a write that
// connects ends the outage itself, and the next probe then does nothing). A connection it makes
// stays in the pool for the next write.
void ConnectionPool::probe() {
  {
    std::lock_guard lock(mutex_);
    probing_ = false;
  }
  if (!outage_.active() || stop_.stopped()) return;
  auto conn = make_connection();
  auto error = conn->connect(Clock::now() + kProbeAttempt, stop_);
  if (!error) {
    note_connected();
    std::lock_guard lock(mutex_);
    if (idle_.size() + leased_ < max_) idle_.push_back(std::move(conn));
    returned_.notify_one();
    return;
  }
  if (error->kind != ConnectFailure::Stopped) note_unreachable(error->message);  // and the next attempt
}

Clock::time_point ConnectionPool::outage_deadline() const {
  return outage_.since().value_or(Clock::now()) + reconnect_timeout_;
}

void ConnectionPool::stop() {
  stop_.stop();
  std::lock_guard lock(mutex_);  // a waiter between its check and its wait sees the stop now
  returned_.notify_all();
}

void ConnectionPool::close() {
  stop();
  scheduler_.close();
  std::lock_guard lock(mutex_);
  idle_.clear();
}

size_t ConnectionPool::size() const {
  std::lock_guard lock(mutex_);
  return idle_.size() + leased_;
}

}  // namespace picomq::postgres
