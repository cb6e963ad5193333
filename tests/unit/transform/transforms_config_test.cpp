// Parsing [[transforms]] of a sink definition: valid chains, and every kind of mistake reported
// with file:line:column and the dotted key.
#include "config/transforms_config.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace picomq::transform {
namespace {

using config::CastType;
using config::Predicate;
using config::TimeFormat;
using config::TransformType;
using config::ValueSource;
using testing::dump;
using testing::error_for;
using testing::parse;

// For top-level `transforms = ...` keys, which must come before the first table header.
constexpr std::string_view kTop = "type = \"sink\"\nkey = \"s1\"\npath = \"libx\"\n";
constexpr const char* kTopics = "[[topics]]\ntopics = [\"orders\"]\n";

TEST(TransformsConfig, NoTransformsIsAnEmptyChain) {
  auto result = parse("");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_TRUE(result.definition->transforms.empty());
  result = parse(std::string("transforms = []\n") + kTopics, {}, kTop);
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_TRUE(result.definition->transforms.empty());
}

TEST(TransformsConfig, ReadsEveryTypeInFileOrder) {
  auto result = parse(R"(
[[transforms]]
type = "add_fields"
overwrite = false
fields = [
  { path = "source", value = "kafka" },
  { path = "meta.n", value = { a = [1, 2.5, true] } },
  { path = "meta.at", compute = "now_rfc3339" },
  { path = "meta.trace", compute = "header", header = "trace-id" },
]
[[transforms]]
type = "delete_fields"
fields = ["internal", 'a\.b.c']
[[transforms]]
type = "rename_fields"
fields = [ { from = "cust", to = "customer.id" } ]
[[transforms]]
type = "keep_fields"
fields = ["id", "customer"]
[[transforms]]
type = "update_fields"
create = true
when = { metadata = "topic", matches = 'orders\..*' }
fields = [ { path = "status", value = "void", when = { field = "status", equals = "cancelled" } },
           { path = "copy", copy_from = "id" } ]
[[transforms]]
type = "filter"
keep_when = { any = [ { field = "amount", gte = 10, lt = 1e6 }, { not = { header = "replay", exists = true } } ] }
[[transforms]]
type = "mask_fields"
fields = ["card"]
keep_last = 4
mask_char = "#"
replacement = 0
[[transforms]]
type = "flatten"
separator = "."
[[transforms]]
type = "cast"
fields = [ { path = "amount", to = "float" }, { path = "qty", to = "integer" } ]
[[transforms]]
type = "convert_timestamp"
fields = ["ts"]
from = "unix_ms"
to = "date"
[[transforms]]
type = "extract_field"
field = "after"
merge = true
on_missing = "drop"
)");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& t = result.definition->transforms;
  ASSERT_EQ(t.size(), 11u);
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].index, static_cast<int>(i));
    EXPECT_EQ(t[i].key, "transforms[" + std::to_string(i) + "]");
  }
  EXPECT_EQ(t[0].type, TransformType::AddFields);
  EXPECT_EQ(t[0].line, 7);
  EXPECT_FALSE(t[0].overwrite);
  ASSERT_EQ(t[0].assignments.size(), 4u);
  EXPECT_EQ(t[0].assignments[0].path.text, "source");
  EXPECT_EQ(t[0].assignments[0].value.json, "\"kafka\"");
  EXPECT_EQ(t[0].assignments[1].path.segments, (std::vector<std::string>{"meta", "n"}));
  EXPECT_EQ(t[0].assignments[1].value.json, R"({"a":[1,2.5,true]})");
  EXPECT_EQ(t[0].assignments[2].value.kind, ValueSource::Kind::Compute);
  EXPECT_EQ(t[0].assignments[2].value.compute, ValueSource::Compute::NowRfc3339);
  EXPECT_EQ(t[0].assignments[3].value.compute, ValueSource::Compute::Header);
  EXPECT_EQ(t[0].assignments[3].value.header, "trace-id");
  EXPECT_EQ(t[0].assignments[3].key, "transforms[0].fields[3]");

  EXPECT_EQ(t[1].type, TransformType::DeleteFields);
  ASSERT_EQ(t[1].fields.size(), 2u);
  EXPECT_EQ(t[1].fields[1].segments, (std::vector<std::string>{"a.b", "c"}));
  EXPECT_EQ(t[1].fields[1].text, "a\\.b.c");

  EXPECT_EQ(t[2].renames[0].to.segments, (std::vector<std::string>{"customer", "id"}));
  EXPECT_EQ(t[3].type, TransformType::KeepFields);

  EXPECT_EQ(t[4].type, TransformType::UpdateFields);
  EXPECT_TRUE(t[4].create);
  ASSERT_TRUE(t[4].when);
  EXPECT_EQ(t[4].when->subject, Predicate::Subject::Topic);
  EXPECT_EQ(t[4].when->matches, "orders\\..*");
  ASSERT_TRUE(t[4].assignments[0].when);
  EXPECT_EQ(t[4].assignments[0].when->equals, "\"cancelled\"");
  EXPECT_EQ(t[4].assignments[0].when->key, "transforms[4].fields[0].when");
  EXPECT_EQ(t[4].assignments[1].value.kind, ValueSource::Kind::CopyFrom);
  EXPECT_EQ(t[4].assignments[1].value.from.text, "id");

  EXPECT_EQ(t[5].type, TransformType::Filter);
  EXPECT_TRUE(t[5].keep_matching);
  EXPECT_EQ(t[5].predicate.kind, Predicate::Kind::Any);
  ASSERT_EQ(t[5].predicate.children.size(), 2u);
  EXPECT_EQ(t[5].predicate.children[0].gte, "10");
  EXPECT_EQ(t[5].predicate.children[0].lt, "1000000.0");
  EXPECT_EQ(t[5].predicate.children[1].kind, Predicate::Kind::Not);
  EXPECT_EQ(t[5].predicate.children[1].children[0].subject, Predicate::Subject::Header);
  EXPECT_TRUE(t[5].touches_payload());

  EXPECT_EQ(t[6].keep_last, 4);
  EXPECT_EQ(t[6].mask_char, "#");
  EXPECT_EQ(t[6].replacement, "0");
  EXPECT_EQ(t[7].separator, ".");
  EXPECT_EQ(t[8].casts[1].to, CastType::Integer);
  EXPECT_EQ(t[9].from, TimeFormat::UnixMs);
  EXPECT_EQ(t[9].to, TimeFormat::Date);
  EXPECT_EQ(t[10].field.text, "after");
  EXPECT_TRUE(t[10].merge);
  EXPECT_EQ(t[10].on_missing, config::OnMissing::Drop);
}

