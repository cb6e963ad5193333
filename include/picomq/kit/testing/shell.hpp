#pragma once
// Shell commands from tests: the independent readers (pyiceberg, deltalake, boto3 scripts) and
// server scripts the tests drive.
//
//   auto out = kit::testing::run_shell(python + " tool.py " + kit::testing::shell_quote(json));
#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace picomq::kit::testing {

// `s` as one sh word: single-quoted, its own single quotes as '\'' (JSON arguments carry them).
inline std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// Runs `command` with /bin/sh, its stderr folded into stdout: the output. Throws
// std::runtime_error naming the command, its exit status and its output when it fails.
inline std::string run_shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + command);
  std::string out;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0) throw std::runtime_error(command + " failed (status " + std::to_string(status) + "): " + out);
  return out;
}

// Runs `command` with /bin/sh, its stderr folded into stdout: its exit code (-1 when it did not
// exit) and output, whatever they are (for tests of a command's exit codes).
struct ShellRun {
  int exit_code = -1;
  std::string out;
};
inline ShellRun run_shell_status(const std::string& command) {
  ShellRun r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace picomq::kit::testing
