// The runtime side: make_decoder_factory() builds a block's decoders from its TopicsBlock; the
// JSON of schema decoders lands in the batch's `owned` storage; a schema that stopped compiling
// makes every record bad with the reason.
#include <gtest/gtest.h>

#include "decoders/payload_decoder.h"
#include "payloads.h"

namespace picomq::decoders {
namespace {

TEST(DecodersRuntime, FactoryDecodersWriteJsonIntoOwnedStorage) {
  config::TopicsBlock block;
  block.schema = config::Schema::Proto;
  block.proto_files = {decoders::test::data_file("all_types.proto").string()};
  block.proto_include_paths = {PICOMQ_DECODERS_DATA};
  block.proto_message = "picomq.test.Line";
  auto factory = make_decoder_factory(block);
  ASSERT_EQ(factory->error(), "");
  auto a = factory->make(), b = factory->make();
  EXPECT_NE(a.get(), b.get()) << "one decoder per thread";
  EXPECT_EQ(a->format(), PMQ_PAYLOAD_JSON);
  const std::string wire("\x0a\x02s1\x10\x05", 6);
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  ASSERT_EQ(a->decode_record({reinterpret_cast<const uint8_t*>(wire.data()), wire.size()}, out, owned, error),
            DecodeStatus::ok)
      << error;
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(out.data), out.size),
            R"({"sku":"s1","quantity":5,"prices":[]})");
  EXPECT_EQ(reinterpret_cast<const char*>(out.data), owned.back().data());
  const std::string bad("\x0a\x09", 2);
  EXPECT_EQ(b->decode_record({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, out, owned, error),
            DecodeStatus::bad_record);
  EXPECT_FALSE(b->decode({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, out, owned, error));
}

TEST(DecodersRuntime, ASchemaThatNoLongerCompilesMakesEveryRecordBad) {
  config::TopicsBlock block;
  block.schema = config::Schema::Flatbuffer;
  block.flatbuffer_schema = "/nonexistent/x.fbs";
  auto factory = make_decoder_factory(block);
  EXPECT_NE(factory->error().find("no longer compiles"), std::string::npos) << factory->error();
  auto d = factory->make();
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  EXPECT_EQ(d->decode_record({}, out, owned, error), DecodeStatus::bad_record);
  EXPECT_EQ(error, factory->error());
}

TEST(DecodersRuntime, JsonRawAndTextStillPassBytesThrough) {
  config::TopicsBlock block;
  block.schema = config::Schema::Text;
  auto d = make_decoder_factory(block)->make();
  EXPECT_EQ(d->format(), PMQ_PAYLOAD_TEXT);
  const std::string text = "h\xc3\xa9";
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  ASSERT_EQ(d->decode_record({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, out, owned, error),
            DecodeStatus::ok);
  EXPECT_EQ(reinterpret_cast<const char*>(out.data), text.data()) << "no copy";
  EXPECT_TRUE(owned.empty());
  const std::string bad = "\xc3";
  EXPECT_EQ(d->decode_record({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, out, owned, error),
            DecodeStatus::bad_record);
}

}  // namespace
}  // namespace picomq::decoders

namespace picomq::decoders {
namespace {

// Found by fuzz_decoder_json: the fallback for integers beyond 64 bits used nlohmann, which
// stops at a NUL byte, so a big integer followed by NUL and anything was accepted.
TEST(DecodersRuntime, FuzzRegressionJsonWithANulByteAfterABigIntegerIsRejected) {
  auto d = make_decoder(config::Schema::Json);
  std::deque<std::string> owned;
  pmq_bytes out{};
  std::string error;
  const std::string bad("123456789012345678901\0abc", 25);
  EXPECT_EQ(d->decode_record({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, out, owned, error),
            DecodeStatus::bad_record);
  const std::string good("123456789012345678901");
  EXPECT_EQ(d->decode_record({reinterpret_cast<const uint8_t*>(good.data()), good.size()}, out, owned, error),
            DecodeStatus::ok);
}

}  // namespace
}  // namespace picomq::decoders