TEST(TransformsConfig, Defaults) {
  auto result = parse(R"(
[[transforms]]
type = "flatten"
[[transforms]]
type = "mask_fields"
fields = ["x"]
[[transforms]]
type = "convert_timestamp"
fields = ["ts"]
[[transforms]]
type = "extract_field"
field = "after"
[[transforms]]
type = "add_fields"
fields = [ { path = "a", value = 1 } ]
)");
  ASSERT_TRUE(result.definition) << dump(result.errors);
  const auto& t = result.definition->transforms;
  EXPECT_EQ(t[0].separator, "_");
  EXPECT_EQ(t[1].replacement, "\"****\"");
  EXPECT_FALSE(t[1].partial_mask());
  EXPECT_EQ(t[2].from, TimeFormat::Auto);
  EXPECT_EQ(t[2].to, TimeFormat::Rfc3339);
  EXPECT_FALSE(t[3].merge);
  EXPECT_EQ(t[3].on_missing, config::OnMissing::Skip);
  EXPECT_TRUE(t[4].overwrite);
}

TEST(TransformsConfig, StaticValuesAreInterpolated) {
  auto result = parse(R"(
[[transforms]]
type = "add_fields"
fields = [ { path = "env", value = "${STAGE}" }, { path = "day", value = 2025-01-01 } ]
)",
                      {{"STAGE", "prod"}});
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_EQ(result.definition->transforms[0].assignments[0].value.json, "\"prod\"");
  EXPECT_EQ(result.definition->transforms[0].assignments[1].value.json, "\"2025-01-01\"");

  result = parse(R"(
[[transforms]]
type = "add_fields"
fields = [ { path = "env", value = "${STAGE}" } ]
)");
  auto e = error_for(result.errors, "transforms[0].fields[0].value");
  EXPECT_EQ(e.line, 9);  // the text starts with an empty line
  EXPECT_EQ(e.column, 36);
  EXPECT_NE(e.message.find("'STAGE' is not set"), std::string::npos) << e.message;
}

