#include "config/transforms_config.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "config/regex.h"
#include "config/sink_definition.h"
#include "config/toml_reader.h"

namespace picomq::config {

std::optional<FieldPath> parse_field_path(std::string_view text, std::string* problem) {
  auto fail = [&](std::string why) -> std::optional<FieldPath> {
    if (problem) *problem = std::move(why);
    return std::nullopt;
  };
  if (text.empty()) return fail("a field path must not be empty");
  FieldPath path;
  path.text = std::string(text);
  std::string segment;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\') {
      if (i + 1 < text.size() && (text[i + 1] == '.' || text[i + 1] == '\\')) {
        segment += text[++i];
        continue;
      }
      return fail("'\\' must be followed by '.' or '\\' (write \"\\.\" for a dot inside a key)");
    }
    if (c == '.') {
      if (segment.empty()) return fail("empty segment (two dots in a row, or a dot at the start)");
      path.segments.push_back(std::move(segment));
      segment.clear();
      continue;
    }
    segment += c;
  }
  if (segment.empty()) return fail("empty segment (a dot at the end)");
  path.segments.push_back(std::move(segment));
  return path;
}

bool Predicate::metadata_only() const {
  if (kind == Kind::Test) return subject != Subject::Field;
  return std::all_of(children.begin(), children.end(), [](const Predicate& p) { return p.metadata_only(); });
}

std::string_view to_string(TransformType type) {
  switch (type) {
    case TransformType::AddFields: return "add_fields";
    case TransformType::DeleteFields: return "delete_fields";
    case TransformType::RenameFields: return "rename_fields";
    case TransformType::KeepFields: return "keep_fields";
    case TransformType::UpdateFields: return "update_fields";
    case TransformType::Filter: return "filter";
    case TransformType::MaskFields: return "mask_fields";
    case TransformType::Flatten: return "flatten";
    case TransformType::Cast: return "cast";
    case TransformType::ConvertTimestamp: return "convert_timestamp";
    case TransformType::ExtractField: return "extract_field";
  }
  return "unknown";
}

std::string_view to_string(ValueSource::Compute compute) {
  using C = ValueSource::Compute;
  switch (compute) {
    case C::NowMs: return "now_ms";
    case C::NowRfc3339: return "now_rfc3339";
    case C::Topic: return "topic";
    case C::Partition: return "partition";
    case C::Offset: return "offset";
    case C::TimestampMs: return "timestamp_ms";
    case C::TimestampRfc3339: return "timestamp_rfc3339";
    case C::Key: return "key";
    case C::KeyBase64: return "key_base64";
    case C::Header: return "header";
    case C::RecordId: return "record_id";
  }
  return "unknown";
}

std::string_view to_string(CastType type) {
  switch (type) {
    case CastType::String: return "string";
    case CastType::Integer: return "integer";
    case CastType::Float: return "float";
    case CastType::Boolean: return "boolean";
    case CastType::Json: return "json";
  }
  return "unknown";
}

std::string_view to_string(TimeFormat format) {
  switch (format) {
    case TimeFormat::Auto: return "auto";
    case TimeFormat::Rfc3339: return "rfc3339";
    case TimeFormat::Date: return "date";
    case TimeFormat::UnixS: return "unix_s";
    case TimeFormat::UnixMs: return "unix_ms";
    case TimeFormat::UnixUs: return "unix_us";
    case TimeFormat::UnixNs: return "unix_ns";
  }
  return "unknown";
}

bool TransformSpec::touches_payload() const {
  if (type != TransformType::Filter) return true;
  return !predicate.metadata_only();
}

