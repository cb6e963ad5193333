// An Avro topic written back as Avro without a declared schema (ABI 2.4 writer schemas): the
// runtime's decoder turns each datum into JSON (docs/decoders.md), the S3 sink's encoder writes
// that JSON by the same writer schema — and must give back the producer's bytes. The datums are
// fastavro's (tests/decoders_data/make_payloads.py), over a schema with every Avro type and
// logical type (order.avsc).
#include <gtest/gtest.h>

#include "decoders/avro_decoder.h"
#include "payloads.h"
#include "picomq/kit/testing/fake_host.hpp"
#include "s3/avro.h"

namespace picomq::s3 {
namespace {

std::string hex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

TEST(S3AvroRoundTrip, EveryTypeDecodedByTheRuntimeIsWrittenBackByteForByteByItsWriterSchema) {
  const std::string schema = decoders::test::read_text(decoders::test::generated() / "order.avsc");
  std::string error;
  auto compiled = decoders::compile_avro(schema, error);
  ASSERT_TRUE(compiled) << error;
  auto decoder = decoders::make_avro_decoder(compiled);
  ASSERT_EQ(*decoder->writer_schema(), schema) << "the decoder names the schema it read by, as given";
  AvroEncoder encoder(*decoder->writer_schema(), kit::Compression::None);
  for (const char* name : {"order_full", "order_nulls", "order_multi_string", "order_multi_array"}) {
    SCOPED_TRACE(name);
    const std::string datum = decoders::test::payload("avro", name);
    const auto decoded = decoders::test::run(*decoder, datum);
    ASSERT_EQ(decoded.status, decoders::Status::ok) << decoded.error;
    kit::testing::TestBatch batch("t", 0, {{.offset = 0, .payload = decoded.json, .writer_schema = schema}},
                                  PMQ_PAYLOAD_JSON, "avro");
    std::string out;
    const auto refused = encoder.append(out, batch.raw(), batch.raw().records[0]);
    ASSERT_FALSE(refused) << *refused << "\n" << decoded.json;
    EXPECT_EQ(hex(out), hex(datum)) << decoded.json;
  }
}

}  // namespace
}  // namespace picomq::s3
