#pragma once
// The one answer to "which column type do these JSON values make?", for every plane and sink that
// infers columns from JSON objects: the Arrow exporter (arrow_export.hpp, the Arrow plane), Postgres
// (row_encoder.cpp) and ClickHouse (schema.cpp, and its Arrow plane through the exporter). Each
// maps the answer onto its own types; the table is docs/arrow.md, "Inference".
//
// Over the non-null values of one field, types join on one lattice: None is below every type,
// Int64 below Float64, every type below Json. So integers widen to Float64 next to floating-point
// numbers (exact up to 2^53); an integer beyond int64 is Json, never Float64 (its digits are kept
// as text, not rounded); any other two kinds meet at Json (each value's JSON text).
#include <simdjson.h>

#include <string_view>

namespace picomq::kit {

// The kind of one JSON value, as inference sees it.
enum class JsonValueKind {
  Null,
  Bool,
  Integer,  // fits int64
  Float,    // a floating-point number a double holds
  String,
  Container,   // object or array
  OutOfRange,  // an integer beyond int64, a number beyond a double's range
};

enum class InferredType { None, Bool, Int64, Float64, String, Json };

constexpr InferredType inferred_type_of(JsonValueKind kind) {
  switch (kind) {
    case JsonValueKind::Null: return InferredType::None;
    case JsonValueKind::Bool: return InferredType::Bool;
    case JsonValueKind::Integer: return InferredType::Int64;
    case JsonValueKind::Float: return InferredType::Float64;
    case JsonValueKind::String: return InferredType::String;
    case JsonValueKind::Container:
    case JsonValueKind::OutOfRange: return InferredType::Json;
  }
  return InferredType::Json;
}

// The least type that holds values of both.
constexpr InferredType join(InferredType a, InferredType b) {
  if (a == b || b == InferredType::None) return a;
  if (a == InferredType::None) return b;
  const auto numeric = [](InferredType t) { return t == InferredType::Int64 || t == InferredType::Float64; };
  if (numeric(a) && numeric(b)) return InferredType::Float64;
  return InferredType::Json;
}

constexpr InferredType join(InferredType a, JsonValueKind value) { return join(a, inferred_type_of(value)); }

// simdjson's DOM types: UINT64 is its type for an integer above INT64_MAX. (A number beyond 64
// bits or a double's range fails the DOM parse; readers that go on, like the Arrow exporter's,
// give OutOfRange for it.)
constexpr JsonValueKind json_value_kind(simdjson::dom::element_type type) {
  using simdjson::dom::element_type;
  switch (type) {
    case element_type::NULL_VALUE: return JsonValueKind::Null;
    case element_type::BOOL: return JsonValueKind::Bool;
    case element_type::INT64: return JsonValueKind::Integer;
    case element_type::DOUBLE: return JsonValueKind::Float;
    case element_type::STRING: return JsonValueKind::String;
    case element_type::UINT64: return JsonValueKind::OutOfRange;
    case element_type::ARRAY:
    case element_type::OBJECT: return JsonValueKind::Container;
  }
  return JsonValueKind::OutOfRange;
}

constexpr std::string_view describe(InferredType type) {
  switch (type) {
    case InferredType::None: return "none";
    case InferredType::Bool: return "bool";
    case InferredType::Int64: return "int64";
    case InferredType::Float64: return "float64";
    case InferredType::String: return "string";
    case InferredType::Json: return "json";
  }
  return "json";
}

}  // namespace picomq::kit
