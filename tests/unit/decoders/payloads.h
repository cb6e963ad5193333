#pragma once
// Test payloads made by independent encoders (tests/decoders_data/make_payloads.py), generated
// once per process into a temporary folder, and small helpers to decode and inspect them.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decoders/schema_decoder.h"

namespace picomq::decoders::test {

// The folder with <format>/<case>.bin, all_types.pb, inventory.bfbs, order.avsc.
const std::filesystem::path& generated();
std::string payload(const std::string& format, const std::string& name);
inline std::filesystem::path data_file(const std::string& name) {
  return std::filesystem::path(PICOMQ_DECODERS_DATA) / name;
}
std::string read_text(const std::filesystem::path& p);
std::vector<uint8_t> bytes(std::string_view s);

struct Result {
  Status status;
  std::string json;   // the output on ok
  std::string error;  // the reason otherwise
  nlohmann::json value() const { return nlohmann::json::parse(json); }
};
Result run(SchemaDecoder& d, std::string_view payload);

}  // namespace picomq::decoders::test
