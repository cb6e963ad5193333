#include "influxdb/line_protocol.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace picomq::influxdb {
namespace {

constexpr int64_t kPerSecond[] = {1'000'000'000, 1'000'000, 1'000, 1};

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// A set of ASCII bytes tested with two 64-bit masks: std::string_view::find_first_of calls
// memchr over the set for every byte of the text, the line encoder's largest cost (a profile).
struct AsciiSet {
  uint64_t bits[2] = {0, 0};
  constexpr explicit AsciiSet(std::string_view chars) {
    for (char ch : chars) {
      const auto c = static_cast<unsigned char>(ch);
      bits[c >> 6] |= uint64_t{1} << (c & 63);
    }
  }
  constexpr bool has(unsigned char c) const { return c < 128 && (bits[c >> 6] >> (c & 63) & 1); }
};

constexpr AsciiSet kMeasurementSpecial(", ");
constexpr AsciiSet kKeySpecial(",= ");
constexpr AsciiSet kStringSpecial("\"\\");
constexpr AsciiSet kLineBreaks("\n\r");

size_t first_of(std::string_view text, size_t from, const AsciiSet& set) {
  for (size_t i = from; i < text.size(); ++i)
    if (set.has(static_cast<unsigned char>(text[i]))) return i;
  return std::string_view::npos;
}

// Escapes every byte of `text` found in `special` with a backslash.
void append_escaped(std::string& out, std::string_view text, const AsciiSet& special) {
  size_t from = 0;
  for (size_t i = first_of(text, 0, special); i != std::string_view::npos; i = first_of(text, i + 1, special)) {
    out.append(text.data() + from, i - from);
    out += '\\';
    out += text[i];
    from = i + 1;
  }
  out.append(text.data() + from, text.size() - from);
}

// What check_name refuses, without building its message (the per-point path).
bool carriable(std::string_view text) {
  return first_of(text, 0, kLineBreaks) == std::string_view::npos && (text.empty() || text.back() != '\\');
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Index of the first byte at or after `from` that is `c`, not escaped, and (with `quotes`) not
// inside a double-quoted string; npos when none.
size_t find_unescaped(std::string_view line, size_t from, char c, bool quotes) {
  bool quoted = false;
  for (size_t i = from; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '\\') {
      ++i;
      continue;
    }
    if (quotes && ch == '"') quoted = !quoted;
    else if (!quoted && ch == c) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::Ns: return "ns";
    case Precision::Us: return "us";
    case Precision::Ms: return "ms";
    case Precision::S: return "s";
  }
  return "ns";
}

std::string_view precision_v3_name(Precision p) {
  switch (p) {
    case Precision::Ns: return "nanosecond";
    case Precision::Us: return "microsecond";
    case Precision::Ms: return "millisecond";
    case Precision::S: return "second";
  }
  return "nanosecond";
}

int64_t units_per_second(Precision p) { return kPerSecond[static_cast<int>(p)]; }

std::optional<int64_t> convert_time(int64_t t, Precision from, Precision to) {
  const int64_t f = units_per_second(from), g = units_per_second(to);
  if (f == g) return t;
  if (g > f) {  // finer: multiply
    int64_t out;
    if (__builtin_mul_overflow(t, g / f, &out)) return std::nullopt;
    return out;
  }
  return floor_div(t, f / g);
}

std::optional<int64_t> time_from_parts(int64_t seconds, uint32_t nanos, Precision to) {
  const int64_t per = units_per_second(to);
  int64_t out;
  if (__builtin_mul_overflow(seconds, per, &out)) return std::nullopt;
  const int64_t frac = static_cast<int64_t>(nanos) / (1'000'000'000 / per);
  if (__builtin_add_overflow(out, frac, &out)) return std::nullopt;
  return out;
}

void append_measurement(std::string& out, std::string_view name) { append_escaped(out, name, kMeasurementSpecial); }
void append_key(std::string& out, std::string_view key) { append_escaped(out, key, kKeySpecial); }

void append_string_value(std::string& out, std::string_view value) {
  out += '"';
  append_escaped(out, value, kStringSpecial);
  out += '"';
}

void append_float(std::string& out, double v) {
  char buf[32];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::optional<std::string> check_name(std::string_view text, std::string_view what) {
  if (first_of(text, 0, kLineBreaks) != std::string_view::npos)
    return std::string(what) + " contains a line break, which line protocol cannot carry there";
  if (!text.empty() && text.back() == '\\')
    return std::string(what) + " ends with a backslash, which line protocol cannot carry there";
  return std::nullopt;
}

std::optional<std::string> check_measurement(std::string_view text) {
  if (text.empty()) return std::string("the measurement is empty");
  if (text.front() == '#') return std::string("the measurement starts with '#' (a comment line in line protocol)");
  return check_name(text, "the measurement");
}

std::string_view type_name(size_t variant_index) {
  switch (variant_index) {
    case 0: return "integer";
    case 1: return "unsigned";
    case 2: return "float";
    case 3: return "boolean";
    default: return "string";
  }
}

namespace {

template <class Text>
std::optional<std::string> append_point(std::string& out, BasicPoint<Text>& p) {
  if (auto bad = check_measurement(p.measurement)) return bad;
  // Stable insertion sort: points have a few tags, and std::stable_sort allocates a buffer.
  for (size_t i = 1; i < p.tags.size(); ++i)
    for (size_t j = i; j > 0 && p.tags[j].first < p.tags[j - 1].first; --j) std::swap(p.tags[j], p.tags[j - 1]);
  for (size_t i = 0; i < p.tags.size(); ++i) {
    const std::string_view k = p.tags[i].first, v = p.tags[i].second;
    if (k.empty()) return std::string("a tag key is empty");
    if (!carriable(k)) return check_name(k, "tag key \"" + std::string(k) + "\"");
    if (!carriable(v)) return check_name(v, "the value of tag \"" + std::string(k) + "\"");
  }
  const size_t start = out.size();
  append_measurement(out, p.measurement);
  for (size_t i = 0; i < p.tags.size(); ++i) {
    const std::string_view k = p.tags[i].first, v = p.tags[i].second;
    if (v.empty() || (i > 0 && std::string_view(p.tags[i - 1].first) == k)) continue;  // no empty tags; first of a key
    out += ',';
    append_key(out, k);
    out += '=';
    append_key(out, v);
  }
  size_t written = 0;
  for (size_t i = 0; i < p.fields.size(); ++i) {
    const std::string_view k = p.fields[i].first;
    const auto& v = p.fields[i].second;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = std::string_view(p.fields[j].first) == k;
    if (seen) continue;
    if (k.empty() || !carriable(k)) {
      out.resize(start);
      if (k.empty()) return std::string("a field key is empty");
      return check_name(k, "field key \"" + std::string(k) + "\"");
    }
    out += written++ ? ',' : ' ';
    append_key(out, k);
    out += '=';
    switch (v.index()) {
      case 0:
        append_int(out, std::get<int64_t>(v));
        out += 'i';
        break;
      case 1:
        append_int(out, std::get<Unsigned>(v).v);
        out += 'u';
        break;
      case 2: append_float(out, std::get<double>(v)); break;
      case 3: out += std::get<bool>(v) ? "true" : "false"; break;
      default: append_string_value(out, std::get<4>(v)); break;
    }
  }
  if (!written) {
    out.resize(start);
    return std::string("no field to write (a point needs at least one)");
  }
  if (p.time) {
    out += ' ';
    append_int(out, *p.time);
  }
  out += '\n';
  return std::nullopt;
}

}  // namespace

std::optional<std::string> append_line(std::string& out, Point& p) { return append_point(out, p); }
std::optional<std::string> append_line(std::string& out, PointView& p) { return append_point(out, p); }

std::string_view line_measurement(std::string_view line) {
  size_t end = line.size();
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') {
      ++i;
      continue;
    }
    if (line[i] == ',' || line[i] == ' ') {
      end = i;
      break;
    }
  }
  return line.substr(0, end);
}

bool line_field_has_type(std::string_view line, std::string_view key, std::string_view type) {
  return line_field_type(line, key) == type;
}

std::string_view line_field_type(std::string_view line, std::string_view key) {
  const size_t fields = find_unescaped(line, 0, ' ', false);
  if (fields == std::string_view::npos) return {};
  size_t end = find_unescaped(line, fields + 1, ' ', true);
  if (end == std::string_view::npos) end = line.size();
  while (end > fields && (line[end - 1] == '\n' || line[end - 1] == '\r')) --end;
  std::string_view section = line.substr(fields + 1, end - fields - 1);
  while (!section.empty()) {
    size_t comma = find_unescaped(section, 0, ',', true);
    std::string_view field = section.substr(0, comma);
    section = comma == std::string_view::npos ? std::string_view{} : section.substr(comma + 1);
    const size_t eq = find_unescaped(field, 0, '=', false);
    if (eq == std::string_view::npos || field.substr(0, eq) != key) continue;
    std::string_view v = field.substr(eq + 1);
    if (v.empty()) return {};
    std::string_view t;
    if (v.front() == '"') t = "string";
    else if (v == "t" || v == "T" || v == "true" || v == "True" || v == "TRUE" || v == "f" || v == "F" ||
             v == "false" || v == "False" || v == "FALSE")
      t = "boolean";
    else if (v.back() == 'i') t = "integer";
    else if (v.back() == 'u') t = "unsigned";
    else t = "float";
    return t;
  }
  return {};
}

}  // namespace picomq::influxdb
