#include "runtime/decoder.h"

#include <simdjson.h>

#include <deque>
#include <stdexcept>

namespace picomq::runtime {
namespace {

class RawDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_RAW; }
  bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&, std::string&) override {
    out = {in.data(), in.size()};
    return true;
  }
};

class TextDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_TEXT; }
  bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&, std::string& error) override {
    if (!simdjson::validate_utf8(reinterpret_cast<const char*>(in.data()), in.size())) {
      error = "payload is not valid UTF-8 text";
      return false;
    }
    out = {in.data(), in.size()};
    return true;
  }
};

// Validates a complete JSON document with simdjson's DOM parser; the plugin gets the original
// bytes (no re-serialisation), so a valid payload costs one parse and no copy downstream.
class JsonDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_JSON; }
  bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&, std::string& error) override {
    auto doc = parser_.parse(in.data(), in.size(), /*realloc_if_needed=*/true);
    if (doc.error()) {
      error = std::string("payload is not valid JSON: ") + simdjson::error_message(doc.error());
      return false;
    }
    out = {in.data(), in.size()};
    return true;
  }

 private:
  simdjson::dom::parser parser_;
};

}  // namespace

std::unique_ptr<PayloadDecoder> make_decoder(config::Schema schema) {
  switch (schema) {
    case config::Schema::Json: return std::make_unique<JsonDecoder>();
    case config::Schema::Text: return std::make_unique<TextDecoder>();
    case config::Schema::Raw: return std::make_unique<RawDecoder>();
    case config::Schema::Proto:
    case config::Schema::Flatbuffer:
    case config::Schema::Avro:
      // Rejected at config validation; reaching here is a programming error.
      throw std::logic_error("schema " + std::string(config::to_string(schema)) + " has no decoder in this build");
  }
  throw std::logic_error("unknown schema");
}

}  // namespace picomq::runtime