namespace {

using detail::Diagnostics;
using detail::TableReader;

constexpr std::array<TransformType, 11> kTypes{
    TransformType::AddFields,        TransformType::DeleteFields, TransformType::RenameFields,
    TransformType::KeepFields,       TransformType::UpdateFields, TransformType::Filter,
    TransformType::MaskFields,       TransformType::Flatten,      TransformType::Cast,
    TransformType::ConvertTimestamp, TransformType::ExtractField};

constexpr std::array<ValueSource::Compute, 11> kComputes{ValueSource::Compute::NowMs,
                                                         ValueSource::Compute::NowRfc3339,
                                                         ValueSource::Compute::Topic,
                                                         ValueSource::Compute::Partition,
                                                         ValueSource::Compute::Offset,
                                                         ValueSource::Compute::TimestampMs,
                                                         ValueSource::Compute::TimestampRfc3339,
                                                         ValueSource::Compute::Key,
                                                         ValueSource::Compute::KeyBase64,
                                                         ValueSource::Compute::Header,
                                                         ValueSource::Compute::RecordId};

constexpr std::array<CastType, 5> kCasts{CastType::String, CastType::Integer, CastType::Float, CastType::Boolean,
                                         CastType::Json};
constexpr std::array<TimeFormat, 7> kTimeFormats{TimeFormat::Auto,  TimeFormat::Rfc3339, TimeFormat::Date,
                                                 TimeFormat::UnixS, TimeFormat::UnixMs,  TimeFormat::UnixUs,
                                                 TimeFormat::UnixNs};

constexpr int kMaxPredicateDepth = 32;

// "one of a, b, c" with a did-you-mean in front when a name is close.
template <typename Range>
std::string choices(std::string_view given, const Range& names) {
  std::string list, best;
  std::size_t best_distance = 3;
  for (const auto& n : names) {
    std::string_view name = to_string(n);
    if (!list.empty()) list += ", ";
    list += name;
    std::size_t d = kit::edit_distance(given, name);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(name);
    }
  }
  std::string out = best.empty() ? "" : "did you mean '" + best + "'? ";
  return out + "one of " + list;
}

template <typename Range>
auto find_named(std::string_view given, const Range& names) -> std::optional<typename Range::value_type> {
  for (const auto& n : names)
    if (to_string(n) == given) return n;
  return std::nullopt;
}

class Parser {
 public:
  Parser(Diagnostics& diag, const EnvLookup& env) : diag_(diag), env_(env) {}

  std::optional<FieldPath> path_at(const toml::node& node, const std::string& key, std::string_view what) {
    auto text = detail::interpolate(node, key, diag_, env_);
    if (!text) return std::nullopt;
    std::string problem;
    auto path = parse_field_path(*text, &problem);
    if (!path) diag_.error(node.source(), key, "invalid " + std::string(what) + " '" + *text + "': " + problem);
    return path;
  }

  // A required or optional key of `r` holding one path.
  std::optional<FieldPath> path(TableReader& r, std::string_view key, bool required) {
    const toml::node* n = r.toml_table().get(key);
    auto text = r.string(key, required);
    if (!text || !n) return std::nullopt;
    std::string problem;
    auto path = parse_field_path(*text, &problem);
    if (!path) r.error(*n, key, "invalid field path '" + *text + "': " + problem);
    return path;
  }

  // `fields = ["a", "b.c"]`: a required, non-empty array of paths.
  std::vector<FieldPath> path_list(TableReader& r) {
    std::vector<FieldPath> out;
    const toml::node* n = r.toml_table().get("fields");
    auto list = r.string_array("fields");
    if (!n) {
      r.missing("fields", "an array of field paths such as [\"id\", \"ship_to.city\"]");
      return out;
    }
    if (!list) return out;
    if (list->empty()) r.error(*n, "fields", "'fields' must not be empty");
    for (auto& item : *list) {
      std::string problem;
      if (auto p = parse_field_path(item.value, &problem)) out.push_back(std::move(*p));
      else diag_.error(item.where, item.key, "invalid field path '" + item.value + "': " + problem);
    }
    return out;
  }

