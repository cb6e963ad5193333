// The transform chain of a sink definition: the [[transforms]] array of tables, as plain data.
// Parsed and validated here, with the rest of the definition (same error format, every problem
// in one pass); src/transform compiles these specs into the chain the runtime applies to each
// record. The syntax is documented in docs/transforms.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace picomq::config {

struct TopicsBlock;
namespace detail {
class TableReader;
}

// A field path as written ("ship_to.city") and its segments ({"ship_to", "city"}).
// Syntax: segments separated by '.'; "\." is a literal dot and "\\" a literal backslash inside
// a segment; no other escape; no empty segment. A segment names an object member, or an array
// element when it is a decimal index ("items.0") and the value there is an array.
struct FieldPath {
  std::string text;
  std::vector<std::string> segments;
};
// Parses a path; nullopt with the reason in *problem when it is not one.
std::optional<FieldPath> parse_field_path(std::string_view text, std::string* problem);

// A condition on a record (docs/transforms.md, "Conditions"). A tree: All/Any/Not combine
// children; a Test has one subject and one or more operators, all of which must hold.
struct Predicate {
  enum class Kind { Test, All, Any, Not };
  enum class Subject { Field, Header, Topic, Key, Partition, Offset, Timestamp };
  Kind kind = Kind::Test;
  std::string key;  // dotted config key of this table, e.g. "transforms[2].when.all[1]"

  // Test
  Subject subject = Subject::Field;
  FieldPath field;     // Subject::Field
  std::string header;  // Subject::Header
  std::optional<bool> exists;
  std::optional<std::string> equals;   // a JSON value (the TOML value converted)
  std::vector<std::string> in;         // JSON values
  std::optional<std::string> matches;  // ECMAScript regular expression, whole-string match
  // Numeric comparisons, each a JSON number.
  std::optional<std::string> gt, gte, lt, lte;

  // All / Any / Not (Not has exactly one child)
  std::vector<Predicate> children;

  // True when the tree refers to no payload field (usable on raw/text payloads).
  bool metadata_only() const;
};

enum class TransformType {
  AddFields,
  DeleteFields,
  RenameFields,
  KeepFields,
  UpdateFields,
  Filter,
  MaskFields,
  Flatten,
  Cast,
  ConvertTimestamp,
  ExtractField,
};
std::string_view to_string(TransformType type);  // "add_fields", ...

// Where a value written by add_fields / update_fields comes from.
struct ValueSource {
  enum class Kind { Static, Compute, CopyFrom };
  enum class Compute {
    NowMs,
    NowRfc3339,
    Topic,
    Partition,
    Offset,
    TimestampMs,
    TimestampRfc3339,
    Key,        // UTF-8 text when the key is valid UTF-8, base64 otherwise; null without a key
    KeyBase64,  // always base64; null without a key
    Header,     // the last header of that name: text or base64 as Key; null when absent
    RecordId,   // "topic:partition:offset"
  };
  Kind kind = Kind::Static;
  std::string json = "null";  // Static: a JSON value
  Compute compute = Compute::NowMs;
  std::string header;  // Compute::Header
  FieldPath from;      // CopyFrom
};
std::string_view to_string(ValueSource::Compute compute);  // "now_ms", ...

struct FieldAssignment {
  FieldPath path;
  ValueSource value;
  std::optional<Predicate> when;  // update_fields only
  std::string key;                // "transforms[0].fields[1]"
};

struct RenameSpec {
  FieldPath from, to;
  std::string key;
};

enum class CastType { String, Integer, Float, Boolean, Json };
std::string_view to_string(CastType type);

struct CastSpec {
  FieldPath path;
  CastType to = CastType::String;
  std::string key;
};

enum class TimeFormat { Auto, Rfc3339, Date, UnixS, UnixMs, UnixUs, UnixNs };
std::string_view to_string(TimeFormat format);

enum class OnMissing { Skip, Fail, Drop };

struct TransformSpec {
  int index = 0;  // position in the [[transforms]] array (0-based): the order of application
  int line = 0;   // line of its [[transforms]] header
  TransformType type = TransformType::AddFields;
  std::string key;                // "transforms[2]"
  std::optional<Predicate> when;  // every type but filter: apply only to matching records

  // add_fields, update_fields
  std::vector<FieldAssignment> assignments;
  bool overwrite = true;  // add_fields: replace a field that is already there
  bool create = false;    // update_fields: also set fields that are missing
  // delete_fields, keep_fields, mask_fields, convert_timestamp
  std::vector<FieldPath> fields;
  // rename_fields
  std::vector<RenameSpec> renames;
  // filter: drop the records `predicate` matches (keep_matching: keep only those)
  Predicate predicate;
  bool keep_matching = false;
  // mask_fields
  std::string replacement = "\"****\"";  // a JSON value
  std::int64_t keep_first = 0, keep_last = 0;
  std::string mask_char = "*";  // one character (UTF-8)
  bool partial_mask() const { return keep_first > 0 || keep_last > 0; }
  // flatten
  std::string separator = "_";
  // cast
  std::vector<CastSpec> casts;
  // convert_timestamp
  TimeFormat from = TimeFormat::Auto;
  TimeFormat to = TimeFormat::Rfc3339;
  // extract_field
  FieldPath field;
  bool merge = false;
  OnMissing on_missing = OnMissing::Skip;

  // False only for filter transforms whose predicate names no payload field.
  bool touches_payload() const;
};

// Reads the top-level `transforms` key of a sink definition (through the root table's reader,
// so an unknown top-level key is still reported) into `out`. `blocks` are the definition's
// [[topics]] blocks: payload transforms are refused when a block decodes raw or text.
void parse_transforms(detail::TableReader& root, const std::vector<TopicsBlock>& blocks,
                      std::vector<TransformSpec>& out);

}  // namespace picomq::config
