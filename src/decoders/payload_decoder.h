#pragma once
// Payload decoding per the [[topics]] block's `schema`. Each decoder validates one payload and
// says what the plugin will see; a payload it cannot decode is a bad record, never passed on as
// raw. json / text / raw pass the payload's own bytes on; proto / flatbuffer / avro turn it
// into compact JSON (PMQ_PAYLOAD_JSON) stored in `owned` (src/decoders, docs/decoders.md).
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "config/sink_definition.h"
#include "decoders/schema_decoder.h"
#include "picomq/sink_abi.h"

namespace simdjson::dom {
class parser;
}

namespace picomq::decoders {

// What became of one payload.
//  ok          `out` is set.
//  bad_record  this payload can never be decoded (malformed, unknown schema id, ...): the
//              bad-record policy applies; `error` names the problem and, where it can, the byte.
//  retry       not the payload's fault (the schema registry is unreachable or failing): decode
//              the same record again later; `error` says what failed. Only avro with
//              avro_framing = "registry" returns it.
using DecodeStatus = Status;

class PayloadDecoder {
 public:
  virtual ~PayloadDecoder() = default;
  virtual pmq_payload_format format() const = 0;
  // Validates/decodes `in`. On success `out` views either `in` or storage the decoder placed in
  // `owned`; otherwise the reason is in `error`.
  virtual DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>& owned,
                                     std::string& error) = 0;
  // Whether decode_record() names a writer schema for each payload (avro): writer_schema() is
  // then the one of the last payload it accepted (its JSON text; the pointer changes only when
  // the schema does, and keeps the text alive).
  virtual bool has_writer_schemas() const { return false; }
  virtual const std::shared_ptr<const std::string>& writer_schema() const {
    static const std::shared_ptr<const std::string> none;
    return none;
  }
  // The json decoder's parser, holding the payload decode_record() last accepted (its DOM and
  // stage 1's positions, read by the Arrow export instead of a second parse); null for other
  // decoders and for a payload simdjson did not represent (accepted by the grammar check).
  // Valid until the next decode_record().
  virtual const simdjson::dom::parser* last_json_parse() const { return nullptr; }
  // For callers that treat every failure alike: true only when decode_record() says ok.
  bool decode(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>& owned, std::string& error) {
    return decode_record(in, out, owned, error) == DecodeStatus::ok;
  }
};

// What a [[topics]] block's decoders share, compiled once when the block starts: descriptors,
// the flatbuffers reflection schema, the Avro writer schema, or the schema registry client and
// its cache. Thread-safe. make() gives one decoder per thread (decoders keep parser state).
// If the schema no longer compiles (its file changed since the definition was validated),
// every decoder it makes reports each record as bad, with the reason; error() says it too.
class DecoderFactory {
 public:
  virtual ~DecoderFactory() = default;
  virtual std::unique_ptr<PayloadDecoder> make() const = 0;
  virtual const std::string& error() const = 0;  // empty when the schema compiled
};

std::shared_ptr<const DecoderFactory> make_decoder_factory(const config::PayloadSchema& block);

// The block's schema compiled to validate it, as a definition loads (config::SchemaCompiler: pass
// it to config::load_sink_directory / parse_sink_definition): the problem at its key, or nothing.
std::optional<config::SchemaProblem> compile_block_schema(const config::PayloadSchema& block);

// json, raw and text need no compiled state (throws std::logic_error for the other schemas).
std::unique_ptr<PayloadDecoder> make_decoder(config::Schema schema);

}  // namespace picomq::decoders
