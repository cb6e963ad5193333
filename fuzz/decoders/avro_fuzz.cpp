// fuzz_decoder_avro: arbitrary bytes as one datum of tests/decoders_data/order.avsc (every
// primitive, unions, enums, fixed, arrays, maps, recursion, each logical type).
#include <fstream>
#include <sstream>
#include <string>

#include "common.h"
#include "decoders/avro_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto decoder = [] {
    std::ifstream in(std::string(PICOMQ_DECODERS_DATA) + "/order.avsc");
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    auto schema = picomq::decoders::compile_avro(text.str(), error);
    if (!schema) picomq::fuzz::die("compile", error);
    return picomq::decoders::make_avro_decoder(schema);
  }();
  std::string out, error;
  const auto status = decoder->decode({data, size}, out, error);
  if (status == picomq::decoders::Status::ok) picomq::fuzz::check_json(out);
  else picomq::fuzz::check_failure(status, error, "avro: ");
  return 0;
}
