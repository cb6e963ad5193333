#pragma once
// schema = "avro": Avro binary payloads -> JSON (type mapping: docs/decoders.md).
//
// The writer schema is parsed by avro-c (its errors are the ones reported) and compiled into a
// small tree the decoder walks: the binary encoding is read directly (zig-zag varints, blocks),
// one pass, writing JSON as it goes. Two framings:
//  - plain: the payload is one Avro binary datum of the configured schema;
//  - registry: the schema registry wire format, magic byte 0 + 4-byte big-endian schema id +
//    the datum; the writer schema is fetched by id from the registry (schema_registry.h).
#include <memory>
#include <string>
#include <string_view>

#include "decoders/schema_decoder.h"

namespace picomq::decoders {

class AvroSchema;  // compiled writer schema; immutable, shared by threads
class SchemaRegistry;

// Parses a writer schema (JSON text). On failure returns null with avro-c's reason in `error`.
std::shared_ptr<const AvroSchema> compile_avro(std::string_view schema_json, std::string& error);

// Plain Avro binary of one schema.
std::unique_ptr<SchemaDecoder> make_avro_decoder(std::shared_ptr<const AvroSchema> schema);
// Schema-registry framing; writer schemas come from `registry` (cached there).
std::unique_ptr<SchemaDecoder> make_avro_registry_decoder(std::shared_ptr<SchemaRegistry> registry);

}  // namespace picomq::decoders
