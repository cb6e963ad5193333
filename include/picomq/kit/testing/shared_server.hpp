#pragma once
// One test server of a kind per test process, the way every sink's tests keep theirs: made in a
// fresh temporary directory and started on first use; a start that failed is remembered (later
// calls throw the same error, nothing is retried, so each test fails with the reason rather than
// waiting again; the directory of a failed start is kept for its logs); stopped and its directory removed when the
// process that started it exits (a forked child, such as a runtime started by the harness, never stops it). And the
// call of a server's control script (`server.sh start|stop|kill ...`) with its output.
//
//   ClickHouseServer& ClickHouseServer::shared() {
//     return kit::testing::SharedServer<ClickHouseServer>::get("picomq-ch");
//   }
//
// Server needs a constructor from its directory (or pass `make`), start() (throws when the server
// does not come up), stop() (idempotent) and dir().
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

namespace picomq::kit::testing {

namespace detail {
// A fresh directory /tmp/<prefix>-XXXXXX (mkdtemp).
inline std::filesystem::path fresh_server_dir(const std::string& prefix) {
  std::string path = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(path.data())) throw std::runtime_error("mkdtemp failed for " + path);
  return path;
}
}  // namespace detail

// Runs `bash <script> <args>` and returns what it printed on stdout; throws "could not <what>:
// <command>" when it cannot run or exits non-zero (its stderr goes to the test's).
inline std::string run_server_script(const std::string& script, const std::string& args, const std::string& what) {
  const std::string cmd = "bash " + script + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("could not run " + cmd);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) throw std::runtime_error("could not " + what + ": " + cmd);
  return out;
}

template <class Server>
class SharedServer {
 public:
  using Make = std::function<std::unique_ptr<Server>(const std::filesystem::path& dir)>;
  using AfterStart = std::function<void(Server&)>;

  // The server of this process, started on the first call in a fresh /tmp/<prefix>-XXXXXX;
  // `after_start` runs once it is up (a warm-up write...); what it throws counts as a failed start.
  static Server& get(const std::string& prefix, const Make& make = {}, const AfterStart& after_start = {}) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.server) return *s.server;
    if (!s.start_error.empty()) throw std::runtime_error(s.start_error);
    const std::filesystem::path dir = detail::fresh_server_dir(prefix);
    std::unique_ptr<Server> server;
    if (make) server = make(dir);
    else if constexpr (std::is_constructible_v<Server, const std::filesystem::path&>)
      server = std::make_unique<Server>(dir);
    else throw std::logic_error("SharedServer: a Server without a constructor from its directory needs `make`");
    try {
      server->start();
      if (after_start) after_start(*server);
    } catch (const std::exception& e) {
      // The directory stays: its logs say why.
      s.start_error = std::string(e.what()) + " (its files: " + dir.string() + ")";
      server->stop();
      throw std::runtime_error(s.start_error);
    }
    s.server = std::move(server);
    if (!s.owner) {
      s.owner = getpid();
      std::atexit(stop_at_exit);
    }
    return *s.server;
  }

  // Stops it and removes its directory (the next get() starts a new one); also run at exit.
  static void stop() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!s.server) return;
    s.server->stop();
    std::error_code ec;
    std::filesystem::remove_all(s.server->dir(), ec);
    s.server.reset();
  }

 private:
  struct State {
    std::mutex mutex;
    std::unique_ptr<Server> server;
    std::string start_error;
    pid_t owner = 0;
  };
  static State& state() {
    static auto* s = new State;  // never destroyed: stop_at_exit runs after static destructors may have
    return *s;
  }
  static void stop_at_exit() {
    if (getpid() == state().owner) stop();
  }
};

}  // namespace picomq::kit::testing