TEST(TransformsConfig, UnknownTypeSuggestsTheClosest) {
  auto result = parse("[[transforms]]\ntype = \"cats\"\nfields = []\n");
  ASSERT_FALSE(result.definition);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);  // no unknown-key noise without a type
  const auto& e = result.errors[0];
  EXPECT_EQ(e.to_string(),
            "sink.toml:7:8: key 'transforms[0].type': unknown transform type 'cats' (did you mean 'cast'? one of "
            "add_fields, delete_fields, rename_fields, keep_fields, update_fields, filter, mask_fields, flatten, "
            "cast, convert_timestamp, extract_field)");
}

TEST(TransformsConfig, MissingType) {
  auto result = parse("[[transforms]]\ntype = \"flatten\"\n[[transforms]]\nfields = [\"a\"]\n");
  auto e = error_for(result.errors, "transforms[1].type");
  EXPECT_EQ(e.line, 8);
  EXPECT_EQ(e.message, "missing required key 'type'");
  EXPECT_EQ(result.errors.size(), 1u) << dump(result.errors);
}

TEST(TransformsConfig, UnknownKeysAreReportedWithSuggestions) {
  auto result = parse(R"([[transforms]]
type = "delete_fields"
feilds = ["a"]
)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].feilds").to_string(),
            "sink.toml:8:1: key 'transforms[0].feilds': unknown key 'feilds' (did you mean 'fields'?)");
  // The required key is missing too: both problems in one pass.
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields").line, 6);

  // A key of another transform type is unknown here.
  result = parse(R"([[transforms]]
type = "flatten"
separator = "."
merge = true
)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].merge").message, "unknown key 'merge'");
  // 'when' belongs to every type but filter.
  result = parse(R"([[transforms]]
type = "filter"
when = { field = "a", exists = true }
drop_when = { field = "a", exists = true }
)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].when").message, "unknown key 'when'");
}

TEST(TransformsConfig, BadFieldPaths) {
  auto result = parse(R"([[transforms]]
type = "delete_fields"
fields = ["ok", "a..b", "", 'x\y', "end."]
)");
  ASSERT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[1]").to_string(),
            "sink.toml:8:17: key 'transforms[0].fields[1]': invalid field path 'a..b': empty segment (two dots in a "
            "row, or a dot at the start)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[2]").message,
            "invalid field path '': a field path must not be empty");
  EXPECT_NE(error_for(result.errors, "transforms[0].fields[3]").message.find("'\\' must be followed by"),
            std::string::npos);
  EXPECT_NE(error_for(result.errors, "transforms[0].fields[4]").message.find("a dot at the end"), std::string::npos);
  EXPECT_EQ(result.errors.size(), 4u) << dump(result.errors);

  result = parse("[[transforms]]\ntype = \"keep_fields\"\nfields = []\n");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields").message, "'fields' must not be empty");
  result = parse("[[transforms]]\ntype = \"keep_fields\"\nfields = \"id\"\n");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields").message,
            "'fields' must be an array of strings, got string");
  result = parse("[[transforms]]\ntype = \"extract_field\"\nfield = \".after\"\n");
  EXPECT_EQ(error_for(result.errors, "transforms[0].field").line, 8);
}

TEST(TransformsConfig, FieldPathSyntax) {
  std::string problem;
  auto p = config::parse_field_path("a.b\\.c.d\\\\e", &problem);
  ASSERT_TRUE(p) << problem;
  EXPECT_EQ(p->segments, (std::vector<std::string>{"a", "b.c", "d\\e"}));
  EXPECT_EQ(config::parse_field_path("items.0", &problem)->segments, (std::vector<std::string>{"items", "0"}));
  EXPECT_EQ(config::parse_field_path("ünïcode.ключ", &problem)->segments,
            (std::vector<std::string>{"ünïcode", "ключ"}));
  EXPECT_FALSE(config::parse_field_path("a.", &problem));
  EXPECT_FALSE(config::parse_field_path(".a", &problem));
  EXPECT_FALSE(config::parse_field_path("a\\", &problem));
  EXPECT_FALSE(config::parse_field_path("a\\n", &problem));
}

TEST(TransformsConfig, AssignmentMistakes) {
  auto result = parse(R"([[transforms]]
type = "add_fields"
fields = [
  { path = "a" },
  { path = "b", value = 1, compute = "topic" },
  { path = "c", compute = "nwo_ms" },
  { path = "d", compute = "header" },
  { path = "e", value = 1, header = "x" },
  { value = 1 },
  { path = "g", copy_from = "a" },
  "h",
]
)");
  ASSERT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[0]").to_string(),
            "sink.toml:9:3: key 'transforms[0].fields[0]': each field needs 'value' (a static value) or 'compute' "
            "(now_ms, topic, ...)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[1]").message, "give either 'value' or 'compute', not both");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[2].compute").message,
            "unknown computed value 'nwo_ms' (did you mean 'now_ms'? one of now_ms, now_rfc3339, topic, partition, "
            "offset, timestamp_ms, timestamp_rfc3339, key, key_base64, header, record_id)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[3].header").message,
            "missing required key 'header' (the header name, with compute = \"header\")");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[4].header").message,
            "'header' goes with compute = \"header\"");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[5].path").message, "missing required key 'path'");
  // copy_from is update_fields only.
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[6].copy_from").message, "unknown key 'copy_from'");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[7]").line, 16);
}