  // `fields = [ {...}, {...} ]`: a required, non-empty array of tables; calls each(table, key).
  template <typename F>
  void table_list(TableReader& r, std::string_view example, F&& each) {
    const toml::node* n = r.node("fields");
    if (!n) {
      r.missing("fields", "an array of tables such as " + std::string(example));
      return;
    }
    const toml::array* items = n->as_array();
    if (!items) {
      r.error(*n, "fields",
              "'fields' must be an array of tables such as " + std::string(example) + ", got " +
                  std::string(detail::type_name(n->type())));
      return;
    }
    if (items->empty()) r.error(*n, "fields", "'fields' must not be empty");
    for (std::size_t i = 0; i < items->size(); ++i) {
      const toml::node& item = *items->get(i);
      std::string key = detail::index_key(r.key_path("fields"), i);
      if (const toml::table* t = item.as_table()) each(*t, key);
      else
        diag_.error(item.source(), key,
                    "each entry of 'fields' must be a table such as " + std::string(example) + ", got " +
                        std::string(detail::type_name(item.type())));
    }
  }

  std::optional<std::string> json_value(const toml::node& node, const std::string& key) {
    const std::size_t before = diag_.count();
    nlohmann::json json = detail::to_json(node, key, diag_, env_);
    if (diag_.count() != before) return std::nullopt;
    try {
      return json.dump();
    } catch (const nlohmann::json::exception& e) {
      diag_.error(node.source(), key, std::string("cannot convert to JSON: ") + e.what());
      return std::nullopt;
    }
  }

  std::optional<std::string> number_value(TableReader& r, std::string_view key) {
    const toml::node* n = r.node(key);
    if (!n) return std::nullopt;
    if (n->is_integer()) return std::to_string(n->as_integer()->get());
    if (n->is_floating_point() && std::isfinite(n->as_floating_point()->get())) return json_value(*n, r.key_path(key));
    r.error(
        *n, key,
        "'" + std::string(key) + "' must be a number (integer or float), got " +
            (n->is_floating_point() ? std::string("a non-finite float") : std::string(detail::type_name(n->type()))));
    return std::nullopt;
  }

  std::optional<Predicate> predicate(const toml::node& node, const std::string& key, int depth = 0) {
    const toml::table* table = node.as_table();
    if (!table) {
      diag_.error(node.source(), key,
                  "a condition must be a table such as { field = \"status\", equals = \"cancelled\" }, got " +
                      std::string(detail::type_name(node.type())));
      return std::nullopt;
    }
    if (depth > kMaxPredicateDepth) {
      diag_.error(node.source(), key,
                  "conditions are nested too deeply (at most " + std::to_string(kMaxPredicateDepth) + " levels)");
      return std::nullopt;
    }
    TableReader r(*table, key, diag_, env_);
    Predicate p;
    p.key = key;
    if (auto combined = combination(*table, r, p, depth)) return std::move(*combined);
    // A test: one subject, one or more operators.
    const std::size_t before = diag_.count();
    const int subjects = read_subject(*table, r, p);
    const int operators = read_operators(*table, r, p);
    if (subjects == 1 && operators == 0)
      r.error_here("a condition needs at least one test: exists, equals, in, matches, gt, gte, lt, lte");
    r.finish();
    if (diag_.count() != before) return std::nullopt;
    return p;
  }

