#include "payloads.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace picomq::decoders::test {

const std::filesystem::path& generated() {
  // Removed at exit: each ctest run of the decoder suites made one (100 KB) and left it.
  struct Generated {
    std::filesystem::path dir;
    ~Generated() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  };
  static const Generated made{[] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "picomq-decoders-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    const std::string cmd = std::string(PICOMQ_VENV_PYTHON) + " " + PICOMQ_DECODERS_DATA + "/make_payloads.py " + tmpl +
                            " > " + tmpl + "/make_payloads.log 2>&1";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("cannot generate the test payloads (run scripts/setup.sh for tools/venv): " + cmd +
                               "\n" + read_text(tmpl + "/make_payloads.log"));
    return std::filesystem::path(tmpl);
  }()};
  return made.dir;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string payload(const std::string& format, const std::string& name) {
  const auto p = generated() / format / (name + ".bin");
  if (!std::filesystem::exists(p)) throw std::runtime_error("no generated payload " + p.string());
  return read_text(p);
}

std::vector<uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

Result run(SchemaDecoder& d, std::string_view payload) {
  // A copy on the heap: sanitizers then see any read past the payload's end.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[payload.size() + 1]);
  std::memcpy(copy.get(), payload.data(), payload.size());
  Result r;
  r.status = d.decode({copy.get(), payload.size()}, r.json, r.error);
  if (r.status == Status::ok) {
    EXPECT_TRUE(nlohmann::json::accept(r.json)) << "output is not JSON: " << r.json;
  }
  return r;
}

}  // namespace picomq::decoders::test
