// The release image, run with podman as a user would: scripts/release.sh's Docker archive
// (PICOMQ_RELEASE_DIST/picomq-connect-image-<v>.docker.tar.gz, the one that keeps the
// HEALTHCHECK) loaded, then
//  - the quickstart inside it, and its HEALTHCHECK answering healthy;
//  - the image consuming the tests' Kafka broker into the tests' PostgreSQL (host network),
//    definitions mounted from the host, and a SIGTERM (`podman stop`) flushing and committing;
//  - a heavy sink's tarball (Delta) mounted into the image's plugin directory, writing a table
//    onto a mounted folder that an independent reader (deltalake) reads back.
// Skipped, saying why, when podman or the archive is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include "harness.h"
#include "postgres.h"

namespace picomq::test {
namespace {

struct Shell {
  int rc = -1;
  std::string out;
};
Shell sh(const std::string& cmd) {
  Shell r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string kPodman = std::string(PICOMQ_SOURCE_DIR) + "/packaging/container/podman.sh";

// The image loaded from the release's archive, once per process; empty with `why` when it cannot be.
const std::string& image(std::string& why) {
  static std::string tag, reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const char* dist = std::getenv("PICOMQ_RELEASE_DIST");
    std::filesystem::path archive;
    if (dist)
      for (const auto& e : std::filesystem::directory_iterator(dist))
        if (e.path().filename().string().ends_with(".docker.tar.gz")) archive = e.path();
    if (sh("command -v podman").rc != 0) {
      reason = "podman is not installed (scripts/setup.sh installs it)";
    } else if (archive.empty()) {
      reason = "no image archive in PICOMQ_RELEASE_DIST (scripts/release.sh builds it)";
    } else {
      // podman 4.3 reads no gzip (docker load does): unpacked into a temp file first.
      const auto tmp = make_temp_dir("image-load") / "image.docker.tar";
      auto gunzip = sh("gunzip -c " + archive.string() + " > " + tmp.string());
      auto loaded = gunzip.rc == 0 ? sh(kPodman + " load -q -i " + tmp.string()) : gunzip;
      std::filesystem::remove(tmp);
      std::smatch m;
      if (loaded.rc == 0 && std::regex_search(loaded.out, m, std::regex(R"(Loaded image: (\S+))"))) tag = m[1];
      else reason = "podman load " + archive.string() + " failed: " + loaded.out;
    }
  }
  why = reason;
  return tag;
}

#define REQUIRE_IMAGE(var)             \
  std::string why_;                    \
  const std::string var = image(why_); \
  if (var.empty()) GTEST_SKIP() << why_

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}
// Mounted folders are read (and written) by the image's user (uid 999), not by root.
void open_to_all(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    std::filesystem::permissions(e.path(), std::filesystem::perms::all, std::filesystem::perm_options::add);
  std::filesystem::permissions(dir, std::filesystem::perms::all, std::filesystem::perm_options::add);
}

TEST(Image, TheQuickstartRunsInsideAndTheHealthcheckSaysHealthy) {
  REQUIRE_IMAGE(tag);
  auto run = sh(kPodman + " run --rm --network none " + tag +
                " --config /usr/share/picomq-connect/quickstart/runtime.toml --stop-after 4s");
  ASSERT_EQ(run.rc, 0) << run.out;
  size_t records = 0;
  for (size_t at = 0; (at = run.out.find("\"pico_topic\"", at)) != std::string::npos; ++at) ++records;
  EXPECT_EQ(records, 10u) << run.out;

  // The image's own HEALTHCHECK (picomq-connect --health on 127.0.0.1:8083) against a runtime
  // with its API on: the quickstart's config plus [api], mounted as the config volume.
  const auto cfg = make_temp_dir("image-health");
  std::string quick = read_file(std::filesystem::path(PICOMQ_SOURCE_DIR) / "examples/quickstart/runtime.toml");
  quick = std::regex_replace(quick, std::regex(R"(file = "orders)"),
                             "file = \"/usr/share/picomq-connect/quickstart/orders");
  quick = std::regex_replace(quick, std::regex(R"(\[plugins\]\npath = [^\n]*\n)"), "");
  quick = std::regex_replace(quick, std::regex(R"(dir = "sinks.d")"), "dir = \"/etc/picomq-connect/sinks.d\"");
  write(cfg / "runtime.toml", quick + "\n[api]\nenabled = true\nlisten = \"127.0.0.1:8083\"\n");
  std::filesystem::copy(std::filesystem::path(PICOMQ_SOURCE_DIR) / "examples/quickstart/sinks.d", cfg / "sinks.d");
  open_to_all(cfg);
  const std::string name = "picomq-health-" + std::to_string(getpid());
  auto started =
      sh(kPodman + " run -d --name " + name + " --network none -v " + cfg.string() + ":/etc/picomq-connect:ro " + tag);
  ASSERT_EQ(started.rc, 0) << started.out;
  bool healthy = wait_until([&] { return sh(kPodman + " healthcheck run " + name).rc == 0; }, scaled(60s));
  auto logs = sh(kPodman + " logs " + name);
  sh(kPodman + " rm -f -t 30 " + name);
  EXPECT_TRUE(healthy) << logs.out;
}

TEST(Image, ConsumesTheBrokerIntoPostgresAndASigtermFlushesAndCommits) {
  REQUIRE_IMAGE(tag);
  Kafka& kafka = Kafka::shared();
  Postgres& pg = Postgres::shared();
  const std::string db = pg.create_database("image");
  const auto topic = unique_name("image");
  kafka.create_topic(topic, 3);
  std::vector<std::string> values;
  for (int i = 0; i < 900; ++i)
    values.push_back("{\"id\": " + std::to_string(i) + ", \"amount\": " + std::to_string(i * 3) + "}");
  kafka.produce_values(topic, values);

  // Big batches and a long poll interval: the records wait in the runtime's buckets until the
  // stop, so only the SIGTERM path can write and commit them.
  const auto cfg = make_temp_dir("image-pg");
  const int api_port = free_port();
  write(cfg / "runtime.toml",
        "[broker]\nbootstrap_servers = \"" + kafka.bootstrap() +
            "\"\n[sinks]\ndir = \"/etc/picomq-connect/sinks.d\"\n[runtime]\nshutdown_timeout = \"30s\"\n"
            "[api]\nenabled = true\nlisten = \"127.0.0.1:" +
            std::to_string(api_port) + "\"\n");
  write(cfg / "sinks.d" / "pg.toml",
        "type = \"sink\"\nkey = \"orders_pg\"\nversion = 0\npath = \"libpicomq_connector_postgres_sink\"\n"
        "[[topics]]\ntopics = [\"" +
            topic +
            "\"]\nschema = \"json\"\nbatch_length = 100000\n"
            "poll_interval = \"10m\"\n[plugin_config]\nconnection_string = \"" +
            pg.conninfo(db) + "\"\ntarget_table = \"orders\"\npayload_mode = \"columns\"\n");
  open_to_all(cfg);
  const std::string name = "picomq-pg-" + std::to_string(getpid());
  auto started =
      sh(kPodman + " run -d --name " + name + " --network host -v " + cfg.string() + ":/etc/picomq-connect:ro " + tag);
  ASSERT_EQ(started.rc, 0) << started.out;
  const std::string group = "picomq-connect-sink-orders_pg";
  // Ready: every partition assigned and its records read (the API says so); nothing written yet.
  const bool ready = wait_until(
      [&] {
        auto r = sh("curl -sf http://127.0.0.1:" + std::to_string(api_port) + "/sinks/orders_pg");
        return r.rc == 0 && r.out.find("\"running\"") != std::string::npos;
      },
      scaled(60s));
  std::this_thread::sleep_for(scaled(3s));
  EXPECT_TRUE(ready) << sh(kPodman + " logs " + name).out;
  EXPECT_LT(kafka.committed(group, topic, 0), 0) << "nothing committed before the stop";

  auto stopped = sh(kPodman + " stop -t 60 " + name);  // SIGTERM, then 60 s before a SIGKILL
  auto logs = sh(kPodman + " logs " + name);
  auto exit_code = sh(kPodman + " inspect -f '{{.State.ExitCode}}' " + name);
  sh(kPodman + " rm -f " + name);
  ASSERT_EQ(stopped.rc, 0) << stopped.out;
  EXPECT_EQ(exit_code.out.substr(0, 1), "0") << logs.out;
  EXPECT_NE(logs.out.find("SIGTERM received: flushing and committing"), std::string::npos) << logs.out;
  auto rows = pg.query("SELECT count(*), count(DISTINCT id), sum(amount) FROM orders", db);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(*rows[0][0], "900") << logs.out;
  EXPECT_EQ(*rows[0][1], "900");
  EXPECT_EQ(*rows[0][2], std::to_string(3 * 899 * 900 / 2));
  EXPECT_EQ(committed_sum(kafka, group, topic, 3), 900) << "every offset committed at the stop";
}

TEST(Image, HeavySinkTarballsLoadInItAndDeltaMountedIntoThePluginDirectoryWritesATable) {
  REQUIRE_IMAGE(tag);
  // Every heavy tarball: its checksum, its contents' checksums, and its plugin loads in the image.
  const auto work = make_temp_dir("image-heavy");
  std::map<std::string, std::filesystem::path> plugins;
  for (const auto& e : std::filesystem::directory_iterator(std::getenv("PICOMQ_RELEASE_DIST"))) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (!std::regex_match(file, m, std::regex(R"(picomq-connect-sink-([a-z]+)-.*-linux-amd64\.tar\.gz)"))) continue;
    auto sum = sh("cd " + e.path().parent_path().string() + " && sha256sum -c " + file + ".sha256");
    ASSERT_EQ(sum.rc, 0) << sum.out;
    auto unpacked = sh("tar -C " + work.string() + " -xzf " + e.path().string() + " && cd " + work.string() + "/" +
                       file.substr(0, file.size() - 7) + " && sha256sum -c SHA256SUMS && test -f LICENSE -a -f " +
                       m[1].str() + ".md");
    ASSERT_EQ(unpacked.rc, 0) << unpacked.out;
    plugins[m[1]] = work / file.substr(0, file.size() - 7) / ("libpicomq_connector_" + m[1].str() + "_sink.so");
  }
  ASSERT_EQ(plugins.size(), 4u) << "doris, redshift, delta, iceberg";
  std::string mounts, describe;
  for (const auto& [name, so] : plugins) {
    mounts += " -v " + so.string() + ":/usr/lib/picomq-connect/plugins/" + so.filename().string() + ":ro";
    describe +=
        "picomq-connect --describe-plugin /usr/lib/picomq-connect/plugins/" + so.filename().string() + " | head -1 && ";
  }
  open_to_all(work);
  auto loads =
      sh(kPodman + " run --rm --network none" + mounts + " --entrypoint sh " + tag + " -c '" + describe + "true'");
  ASSERT_EQ(loads.rc, 0) << loads.out;
  for (const char* name : {"doris", "redshift", "delta", "iceberg"})
    EXPECT_NE(loads.out.find(std::string("Sink `") + name + "`"), std::string::npos) << loads.out;
  const auto so = plugins.at("delta");