TEST(TransformsConfig, ConditionMistakes) {
  auto result = parse(R"([[transforms]]
type = "filter"
drop_when = { all = [
  { equals = 1 },
  { field = "a", header = "b", exists = true },
  { field = "a", equal = 1 },
  { field = "a", matches = "([a-z" },
  { metadata = "topik", equals = "x" },
  { metadata = "topic", gt = 3 },
  { metadata = "offset", equals = "12" },
  { field = "a" },
  { any = [], field = "x" },
  { not = 3 },
  { header = "h", matches = 5 },
] }
)");
  ASSERT_FALSE(result.definition);
  const std::string k = "transforms[0].drop_when.all";
  EXPECT_EQ(error_for(result.errors, k + "[0]").message.substr(0, 30), "a condition needs a subject: '");
  EXPECT_EQ(
      error_for(result.errors, k + "[1]").message,
      "a condition has exactly one subject: 'field', 'header' or 'metadata' (combine several with 'all' or 'any')");
  EXPECT_EQ(
      error_for(result.errors, k + "[2].equal").to_string(),
      "sink.toml:11:18: key 'transforms[0].drop_when.all[2].equal': unknown key 'equal' (did you mean 'equals'?)");
  EXPECT_NE(error_for(result.errors, k + "[3].matches").message.find("invalid regular expression '([a-z'"),
            std::string::npos);
  EXPECT_EQ(error_for(result.errors, k + "[4].metadata").message,
            "unknown metadata 'topik' (one of topic, key, partition, offset, timestamp)");
  EXPECT_EQ(error_for(result.errors, k + "[5].gt").message, "'gt' compares numbers; the topic is text");
  EXPECT_EQ(error_for(result.errors, k + "[6].equals").message,
            "compare a record's metadata number with an integer, got string");
  EXPECT_EQ(error_for(result.errors, k + "[7]").message,
            "a condition needs at least one test: exists, equals, in, matches, gt, gte, lt, lte");
  EXPECT_NE(error_for(result.errors, k + "[8]").message.find("'any' must be the only key"), std::string::npos);
  EXPECT_NE(error_for(result.errors, k + "[9].not").message.find("a condition must be a table"), std::string::npos);
  EXPECT_EQ(error_for(result.errors, k + "[10].matches").message, "'matches' must be a string, got integer");
  // Sorted by position.
  for (std::size_t i = 1; i < result.errors.size(); ++i)
    EXPECT_LE(result.errors[i - 1].line, result.errors[i].line) << dump(result.errors);
}

// Found by fuzz_transform_config: GCC 12's std::regex reads these numbers into a long without an
// overflow check (undefined behaviour), so they are refused before it sees them.
TEST(TransformsConfig, RegexNumbersTooLongForStdRegexAreRefused) {
  auto result = parse(R"([[transforms]]
type = "filter"
drop_when = { any = [
  { metadata = "topic", matches = '(a)\88888888888888888888888' },
  { metadata = "topic", matches = 'a{1,99999999999999999999}' },
  { metadata = "topic", matches = '(a)\1b{2,3}[{1234567890123]' },
] }
)");
  ASSERT_FALSE(result.definition);
  const std::string k = "transforms[0].drop_when.any";
  EXPECT_EQ(error_for(result.errors, k + "[0].matches").message,
            "invalid regular expression '(a)\\88888888888888888888888': backreference "
            "'\\88888888888888888888888' has more than 9 digits");
  EXPECT_EQ(error_for(result.errors, k + "[1].matches").message,
            "invalid regular expression 'a{1,99999999999999999999}': repeat count '99999999999999999999' has "
            "more than 9 digits");
  // Digits in a [class] are characters; a backreference of a few digits is refused on its own
  // (matching runs in linear time: config/regex.h).
  EXPECT_EQ(error_for(result.errors, k + "[2].matches").message,
            "invalid regular expression '(a)\\1b{2,3}[{1234567890123]': backreferences are not supported (regular "
            "expressions match in linear time)");
  EXPECT_EQ(result.errors.size(), 3u) << dump(result.errors);
}

