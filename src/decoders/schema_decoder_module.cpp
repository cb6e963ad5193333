// The entry of libpicomq_schema_decoders.so (schema_decoder_module.h); its only exported symbol
// (src/modules/module.map).
#include "decoders/schema_decoder_module.h"

namespace picomq::decoders {
namespace {

std::shared_ptr<SchemaRegistry> create_registry(const std::string& url, std::string& error) {
  return SchemaRegistry::create(url, error);
}

const SchemaDecoderModule kModule{
    {sizeof(SchemaDecoderModule), PICOMQ_MODULE_VERSION},
    compile_proto,
    make_proto_decoder,
    compile_flatbuffer,
    make_flatbuffer_decoder,
    compile_avro,
    make_avro_decoder,
    create_registry,
    make_avro_registry_decoder,
};

}  // namespace
}  // namespace picomq::decoders

extern "C" const picomq::modules::TableHeader* picomq_schema_decoder_module() {
  return &picomq::decoders::kModule.header;
}
