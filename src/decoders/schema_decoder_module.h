#pragma once
// The schema decoders (proto, flatbuffer, avro and the schema registry client) as the runtime
// reaches them: through a module, libpicomq_schema_decoders.so, loaded the first time a definition
// names one of those schemas. Linking protobuf, avro-c and Debian's libcurl (with its thirty
// libraries) into the executable cost every runtime ~7 MB of memory before its first record;
// most definitions read JSON. Tests of the decoders themselves link picomq_schema_decoders.
#include <memory>
#include <string>

#include "decoders/avro_decoder.h"
#include "decoders/flatbuffer_decoder.h"
#include "decoders/proto_decoder.h"
#include "decoders/schema_registry.h"
#include "modules/loader.h"

namespace picomq::decoders {

// The module's entry table: the functions of the headers above.
struct SchemaDecoderModule {
  modules::TableHeader header;
  std::shared_ptr<const ProtoSchema> (*compile_proto)(const ProtoOptions& options, std::string& error);
  std::unique_ptr<SchemaDecoder> (*make_proto_decoder)(std::shared_ptr<const ProtoSchema> schema);
  std::shared_ptr<const FlatbufferSchema> (*compile_flatbuffer)(const FlatbufferOptions& options, std::string& error);
  std::unique_ptr<SchemaDecoder> (*make_flatbuffer_decoder)(std::shared_ptr<const FlatbufferSchema> schema);
  std::shared_ptr<const AvroSchema> (*compile_avro)(std::string_view schema_json, std::string& error);
  std::unique_ptr<SchemaDecoder> (*make_avro_decoder)(std::shared_ptr<const AvroSchema> schema);
  std::shared_ptr<SchemaRegistry> (*create_registry)(const std::string& url, std::string& error);
  std::unique_ptr<SchemaDecoder> (*make_avro_registry_decoder)(std::shared_ptr<SchemaRegistry> registry);
};

inline constexpr const char* kSchemaDecoderModule = "picomq_schema_decoders";
inline constexpr const char* kSchemaDecoderModuleEntry = "picomq_schema_decoder_module";

// The loaded module, or null with `error` (which names the file and why).
inline const SchemaDecoderModule* schema_decoder_module(std::string& error) {
  return modules::load<SchemaDecoderModule>(kSchemaDecoderModule, kSchemaDecoderModuleEntry, error);
}

}  // namespace picomq::decoders
