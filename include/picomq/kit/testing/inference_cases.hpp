#pragma once
// One batch of JSON objects and the type the lattice (kit/inferred_type.hpp) gives each field.
// Every inference runs it — the Arrow exporter's, Postgres', ClickHouse's on both its planes —
// and maps the answer through its own column types: they agree or a test fails.
//
//   for (const auto& [field, type] : kit::testing::inference_fields()) ...
#include <picomq/kit/inferred_type.hpp>
#include <string>
#include <utility>
#include <vector>

namespace picomq::kit::testing {

// The payloads, in order (the fields appear in this order across them).
inline std::vector<std::string> inference_payloads() {
  return {
      R"({"b":true,"i":1,"f":1.5,"if":1,"s":"x","o":{"a":1},"a":[1],"u":18446744073709551615,)"
      R"("bi":true,"bs":false,"is":1,"so":"x","sn":"123","n":null,"late":null})",
      R"({"b":false,"i":-9223372036854775808,"f":2.25,"if":2.5,"s":"","o":{},"a":[],"u":1,)"
      R"("bi":2,"bs":"t","is":"2","so":[1],"sn":"4.5","n":null})",
      R"({"i":9223372036854775807,"u":null,"late":3})",
  };
}

// Each field's type, in order of first appearance.
inline std::vector<std::pair<std::string, InferredType>> inference_fields() {
  using T = InferredType;
  return {
      {"b", T::Bool},      // booleans
      {"i", T::Int64},     // integers at int64's ends
      {"f", T::Float64},   // floating-point numbers
      {"if", T::Float64},  // an integer next to a floating-point number widens
      {"s", T::String},    // strings (the empty one too)
      {"o", T::Json},      // objects
      {"a", T::Json},      // arrays
      {"u", T::Json},      // an integer beyond int64: never Float64
      {"bi", T::Json},     // bool and integer
      {"bs", T::Json},     // bool and string
      {"is", T::Json},     // integer and string
      {"so", T::Json},     // string and array
      {"sn", T::String},   // strings that look like numbers stay strings
      {"n", T::None},      // null in every record
      {"late", T::Int64},  // null first, a value later
  };
}

}  // namespace picomq::kit::testing
