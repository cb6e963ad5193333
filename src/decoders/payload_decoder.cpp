#include "decoders/payload_decoder.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "config/file_text.h"
#include "decoders/schema_decoder_module.h"

namespace picomq::decoders {
namespace {

class RawDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_RAW; }
  DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&,
                             std::string&) override {
    out = {in.data(), in.size()};
    return DecodeStatus::ok;
  }
};

class TextDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_TEXT; }
  DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&,
                             std::string& error) override {
    if (!simdjson::validate_utf8(reinterpret_cast<const char*>(in.data()), in.size())) {
      error = "payload is not valid UTF-8 text";
      return DecodeStatus::bad_record;
    }
    out = {in.data(), in.size()};
    return DecodeStatus::ok;
  }
};

// simdjson reads up to SIMDJSON_PADDING bytes past the end of a document (their content does
// not matter). A payload inside librdkafka's fetch buffer usually has them: when the padding
// lies on the same memory page as the payload's last byte, it is mapped and safe to read, and
// the parser can skip copying the payload into a padded buffer. Sanitizer builds always copy,
// since they track allocations, not pages.
bool padding_is_readable(std::span<const uint8_t> in) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)in;
  return false;
#else
  constexpr uintptr_t kPage = 4096;
  if (in.empty()) return false;
  const auto last = reinterpret_cast<uintptr_t>(in.data()) + in.size() - 1;
  return last / kPage == (last + simdjson::SIMDJSON_PADDING) / kPage;
#endif
}

// The deepest nesting of arrays and objects in a valid JSON text (strings skipped), for the one
// path that does not go through simdjson's own limit.
size_t nesting_depth(std::string_view json) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Validates a complete JSON document with simdjson's DOM parser; the plugin gets the original
// bytes (no re-serialisation), so a valid payload costs one parse and no copy downstream.
class JsonDecoder final : public PayloadDecoder {
 public:
  pmq_payload_format format() const override { return PMQ_PAYLOAD_JSON; }
  DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&,
                             std::string& error) override {
    parsed_ = false;
    auto doc = parser_.parse(in.data(), in.size(), /*realloc_if_needed=*/!padding_is_readable(in));
    if (doc.error() == simdjson::NUMBER_ERROR) {
      // Valid JSON may hold integers beyond 64 bits, which simdjson refuses to represent; a
      // grammar check that keeps them as doubles decides instead. It still refuses numbers
      // beyond a double's range (1e400), as RFC 8259 allows.
      // nlohmann stops at a NUL byte as if the input ended there; JSON never has a raw NUL
      // (found by fuzz_decoder_json: "123456789012345678901\0garbage" was accepted).
      if (std::memchr(in.data(), 0, in.size()) == nullptr) {
        const std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
        try {
          // (Held in a variable: GCC's warn_unused_result ignores a cast to void.)
          [[maybe_unused]] const auto grammatical = nlohmann::json::parse(text);
          // The same depth limit as simdjson's (its document counts as a level).
          if (nesting_depth(text) >= simdjson::DEFAULT_MAX_DEPTH) {
            error = std::string("payload is not valid JSON: ") + simdjson::error_message(simdjson::DEPTH_ERROR);
            return DecodeStatus::bad_record;
          }
          out = {in.data(), in.size()};
          return DecodeStatus::ok;
        } catch (const nlohmann::json::out_of_range& e) {
          // Grammatical JSON with a number no double holds: say that, not "not valid JSON".
          const std::string_view what = e.what();
          const auto at = what.find("] ");
          error =
              "payload holds a number out of range (" + std::string(at == what.npos ? what : what.substr(at + 2)) + ")";
          return DecodeStatus::bad_record;
        } catch (const nlohmann::json::exception&) {}
      }
    }
    if (doc.error()) {
      error = std::string("payload is not valid JSON: ") + simdjson::error_message(doc.error());
      return DecodeStatus::bad_record;
    }
    out = {in.data(), in.size()};
    parsed_ = true;
    return DecodeStatus::ok;
  }
  const simdjson::dom::parser* last_json_parse() const override { return parsed_ ? &parser_ : nullptr; }

 private:
  simdjson::dom::parser parser_;
  bool parsed_ = false;  // parser_ holds the last accepted payload
};

// proto / flatbuffer / avro: the payload becomes JSON, stored in the batch's `owned` storage.
class SchemaPayloadDecoder final : public PayloadDecoder {
 public:
  SchemaPayloadDecoder(std::unique_ptr<SchemaDecoder> inner, bool has_writer_schemas)
      : inner_(std::move(inner)), has_writer_schemas_(has_writer_schemas) {}
  pmq_payload_format format() const override { return PMQ_PAYLOAD_JSON; }
  bool has_writer_schemas() const override { return has_writer_schemas_; }
  const std::shared_ptr<const std::string>& writer_schema() const override { return inner_->writer_schema(); }
  DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>& owned,
                             std::string& error) override {
    const DecodeStatus status = inner_->decode(in, json_, error);
    if (status != DecodeStatus::ok) return status;
    const std::string& stored = owned.emplace_back(json_);  // one exact-size copy; json_ keeps its capacity
    out = {reinterpret_cast<const uint8_t*>(stored.data()), stored.size()};
    return DecodeStatus::ok;
  }

 private:
  std::unique_ptr<SchemaDecoder> inner_;
  bool has_writer_schemas_;
  std::string json_;
};

// Every record is bad, with the reason the schema did not compile.
class FailingDecoder final : public PayloadDecoder {
 public:
  explicit FailingDecoder(std::string error) : error_(std::move(error)) {}
  pmq_payload_format format() const override { return PMQ_PAYLOAD_JSON; }
  DecodeStatus decode_record(std::span<const uint8_t>, pmq_bytes&, std::deque<std::string>&,
                             std::string& error) override {
    error = error_;
    return DecodeStatus::bad_record;
  }

