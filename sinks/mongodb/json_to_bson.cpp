#include "mongodb/json_to_bson.h"

#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace picomq::mongodb {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// libbson's reader refuses documents nested deeper than its stack (100); leave those to it.
constexpr int kMaxDepth = 90;

bool append_element(bson_t* into, const char* key, int key_len, element value, int depth);

bool append_members(bson_t* into, simdjson::dom::object object, int depth) {
  for (const auto member : object) {
    if (!is_plain_key(member.key)) return false;
    if (!append_element(into, member.key.data(), static_cast<int>(member.key.size()), member.value, depth))
      return false;
  }
  return true;
}

bool append_element(bson_t* into, const char* key, int key_len, element value, int depth) {
  switch (value.type()) {
    case element_type::OBJECT: {
      if (depth >= kMaxDepth) return false;
      bson_t child;
      if (!bson_append_document_begin(into, key, key_len, &child)) return false;
      simdjson::dom::object object;
      const bool ok = !value.get(object) && append_members(&child, object, depth + 1);
      return bson_append_document_end(into, &child) && ok;
    }
    case element_type::ARRAY: {
      if (depth >= kMaxDepth) return false;
      bson_t child;
      if (!bson_append_array_begin(into, key, key_len, &child)) return false;
      simdjson::dom::array array;
      bool ok = !value.get(array);
      uint32_t i = 0;
      char index[16];
      for (const element item : array) {
        if (!ok) break;
        const char* name = nullptr;
        const size_t name_len = bson_uint32_to_string(i++, &name, index, sizeof index);
        if (!(ok = append_element(&child, name, static_cast<int>(name_len), item, depth + 1))) break;
      }
      return bson_append_array_end(into, &child) && ok;
    }
    case element_type::STRING: {
      std::string_view s;
      if (value.get(s)) return false;
      if (s.find('\0') != std::string_view::npos) return false;
      return bson_append_utf8(into, key, key_len, s.data(), static_cast<int>(s.size()));
    }
    case element_type::INT64: {
      // libbson: an integer is an int32 when it fits, else an int64.
      int64_t n = 0;
      if (value.get(n)) return false;
      if (n >= std::numeric_limits<int32_t>::min() && n <= std::numeric_limits<int32_t>::max())
        return bson_append_int32(into, key, key_len, static_cast<int32_t>(n));
      return bson_append_int64(into, key, key_len, n);
    }
    case element_type::DOUBLE: {
      // simdjson reads "-0" as the double -0.0 where libbson reads the integer 0; any -0.0 to libbson.
      double d = 0;
      if (value.get(d)) return false;
      if (d == 0 && std::signbit(d)) return false;
      return bson_append_double(into, key, key_len, d);
    }
    case element_type::BOOL: {
      bool b = false;
      return !value.get(b) && bson_append_bool(into, key, key_len, b);
    }
    case element_type::NULL_VALUE: return bson_append_null(into, key, key_len);
    case element_type::UINT64: return false;  // beyond int64: libbson's error
  }
  return false;
}

}  // namespace

simdjson::simdjson_result<simdjson::dom::object> parse_object(simdjson::dom::parser& parser, std::string_view json) {
  return parser.parse(json.data(), json.size()).get_object();
}

bool is_plain_key(std::string_view key) {
  return (key.empty() || key.front() != '$') && key.find('\0') == std::string_view::npos;
}

bool append_plain_value(bson_t* into, std::string_view key, element value) {
  return is_plain_key(key) && append_element(into, key.data(), static_cast<int>(key.size()), value, 1);
}

bool append_plain_json_object(std::string_view json, bson_t* into, bool& has_pico_key) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parse_object(parser, json).get(object)) return false;
  has_pico_key = false;
  for (const auto member : object) {
    if (!append_plain_value(into, member.key, member.value)) return false;
    if (member.key.starts_with("pico_")) has_pico_key = true;
  }
  return true;
}

}  // namespace picomq::mongodb
