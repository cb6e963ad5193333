#include "authoring/json_diff.h"

namespace picomq::authoring {
namespace {

bool numbers_equal(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    // Signed against unsigned: equal only when both fit the same value.
    if (a.is_number_unsigned() != b.is_number_unsigned()) {
      const auto& s = a.is_number_unsigned() ? b : a;
      const auto& u = a.is_number_unsigned() ? a : b;
      return s.get<int64_t>() >= 0 && static_cast<uint64_t>(s.get<int64_t>()) == u.get<uint64_t>();
    }
    return a == b;
  }
  return a.get<double>() == b.get<double>();
}

std::string member_path(const std::string& path, const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  return bare ? path + "." + key : path + "[" + nlohmann::json(key).dump() + "]";
}

}  // namespace

std::string json_brief(const nlohmann::json& value, size_t limit) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > limit) text = text.substr(0, limit) + "…";
  return text;
}

std::vector<std::string> json_diff(const nlohmann::json& expected, const nlohmann::json& got, const std::string& path) {
  std::vector<std::string> out;
  const std::string where = path.empty() ? "the value" : path;
  if (expected.is_number() && got.is_number()) {
    if (!numbers_equal(expected, got))
      out.push_back(where + ": expected " + json_brief(expected) + ", got " + json_brief(got));
    return out;
  }
  if (expected.type() != got.type()) {
    out.push_back(where + ": expected " + json_brief(expected) + ", got " + json_brief(got));
    return out;
  }
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      const auto it = got.find(key);
      if (it == got.end()) out.push_back(member_path(path, key) + ": missing (expected " + json_brief(value) + ")");
      else {
        auto inner = json_diff(value, *it, member_path(path, key));
        out.insert(out.end(), inner.begin(), inner.end());
      }
    }
    for (const auto& [key, value] : got.items())
      if (!expected.contains(key))
        out.push_back(member_path(path, key) + ": not expected (got " + json_brief(value) + ")");
    return out;
  }
  if (expected.is_array()) {
    if (expected.size() != got.size())
      out.push_back(where + ": expected " + std::to_string(expected.size()) + " items, got " +
                    std::to_string(got.size()));
    for (size_t i = 0; i < std::min(expected.size(), got.size()); ++i) {
      auto inner = json_diff(expected[i], got[i], path + "[" + std::to_string(i) + "]");
      out.insert(out.end(), inner.begin(), inner.end());
    }
    return out;
  }
  if (expected != got) out.push_back(where + ": expected " + json_brief(expected) + ", got " + json_brief(got));
  return out;
}

}  // namespace picomq::authoring
