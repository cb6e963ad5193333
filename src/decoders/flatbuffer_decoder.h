#pragma once
// schema = "flatbuffer": FlatBuffers payloads -> JSON (type mapping: docs/decoders.md).
//
// The schema is a .fbs file (compiled at load time by flatbuffers' own parser, which reports
// "file(line, column): error: ...") or a binary schema (.bfbs, flatc --binary --schema). Every
// payload is first checked by flatbuffers' reflection verifier (offsets, sizes, nesting,
// unions), then walked through the schema's reflection tables, writing JSON in the same pass.
#include <memory>
#include <string>
#include <vector>

#include "decoders/schema_decoder.h"

namespace picomq::decoders {

struct FlatbufferOptions {
  std::string schema;                      // .fbs or .bfbs file
  std::string root_type;                   // e.g. "shop.Order"; empty: the schema's root_type
  std::vector<std::string> include_paths;  // where .fbs includes are looked up
};

class FlatbufferSchema;

std::shared_ptr<const FlatbufferSchema> compile_flatbuffer(const FlatbufferOptions& options, std::string& error);
std::unique_ptr<SchemaDecoder> make_flatbuffer_decoder(std::shared_ptr<const FlatbufferSchema> schema);

}  // namespace picomq::decoders
