// fuzz_decoder_proto: arbitrary bytes as a picomq.test.Order (tests/decoders_data/all_types.proto:
// every scalar, packed/unpacked repeated, maps, oneofs, nesting, recursion, well-known types).
// Differential: our wire reader must accept exactly what libprotobuf's parser accepts (a
// DynamicMessage of the same descriptors), except for what we check beyond parsing: the ranges
// of Timestamp / Duration and the contents of an Any's value (which libprotobuf leaves unparsed).
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/dynamic_message.h>

#include <string>

#include "common.h"
#include "decoders/proto_decoder.h"

namespace {

struct Setup {
  std::unique_ptr<picomq::decoders::SchemaDecoder> ours;
  google::protobuf::compiler::DiskSourceTree tree;
  std::unique_ptr<google::protobuf::compiler::Importer> importer;
  google::protobuf::DynamicMessageFactory factory;
  const google::protobuf::Message* prototype = nullptr;

  Setup() {
    picomq::decoders::ProtoOptions o;
    o.files = {std::string(PICOMQ_DECODERS_DATA) + "/all_types.proto"};
    o.include_paths = {PICOMQ_DECODERS_DATA};
    o.message = "picomq.test.Order";
    std::string error;
    auto schema = picomq::decoders::compile_proto(o, error);
    if (!schema) picomq::fuzz::die("compile", error);
    ours = picomq::decoders::make_proto_decoder(schema);
    tree.MapPath("", PICOMQ_DECODERS_DATA);
    tree.MapPath("", "/usr/include");  // google/protobuf/*.proto
    importer = std::make_unique<google::protobuf::compiler::Importer>(&tree, nullptr);
    if (!importer->Import("all_types.proto")) picomq::fuzz::die("import", "all_types.proto");
    prototype = factory.GetPrototype(importer->pool()->FindMessageTypeByName("picomq.test.Order"));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Setup s;
  std::string out, error;
  const auto status = s.ours->decode({data, size}, out, error);
  std::unique_ptr<google::protobuf::Message> m(s.prototype->New());
  const bool theirs = m->ParseFromArray(data, static_cast<int>(size));
  if (status == picomq::decoders::Status::ok) {
    picomq::fuzz::check_json(out);
    if (!theirs) picomq::fuzz::die("we accept what libprotobuf rejects", out);
  } else {
    picomq::fuzz::check_failure(status, error, "proto: ");
    const bool beyond_parsing = error.find("Timestamp") != std::string::npos ||
                                error.find("Duration") != std::string::npos ||
                                error.find("in the value of an Any") != std::string::npos;
    if (theirs && !beyond_parsing) picomq::fuzz::die("we reject what libprotobuf accepts", error);
  }
  return 0;
}
