#include "decoders/schema_decoder.h"

namespace picomq::decoders {

std::string_view to_string(Status status) {
  switch (status) {
    case Status::ok: return "ok";
    case Status::bad_record: return "bad record";
    case Status::retry: return "retry";
  }
  return "unknown";
}

}  // namespace picomq::decoders
