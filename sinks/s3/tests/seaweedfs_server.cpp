#include "seaweedfs_server.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/testing/shared_server.hpp"
#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {
namespace {

// This file sits in sinks/s3/tests/; the script one folder up.
// sinks/s3/tests/, from the build (tests/CMakeLists.txt: __FILE__ is relative under ccache).
const std::filesystem::path kTests = PICOMQ_S3_TESTS_DIR;
const std::string kScript = (kTests.parent_path() / "server.sh").string();
// boto3 and zstandard live in the tree's tools/venv (scripts/setup.sh); PICOMQ_S3_PYTHON overrides.
std::string python() {
  if (const char* p = std::getenv("PICOMQ_S3_PYTHON"); p && *p) return p;
  return (kTests.parent_path().parent_path().parent_path() / "tools" / "venv" / "bin" / "python").string();
}

std::string run(const std::string& cmd, const std::string& what) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("could not run " + cmd);
  std::string out;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) throw std::runtime_error("could not " + what + ": " + cmd);
  return out;
}

kit::HttpClient& admin() {
  static kit::HttpClient c(
      kit::HttpClientOptions{.auth = kit::AwsSigV4Auth{.region = "us-east-1",
                                                       .service = "s3",
                                                       .access_key_id = SeaweedfsServer::kAccessKey,
                                                       .secret_access_key = SeaweedfsServer::kSecretKey},
                             .request_timeout = std::chrono::seconds(30)});
  return c;
}

std::string quote(const std::string& s) { return kit::testing::shell_quote(s); }

}  // namespace

SeaweedfsServer& SeaweedfsServer::shared() {
  return kit::testing::SharedServer<SeaweedfsServer>::get("picomq-weed", {}, [](SeaweedfsServer& s) {
    // The master defers the first volume allocation after it starts (~5 s): one write now, so
    // that no test's first upload waits for it.
    // Bounded: a volume server that never registers capacity (a full disk) made each upload wait
    // 30 s and this loop took 50 minutes; fail the suite with the server's own reason instead.
    const std::string warm = s.create_bucket("warm-up");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      const kit::HttpResponse r = admin().send({.method = "PUT", .url = s.endpoint() + "/" + warm + "/k", .body = "x"});
      if (r.completed() && r.status == 200) return;
      last = r.completed() ? std::to_string(r.status) + " " + r.body_excerpt() : r.failure->message;
      usleep(100'000);
    }
    throw std::runtime_error("seaweedfs in " + s.dir().string() + " takes no upload after 90 s (" + last +
                             "); what its log says about disk space: " + s.disk_space_complaints());
  });
}

std::string SeaweedfsServer::disk_space_complaints() const {
  std::ifstream log(dir_ / "server.log");
  std::string found;
  for (std::string line; std::getline(log, line);)
    if (line.find("disk free") != std::string::npos || line.find("ReadOnly") != std::string::npos)
      found += "\n  " + line;
  return found.empty() ? "nothing" : found;
}

void SeaweedfsServer::start() {
  const std::string out =
      run("bash " + kScript + " start " + dir_.string() + " --owner " + std::to_string(getpid()), "start SeaweedFS");
  port_ = std::stoi(out);
}

int SeaweedfsServer::iceberg_port() const {
  return std::stoi(run("bash " + kScript + " iceberg-port " + dir_.string(), "read the Iceberg catalog's port"));
}

void SeaweedfsServer::stop() { (void)std::system(("bash " + kScript + " stop " + dir_.string()).c_str()); }

std::string SeaweedfsServer::create_bucket(const std::string& prefix) const {
  static std::atomic<int> counter{0};
  std::string name;
  for (char c : prefix) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  name = name.substr(0, 40) + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  // A fresh server may answer before its volume layer is ready: retry for a few seconds.
  std::string last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    const kit::HttpResponse r = admin().send({.method = "PUT", .url = endpoint() + "/" + name});
    if (r.completed() && r.status == 200) return name;
    last = r.completed() ? std::to_string(r.status) + " " + r.body_excerpt() : r.failure->message;
    usleep(100'000);
  }
  throw std::runtime_error("seaweedfs: could not create bucket " + name + ": " + last);
}

void SeaweedfsServer::put_object(const std::string& bucket, const std::string& key, const std::string& body,
                                 const std::vector<std::pair<std::string, std::string>>& headers) const {
  // Each segment of the key percent-encoded ('+' as %2B), as the SigV4 canonical path has it.
  std::string path;
  for (size_t at = 0;;) {
    const size_t slash = key.find('/', at);
    path += kit::percent_encode(
        std::string_view(key).substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    path += '/';
    at = slash + 1;
  }
  kit::HttpRequest request{.method = "PUT", .url = endpoint() + "/" + bucket + "/" + path, .body = body};
  for (const auto& [name, value] : headers) request.headers.set(name, value);
  const kit::HttpResponse r = admin().send(std::move(request));
  if (!r.completed() || r.status != 200)
    throw std::runtime_error("seaweedfs: could not put " + bucket + "/" + key + ": " +
                             (r.completed() ? std::to_string(r.status) + " " + r.body_excerpt() : r.failure->message));
}

std::vector<S3Object> SeaweedfsServer::objects(const std::string& bucket, const std::string& prefix) const {
  const std::string out = run(python() + " " + (kTests / "s3_objects.py").string() + " " + quote(endpoint()) + " " +
                                  kAccessKey + " " + kSecretKey + " " + quote(bucket) + " " + quote(prefix),
                              "list objects with boto3");
  std::vector<S3Object> objects;
  for (const auto& o : nlohmann::json::parse(out)) {
    // The S3 sink's probe that the store honours If-None-Match (one per prefix): not an object of the records.
    if (o["key"].get<std::string>().ends_with("_picomq/conditional-write-probe")) continue;
    auto b64 = [](const nlohmann::json& v) {
      auto d = kit::base64_decode(v.get<std::string>());
      return d ? std::string(d->begin(), d->end()) : std::string();
    };
    objects.push_back(
        {o["key"].get<std::string>(), b64(o["bytes_b64"]), b64(o["text_b64"]), o["etag"].get<std::string>()});
  }
  return objects;
}

std::string SeaweedfsServer::plugin_config(const std::string& bucket) const {
  return "bucket = \"" + bucket + "\"\nendpoint = \"" + endpoint() + "\"\naws_access_key_id = \"" + kAccessKey +
         "\"\naws_secret_access_key = \"" + kSecretKey + "\"\n";
}

}  // namespace picomq::test
