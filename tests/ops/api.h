#pragma once
// The operations API as the ops tests drive it: a runtime with [api] on a free port and a token,
// and an HTTP client (Debian's cpp-httplib) that waits for its URL in the status file.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {

using nlohmann::json;

inline const std::string kToken = "tok-4f9a2c";          // the API's bearer token (through ${OPS_TOKEN})
inline const std::string kSecret = "hunter2-secret-77";  // a secret plugin option (through ${SINK_SECRET})

// A runtime with the API on a free port, a token, JSON logs and keep_running_on_error.
inline void with_api(Runtime& rt, const std::string& extra_runtime = "") {
  rt.env("OPS_TOKEN", kToken);
  rt.env("SINK_SECRET", kSecret);
  rt.runtime_settings("keep_running_on_error = true\nlog_format = \"json\"\n" + extra_runtime +
                      "\n[api]\nenabled = true\nlisten = \"127.0.0.1:0\"\ntoken = \"${OPS_TOKEN}\"\n");
}

// The API's URL, once the status file says it (empty after 30 s, a test failure).
inline std::string wait_api_url(Runtime& rt) {
  std::string url;
  EXPECT_TRUE(wait_until(
      [&] {
        auto s = rt.status();
        if (!s.contains("runtime") || !s["runtime"].contains("api")) return false;
        url = s["runtime"]["api"].get<std::string>();
        return true;
      },
      30s))
      << rt.log();
  return url;
}

struct Api {
  std::unique_ptr<httplib::Client> client;
  std::string url;
  explicit Api(Runtime& rt) : url(wait_api_url(rt)) {
    client = std::make_unique<httplib::Client>(url);
    client->set_read_timeout(60, 0);
    client->set_bearer_token_auth(kToken);
  }
  struct Reply {
    int status = 0;
    std::string body;
    json doc() const { return json::parse(body, nullptr, false); }
  };
  static Reply of(const httplib::Result& r) {
    return r ? Reply{r->status, r->body} : Reply{-1, httplib::to_string(r.error())};
  }
  Reply get(const std::string& path) const { return of(client->Get(path)); }
  Reply post(const std::string& path, const std::string& body = "{}") const {
    return of(client->Post(path, body, "application/json"));
  }
  Reply put(const std::string& path, const std::string& body) const {
    return of(client->Put(path, body, "application/toml"));
  }
  Reply del(const std::string& path) const { return of(client->Delete(path)); }
};

// `picomq-connect ctl <args>` against the runtimes at `urls`, with the token: its exit code and output.
using CtlRun = kit::testing::ShellRun;
inline CtlRun ctl(const std::vector<std::string>& urls, const std::string& args) {
  std::string command = kit::testing::shell_quote(locations().connect_binary.string()) + " ctl --token " + kToken;
  for (const auto& u : urls) command += " --url " + u;
  return kit::testing::run_shell_status(command + " " + args);
}

}  // namespace picomq::test
