#pragma once
// How the operations surfaces and `picomq-connect test` show a record's parts as JSON: bytes as
// text when they are UTF-8, else {"base64": "..."}, absent bytes as null; a change's operation
// by name. One place, so the tap, the dead-letter listing and the fixtures' reports agree.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "picomq/kit/encoding.hpp"
#include "picomq/sink_abi.h"

namespace picomq::runtime {

inline nlohmann::ordered_json bytes_json(std::optional<std::string_view> bytes) {
  if (!bytes) return nullptr;
  if (kit::is_valid_utf8(*bytes)) return std::string(*bytes);
  return nlohmann::ordered_json{{"base64", kit::base64_encode(*bytes)}};
}
inline nlohmann::ordered_json bytes_json(pmq_bytes b) {
  return bytes_json(b.data ? std::optional<std::string_view>({reinterpret_cast<const char*>(b.data), b.size})
                           : std::nullopt);
}
inline nlohmann::ordered_json bytes_json(const std::optional<std::string>& b) {
  return bytes_json(b ? std::optional<std::string_view>(*b) : std::nullopt);
}

// "append" | "upsert" | "delete" | "truncate" | "patch" (ABI 2.8 pmq_change_op).
inline const char* op_name(int32_t op) {
  switch (op) {
    case PMQ_OP_UPSERT: return "upsert";
    case PMQ_OP_DELETE: return "delete";
    case PMQ_OP_TRUNCATE: return "truncate";
    case PMQ_OP_PATCH: return "patch";
    default: return "append";
  }
}

}  // namespace picomq::runtime
