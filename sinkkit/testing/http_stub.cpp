#include "picomq/kit/testing/http_stub.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <thread>

#include "picomq/kit/encoding.hpp"

extern char** environ;

namespace picomq::kit::testing {

namespace {

// A test server's script: the environment's choice (an installed kit: share/picomq-sdk/testing/),
// else where this tree has it.
std::string resource(const char* env, const char* compiled) {
  const char* v = std::getenv(env);
  return v && *v ? v : compiled;
}

using namespace std::chrono_literals;

// The control channel is plain libcurl, apart from the client under test: a broken client must
// not break the servers' scripting.
std::pair<long, std::string> exchange(const char* method, const std::string& url, const std::string& body,
                                      const std::string& ca_file = {}) {
  CURL* curl = curl_easy_init();
  if (!curl) throw std::runtime_error("curl_easy_init failed");
  std::string answer;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  if (std::string_view(method) != "GET") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, body.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(scaled(30s).count()));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  if (!ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* out) {
        static_cast<std::string*>(out)->append(data, size * n);
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK)
    throw std::runtime_error(std::string(method) + " " + url + ": " + (error[0] ? error : curl_easy_strerror(rc)));
  return {status, answer};
}

// Reads one line from `fd` within `timeout`; empty when the process closed it or time ran out.
std::string read_line(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) <= 0) continue;
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return {};
    if (c == '\n') return line;
    line.push_back(c);
  }
  return {};
}

uint16_t parse_port(const std::string& text, const std::string& who) {
  try {
    const int port = std::stoi(text);
    if (port > 0 && port < 65536) return static_cast<uint16_t>(port);
  } catch (const std::exception&) {}
  throw std::runtime_error(who + " did not report a port (got '" + text + "')");
}

// Runs a command through the shell, returns its stdout (stderr goes to the test's output).
std::string run_capturing(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buffer[512];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error("failed (" + std::to_string(status) + "): " + command);
  return out;
}

std::string quoted(const std::string& s) { return "'" + std::regex_replace(s, std::regex("'"), "'\\''") + "'"; }

}  // namespace

std::chrono::milliseconds scaled(std::chrono::milliseconds timeout) {
  static const double factor = [] {
    const char* v = std::getenv("PICOMQ_TEST_TIMEOUT_MULTIPLIER");
    return v ? std::max(1.0, std::atof(v)) : 1.0;
  }();
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(timeout.count()) * factor));
}

// ---------------------------------------------------------------- HttpReceiver

HttpReceiver::HttpReceiver() : HttpReceiver(resource("PICOMQ_HTTP_RECEIVER", PICOMQ_HTTP_RECEIVER)) {}

