// fuzz_decoder_json: arbitrary bytes through the json schema's decoder (simdjson, with the
// nlohmann fallback for integers beyond 64 bits). Differential: it accepts exactly the
// documents nlohmann::json::accept accepts, and passes them on byte for byte.
#include <nlohmann/json.hpp>

#include <cstring>

#include "common.h"
#include "decoders/payload_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto decoder = picomq::decoders::make_decoder(picomq::config::Schema::Json);
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  const auto status = decoder->decode_record({data, size}, out, owned, error);
  // nlohmann treats a NUL byte as the end of the input; JSON never contains a raw one.
  const bool reference = std::memchr(data, 0, size) == nullptr &&
                         nlohmann::json::accept(std::string_view(reinterpret_cast<const char*>(data), size));
  if ((status == picomq::decoders::Status::ok) != reference)
    picomq::fuzz::die(reference ? "json decoder rejects what nlohmann accepts" : "json decoder accepts what nlohmann rejects",
                      std::string(reinterpret_cast<const char*>(data), size) + " / " + error);
  if (status == picomq::decoders::Status::ok && (out.data != data || out.size != size))
    picomq::fuzz::die("json payload not passed on as is", "");
  return 0;
}