TEST(TransformsConfig, FilterNeedsExactlyOnePredicate) {
  auto result = parse("[[transforms]]\ntype = \"filter\"\n");
  EXPECT_EQ(error_for(result.errors, "transforms[0].drop_when").message,
            "missing required key 'drop_when' (a condition: the records it matches are dropped (or 'keep_when' to "
            "keep only those))");
  result = parse(R"([[transforms]]
type = "filter"
drop_when = { field = "a", exists = true }
keep_when = { field = "b", exists = true }
)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].keep_when").to_string(),
            "sink.toml:9:13: key 'transforms[0].keep_when': give either 'drop_when' or 'keep_when', not both");
}

TEST(TransformsConfig, TypeSpecificMistakes) {
  auto result = parse(R"([[transforms]]
type = "cast"
fields = [ { path = "a", to = "flaot" }, { path = "b" } ]
[[transforms]]
type = "convert_timestamp"
fields = ["ts"]
from = "unix_sec"
to = "auto"
[[transforms]]
type = "extract_field"
field = "after"
on_missing = "ignore"
merge = "yes"
[[transforms]]
type = "mask_fields"
fields = ["card"]
keep_last = -1
mask_char = "**"
[[transforms]]
type = "flatten"
separator = ""
[[transforms]]
type = "rename_fields"
fields = [ { from = "a" } ]
)");
  ASSERT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[0].to").message,
            "unknown type 'flaot' (did you mean 'float'? one of string, integer, float, boolean, json)");
  EXPECT_EQ(error_for(result.errors, "transforms[0].fields[1].to").message, "missing required key 'to'");
  EXPECT_EQ(error_for(result.errors, "transforms[1].from").message,
            "unknown time format 'unix_sec' (did you mean 'unix_s'? one of auto, rfc3339, date, unix_s, unix_ms, "
            "unix_us, unix_ns)");
  EXPECT_EQ(error_for(result.errors, "transforms[1].to").message,
            "unknown time format 'auto' (one of rfc3339, date, unix_s, unix_ms, unix_us, unix_ns)");
  EXPECT_EQ(error_for(result.errors, "transforms[2].on_missing").message,
            "'on_missing' must be \"skip\", \"fail\" or \"drop\", got \"ignore\"");
  EXPECT_EQ(error_for(result.errors, "transforms[2].merge").message,
            "'merge' must be a boolean (true or false), got string");
  EXPECT_EQ(error_for(result.errors, "transforms[3].keep_last").message, "'keep_last' must be between 0 and 1000");
  EXPECT_EQ(error_for(result.errors, "transforms[3].mask_char").message,
            "'mask_char' must be exactly one character, got \"**\"");
  EXPECT_EQ(error_for(result.errors, "transforms[4].separator").message, "'separator' must not be empty");
  EXPECT_EQ(error_for(result.errors, "transforms[5].fields[0].to").message, "missing required key 'to'");
}

TEST(TransformsConfig, TransformsMustBeTables) {
  auto result = parse(std::string("transforms = \"flatten\"\n") + kTopics, {}, kTop);
  EXPECT_EQ(error_for(result.errors, "transforms").message,
            "'transforms' must be an array of tables ([[transforms]] blocks), got string");
  result = parse(std::string("transforms = [ { type = \"flatten\" }, 3 ]\n") + kTopics, {}, kTop);
  EXPECT_EQ(error_for(result.errors, "transforms[1]").message,
            "each entry of 'transforms' must be a table ([[transforms]] block), got integer");
}

TEST(TransformsConfig, RawAndTextPayloadsOnlyTakeMetadataFilters) {
  constexpr std::string_view kRawHead = R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders"]
[[topics]]
topics = ["blobs"]
schema = "raw"
consumer_group = "g2"
)";
  auto result = parse(R"([[transforms]]
type = "filter"
drop_when = { any = [ { header = "skip", exists = true }, { metadata = "key", matches = "test-.*" } ] }
)",
                      {}, kRawHead);
  ASSERT_TRUE(result.definition) << dump(result.errors);
  EXPECT_FALSE(result.definition->transforms[0].touches_payload());

  result = parse(R"([[transforms]]
type = "cast"
fields = [ { path = "a", to = "string" } ]
[[transforms]]
type = "filter"
drop_when = { field = "a", exists = true }
)",
                 {}, kRawHead);
  ASSERT_FALSE(result.definition);
  EXPECT_EQ(error_for(result.errors, "transforms[0].type").to_string(),
            "sink.toml:11:8: key 'transforms[0].type': 'cast' works on payload fields, but topics[1] has schema = "
            "\"raw\" (not JSON); with raw or text payloads only 'filter' on header and metadata conditions applies");
  EXPECT_EQ(error_for(result.errors, "transforms[1].type").message.substr(0, 41),
            "this filter tests payload fields, but top");
}

