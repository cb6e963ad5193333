#include "schema_registry.h"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "harness.h"

namespace picomq::test {

SchemaRegistry::SchemaRegistry() : dir_(make_temp_dir("picomq-registry")), port_(free_port()) {}

SchemaRegistry::~SchemaRegistry() { stop(); }

void SchemaRegistry::start() {
  const std::string cmd = std::string(PICOMQ_REGISTRY_SH) + " start " + dir_.string() + " " + std::to_string(port_) +
                          " " + std::to_string(getpid());
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot start the schema registry: " + cmd);
}

void SchemaRegistry::stop() { (void)std::system((std::string(PICOMQ_REGISTRY_SH) + " stop " + dir_.string()).c_str()); }

std::filesystem::path SchemaRegistry::encode() {
  auto out = dir_ / "payloads";
  const std::string cmd = std::string(PICOMQ_VENV_PYTHON) + " " + PICOMQ_DECODERS_DATA +
                          "/make_payloads.py --registry " + url() + " " + out.string() + " > " +
                          (dir_ / "make.log").string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("registry encoding failed: " + read_file(dir_ / "make.log"));
  return out / "registry";
}

std::string SchemaRegistry::schema(int id) {
  const auto body = dir_ / ("schema-" + std::to_string(id) + ".json");
  const std::string cmd = "curl -sf " + url() + "/schemas/ids/" + std::to_string(id) + " -o " + body.string();
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("cannot read schema id " + std::to_string(id) + ": " + cmd);
  return nlohmann::json::parse(read_file(body))["schema"].get<std::string>();
}

size_t SchemaRegistry::id_lookups() {
  size_t n = 0;
  for (const auto& line : read_lines(dir_ / "registry.log")) n += line.find("GET /schemas/ids/") != std::string::npos;
  return n;
}

}  // namespace picomq::test