  // { all = [...] } | { any = [...] } | { not = {...} }: the combined conditions (empty inside when
  // they do not read), or nullopt when the table is a single test.
  std::optional<std::optional<Predicate>> combination(const toml::table& table, TableReader& r, Predicate& p,
                                                      int depth) {
    for (std::string_view combinator : {"all", "any", "not"}) {
      if (!table.get(combinator)) continue;
      if (table.size() != 1) {
        r.error_here("'" + std::string(combinator) +
                     "' must be the only key of its table (put tests inside it, e.g. { all = [ {...}, {...} ] })");
        return std::optional<Predicate>();
      }
      const toml::node& inner = *table.get(combinator);
      r.node(combinator);
      std::string inner_key = r.key_path(combinator);
      bool ok = true;
      if (combinator == "not") {
        p.kind = Predicate::Kind::Not;
        if (auto child = predicate(inner, inner_key, depth + 1)) p.children.push_back(std::move(*child));
        else ok = false;
      } else {
        p.kind = combinator == "all" ? Predicate::Kind::All : Predicate::Kind::Any;
        const toml::array* items = inner.as_array();
        if (!items || items->empty()) {
          r.error(inner, combinator,
                  "'" + std::string(combinator) +
                      "' must be a non-empty array of conditions, e.g. [ { field = \"a\", exists = true } ]");
          return std::optional<Predicate>();
        }
        for (std::size_t i = 0; i < items->size(); ++i) {
          if (auto child = predicate(*items->get(i), detail::index_key(inner_key, i), depth + 1))
            p.children.push_back(std::move(*child));
          else ok = false;
        }
      }
      if (!ok) return std::optional<Predicate>();
      return std::optional<Predicate>(std::move(p));
    }
    return std::nullopt;
  }

  // The test's subject: `field`, `header` or `metadata`. Returns how many it names (one is right).
  int read_subject(const toml::table& table, TableReader& r, Predicate& p) {
    int subjects = 0;
    if (auto field = path(r, "field", false)) {
      p.subject = Predicate::Subject::Field;
      p.field = std::move(*field);
      ++subjects;
    } else if (table.get("field")) {
      ++subjects;
    }
    if (auto header = r.string("header")) {
      p.subject = Predicate::Subject::Header;
      p.header = std::move(*header);
      ++subjects;
    } else if (table.get("header")) {
      ++subjects;
    }
    if (auto metadata = r.string("metadata")) {
      ++subjects;
      static constexpr std::array<std::pair<std::string_view, Predicate::Subject>, 5> kMeta{{
          {"topic", Predicate::Subject::Topic},
          {"key", Predicate::Subject::Key},
          {"partition", Predicate::Subject::Partition},
          {"offset", Predicate::Subject::Offset},
          {"timestamp", Predicate::Subject::Timestamp},
      }};
      auto it = std::find_if(kMeta.begin(), kMeta.end(), [&](const auto& m) { return m.first == *metadata; });
      if (it == kMeta.end())
        r.error(*table.get("metadata"), "metadata",
                "unknown metadata '" + *metadata + "' (one of topic, key, partition, offset, timestamp)");
      else p.subject = it->second;
    } else if (table.get("metadata")) {
      ++subjects;
    }
    if (subjects == 0) {
      r.error_here(
          "a condition needs a subject: 'field' (a payload field), 'header' (a header name) or 'metadata' "
          "(topic, key, partition, offset, timestamp); or combine conditions with 'all', 'any', 'not'");
    } else if (subjects > 1) {
      r.error_here(
          "a condition has exactly one subject: 'field', 'header' or 'metadata' (combine several with 'all' or 'any')");
    }
    return subjects;
  }

