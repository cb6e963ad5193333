#pragma once
// Payload decoding per the definition's `schema`. Each decoder validates one payload and says
// what the plugin will see; a payload it cannot decode is a bad record, never passed on as raw.
#include <deque>
#include <memory>
#include <span>
#include <string>

#include "config/sink_definition.h"
#include "picomq/sink_abi.h"

namespace picomq::runtime {

class PayloadDecoder {
 public:
  virtual ~PayloadDecoder() = default;
  virtual pmq_payload_format format() const = 0;
  // Validates/decodes `in`. On success `out` views either `in` or storage the decoder placed in
  // `owned`; on failure returns false with the reason in `error`.
  virtual bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>& owned,
                      std::string& error) = 0;
};

// One decoder per thread (decoders keep parser state and are not thread-safe).
std::unique_ptr<PayloadDecoder> make_decoder(config::Schema schema);

}  // namespace picomq::runtime