  Kafka& kafka = Kafka::shared();
  const auto topic = unique_name("image");
  kafka.create_topic(topic, 2);
  std::vector<std::string> values;
  for (int i = 0; i < 500; ++i)
    values.push_back("{\"id\": " + std::to_string(i) + ", \"name\": \"n" + std::to_string(i) + "\"}");
  kafka.produce_values(topic, values);
  const auto cfg = work / "config", lake = work / "lake";
  std::filesystem::create_directories(lake);
  write(cfg / "runtime.toml", "[broker]\nbootstrap_servers = \"" + kafka.bootstrap() +
                                  "\"\n[sinks]\ndir = \"/etc/picomq-connect/sinks.d\"\n");
  write(cfg / "sinks.d" / "lake.toml",
        "type = \"sink\"\nkey = \"lake\"\nversion = 0\npath = \"libpicomq_connector_delta_sink\"\n"
        "[[topics]]\ntopics = [\"" +
            topic +
            "\"]\nschema = \"json\"\npoll_interval = \"200ms\"\n"
            "[plugin_config]\ntable_uri = \"/lake/orders\"\ncreate_table = true\n");
  open_to_all(work);
  auto run =
      sh(kPodman + " run --rm --network host -v " + cfg.string() + ":/etc/picomq-connect:ro -v " + lake.string() +
         ":/lake -v " + so.string() + ":/usr/lib/picomq-connect/plugins/libpicomq_connector_delta_sink.so:ro " + tag +
         " --config /etc/picomq-connect/runtime.toml --stop-after 15s");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_NE(run.out.find("plugin delta"), std::string::npos) << run.out;
  auto read = sh(std::string(PICOMQ_VENV_PYTHON) + " -c \"import deltalake; t = deltalake.DeltaTable('" +
                 (lake / "orders").string() +
                 "').to_pyarrow_table(); print(t.num_rows, len(set(t.column('id').to_pylist())), flush=True); "
                 "import os; os._exit(0)\"");  // deltalake's threads may abort the interpreter's teardown
  EXPECT_EQ(read.out, "500 500\n") << read.out << run.out;
  EXPECT_EQ(committed_sum(kafka, "picomq-connect-sink-lake", topic, 2), 500);
}

}  // namespace
}  // namespace picomq::test

int main(int argc, char** argv) { return picomq::test::run_tests_with_kafka(argc, argv); }
