#include "clickhouse/types.h"

#include <cctype>
#include <charconv>
#include <utility>

namespace picomq::clickhouse {
namespace {

struct Simple {
  std::string_view name;
  Kind kind;
};
constexpr Simple kSimple[] = {
    {"String", Kind::String}, {"Int8", Kind::Int8},         {"Int16", Kind::Int16},     {"Int32", Kind::Int32},
    {"Int64", Kind::Int64},   {"UInt8", Kind::UInt8},       {"UInt16", Kind::UInt16},   {"UInt32", Kind::UInt32},
    {"UInt64", Kind::UInt64}, {"Float32", Kind::Float32},   {"Float64", Kind::Float64}, {"Bool", Kind::Bool},
    {"Date", Kind::Date},     {"DateTime", Kind::DateTime}, {"UUID", Kind::UUID},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "Name(args)" -> name, args; no parentheses -> name, "" (has_args false).
bool split_call(std::string_view text, std::string_view& name, std::string_view& args) {
  const size_t open = text.find('(');
  if (open == std::string_view::npos) {
    name = trim(text);
    args = {};
    return false;
  }
  name = trim(text.substr(0, open));
  args = text.substr(open + 1);
  args = trim(args);
  if (args.empty() || args.back() != ')') return false;
  args.remove_suffix(1);
  return true;
}

// A quoted time zone: 'Europe/Berlin' -> Europe/Berlin.
bool unquote(std::string_view s, std::string& out) {
  s = trim(s);
  if (s.size() < 2 || s.front() != '\'' || s.back() != '\'') return false;
  out.assign(s.substr(1, s.size() - 2));
  return out.find('\'') == std::string::npos;
}

bool parse_uint(std::string_view s, uint32_t& out) {
  s = trim(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Type make(Kind kind) {
  Type t;
  t.kind = kind;
  return t;
}
Type nullable(Type inner) {
  Type t;
  t.kind = Kind::Nullable;
  t.inner = std::make_shared<const Type>(std::move(inner));
  return t;
}
Type array(Type inner) {
  Type t;
  t.kind = Kind::Array;
  t.inner = std::make_shared<const Type>(std::move(inner));
  return t;
}

std::string Type::name() const {
  switch (kind) {
    case Kind::FixedString: return "FixedString(" + std::to_string(size) + ")";
    case Kind::DateTime: return timezone.empty() ? "DateTime" : "DateTime('" + timezone + "')";
    case Kind::DateTime64:
      return "DateTime64(" + std::to_string(size) + (timezone.empty() ? "" : ", '" + timezone + "'") + ")";
    case Kind::Nullable: return "Nullable(" + inner->name() + ")";
    case Kind::Array: return "Array(" + inner->name() + ")";
    case Kind::LowCardinality: return "LowCardinality(" + inner->name() + ")";
    default:
      for (const auto& s : kSimple)
        if (s.kind == kind) return std::string(s.name);
  }
  return "?";
}

kit::Result<Type> parse_type(std::string_view text) {
  using R = kit::Result<Type>;
  text = trim(text);
  std::string_view name, args;
  const bool call = split_call(text, name, args);
  auto unsupported = [&] {
    return R::failure("'" + std::string(text) +
                      "' is not a type the sink writes (String, FixedString(N), Int8-Int64, UInt8-UInt64, Float32, "
                      "Float64, Bool, Date, DateTime, DateTime64(P), UUID, Nullable(T), Array(T), LowCardinality(T))");
  };
  if (!call) {
    if (text.find_first_of("()") != std::string_view::npos) return unsupported();
    for (const auto& s : kSimple)
      if (s.name == name) return R::success(make(s.kind));
    return unsupported();
  }
  if (name == "Nullable" || name == "Array" || name == "LowCardinality") {
    auto inner = parse_type(args);
    if (!inner) return inner;
    if (name == "Nullable") {
      const Kind k = inner.value().kind;
      if (k == Kind::Nullable || k == Kind::Array || k == Kind::LowCardinality)
        return R::failure("'" + std::string(text) + "': Nullable cannot hold " + inner.value().name());
      return R::success(nullable(std::move(inner).value()));
    }
    if (name == "Array") return R::success(array(std::move(inner).value()));
    const Type& in = inner.value().kind == Kind::Nullable ? *inner.value().inner : inner.value();
    if (in.kind != Kind::String && in.kind != Kind::FixedString && in.kind != Kind::Date && in.kind != Kind::DateTime &&
        !(in.kind >= Kind::Int8 && in.kind <= Kind::Float64))
      return R::failure("'" + std::string(text) + "': LowCardinality cannot hold " + in.name());
    Type t;
    t.kind = Kind::LowCardinality;
    t.inner = std::make_shared<const Type>(std::move(inner).value());
    return R::success(std::move(t));
  }
  if (name == "FixedString") {
    Type t = make(Kind::FixedString);
    if (!parse_uint(args, t.size) || t.size == 0)
      return R::failure("'" + std::string(text) + "': FixedString needs a size N > 0");
    return R::success(std::move(t));
  }
  if (name == "DateTime") {
    Type t = make(Kind::DateTime);
    if (!unquote(args, t.timezone)) return R::failure("'" + std::string(text) + "': DateTime takes a quoted time zone");
    return R::success(std::move(t));
  }
  if (name == "DateTime64") {
    Type t = make(Kind::DateTime64);
    const size_t comma = args.find(',');
    if (!parse_uint(args.substr(0, comma), t.size) || t.size > 9)
      return R::failure("'" + std::string(text) + "': DateTime64 needs a precision from 0 to 9");
    if (comma != std::string_view::npos && !unquote(args.substr(comma + 1), t.timezone))
      return R::failure("'" + std::string(text) + "': DateTime64's time zone must be quoted");
    return R::success(std::move(t));
  }
  return unsupported();
}

}  // namespace picomq::clickhouse