  // The test's operators (exists, equals, in, matches, gt, gte, lt, lte), each checked against the
  // subject's kind (text, number, any JSON value). Returns how many it names.
  int read_operators(const toml::table& table, TableReader& r, Predicate& p) {
    const bool is_number_meta = p.subject == Predicate::Subject::Partition || p.subject == Predicate::Subject::Offset ||
                                p.subject == Predicate::Subject::Timestamp;
    const bool is_bytes = p.subject == Predicate::Subject::Header || p.subject == Predicate::Subject::Topic ||
                          p.subject == Predicate::Subject::Key;
    std::string subject_name = p.subject == Predicate::Subject::Field    ? "a field"
                               : p.subject == Predicate::Subject::Header ? "a header"
                               : is_bytes
                                   ? "the " + std::string(p.subject == Predicate::Subject::Topic ? "topic" : "key")
                                   : "a record's metadata number";

    int operators = 0;
    p.exists = r.boolean("exists");
    if (table.get("exists")) ++operators;
    // equals / in: any value for a field; strings for header/topic/key; integers for the numbers.
    auto check_comparable = [&](const toml::node& n, const std::string& k) {
      if (p.subject == Predicate::Subject::Field) return true;
      if (is_bytes && !n.is_string()) {
        diag_.error(n.source(), k,
                    "compare " + subject_name + " with a string, got " + std::string(detail::type_name(n.type())));
        return false;
      }
      if (is_number_meta && !n.is_integer()) {
        diag_.error(n.source(), k,
                    "compare " + subject_name + " with an integer, got " + std::string(detail::type_name(n.type())));
        return false;
      }
      return true;
    };
    if (const toml::node* n = r.node("equals")) {
      ++operators;
      if (check_comparable(*n, r.key_path("equals"))) p.equals = json_value(*n, r.key_path("equals"));
    }
    if (const toml::node* n = r.node("in")) {
      ++operators;
      const toml::array* items = n->as_array();
      if (!items || items->empty()) {
        r.error(*n, "in", "'in' must be a non-empty array of values");
      } else {
        for (std::size_t i = 0; i < items->size(); ++i) {
          std::string k = detail::index_key(r.key_path("in"), i);
          if (!check_comparable(*items->get(i), k)) continue;
          if (auto v = json_value(*items->get(i), k)) p.in.push_back(std::move(*v));
        }
      }
    }
    if (const toml::node* n = table.get("matches")) {
      ++operators;
      if (auto re = r.string("matches")) {
        if (is_number_meta) {
          r.error(*n, "matches", "'matches' applies to text; " + subject_name + " is a number (use equals, gt, lt...)");
        } else {
          try {
            (void)compile_regex(*re);
            p.matches = std::move(*re);
          } catch (const std::invalid_argument& e) {
            r.error(*n, "matches", "invalid regular expression '" + *re + "': " + e.what());
          }
        }
      }
    } else {
      r.node("matches");
    }
    for (auto [name, slot] : {std::pair<std::string_view, std::optional<std::string>*>{"gt", &p.gt},
                              {"gte", &p.gte},
                              {"lt", &p.lt},
                              {"lte", &p.lte}}) {
      const toml::node* n = table.get(name);
      auto number = number_value(r, name);
      if (!n) continue;
      ++operators;
      if (is_bytes) {
        r.error(*n, name, "'" + std::string(name) + "' compares numbers; " + subject_name + " is text");
        continue;
      }
      *slot = std::move(number);
    }
    return operators;
  }

  std::optional<Predicate> optional_predicate(TableReader& r, std::string_view key) {
    const toml::node* n = r.node(key);
    if (!n) return std::nullopt;
    return predicate(*n, r.key_path(key));
  }

