#pragma once
// schema = "proto": Protocol Buffers payloads -> JSON (type mapping: docs/decoders.md).
//
// The message type comes from .proto files, compiled at load time with libprotobuf's own parser
// (errors carry protoc's file:line:column), or from a binary FileDescriptorSet (protoc
// --descriptor_set_out --include_imports). The well-known types (google/protobuf/*.proto) are
// built in. Decoding does not go through a libprotobuf Message: it reads the wire format
// directly, guided by tables compiled once from the descriptors, and writes JSON in the same
// pass over each message. It accepts and rejects what libprotobuf's parser does (the fuzz target
// checks this against libprotobuf), except that strings must be valid UTF-8 in proto2 files too.
#include <memory>
#include <string>
#include <vector>

#include "decoders/schema_decoder.h"

namespace picomq::decoders {

struct ProtoOptions {
  std::vector<std::string> files;          // .proto files (paths on disk)
  std::vector<std::string> include_paths;  // where imports are looked up, in order
  std::string descriptor_set;              // instead of files: a binary FileDescriptorSet
  std::string message;                     // fully qualified, e.g. "shop.v1.Order"
  bool int64_as_string = false;            // 64-bit integers as JSON strings (proto3 canonical JSON)
  bool json_names = false;                 // member names: json_name (lowerCamelCase) instead of the .proto names
};

class ProtoSchema;  // compiled descriptors + decode tables; immutable, shared by threads

// Compiles the options. On failure returns null with `error` naming the file and the reason.
std::shared_ptr<const ProtoSchema> compile_proto(const ProtoOptions& options, std::string& error);
std::unique_ptr<SchemaDecoder> make_proto_decoder(std::shared_ptr<const ProtoSchema> schema);

}  // namespace picomq::decoders
