#include "runtime/decoder.h"

#include <nlohmann/json.hpp>
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

// simdjson reads up to SIMDJSON_PADDING bytes past the end of a document (their content does
// not matter). A payload inside librdkafka's fetch buffer usually has them: when the padding
// lies on the same memory page as the payload's last byte, it is mapped and safe to read, and
// the parser can skip copying the payload into a padded buffer. Sanitizer builds always copy,
// since they track allocations, not pages.
bool padding_is_readable(std::span<const uint8_t> in) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)in;
  return false;
#else
  constexpr uintptr_t kPage = 4096;
  if (in.empty()) return false;
  const auto last = reinterpret_cast<uintptr_t>(in.data()) + in.size() - 1;
  return last / kPage == (last + simdjson::SIMDJSON_PADDING) / kPage;
#endif
}

// Validates a complete JSON document with simdjson's DOM parser; the plugin gets the original
// bytes (no re-serialisation), so a valid payload costs one parse and no copy downstream.
class JsonDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_JSON; }
  bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&, std::string& error) override {
    auto doc = parser_.parse(in.data(), in.size(), /*realloc_if_needed=*/!padding_is_readable(in));
    if (doc.error() == simdjson::NUMBER_ERROR) {
      // Valid JSON may hold integers beyond 64 bits, which simdjson refuses to represent; a
      // grammar check that keeps them as doubles decides instead. It still refuses numbers
      // beyond a double's range (1e400), as RFC 8259 allows.
      if (nlohmann::json::accept(std::string_view(reinterpret_cast<const char*>(in.data()), in.size()))) {
        out = {in.data(), in.size()};
        return true;
      }
    }
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