HttpReceiver::HttpReceiver(std::string script, std::vector<std::string> args) {
  int to_child[2], from_child[2];
  // CLOEXEC: no other child (nginx, another receiver) may inherit these ends, or the receiver
  // would not see its stdin close when this process dies.
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  std::string python = PICOMQ_PYTHON3, flag = "--exit-on-stdin-eof";
  std::vector<char*> argv{python.data(), script.data(), flag.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int spawned = posix_spawn(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(to_child[0]);
  ::close(from_child[1]);
  stdin_fd_ = to_child[1];
  if (spawned != 0) {
    ::close(from_child[0]);
    ::close(stdin_fd_);
    throw std::runtime_error("cannot start " + python + " " + script);
  }
  const std::string line = read_line(from_child[0], scaled(20s));
  ::close(from_child[0]);  // it prints nothing else
  try {
    port_ = parse_port(line, std::filesystem::path(script).filename().string());
  } catch (...) {
    stop();
    throw;
  }
}

HttpReceiver::~HttpReceiver() { stop(); }

void HttpReceiver::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + scaled(10s);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  pid_ = -1;
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

std::string HttpReceiver::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
std::string HttpReceiver::url(std::string_view path) const { return base_url() + std::string(path); }

nlohmann::json HttpReceiver::control(const char* method, std::string_view endpoint, const std::string& body) const {
  const auto [status, answer] = exchange(method, url("/_control/" + std::string(endpoint)), body);
  if (status != 200)
    throw std::runtime_error("receiver: " + std::string(endpoint) + " answered " + std::to_string(status) + ": " +
                             answer);
  return nlohmann::json::parse(answer);
}

std::pair<long, std::string> HttpReceiver::call(const char* method, std::string_view path,
                                                const std::string& body) const {
  return exchange(method, url(path), body);
}

void HttpReceiver::script(const nlohmann::json& rules) { control("POST", "script", rules.dump()); }

void HttpReceiver::set_default_answer(long status, const nlohmann::json& headers, std::string body) {
  control("POST", "default",
          nlohmann::json{{"status", status}, {"headers", headers}, {"body", std::move(body)}}.dump());
}

void HttpReceiver::idempotency(std::optional<std::string> header) {
  control("POST", "idempotency",
          nlohmann::json{{"header", header ? nlohmann::json(*header) : nlohmann::json()}}.dump());
}

void HttpReceiver::forward_to(std::optional<std::string> target) {
  control("POST", "forward", nlohmann::json{{"to", target ? nlohmann::json(*target) : nlohmann::json()}}.dump());
}

void HttpReceiver::reset() { control("POST", "reset", "{}"); }

std::vector<RecordedRequest> HttpReceiver::requests(std::string_view path) const {
  std::string endpoint = "requests";
  if (!path.empty()) {
    CURL* curl = curl_easy_init();
    char* escaped = curl_easy_escape(curl, path.data(), static_cast<int>(path.size()));
    endpoint += "?path=" + std::string(escaped);
    curl_free(escaped);
    curl_easy_cleanup(curl);
  }
  std::vector<RecordedRequest> out;
  for (const auto& r : control("GET", endpoint)) {
    RecordedRequest request;
    request.method = r.at("method");
    request.path = r.at("path");
    request.query = r.at("query");
    for (const auto& field : r.at("headers")) request.headers.add(field.at(0), field.at(1));
    const auto body = base64_decode(r.at("body_base64").get<std::string>());
    if (!body) throw std::runtime_error("receiver: a body that is not base64");
    request.body.assign(body->begin(), body->end());
    request.wire_size = r.at("wire_size");
    request.content_encoding = r.at("content_encoding").is_string() ? r.at("content_encoding").get<std::string>() : "";
    request.chunked = r.at("chunked");
    request.connection = r.at("connection");
    request.duplicate = r.at("duplicate");
    request.answer = r.at("answer");
    out.push_back(std::move(request));
  }
  return out;
}

ReceiverStats HttpReceiver::stats() const {
  const auto s = control("GET", "stats");
  // The hold counters are http_receiver.py's; another script's control API may not have them.
  ReceiverStats out{s.at("requests"),
                    s.at("connections"),
                    s.at("in_flight"),
                    s.at("max_in_flight"),
                    s.at("duplicates"),
                    s.value("held", size_t{0}),
                    s.value("held_now", size_t{0}),
                    s.value("applied_late", size_t{0}),
                    {}};
  const nlohmann::json late = s.value("late_answers", nlohmann::json::object());  // alive while iterated
  for (const auto& [status, n] : late.items()) out.late_answers[status] = n.get<size_t>();
  return out;
}

std::vector<HeldRequest> HttpReceiver::held() const {
  std::vector<HeldRequest> out;
  for (const auto& h : control("GET", "held"))
    out.push_back({h.at("id"), h.at("method"), h.at("path"), h.at("query"), h.at("client_gone")});
  return out;
}

std::map<int64_t, long> HttpReceiver::release(const std::vector<int64_t>& ids) {
  std::map<int64_t, long> out;
  for (const auto& r : control("POST", "release", nlohmann::json{{"ids", ids}}.dump()))
    out[r.at("id")] = r.at("status").is_number() ? r.at("status").get<long>() : 0;
  return out;
}

// ---------------------------------------------------------------- Nginx

Nginx::Nginx(const Options& options) : tls_(options.tls == Tls::On) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "picomq-nginx-XXXXXX").string();
  if (!::mkdtemp(dir_template.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = dir_template;
  std::string command = "bash " + quoted(resource("PICOMQ_NGINX_SH", PICOMQ_NGINX_SH)) + " start " +
                        quoted(dir_.string()) + (tls_ ? " --tls" : "") + " --owner " + std::to_string(::getpid());
  if (!options.proxy_to.empty()) command += " --proxy-to " + quoted(options.proxy_to);
  for (const auto& value : options.authorizations) command += " --authorization " + quoted(value);
  try {
    port_ = parse_port(run_capturing(command), "nginx.sh");
    baseline_ = raw_stats();
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

Nginx::~Nginx() {
  const std::string command =
      "bash " + quoted(resource("PICOMQ_NGINX_SH", PICOMQ_NGINX_SH)) + " stop " + quoted(dir_.string());
  if (std::system(command.c_str()) != 0) std::fprintf(stderr, "nginx.sh stop %s failed\n", dir_.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string Nginx::base_url() const {
  return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
}

NginxStats Nginx::stats() const {
  const NginxStats now = raw_stats();
  ++status_requests_;  // each is one connection and one request
  return {now.accepted_connections - baseline_.accepted_connections - status_requests_,
          now.requests - baseline_.requests - status_requests_};
}

NginxStats Nginx::raw_stats() const {
  // stub_status: "Active connections: 1 \nserver accepts handled requests\n 5 5 10 \n..."
  const auto [status, text] = exchange("GET", base_url() + "/_status", {}, tls_ ? ca_file().string() : std::string());
  std::smatch m;
  if (status != 200 || !std::regex_search(text, m, std::regex(R"(\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n)")))
    throw std::runtime_error("nginx /_status answered " + std::to_string(status) + ": " + text);
  return {std::stoull(m[1]), std::stoull(m[3])};
}

}  // namespace picomq::kit::testing
