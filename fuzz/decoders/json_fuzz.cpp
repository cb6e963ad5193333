// fuzz_decoder_json: arbitrary bytes through the json schema's decoder (simdjson, with the
// nlohmann fallback for integers beyond 64 bits). Differential: it accepts exactly the
// documents nlohmann::json::accept accepts, and passes them on byte for byte. And the Arrow
// export's reading of the decoder's parse (read_parsed_object: DOM values, texts from stage 1's
// positions) gives the members the export's own On-Demand reader gives, texts included.
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "arrow/json_payload.h"
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
    picomq::fuzz::die(
        reference ? "json decoder rejects what nlohmann accepts" : "json decoder accepts what nlohmann rejects",
        std::string(reinterpret_cast<const char*>(data), size) + " / " + error);
  if (status == picomq::decoders::Status::ok && (out.data != data || out.size != size))
    picomq::fuzz::die("json payload not passed on as is", "");
  if (status == picomq::decoders::Status::ok && decoder->last_json_parse()) {
    namespace ad = picomq::arrow::detail;
    const std::string_view payload(reinterpret_cast<const char*>(data), size);
    static std::vector<ad::FlatMember> parsed, flat;
    static ad::FlatObjectReader reader;
    if (ad::read_parsed_object(*decoder->last_json_parse(), payload, parsed)) {
      if (!reader.read(payload, flat))
        picomq::fuzz::die("the decoder's parse reads as an object, On-Demand does not", std::string(payload));
      if (flat.size() != parsed.size()) picomq::fuzz::die("member counts differ", std::string(payload));
      for (size_t m = 0; m < flat.size(); ++m) {
        const ad::FlatMember &a = parsed[m], &b = flat[m];
        if (a.key != b.key || a.kind != b.kind ||
            payload.substr(a.raw_begin, a.raw_size) != payload.substr(b.raw_begin, b.raw_size) ||
            (a.kind == ad::JsonKind::String && a.text != b.text) ||
            (a.kind == ad::JsonKind::Int64 && a.integer != b.integer) ||
            (a.kind == ad::JsonKind::Bool && a.boolean != b.boolean))
          picomq::fuzz::die("a member reads differently from the parse and On-Demand",
                            "member " + std::to_string(m) + " of " + std::string(payload));
      }
    }
  }
  return 0;
}
