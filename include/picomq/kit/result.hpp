#pragma once
// A value or an error message: C++20 (gcc 12) has no std::expected. Errors in this library are
// configuration or data problems a sink reports to the user, so a message is all they carry.
#include <optional>
#include <string>
#include <utility>

namespace picomq::kit {

template <class T>
class [[nodiscard]] Result {
 public:
  static Result success(T value) { return Result(std::move(value), {}); }
  static Result failure(std::string message) { return Result(std::nullopt, std::move(message)); }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  // Throws std::bad_optional_access on a failure: reading a value that is not there is a bug.
  const T& value() const& { return value_.value(); }
  T& value() & { return value_.value(); }
  T&& value() && { return std::move(value_).value(); }

  // Empty on success.
  const std::string& error() const { return error_; }
  // nullopt on success, else the message: what an option's check() returns
  // (`.check([](const kit::JsonValue& v) { return parse_columns(v.text).problem(); })`).
  std::optional<std::string> problem() const {
    if (ok()) return std::nullopt;
    return error_;
  }

 private:
  Result(std::optional<T> value, std::string error) : value_(std::move(value)), error_(std::move(error)) {}

  std::optional<T> value_;
  std::string error_;
};

}  // namespace picomq::kit
