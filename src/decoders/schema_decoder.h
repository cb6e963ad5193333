#pragma once
// What the schema decoders (proto, avro, flatbuffer) have in common: each turns one payload into
// one compact JSON value, and tells a bad record apart from a failure worth retrying.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace picomq::decoders {

enum class Status {
  ok,          // `out` holds the payload's JSON
  bad_record,  // this payload cannot be decoded; `error` says why (and where)
  retry,       // not the payload's fault (e.g. the schema registry is unreachable): the same
               // payload may decode later; `error` says what failed
};
std::string_view to_string(Status status);  // "ok", "bad record", "retry"

// One instance per thread: decoders keep scratch state and are not thread-safe. What they
// share (compiled schemas, the registry cache) is immutable or synchronised.
class SchemaDecoder {
 public:
  virtual ~SchemaDecoder() = default;
  // Replaces `out` with the JSON of `in`. On failure `out` is unspecified and `error` is set,
  // prefixed with the decoder ("proto: ...", "avro: ...", "flatbuffer: ...").
  virtual Status decode(std::span<const uint8_t> in, std::string& out, std::string& error) = 0;
  // The writer schema (its JSON text) the last payload decode() accepted was read by, or null
  // when the format has no such thing (proto, flatbuffer). The pointer changes only when the
  // schema does; it keeps the text alive for whoever holds it.
  virtual const std::shared_ptr<const std::string>& writer_schema() const {
    static const std::shared_ptr<const std::string> none;
    return none;
  }
};

}  // namespace picomq::decoders