TEST(TransformsConfig, EveryProblemOfAFileInOnePass) {
  auto result = parse(R"([[transforms]]
type = "add_fields"
fields = [ { path = "a..b", value = 1 } ]
[[transforms]]
type = "renam_fields"
[[transforms]]
type = "cast"
fields = [ { path = "x", to = "int" } ]
)");
  ASSERT_EQ(result.errors.size(), 3u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "transforms[0].fields[0].path");
  EXPECT_EQ(result.errors[0].line, 8);
  EXPECT_EQ(result.errors[1].key, "transforms[1].type");
  EXPECT_NE(result.errors[1].message.find("did you mean 'rename_fields'?"), std::string::npos);
  EXPECT_EQ(result.errors[2].key, "transforms[2].fields[0].to");
  EXPECT_EQ(result.errors[2].line, 13);
}

TEST(TransformsConfig, DeeplyNestedConditionsAreRefused) {
  std::string nested = "{ field = \"a\", exists = true }";
  for (int i = 0; i < 40; ++i) nested.insert(0, "{ not = ").append(" }");
  auto result = parse("[[transforms]]\ntype = \"filter\"\ndrop_when = " + nested + "\n");
  ASSERT_FALSE(result.definition);
  EXPECT_NE(dump(result.errors).find("nested too deeply"), std::string::npos) << dump(result.errors);
}

}  // namespace
}  // namespace picomq::transform

namespace picomq::transform {
namespace {

// The file behind the "Errors" section of docs/transforms.md: its output is quoted there.
constexpr std::string_view kDocsErrorsFile = R"(type = "sink"
key = "orders"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders.eu"]
[[topics]]
topics = ["blobs"]
schema = "raw"
consumer_group = "blobs"
[[transforms]]
type = "filter"
drop_when = { header = "skip", exists = true }
[[transforms]]
type = "cats"
[[transforms]]
type = "filter"
drop_when = { header = "x", equal = "y" }
[[transforms]]
type = "cast"
fields = [ { path = "amount", to = "flaot" } ]
[[transforms]]
type = "delete_fields"
fields = ["ok", "a..b"]
)";

TEST(TransformsConfig, TheErrorsOfTheDocs) {
  auto result = config::parse_sink_definition(kDocsErrorsFile, "sinks.d/orders.toml", testing::fake_env());
  EXPECT_EQ(config::format_errors(result.errors),
            "sinks.d/orders.toml:14:8: key 'transforms[1].type': unknown transform type 'cats' (did you mean 'cast'? "
            "one of add_fields, delete_fields, rename_fields, keep_fields, update_fields, filter, mask_fields, "
            "flatten, cast, convert_timestamp, extract_field)\n"
            "sinks.d/orders.toml:17:13: key 'transforms[2].drop_when': a condition needs at least one test: exists, "
            "equals, in, matches, gt, gte, lt, lte\n"
            "sinks.d/orders.toml:17:29: key 'transforms[2].drop_when.equal': unknown key 'equal' (did you mean "
            "'equals'?)\n"
            "sinks.d/orders.toml:19:8: key 'transforms[3].type': 'cast' works on payload fields, but topics[1] has "
            "schema = \"raw\" (not JSON); with raw or text payloads only 'filter' on header and metadata conditions "
            "applies\n"
            "sinks.d/orders.toml:20:36: key 'transforms[3].fields[0].to': unknown type 'flaot' (did you mean 'float'? "
            "one of string, integer, float, boolean, json)\n"
            "sinks.d/orders.toml:22:8: key 'transforms[4].type': 'delete_fields' works on payload fields, but "
            "topics[1] has schema = \"raw\" (not JSON); with raw or text payloads only 'filter' on header and "
            "metadata conditions applies\n"
            "sinks.d/orders.toml:23:17: key 'transforms[4].fields[1]': invalid field path 'a..b': empty segment (two "
            "dots in a row, or a dot at the start)\n");
}

}  // namespace
}  // namespace picomq::transform
