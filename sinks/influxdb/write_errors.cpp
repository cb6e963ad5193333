#include "influxdb/write_errors.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>

#include "influxdb/line_protocol.h"

namespace picomq::influxdb {
namespace {

std::string_view trim_newline(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  return line;
}

// Go's %q of a simple name, undone: "a\"b" -> a"b (the names InfluxDB quotes in its messages).
std::optional<std::string> unquote(std::string_view text, size_t& pos) {
  if (pos >= text.size() || text[pos] != '"') return std::nullopt;
  std::string out;
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[++i];
      continue;
    }
    if (text[i] == '"') {
      pos = i + 1;
      return out;
    }
    out += text[i];
  }
  return std::nullopt;
}

std::optional<size_t> dropped(std::string_view text) {
  const size_t at = text.rfind("dropped=");
  if (at == std::string_view::npos) return std::nullopt;
  size_t n = 0;
  const char* begin = text.data() + at + 8;
  if (std::from_chars(begin, text.data() + text.size(), n).ec != std::errc{}) return std::nullopt;
  return n;
}

}  // namespace

std::string error_text(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view v;
  if (!parser.parse(body.data(), body.size()).get(root)) {
    if (!root["error"].get_string().get(v)) return std::string(v);
    if (!root["message"].get_string().get(v)) return std::string(v);
  }
  return std::string(body);
}

std::optional<RefusedLines> refused_lines(std::string_view body, const std::vector<std::string_view>& lines) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  RefusedLines out;
  if (!parser.parse(body.data(), body.size()).get(root)) {
    // 3.x: the refused lines by number.
    simdjson::dom::array data;
    if (!root["data"].get_array().get(data)) {
      for (simdjson::dom::element item : data) {
        uint64_t number = 0;
        std::string_view why;
        if (item["line_number"].get_uint64().get(number) || number == 0 || number > lines.size()) return std::nullopt;
        if (item["error_message"].get_string().get(why)) why = "refused";
        out.lines.emplace_back(number - 1, std::string(why));
      }
      if (out.lines.empty()) return std::nullopt;
      // Up to 100 refused lines are listed: with more, some are not identified.
      if (out.lines.size() >= 100) return std::nullopt;
      std::string_view error;
      out.rest_written =
          !root["error"].get_string().get(error) && error.find("partial write") != std::string_view::npos;
      return out;
    }
  }
  const std::string text = error_text(body);
  const bool partial = text.find("partial write") != std::string::npos;
  std::vector<bool> taken(lines.size(), false);
  auto take = [&](size_t i, std::string why) {
    if (taken[i]) return;
    taken[i] = true;
    out.lines.emplace_back(i, std::move(why));
  };
  // Parse errors name their line: unable to parse '<line>': <why>
  for (size_t at = text.find("unable to parse '"); at != std::string::npos;
       at = text.find("unable to parse '", at + 1)) {
    const size_t from = at + 17;
    bool found = false;
    for (size_t i = 0; i < lines.size() && !found; ++i) {
      const std::string_view line = trim_newline(lines[i]);
      if (text.compare(from, line.size(), line) != 0 || text.compare(from + line.size(), 3, "': ") != 0) continue;
      size_t end = std::min(text.find('\n', from + line.size()), text.find(" dropped=", from + line.size()));
      const std::string why = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      // Every line equal to it is the same point, refused the same way.
      for (size_t j = 0; j < lines.size(); ++j)
        if (trim_newline(lines[j]) == line) take(j, why);
      found = true;
    }
    if (!found) return std::nullopt;  // a line the answer names that is not in the request
  }
  // A field type conflict: every line of that measurement whose field has the conflicting type.
  const std::string_view conflict = "field type conflict: input field ";
  if (size_t at = text.find(conflict); at != std::string::npos) {
    size_t pos = at + conflict.size();
    auto field = unquote(text, pos);
    if (!field || text.compare(pos, 16, " on measurement ") != 0) return std::nullopt;
    pos += 16;
    auto measurement = unquote(text, pos);
    if (!measurement || text.compare(pos, 9, " is type ") != 0) return std::nullopt;
    pos += 9;
    const size_t type_end = text.find(',', pos);
    if (type_end == std::string::npos) return std::nullopt;
    const std::string type = text.substr(pos, type_end - pos);
    std::string m, f;
    append_measurement(m, *measurement);
    append_key(f, *field);
    const size_t reason_end = text.find(" dropped=", at);
    const std::string why = text.substr(at, reason_end == std::string::npos ? std::string::npos : reason_end - at);
    for (size_t i = 0; i < lines.size(); ++i)
      if (line_measurement(lines[i]) == m && line_field_has_type(lines[i], f, type)) take(i, why);
  }
  // A field name InfluxDB refuses ("time"): every line of that measurement with that field.
  const std::string_view invalid = "invalid field name: input field ";
  if (size_t at = text.find(invalid); at != std::string::npos) {
    size_t pos = at + invalid.size();
    auto field = unquote(text, pos);
    if (!field || text.compare(pos, 16, " on measurement ") != 0) return std::nullopt;
    pos += 16;
    auto measurement = unquote(text, pos);
    if (!measurement) return std::nullopt;
    std::string m, f;
    append_measurement(m, *measurement);
    append_key(f, *field);
    const size_t reason_end = text.find(" dropped=", at);
    const std::string why = text.substr(at, reason_end == std::string::npos ? std::string::npos : reason_end - at);
    for (size_t i = 0; i < lines.size(); ++i)
      if (line_measurement(lines[i]) == m && !line_field_type(lines[i], f).empty()) take(i, why);
  }
  if (out.lines.empty()) return std::nullopt;
  if (partial) {
    // 1.x reports dropped=0 for parse errors (the count is only of points the engine dropped);
    // a count that is given must match what was found.
    const auto n = dropped(text);
    const bool only_parse_errors =
        text.find("field type conflict") == std::string::npos && text.find("invalid field name") == std::string::npos;
    if (n && *n != out.lines.size() && !(only_parse_errors && *n == 0)) return std::nullopt;
    // Only one kind of cause named: the rest was written. Other causes in the same answer
    // (a conflict and a beyond-retention drop) are not told apart: resend the rest.
    out.rest_written =
        text.find("beyond retention") == std::string::npos && text.find("max-values-per-tag") == std::string::npos;
  }
  return out;
}

}  // namespace picomq::influxdb
