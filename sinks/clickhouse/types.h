#pragma once
// ClickHouse column types as the sink writes them: parsed from the type names the server reports
// (DESCRIBE TABLE) or a user declares, printed back for CREATE TABLE. Pure: no server.
//   String, FixedString(N), Int8..Int64, UInt8..UInt64, Float32, Float64, Bool, Date, DateTime,
//   DateTime('tz'), DateTime64(P[, 'tz']), UUID, Nullable(T), Array(T), LowCardinality(T)
// Bool and DateTime64 exist from ClickHouse 21.x / 20.1 on (not in 18.16).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "picomq/kit/result.hpp"

namespace picomq::clickhouse {

enum class Kind {
  String,
  FixedString,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float32,
  Float64,
  Bool,
  Date,
  DateTime,
  DateTime64,
  UUID,
  Nullable,
  Array,
  LowCardinality,
};

struct Type {
  Kind kind = Kind::String;
  uint32_t size = 0;                  // FixedString(N): N; DateTime64(P): P (0-9)
  std::string timezone;               // DateTime('tz'), DateTime64(P, 'tz'): as declared, empty if none
  std::shared_ptr<const Type> inner;  // Nullable, Array, LowCardinality

  // The ClickHouse spelling: "Nullable(Array(Int64))", "DateTime64(3, 'UTC')".
  std::string name() const;
  bool nullable() const { return kind == Kind::Nullable; }
  // LowCardinality(T) is T on the wire (RowBinary); this is T, or the type itself.
  const Type& wire() const { return kind == Kind::LowCardinality ? *inner : *this; }
};

// Parses a type name as the server prints it (whitespace between tokens allowed). Errors name
// what is not supported ("Decimal(18, 4) is not a type the sink writes").
kit::Result<Type> parse_type(std::string_view text);

Type make(Kind kind);
Type nullable(Type inner);
Type array(Type inner);

}  // namespace picomq::clickhouse