  // { path = "...", value = ... } | { path, compute = "...", header = "..." } | { path, copy_from = "..." }
  std::optional<FieldAssignment> assignment(const toml::table& t, const std::string& key, bool update) {
    TableReader r(t, key, diag_, env_);
    FieldAssignment a;
    a.key = key;
    const std::size_t before = diag_.count();
    if (auto p = path(r, "path", true)) a.path = std::move(*p);
    int sources = 0;
    if (const toml::node* v = r.node("value")) {
      ++sources;
      a.value.kind = ValueSource::Kind::Static;
      if (auto json = json_value(*v, r.key_path("value"))) a.value.json = std::move(*json);
    }
    const toml::node* compute_node = t.get("compute");
    if (auto compute = r.string("compute")) {
      ++sources;
      a.value.kind = ValueSource::Kind::Compute;
      if (auto c = find_named(*compute, kComputes)) a.value.compute = *c;
      else
        r.error(*compute_node, "compute",
                "unknown computed value '" + *compute + "' (" + choices(*compute, kComputes) + ")");
    } else if (compute_node) {
      ++sources;
    }
    const toml::node* header_node = t.get("header");
    if (auto header = r.string("header")) {
      if (!compute_node || a.value.compute != ValueSource::Compute::Header)
        r.error(*header_node, "header", "'header' goes with compute = \"header\"");
      else if (header->empty()) r.error(*header_node, "header", "'header' must not be empty");
      a.value.header = std::move(*header);
    } else if (compute_node && compute_node->is_string() && a.value.kind == ValueSource::Kind::Compute &&
               a.value.compute == ValueSource::Compute::Header && !header_node) {
      r.missing("header", "the header name, with compute = \"header\"");
    }
    if (update) {
      if (const toml::node* from = r.node("copy_from")) {
        ++sources;
        a.value.kind = ValueSource::Kind::CopyFrom;
        if (from->is_string()) {
          if (auto p = path_at(*from, r.key_path("copy_from"), "field path")) a.value.from = std::move(*p);
        } else {
          r.error(*from, "copy_from",
                  "'copy_from' must be a string, got " + std::string(detail::type_name(from->type())));
        }
      }
      a.when = optional_predicate(r, "when");
    }
    if (sources == 0)
      r.error_here(update ? "each field needs one of 'value', 'compute' or 'copy_from'"
                          : "each field needs 'value' (a static value) or 'compute' (now_ms, topic, ...)");
    else if (sources > 1)
      r.error_here(update ? "give only one of 'value', 'compute' and 'copy_from'"
                          : "give either 'value' or 'compute', not both");
    r.finish();
    if (diag_.count() != before) return std::nullopt;
    return a;
  }

  // What each type of transform reads besides `type` and `when` (docs/transforms.md).
  void fields_specific(TableReader& r, TransformSpec& s) {
    switch (s.type) {
      case TransformType::AddFields:
      case TransformType::UpdateFields: return read_assignments(r, s);
      case TransformType::DeleteFields:
      case TransformType::KeepFields: s.fields = path_list(r); return;
      case TransformType::RenameFields: return read_renames(r, s);
      case TransformType::Filter: return read_filter(r, s);
      case TransformType::MaskFields: return read_mask(r, s);
      case TransformType::Flatten: return read_flatten(r, s);
      case TransformType::Cast: return read_casts(r, s);
      case TransformType::ConvertTimestamp: return read_timestamp_conversion(r, s);
      case TransformType::ExtractField: return read_extract(r, s);
    }
  }

  // add_fields / update_fields: `fields` of assignments; `overwrite` / `create`.
  void read_assignments(TableReader& r, TransformSpec& s) {
    const bool update = s.type == TransformType::UpdateFields;
    table_list(
        r,
        update ? "{ path = \"status\", value = \"void\", when = {...} }" : "{ path = \"source\", value = \"kafka\" }",
        [&](const toml::table& t, const std::string& key) {
          if (auto a = assignment(t, key, update)) s.assignments.push_back(std::move(*a));
        });
    if (update) {
      if (auto create = r.boolean("create")) s.create = *create;
    } else {
      if (auto overwrite = r.boolean("overwrite")) s.overwrite = *overwrite;
    }
  }

  // rename_fields: `fields` of { from, to }.
  void read_renames(TableReader& r, TransformSpec& s) {
    table_list(r, "{ from = \"old\", to = \"new\" }", [&](const toml::table& t, const std::string& key) {
      TableReader e(t, key, diag_, env_);
      const std::size_t before = diag_.count();
      RenameSpec rename;
      rename.key = key;
      if (auto from = path(e, "from", true)) rename.from = std::move(*from);
      if (auto to = path(e, "to", true)) rename.to = std::move(*to);
      e.finish();
      if (diag_.count() == before) s.renames.push_back(std::move(rename));
    });
  }

  // filter: exactly one of `drop_when` and `keep_when`.
  void read_filter(TableReader& r, TransformSpec& s) {
    const toml::node* drop = r.node("drop_when");
    const toml::node* keep = r.node("keep_when");
    if (drop && keep) {
      r.error(*keep, "keep_when", "give either 'drop_when' or 'keep_when', not both");
    } else if (!drop && !keep) {
      r.missing("drop_when", "a condition: the records it matches are dropped (or 'keep_when' to keep only those)");
    } else {
      s.keep_matching = keep != nullptr;
      if (auto p = predicate(keep ? *keep : *drop, r.key_path(keep ? "keep_when" : "drop_when")))
        s.predicate = std::move(*p);
    }
  }