 private:
  std::string error_;
};

// Compiles a block's schema through the module. A problem names the schema key it is about, in
// the words a definition's error at that key uses (config::SchemaCompiler).
class Factory final : public DecoderFactory {
 public:
  explicit Factory(const config::PayloadSchema& block) : schema_(block.schema) {
    if (schema_ == config::Schema::Json || schema_ == config::Schema::Raw || schema_ == config::Schema::Text) return;
    std::string error;
    module_ = schema_decoder_module(error);
    if (!module_) problem_ = config::SchemaProblem{"schema", error};
    else compile(block);
    if (problem_)
      error_ =
          "schema = \"" + std::string(config::to_string(block.schema)) + "\" no longer compiles: " + problem_->message;
  }

  const std::optional<config::SchemaProblem>& problem() const { return problem_; }

  std::unique_ptr<PayloadDecoder> make() const override {
    if (!error_.empty()) return std::make_unique<FailingDecoder>(error_);
    switch (schema_) {
      case config::Schema::Json:
      case config::Schema::Raw:
      case config::Schema::Text: return make_decoder(schema_);
      case config::Schema::Proto:
        return std::make_unique<SchemaPayloadDecoder>(module_->make_proto_decoder(proto_), false);
      case config::Schema::Flatbuffer:
        return std::make_unique<SchemaPayloadDecoder>(module_->make_flatbuffer_decoder(flatbuffer_), false);
      case config::Schema::Avro:
        return std::make_unique<SchemaPayloadDecoder>(
            registry_ ? module_->make_avro_registry_decoder(registry_) : module_->make_avro_decoder(avro_), true);
    }
    throw std::logic_error("unknown schema");
  }
  const std::string& error() const override { return error_; }

 private:
  void fail(std::string key, std::string message) {
    problem_ = config::SchemaProblem{std::move(key), std::move(message)};
  }

  void compile(const config::PayloadSchema& block) {
    std::string error;
    switch (block.schema) {
      case config::Schema::Json:
      case config::Schema::Raw:
      case config::Schema::Text: return;
      case config::Schema::Proto: {
        decoders::ProtoOptions o;
        o.files = block.proto_files;
        o.include_paths = block.proto_include_paths;
        o.descriptor_set = block.proto_descriptor_set.value_or("");
        o.message = block.proto_message;
        o.int64_as_string = block.proto_int64_as_string;
        o.json_names = block.proto_json_names;
        proto_ = module_->compile_proto(o, error);
        if (!proto_)
          fail(error.rfind("message type", 0) == 0 ? "proto_message"
               : block.proto_descriptor_set        ? "proto_descriptor_set"
                                                   : "proto_files",
               error);
        return;
      }
      case config::Schema::Flatbuffer: {
        decoders::FlatbufferOptions o;
        o.schema = block.flatbuffer_schema;
        o.root_type = block.flatbuffer_root_type;
        o.include_paths = block.flatbuffer_include_paths;
        flatbuffer_ = module_->compile_flatbuffer(o, error);
        if (!flatbuffer_)
          fail(error.rfind("root type", 0) == 0 && !block.flatbuffer_root_type.empty() ? "flatbuffer_root_type"
                                                                                       : "flatbuffer_schema",
               error);
        return;
      }
      case config::Schema::Avro:
        if (block.avro_framing == config::PayloadSchema::AvroFraming::Registry) {
          registry_ = module_->create_registry(block.avro_registry_url.value_or(""), error);
          if (!registry_) fail("avro_registry_url", error);
        } else if (block.avro_schema_json) {
          avro_ = module_->compile_avro(*block.avro_schema_json, error);
          if (!avro_) fail("avro_schema_json", "invalid Avro schema: " + error);
        } else {
          const std::string path = block.avro_schema_path.value_or("");
          auto text = config::detail::read_file_text(path, &error);
          if (!text) fail("avro_schema_path", "'" + path + "': " + error);
          else if (avro_ = module_->compile_avro(*text, error); !avro_)
            fail("avro_schema_path", "'" + path + "': invalid Avro schema: " + error);
        }
        return;
    }
  }

  config::Schema schema_;
  std::optional<config::SchemaProblem> problem_;
  std::string error_;
  const SchemaDecoderModule* module_ = nullptr;
  std::shared_ptr<const decoders::ProtoSchema> proto_;
  std::shared_ptr<const decoders::FlatbufferSchema> flatbuffer_;
  std::shared_ptr<const decoders::AvroSchema> avro_;
  std::shared_ptr<decoders::SchemaRegistry> registry_;
};

}  // namespace

std::unique_ptr<PayloadDecoder> make_decoder(config::Schema schema) {
  switch (schema) {
    case config::Schema::Json: return std::make_unique<JsonDecoder>();
    case config::Schema::Text: return std::make_unique<TextDecoder>();
    case config::Schema::Raw: return std::make_unique<RawDecoder>();
    case config::Schema::Proto:
    case config::Schema::Flatbuffer:
    case config::Schema::Avro:
      // These need a compiled schema: make_decoder_factory(block).
      throw std::logic_error("schema " + std::string(config::to_string(schema)) + " needs make_decoder_factory()");
  }
  throw std::logic_error("unknown schema");
}

std::shared_ptr<const DecoderFactory> make_decoder_factory(const config::PayloadSchema& block) {
  return std::make_shared<Factory>(block);
}

std::optional<config::SchemaProblem> compile_block_schema(const config::PayloadSchema& block) {
  return Factory(block).problem();
}

}  // namespace picomq::decoders
