#include "picomq/kit/inferred_type.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kit = picomq::kit;
using kit::InferredType;
using kit::JsonValueKind;

namespace {

const std::vector<InferredType> kTypes = {InferredType::None,    InferredType::Bool,   InferredType::Int64,
                                          InferredType::Float64, InferredType::String, InferredType::Json};

// The type a field's values make, in the order given.
InferredType joined(std::initializer_list<JsonValueKind> values) {
  InferredType type = InferredType::None;
  for (JsonValueKind v : values) type = kit::join(type, v);
  return type;
}

}  // namespace

TEST(InferredType, IsALattice) {
  for (InferredType a : kTypes) {
    EXPECT_EQ(kit::join(a, a), a) << kit::describe(a);
    EXPECT_EQ(kit::join(a, InferredType::None), a) << "none is below every type: " << kit::describe(a);
    EXPECT_EQ(kit::join(a, InferredType::Json), InferredType::Json) << "json is above every type: " << kit::describe(a);
    for (InferredType b : kTypes) {
      EXPECT_EQ(kit::join(a, b), kit::join(b, a)) << "the order of the values does not matter";
      for (InferredType c : kTypes) EXPECT_EQ(kit::join(kit::join(a, b), c), kit::join(a, kit::join(b, c)));
    }
  }
}

TEST(InferredType, OneKindKeepsItsTypeAndOnlyIntegersWidenToFloats) {
  EXPECT_EQ(joined({JsonValueKind::Bool, JsonValueKind::Null, JsonValueKind::Bool}), InferredType::Bool);
  EXPECT_EQ(joined({JsonValueKind::Integer, JsonValueKind::Integer}), InferredType::Int64);
  EXPECT_EQ(joined({JsonValueKind::Integer, JsonValueKind::Float}), InferredType::Float64);
  EXPECT_EQ(joined({JsonValueKind::Float, JsonValueKind::Integer}), InferredType::Float64);
  EXPECT_EQ(joined({JsonValueKind::String}), InferredType::String);
  EXPECT_EQ(joined({JsonValueKind::Null, JsonValueKind::Null}), InferredType::None);
  EXPECT_EQ(joined({}), InferredType::None);
}

TEST(InferredType, OutOfRangeNumbersAreJsonNeverFloat) {
  EXPECT_EQ(joined({JsonValueKind::OutOfRange}), InferredType::Json);
  EXPECT_EQ(joined({JsonValueKind::Integer, JsonValueKind::OutOfRange}), InferredType::Json);
  EXPECT_EQ(joined({JsonValueKind::Float, JsonValueKind::OutOfRange}), InferredType::Json);
  EXPECT_EQ(kit::json_value_kind(simdjson::dom::element_type::UINT64), JsonValueKind::OutOfRange)
      << "simdjson's UINT64 is an integer above INT64_MAX";
}

TEST(InferredType, ConflictingKindsAndContainersAreJson) {
  EXPECT_EQ(joined({JsonValueKind::Bool, JsonValueKind::Integer}), InferredType::Json);
  EXPECT_EQ(joined({JsonValueKind::Integer, JsonValueKind::String}), InferredType::Json);
  EXPECT_EQ(joined({JsonValueKind::String, JsonValueKind::Container}), InferredType::Json);
  EXPECT_EQ(joined({JsonValueKind::Container}), InferredType::Json);
}