  // mask_fields: `fields`, `replacement`, or a partial mask (`keep_first`, `keep_last`, `mask_char`).
  void read_mask(TableReader& r, TransformSpec& s) {
    s.fields = path_list(r);
    if (const toml::node* n = r.node("replacement"))
      if (auto json = json_value(*n, r.key_path("replacement"))) s.replacement = std::move(*json);
    for (auto [name, slot] :
         {std::pair<std::string_view, std::int64_t*>{"keep_first", &s.keep_first}, {"keep_last", &s.keep_last}}) {
      if (auto n = r.integer(name)) {
        if (*n < 0 || *n > 1000)
          r.error(*r.toml_table().get(name), name, "'" + std::string(name) + "' must be between 0 and 1000");
        else *slot = *n;
      }
    }
    if (auto c = r.string("mask_char")) {
      // Exactly one UTF-8 character.
      std::size_t chars = 0;
      for (unsigned char b : *c) chars += (b & 0xC0) != 0x80;
      if (chars != 1)
        r.error(*r.toml_table().get("mask_char"), "mask_char",
                "'mask_char' must be exactly one character, got \"" + *c + "\"");
      else s.mask_char = std::move(*c);
    }
    if (r.toml_table().get("mask_char") && !r.toml_table().get("keep_first") && !r.toml_table().get("keep_last"))
      r.error(*r.toml_table().get("mask_char"), "mask_char", "'mask_char' goes with 'keep_first' or 'keep_last'");
  }

  // flatten: `separator`.
  void read_flatten(TableReader& r, TransformSpec& s) {
    if (auto sep = r.string("separator")) {
      if (sep->empty()) r.error(*r.toml_table().get("separator"), "separator", "'separator' must not be empty");
      else s.separator = std::move(*sep);
    }
  }

  // cast: `fields` of { path, to }.
  void read_casts(TableReader& r, TransformSpec& s) {
    table_list(r, "{ path = \"amount\", to = \"float\" }", [&](const toml::table& t, const std::string& key) {
      TableReader e(t, key, diag_, env_);
      const std::size_t before = diag_.count();
      CastSpec cast;
      cast.key = key;
      if (auto p = path(e, "path", true)) cast.path = std::move(*p);
      if (auto to = e.string("to", true)) {
        if (auto c = find_named(*to, kCasts)) cast.to = *c;
        else e.error(*t.get("to"), "to", "unknown type '" + *to + "' (" + choices(*to, kCasts) + ")");
      }
      e.finish();
      if (diag_.count() == before) s.casts.push_back(std::move(cast));
    });
  }

  // convert_timestamp: `fields`, `from`, `to`.
  void read_timestamp_conversion(TableReader& r, TransformSpec& s) {
    s.fields = path_list(r);
    for (auto [name, slot] : {std::pair<std::string_view, TimeFormat*>{"from", &s.from}, {"to", &s.to}}) {
      auto text = r.string(name);
      if (!text) continue;
      auto f = find_named(*text, kTimeFormats);
      if (!f || (name == "to" && *f == TimeFormat::Auto))
        r.error(*r.toml_table().get(name), name,
                "unknown time format '" + *text + "' (" +
                    (name == "to" ? "one of rfc3339, date, unix_s, unix_ms, unix_us, unix_ns"
                                  : choices(*text, kTimeFormats)) +
                    ")");
      else *slot = *f;
    }
  }

