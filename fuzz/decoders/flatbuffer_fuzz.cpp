// fuzz_decoder_flatbuffer: arbitrary bytes as a picomq.test.fb.Item (tests/decoders_data/
// inventory.fbs: tables, structs with arrays, enums, unions, vectors of each). Whatever the
// verifier lets through must be walked without reading out of bounds (ASan) and become JSON;
// the only failure after verification is a string that is not UTF-8.
#include <string>

#include "common.h"
#include "decoders/flatbuffer_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto decoder = [] {
    picomq::decoders::FlatbufferOptions o;
    o.schema = std::string(PICOMQ_DECODERS_DATA) + "/inventory.fbs";
    std::string error;
    auto schema = picomq::decoders::compile_flatbuffer(o, error);
    if (!schema) picomq::fuzz::die("compile", error);
    return picomq::decoders::make_flatbuffer_decoder(schema);
  }();
  std::string out, error;
  const auto status = decoder->decode({data, size}, out, error);
  if (status == picomq::decoders::Status::ok) {
    picomq::fuzz::check_json(out);
  } else {
    picomq::fuzz::check_failure(status, error, "flatbuffer: ");
    if (error.find("verification failed") == std::string::npos && error.find("invalid UTF-8") == std::string::npos &&
        error.find("nesting deeper") == std::string::npos)
      picomq::fuzz::die("unexpected failure after verification", error);
  }
  return 0;
}
