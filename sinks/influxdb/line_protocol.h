#pragma once
// InfluxDB line protocol (pure, no I/O): one point as one line
//   measurement[,tag_key=tag_value...] field_key=field_value[,...] [timestamp]\n
// with the escaping rules of the InfluxDB line protocol reference (v1.x, v2.x and 3.x agree):
//   measurement             comma and space are escaped with a backslash
//   tag keys, tag values,   comma, equals sign and space are escaped
//   field keys
//   string field values     double quote and backslash are escaped; the value is quoted
// Field values: integers with the `i` suffix (signed 64-bit), unsigned integers with `u`,
// floats without a suffix (shortest text that reads back to the same double), `true` / `false`,
// strings in double quotes. Timestamps are integers in the write's precision (ns, us, ms, s).
//
// What line protocol cannot carry is refused with a reason (the record is then rejected, never
// written wrong): an empty measurement or field key, a measurement starting with '#' (a comment
// line), a newline or carriage return in a measurement, a key or a tag value (only string field
// values may span lines), and a name or tag value ending in a backslash (it would escape the
// separator that follows). A tag with an empty value is left out (InfluxDB has no empty tags).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace picomq::influxdb {

enum class Precision { Ns, Us, Ms, S };

// "ns", "us", "ms", "s": the precision query parameter of the v1 and v2 write APIs.
std::string_view precision_name(Precision p);
// "nanosecond", "microsecond", "millisecond", "second": the v3 write_lp API's precision values.
std::string_view precision_v3_name(Precision p);
int64_t units_per_second(Precision p);

// `t` in `from` units expressed in `to` units: exact when `to` is finer (nullopt on overflow),
// rounded down (towards the past) when coarser.
std::optional<int64_t> convert_time(int64_t t, Precision from, Precision to);
// seconds + nanos since the epoch in `to` units (rounded down); nullopt on overflow.
std::optional<int64_t> time_from_parts(int64_t seconds, uint32_t nanos, Precision to);

// The escaping primitives.
void append_measurement(std::string& out, std::string_view name);
void append_key(std::string& out, std::string_view key_or_tag_value);
void append_string_value(std::string& out, std::string_view value);  // with its quotes
void append_float(std::string& out, double v);

// Why `text` cannot be a measurement, key or tag value (`what` names it in the reason), or nullopt.
std::optional<std::string> check_measurement(std::string_view text);
std::optional<std::string> check_name(std::string_view text, std::string_view what);

struct Unsigned {
  uint64_t v;
};
// A point's text either owned (Point) or borrowed (PointView: what the record mapper builds, its
// names and values pointing into the parsed record, so a point costs no allocation).
template <class Text>
using BasicFieldValue = std::variant<int64_t, Unsigned, double, bool, Text>;
using FieldValue = BasicFieldValue<std::string>;
std::string_view type_name(size_t variant_index);  // "integer", "unsigned", "float", "boolean", "string"
inline std::string_view type_name(const FieldValue& v) { return type_name(v.index()); }

template <class Text>
struct BasicPoint {
  Text measurement;
  std::vector<std::pair<Text, Text>> tags;                     // any order; the first of a key wins
  std::vector<std::pair<Text, BasicFieldValue<Text>>> fields;  // in order; the first of a key wins
  std::optional<int64_t> time;                                 // in the write's precision; none: the server's clock
};
using Point = BasicPoint<std::string>;
using PointView = BasicPoint<std::string_view>;

// Appends the point as one line (with its '\n'), tags sorted by key; or leaves `out` as it was
// and returns why the point cannot be written. (Tags are sorted in place.)
std::optional<std::string> append_line(std::string& out, Point& point);
std::optional<std::string> append_line(std::string& out, PointView& point);

// The measurement of a line as written (escaped), and whether field `key` (escaped form) holds a
// value of `type` ("integer", "float"...) in it: what a field type conflict names.
std::string_view line_measurement(std::string_view line);
bool line_field_has_type(std::string_view line, std::string_view escaped_key, std::string_view type);
// The type of field `key` (escaped form) in a line, or "" when the line has no such field.
std::string_view line_field_type(std::string_view line, std::string_view escaped_key);

}  // namespace picomq::influxdb