  // extract_field: `field`, `merge`, `on_missing`.
  void read_extract(TableReader& r, TransformSpec& s) {
    if (auto p = path(r, "field", true)) s.field = std::move(*p);
    if (auto merge = r.boolean("merge")) s.merge = *merge;
    if (auto missing = r.string("on_missing")) {
      if (*missing == "skip") s.on_missing = OnMissing::Skip;
      else if (*missing == "fail") s.on_missing = OnMissing::Fail;
      else if (*missing == "drop") s.on_missing = OnMissing::Drop;
      else
        r.error(*r.toml_table().get("on_missing"), "on_missing",
                "'on_missing' must be \"skip\", \"fail\" or \"drop\", got \"" + *missing + "\"");
    }
  }

  // Returns the node of `type` (for later errors about the whole transform) or null.
  const toml::node* transform(const toml::table& table, int index, TransformSpec& s) {
    s.index = index;
    s.line = static_cast<int>(table.source().begin.line);
    s.key = detail::index_key("transforms", static_cast<std::size_t>(index));
    TableReader r(table, s.key, diag_, env_);
    const toml::node* type_node = table.get("type");
    auto type = r.string("type", true);
    if (!type) return nullptr;  // unknown keys are not reported without a type: they depend on it
    auto t = find_named(*type, kTypes);
    if (!t) {
      r.error(*type_node, "type", "unknown transform type '" + *type + "' (" + choices(*type, kTypes) + ")");
      return nullptr;
    }
    s.type = *t;
    if (s.type != TransformType::Filter) s.when = optional_predicate(r, "when");
    fields_specific(r, s);
    r.finish();
    return type_node;
  }

 private:
  Diagnostics& diag_;
  const EnvLookup& env_;
};

}  // namespace

void parse_transforms(detail::TableReader& root, const std::vector<TopicsBlock>& blocks,
                      std::vector<TransformSpec>& out) {
  const toml::node* node = root.node("transforms");
  if (!node) return;
  const toml::array* items = node->as_array();
  if (!items) {
    root.error(*node, "transforms",
               "'transforms' must be an array of tables ([[transforms]] blocks), got " +
                   std::string(detail::type_name(node->type())));
    return;
  }
  Parser parser(root.diagnostics(), root.env());
  std::vector<const toml::node*> type_nodes;  // per entry of `out`; null when its type is unusable
  out.reserve(items->size());
  for (std::size_t i = 0; i < items->size(); ++i) {
    const toml::node& item = *items->get(i);
    const toml::table* table = item.as_table();
    if (!table) {
      root.diagnostics().error(item.source(), detail::index_key("transforms", i),
                               "each entry of 'transforms' must be a table ([[transforms]] block), got " +
                                   std::string(detail::type_name(item.type())));
      continue;
    }
    TransformSpec spec;
    const std::size_t before = root.diagnostics().count();
    const toml::node* type_node = parser.transform(*table, static_cast<int>(i), spec);
    // A filter whose condition did not parse cannot tell whether it tests payload fields.
    if (spec.type == TransformType::Filter && root.diagnostics().count() != before) type_node = nullptr;
    out.push_back(std::move(spec));
    type_nodes.push_back(type_node);
  }
  // Payload transforms need JSON payloads: refuse them when a block decodes raw or text.
  auto non_json = std::find_if(blocks.begin(), blocks.end(), [](const TopicsBlock& b) {
    return b.schema == Schema::Raw || b.schema == Schema::Text;
  });
  if (non_json == blocks.end()) return;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const toml::node* type_node = type_nodes[i];
    if (!type_node || !out[i].touches_payload()) continue;
    std::string what = out[i].type == TransformType::Filter
                           ? "this filter tests payload fields"
                           : "'" + std::string(to_string(out[i].type)) + "' works on payload fields";
    root.diagnostics().error(
        type_node->source(), out[i].key + ".type",
        what + ", but topics[" + std::to_string(non_json->index) + "] has schema = \"" +
            std::string(to_string(non_json->schema)) +
            "\" (not JSON); with raw or text payloads only 'filter' on header and metadata conditions applies");
  }
}

}  // namespace picomq::config
