#include "arrow/json_payload.h"

#include <cstring>

namespace picomq::arrow::detail {
namespace {

JsonKind kind_of(simdjson::dom::element element) {
  switch (element.type()) {
    case simdjson::dom::element_type::ARRAY: return JsonKind::Array;
    case simdjson::dom::element_type::OBJECT: return JsonKind::Object;
    case simdjson::dom::element_type::INT64: return JsonKind::Int64;
    case simdjson::dom::element_type::UINT64: return JsonKind::Uint64;
    case simdjson::dom::element_type::DOUBLE: return JsonKind::Double;
    case simdjson::dom::element_type::STRING: return JsonKind::String;
    case simdjson::dom::element_type::BOOL: return JsonKind::Bool;
    case simdjson::dom::element_type::NULL_VALUE: return JsonKind::Null;
  }
  return JsonKind::Null;
}

// The kind of a value simdjson did not parse, from its first character; the scanner has
// already checked its grammar.
JsonKind kind_from_text(std::string_view raw) {
  switch (raw.empty() ? '\0' : raw.front()) {
    case '{': return JsonKind::Object;
    case '[': return JsonKind::Array;
    default: return JsonKind::BigNumber;
  }
}

std::string not_json(simdjson::error_code error) {
  return std::string("payload is not valid JSON: ") + simdjson::error_message(error);
}

}  // namespace

std::string_view describe(JsonKind kind) {
  switch (kind) {
    case JsonKind::Null: return "null";
    case JsonKind::Bool: return "bool";
    case JsonKind::Int64: return "integer";
    case JsonKind::Uint64: return "integer out of int64 range";
    case JsonKind::Double: return "floating-point number";
    case JsonKind::String: return "string";
    case JsonKind::Object: return "object";
    case JsonKind::Array: return "array";
    case JsonKind::BigNumber: return "number out of range";
  }
  return "value";
}

namespace {}  // namespace

bool FlatObjectReader::read(std::string_view payload, std::vector<FlatMember>& out) {
  namespace od = simdjson::ondemand;
  out.clear();
  // On-Demand reads up to SIMDJSON_PADDING bytes past the end: a padded copy (payloads are small).
  padded_.resize(payload.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(padded_.data(), payload.data(), payload.size());
  std::memset(padded_.data() + payload.size(), ' ', simdjson::SIMDJSON_PADDING);
  const char* base = padded_.data();
  od::document doc;
  if (parser_.iterate(padded_.data(), payload.size(), padded_.size()).get(doc)) return false;
  od::object object;
  if (doc.get_object().get(object)) return false;
  for (auto result : object) {
    od::field field;
    if (std::move(result).get(field)) return false;
    FlatMember m;
    if (field.unescaped_key().get(m.key)) return false;
    od::value value = field.value();
    const std::string_view token = value.raw_json_token();
    m.raw_begin = static_cast<size_t>(token.data() - base);
    m.raw_size = trimmed_size(token);
    od::json_type type;
    if (value.type().get(type)) return false;
    switch (type) {
      case od::json_type::object: {
        od::object inner;
        std::string_view raw;
        if (value.get_object().get(inner) || inner.raw_json().get(raw)) return false;
        m.kind = JsonKind::Object;
        m.raw_size = trimmed_size(raw);
        break;
      }
      case od::json_type::array: {
        od::array inner;
        std::string_view raw;
        if (value.get_array().get(inner) || inner.raw_json().get(raw)) return false;
        m.kind = JsonKind::Array;
        m.raw_size = trimmed_size(raw);
        break;
      }
      case od::json_type::number: {
        od::number number;
        if (value.get_number().get(number)) return false;  // beyond double, or malformed
        switch (number.get_number_type()) {
          case od::number_type::signed_integer:
            m.kind = JsonKind::Int64;
            m.integer = number.get_int64();
            break;
          case od::number_type::floating_point_number:
            m.kind = JsonKind::Double;
            m.floating = number.get_double();
            break;
          default: return false;  // unsigned beyond int64, big integers: the DOM reader's rules
        }
        break;
      }
      case od::json_type::string:
        m.kind = JsonKind::String;
        if (value.get_string().get(m.text)) return false;
        break;
      case od::json_type::boolean:
        m.kind = JsonKind::Bool;
        if (value.get_bool().get(m.boolean)) return false;
        break;
      case od::json_type::null: {
        bool is_null = false;
        if (value.is_null().get(is_null) || !is_null) return false;
        m.kind = JsonKind::Null;
        break;
      }
      default: return false;
    }
    out.push_back(m);
  }
  return true;  // what follows the object was validated with it (the decoder parsed the whole payload)
}

bool read_parsed_object(const simdjson::dom::parser& parser, std::string_view payload, std::vector<FlatMember>& out) {
  out.clear();
  return for_each_parsed_member(parser, payload, [&](const FlatMember& m) {
    out.push_back(m);
    return true;
  });
}

std::string JsonPayloadReader::read(std::string_view payload, bool want_raw, ParsedPayload& out) {
  out.members.clear();
  out.validated = true;
  // Payload bytes carry no padding: simdjson copies them into its own padded buffer.
  auto parsed = parser_.parse(payload.data(), payload.size(), /*realloc_if_needed=*/true);
  if (parsed.error() == simdjson::NUMBER_ERROR) return read_with_big_numbers(payload, out);
  if (parsed.error()) return not_json(parsed.error());
  const simdjson::dom::element root = parsed.value_unsafe();
  out.kind = kind_of(root);
  if (out.kind != JsonKind::Object) return {};

  if (want_raw && !split_valid_object(payload, raw_members_)) return "payload is not valid JSON";
  const simdjson::dom::object object = root.get_object().value_unsafe();  // a named copy outlives the loop
  size_t index = 0;
  for (const simdjson::dom::key_value_pair field : object) {
    JsonValue value{kind_of(field.value), field.value, {}};
    if (want_raw) {
      if (index >= raw_members_.size()) return "payload is not valid JSON";
      value.raw = raw_members_[index].value;
    }
    out.members.push_back({field.key, value});
    ++index;
  }
  if (want_raw && index != raw_members_.size()) return "payload is not valid JSON";
  return {};
}

// simdjson refuses the whole document for one number it cannot represent. The scanner checks
// the grammar and finds the top-level members; each member whose value simdjson cannot take
// (such a number, or a container that may hold one) is replaced by null in a copy, which
// simdjson then parses for the keys and the other values. Replaced members keep their original
// text: containers and such numbers only ever export as JSON text.
std::string JsonPayloadReader::read_with_big_numbers(std::string_view payload, ParsedPayload& out) {
  out.validated = false;
  if (!simdjson::validate_utf8(payload.data(), payload.size())) return not_json(simdjson::UTF8_ERROR);
  const size_t end = scan_value(payload, 0);
  if (end == kScanFailed || payload.find_first_not_of(" \t\r\n", end) != std::string_view::npos) {
    return not_json(simdjson::NUMBER_ERROR);
  }
  const std::string_view trimmed = payload.substr(payload.find_first_not_of(" \t\r\n"));
  out.kind = kind_from_text(trimmed);
  if (out.kind != JsonKind::Object) return {};  // only its text is ever exported
  if (!split_object(payload, raw_members_)) return not_json(simdjson::NUMBER_ERROR);

  patched_.clear();
  patched_.push_back('{');
  replaced_.assign(raw_members_.size(), false);
  for (size_t i = 0; i < raw_members_.size(); ++i) {
    const RawMember& member = raw_members_[i];
    bool replace = member.value.front() == '{' || member.value.front() == '[';
    if (!replace && is_json_number(member.value)) {
      replace = parser_.parse(member.value.data(), member.value.size(), true).error() == simdjson::NUMBER_ERROR;
    }
    replaced_[i] = replace;
    if (i > 0) patched_.push_back(',');
    patched_.append(member.key).push_back(':');
    patched_.append(replace ? std::string_view("null") : member.value);
  }
  patched_.push_back('}');

  auto parsed = parser_.parse(patched_.data(), patched_.size(), /*realloc_if_needed=*/true);
  if (parsed.error()) return not_json(parsed.error());
  const simdjson::dom::object object = parsed.value_unsafe().get_object().value_unsafe();
  size_t index = 0;
  for (const simdjson::dom::key_value_pair field : object) {
    if (index >= raw_members_.size()) return "payload is not valid JSON";
    const std::string_view raw = raw_members_[index].value;
    const JsonKind kind = replaced_[index] ? kind_from_text(raw) : kind_of(field.value);
    out.members.push_back({field.key, JsonValue{kind, field.value, raw}});
    ++index;
  }
  if (index != raw_members_.size()) return "payload is not valid JSON";
  return {};
}

}  // namespace picomq::arrow::detail
