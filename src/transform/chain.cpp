#include "transform/chain.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <regex>
#include <stdexcept>

#include "config/regex.h"
#include "picomq/kit/encoding.hpp"
#include "transform/json.h"
#include "transform/time.h"

namespace picomq::transform {

RecordMeta record_meta(std::string_view topic, std::int32_t partition, const pmq_record& record) {
  RecordMeta meta;
  meta.topic = topic;
  meta.partition = partition;
  meta.offset = record.offset;
  meta.timestamp_ms = record.timestamp_ms;
  if (record.key.data) meta.key = std::string_view(reinterpret_cast<const char*>(record.key.data), record.key.size);
  if (record.headers && record.header_count) meta.headers = {record.headers, record.header_count};
  return meta;
}

namespace {

using config::Predicate;
using config::TransformSpec;
using config::TransformType;
using json::Kind;
using json::Member;
using json::Value;
using Segments = std::vector<std::string>;

enum class Outcome { Unchanged, Changed, Drop, Fail };

Value spec_json(const std::string& text, const std::string& where) {
  Value v;
  std::string error;
  if (!json::parse(text, v, error)) throw std::invalid_argument(where + ": invalid JSON value in the spec: " + error);
  return v;
}

std::string number_text(std::int64_t n) { return std::to_string(n); }

std::string_view bytes_view(const pmq_bytes& b) {
  return b.data ? std::string_view(reinterpret_cast<const char*>(b.data), b.size) : std::string_view();
}

std::span<const uint8_t> as_span(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// A value for an error message: JSON text, cut at 60 bytes (on a UTF-8 boundary).
std::string describe(const Value& v) {
  std::string text = json::to_string(v);
  if (text.size() <= 60) return text;
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string quoted(std::string_view path) {
  std::string out;
  kit::append_json_escaped(out, path);
  return out;
}

std::string a_kind(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Array:
    case Kind::Object: return "an " + std::string(json::kind_name(kind));
    default: return "a " + std::string(json::kind_name(kind));
  }
}

// ---- paths ----

std::optional<std::size_t> index_of(const std::string& segment) {
  if (segment.empty() || segment.size() > 9) return std::nullopt;
  if (segment.size() > 1 && segment[0] == '0') return std::nullopt;
  std::size_t n = 0;
  for (char c : segment) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n;
}

Value* child(Value& v, const std::string& segment) {
  if (v.kind == Kind::Object) return v.find(segment);
  if (v.kind == Kind::Array) {
    auto i = index_of(segment);
    if (i && *i < v.items.size()) return &v.items[*i].value;
  }
  return nullptr;
}

// The value at the first `count` segments, or null.
Value* resolve(Value& root, const Segments& segments, std::size_t count) {
  Value* v = &root;
  for (std::size_t i = 0; i < count && v; ++i) v = child(*v, segments[i]);
  return v;
}
Value* resolve(Value& root, const Segments& segments) { return resolve(root, segments, segments.size()); }

std::string prefix_text(const Segments& segments, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += '.';
    for (char c : segments[i]) {
      if (c == '.' || c == '\\') out += '\\';
      out += c;
    }
  }
  return out;
}

// The container that should hold the last segment, creating missing objects on the way.
// Null with `problem` when a value that is neither object nor array is in the way.
Value* make_parent(Value& root, const Segments& segments, std::string& problem) {
  if (!root.is_object() && !root.is_array()) {
    problem = "the payload is " + a_kind(root.kind) + ", not an object";
    return nullptr;
  }
  Value* v = &root;
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    Value* next = child(*v, segments[i]);
    if (!next) {
      if (v->is_object()) {
        next = &v->set(segments[i], Value::object());
      } else {
        problem = "\"" + prefix_text(segments, i) + "\" is an array with no element " + segments[i];
        return nullptr;
      }
    }
    if (!next->is_object() && !next->is_array()) {
      problem = "\"" + prefix_text(segments, i + 1) + "\" is " + a_kind(next->kind) + ", not an object";
      return nullptr;
    }
    v = next;
  }
  return v;
}

// Puts `value` under the last segment of `parent` (an object or array). False with `problem`
// when an array has no such element.
bool put(Value& parent, const std::string& segment, Value value, std::string& problem) {
  if (parent.is_object()) {
    parent.set(segment, std::move(value));
    return true;
  }
  auto i = index_of(segment);
  if (!i) {
    problem = "an array has no field \"" + segment + "\"";
    return false;
  }
  if (*i >= parent.items.size()) {
    problem = "the array has no element " + segment;
    return false;
  }
  parent.items[*i].value = std::move(value);
  return true;
}

bool remove(Value& parent, const std::string& segment) {
  if (parent.is_object()) return parent.erase(segment) > 0;
  if (parent.is_array()) {
    auto i = index_of(segment);
    if (!i || *i >= parent.items.size()) return false;
    parent.items.erase(parent.items.begin() + static_cast<std::ptrdiff_t>(*i));
    return true;
  }
  return false;
}

// Moves the value at `segments` out (removing it); nullopt when missing.
std::optional<Value> take(Value& root, const Segments& segments) {
  Value* parent = resolve(root, segments, segments.size() - 1);
  if (!parent) return std::nullopt;
  const std::string& last = segments.back();
  if (parent->is_object()) {
    for (auto it = parent->items.begin(); it != parent->items.end(); ++it) {
      if (it->key != last) continue;
      Value v = std::move(it->value);
      parent->items.erase(it);
      return v;
    }
    return std::nullopt;
  }
  if (parent->is_array()) {
    auto i = index_of(last);
    if (!i || *i >= parent->items.size()) return std::nullopt;
    Value v = std::move(parent->items[*i].value);
    parent->items.erase(parent->items.begin() + static_cast<std::ptrdiff_t>(*i));
    return v;
  }
  return std::nullopt;
}

// ---- conditions ----

// std::regex (libstdc++) matches recursively, one stack frame or more per character: on long
// subjects it takes quadratic time and, from about 8 KB (ASan, a worker thread), overflows the
// stack. 'matches' therefore reads at most this much; a longer subject is a bad record.
constexpr std::size_t kMaxMatchBytes = 1024;

struct Pred {
  Predicate::Kind kind = Predicate::Kind::Test;
  std::string key;           // config key of the condition, for messages
  std::string subject_name;  // 'field "email"', 'header "x"', 'the topic', for messages
  Predicate::Subject subject = Predicate::Subject::Field;
  Segments field;
  std::string header;
  std::optional<bool> exists;
  std::optional<Value> equals;
  std::vector<Value> in;
  std::optional<std::regex> matches;
  uint64_t matches_id = 0;  // unique per compiled pattern, for topic_matches' memo
  std::optional<std::string> gt, gte, lt, lte;
  std::vector<Pred> children;
  bool metadata_only = true;
};

// A topic condition sees the same topic record after record, and a polynomial-time match costs
// ~1 us (config/regex.h): each thread remembers its last answer per condition and topic. Keyed by
// a number each compiled pattern gets once, so a chain rebuilt at the same address (a reload)
// never reads another pattern's answer.
bool topic_matches(const Pred& p, std::string_view topic) {
  struct Memo {
    uint64_t id = 0;
    std::string topic;
    bool result = false;
  };
  thread_local std::array<Memo, 8> memo;
  Memo& m = memo[p.matches_id % memo.size()];
  if (m.id != p.matches_id || m.topic != topic) {
    m.result = std::regex_match(topic.begin(), topic.end(), *p.matches);
    m.id = p.matches_id;
    m.topic.assign(topic);
  }
  return m.result;
}

Pred compile(const Predicate& p) {
  Pred c;
  c.kind = p.kind;
  c.key = p.key;
  c.metadata_only = p.metadata_only();
  if (p.kind != Predicate::Kind::Test) {
    for (const auto& child : p.children) c.children.push_back(compile(child));
    if (c.children.empty() || (p.kind == Predicate::Kind::Not && c.children.size() != 1))
      throw std::invalid_argument(p.key + ": a combinator needs conditions");
    return c;
  }
  c.subject = p.subject;
  switch (p.subject) {
    case Predicate::Subject::Field: c.subject_name = "field " + quoted(p.field.text); break;
    case Predicate::Subject::Header: c.subject_name = "header " + quoted(p.header); break;
    case Predicate::Subject::Topic: c.subject_name = "the topic"; break;
    case Predicate::Subject::Key: c.subject_name = "the key"; break;
    default: c.subject_name = "the record's metadata"; break;
  }
  c.field = p.field.segments;
  if (p.subject == Predicate::Subject::Field && c.field.empty())
    throw std::invalid_argument(p.key + ": a field condition needs a path");
  c.header = p.header;
  c.exists = p.exists;
  if (p.equals) c.equals = spec_json(*p.equals, p.key + ".equals");
  for (const auto& v : p.in) c.in.push_back(spec_json(v, p.key + ".in"));
  if (p.matches) {
    try {
      c.matches = config::compile_regex(*p.matches);
      static std::atomic<uint64_t> next_id{1};
      c.matches_id = next_id++;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(p.key + ".matches: " + e.what());
    }
  }
  for (auto [from, to] : {std::pair{&p.gt, &c.gt}, {&p.gte, &c.gte}, {&p.lt, &c.lt}, {&p.lte, &c.lte}}) {
    if (!*from) continue;
    if (!json::is_number(**from)) throw std::invalid_argument(p.key + ": a comparison needs a number");
    *to = **from;
  }
  return c;
}

struct Ctx {
  const RecordMeta& meta;
  Value* root = nullptr;  // null: no payload (or not parsed: only metadata is read then)
  const std::function<std::int64_t()>& clock;
  std::optional<std::int64_t> now;  // one clock reading per record
  std::string problem;              // set when a condition cannot be evaluated (the record is bad)

  std::int64_t now_ms() {
    if (!now) {
      now = clock ? clock()
                  : std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    }
    return *now;
  }

  // The parsed payload, for the steps that edit it (apply() parses before running them).
  Value& doc() const {
    if (!root) throw std::logic_error("a transform step that reads the payload ran before it was parsed");
    return *root;
  }

  // The last header named `name`; null when absent.
  const pmq_header* header(std::string_view name) const {
    for (std::size_t i = meta.headers.size(); i-- > 0;)
      if (bytes_view(meta.headers[i].name) == name) return &meta.headers[i];
    return nullptr;
  }
};

// The subject's value, or null when the record has none (missing field, absent header or key,
// no timestamp). Metadata is materialised into `scratch`.
const Value* subject(const Pred& p, Ctx& ctx, Value& scratch) {
  switch (p.subject) {
    case Predicate::Subject::Field: return ctx.root ? resolve(*ctx.root, p.field) : nullptr;
    case Predicate::Subject::Header: {
      const pmq_header* h = ctx.header(p.header);
      if (!h) return nullptr;
      scratch = h->value.data ? Value::string(std::string(bytes_view(h->value))) : Value::null();
      return &scratch;
    }
    case Predicate::Subject::Topic: scratch = Value::string(std::string(ctx.meta.topic)); return &scratch;
    case Predicate::Subject::Key:
      if (!ctx.meta.key) return nullptr;
      scratch = Value::string(std::string(*ctx.meta.key));
      return &scratch;
    case Predicate::Subject::Partition: scratch = Value::number(number_text(ctx.meta.partition)); return &scratch;
    case Predicate::Subject::Offset: scratch = Value::number(number_text(ctx.meta.offset)); return &scratch;
    case Predicate::Subject::Timestamp:
      if (ctx.meta.timestamp_ms < 0) return nullptr;
      scratch = Value::number(number_text(ctx.meta.timestamp_ms));
      return &scratch;
  }
  return nullptr;
}

bool eval(const Pred& p, Ctx& ctx) {
  switch (p.kind) {
    case Predicate::Kind::All:
      return std::all_of(p.children.begin(), p.children.end(), [&](const Pred& c) { return eval(c, ctx); });
    case Predicate::Kind::Any:
      return std::any_of(p.children.begin(), p.children.end(), [&](const Pred& c) { return eval(c, ctx); });
    case Predicate::Kind::Not: return !eval(p.children.front(), ctx);
    case Predicate::Kind::Test: break;
  }
  Value scratch;
  const Value* v = subject(p, ctx, scratch);
  if (p.exists && (v != nullptr) != *p.exists) return false;
  if (p.equals && (!v || !json::equal(*v, *p.equals))) return false;
  if (!p.in.empty() &&
      (!v || std::none_of(p.in.begin(), p.in.end(), [&](const Value& c) { return json::equal(*v, c); })))
    return false;
  if (p.matches) {
    if (!v || v->kind != Kind::String) return false;
    if (v->text.size() > kMaxMatchBytes) {
      if (ctx.problem.empty())
        ctx.problem = "condition " + p.key + ": " + p.subject_name + " is " + std::to_string(v->text.size()) +
                      " bytes long; 'matches' reads at most " + std::to_string(kMaxMatchBytes);
      return false;
    }
    if (p.subject == Predicate::Subject::Topic ? !topic_matches(p, ctx.meta.topic)
                                               : !std::regex_match(v->text, *p.matches))
      return false;
  }
  if (p.gt || p.gte || p.lt || p.lte) {
    if (!v || v->kind != Kind::Number) return false;
    if (p.gt && !(json::compare_numbers(v->text, *p.gt) > 0)) return false;
    if (p.gte && !(json::compare_numbers(v->text, *p.gte) >= 0)) return false;
    if (p.lt && !(json::compare_numbers(v->text, *p.lt) < 0)) return false;
    if (p.lte && !(json::compare_numbers(v->text, *p.lte) <= 0)) return false;
  }
  return true;
}

// ---- compiled transforms ----

struct Assignment {
  config::FieldAssignment spec;
  std::optional<Value> value;  // Static
  std::optional<Pred> when;
};

// keep_fields paths as a tree: {"id", "ship_to.city"} -> id (leaf), ship_to -> city (leaf).
struct KeepNode {
  std::string name;
  bool leaf = false;
  std::vector<KeepNode> children;
  KeepNode* find(std::string_view n);
  const KeepNode* find(std::string_view n) const;
};

KeepNode* KeepNode::find(std::string_view n) {
  for (auto& c : children)
    if (c.name == n) return &c;
  return nullptr;
}
const KeepNode* KeepNode::find(std::string_view n) const { return const_cast<KeepNode*>(this)->find(n); }

struct Step {
  TransformSpec spec;
  std::string prefix;  // "transforms[3] (cast): "
  std::optional<Pred> when;
  bool needs_payload = true;
  std::vector<Assignment> assignments;
  Pred filter;
  Value replacement;
  KeepNode keep;

  std::string field_error(const config::FieldPath& path, const std::string& reason) const {
    return prefix + "field " + quoted(path.text) + ": " + reason;
  }
};

// RFC 3339 text of epoch milliseconds; null outside the years 0000-9999 it can write.
Value rfc3339_or_null(std::int64_t ms) {
  time::Instant t = time::from_millis(ms);
  if (t.seconds < time::kMinSeconds || t.seconds > time::kMaxSeconds) return Value::null();
  return Value::string(time::to_rfc3339(t));
}

Value computed(const config::ValueSource& src, Ctx& ctx) {
  using C = config::ValueSource::Compute;
  const RecordMeta& m = ctx.meta;
  switch (src.compute) {
    case C::NowMs: return Value::number(number_text(ctx.now_ms()));
    case C::NowRfc3339: return rfc3339_or_null(ctx.now_ms());
    case C::Topic: return Value::string(std::string(m.topic));
    case C::Partition: return Value::number(number_text(m.partition));
    case C::Offset: return Value::number(number_text(m.offset));
    case C::TimestampMs: return m.timestamp_ms < 0 ? Value::null() : Value::number(number_text(m.timestamp_ms));
    case C::TimestampRfc3339: return m.timestamp_ms < 0 ? Value::null() : rfc3339_or_null(m.timestamp_ms);
    case C::Key: return m.key ? Value::string(kit::header_value_as_string(as_span(*m.key))) : Value::null();
    case C::KeyBase64: return m.key ? Value::string(kit::base64_encode(*m.key)) : Value::null();
    case C::Header: {
      const pmq_header* h = ctx.header(src.header);
      if (!h || !h->value.data) return Value::null();
      return Value::string(kit::header_value_as_string(as_span(bytes_view(h->value))));
    }
    case C::RecordId:
      return Value::string(std::string(m.topic) + ':' + number_text(m.partition) + ':' + number_text(m.offset));
  }
  return Value::null();
}

// The value an assignment writes; nullopt when it copies from a missing field.
std::optional<Value> assigned_value(const Assignment& a, Ctx& ctx) {
  switch (a.spec.value.kind) {
    case config::ValueSource::Kind::Static: return *a.value;
    case config::ValueSource::Kind::Compute: return computed(a.spec.value, ctx);
    case config::ValueSource::Kind::CopyFrom: {
      const Value* from = resolve(ctx.doc(), a.spec.value.from.segments);
      if (!from) return std::nullopt;
      return *from;
    }
  }
  return std::nullopt;
}

Outcome add_or_update(const Step& s, Ctx& ctx, std::string& error) {
  const bool update = s.spec.type == TransformType::UpdateFields;
  Value& root = ctx.doc();
  bool changed = false;
  for (const auto& a : s.assignments) {
    if (a.when && !eval(*a.when, ctx)) {
      if (!ctx.problem.empty()) {
        error = s.prefix + ctx.problem;
        return Outcome::Fail;
      }
      continue;
    }
    const Segments& path = a.spec.path.segments;
    Value* existing = resolve(root, path);
    if (existing ? (!update && !s.spec.overwrite) : (update && !s.spec.create)) continue;
    std::optional<Value> value = assigned_value(a, ctx);
    if (!value) continue;
    if (existing) {
      *existing = std::move(*value);
      changed = true;
      continue;
    }
    std::string problem;
    Value* parent = make_parent(root, path, problem);
    if (!parent || !put(*parent, path.back(), std::move(*value), problem)) {
      error = s.field_error(a.spec.path, "cannot set it: " + problem);
      return Outcome::Fail;
    }
    changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

Outcome delete_fields(const Step& s, Ctx& ctx) {
  bool changed = false;
  for (const auto& path : s.spec.fields) {
    Value* parent = resolve(ctx.doc(), path.segments, path.segments.size() - 1);
    if (parent && remove(*parent, path.segments.back())) changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

Outcome rename_fields(const Step& s, Ctx& ctx, std::string& error) {
  Value& root = ctx.doc();
  bool changed = false;
  for (const auto& r : s.spec.renames) {
    const Segments& from = r.from.segments;
    const Segments& to = r.to.segments;
    if (from == to) continue;
    Value* from_parent = resolve(root, from, from.size() - 1);
    if (!from_parent || !child(*from_parent, from.back())) continue;
    // Same object: rename the member where it stands.
    if (from_parent->is_object() && from.size() == to.size() && std::equal(from.begin(), from.end() - 1, to.begin())) {
      // The last segments differ (from != to): drop what the new name held, then rename.
      from_parent->erase(to.back());
      auto& items = from_parent->items;
      std::find_if(items.begin(), items.end(), [&](const Member& m) { return m.key == from.back(); })->key = to.back();
      changed = true;
      continue;
    }
    std::optional<Value> value = take(root, from);
    changed = true;
    std::string problem;
    Value* parent = make_parent(root, to, problem);
    if (!parent || !put(*parent, to.back(), std::move(*value), problem)) {
      error = s.prefix + "field " + quoted(r.from.text) + " -> " + quoted(r.to.text) + ": cannot move it: " + problem;
      return Outcome::Fail;
    }
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

void prune(Value& v, const KeepNode& node, bool& changed) {
  if (node.leaf || (!v.is_object() && !v.is_array())) return;
  std::vector<Member> kept;
  kept.reserve(std::min(v.items.size(), node.children.size()));
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    Member& m = v.items[i];
    const KeepNode* c = v.is_object() ? node.find(m.key) : node.find(std::to_string(i));
    if (!c || (!c->leaf && !m.value.is_object() && !m.value.is_array())) continue;
    if (!c->leaf) prune(m.value, *c, changed);
    kept.push_back(std::move(m));
  }
  if (kept.size() != v.items.size()) changed = true;
  v.items = std::move(kept);
}

Outcome keep_fields(const Step& s, Ctx& ctx) {
  Value& root = ctx.doc();
  if (!root.is_object()) return Outcome::Unchanged;  // a record without fields: nothing to choose from
  bool changed = false;
  prune(root, s.keep, changed);
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

std::string mask_text(std::string_view text, std::size_t first, std::size_t last, std::string_view mask) {
  std::vector<std::size_t> starts;  // byte offset of each code point
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  const std::size_t n = starts.size();
  std::string out;
  if (n <= first + last) {
    for (std::size_t i = 0; i < n; ++i) out += mask;
    return out;
  }
  out.append(text.substr(0, starts[first]));
  for (std::size_t i = first; i < n - last; ++i) out += mask;
  out.append(text.substr(last ? starts[n - last] : text.size()));
  return out;
}

Outcome mask_fields(const Step& s, Ctx& ctx) {
  bool changed = false;
  for (const auto& path : s.spec.fields) {
    Value* v = resolve(ctx.doc(), path.segments);
    if (!v || v->is_null()) continue;
    if (s.spec.partial_mask() && (v->kind == Kind::String || v->kind == Kind::Number)) {
      *v = Value::string(mask_text(v->text, static_cast<std::size_t>(s.spec.keep_first),
                                   static_cast<std::size_t>(s.spec.keep_last), s.spec.mask_char));
    } else {
      *v = s.replacement;
    }
    changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

void flatten_into(std::string name, Value&& v, const std::string& sep, std::vector<Member>& out,
                  std::vector<bool>& generated) {
  if (v.is_object() && !v.items.empty()) {
    for (auto& m : v.items) flatten_into(name + sep + m.key, std::move(m.value), sep, out, generated);
    return;
  }
  out.push_back(Member{std::move(name), std::move(v)});
  generated.push_back(true);
}

Outcome flatten(const Step& s, Ctx& ctx, std::string& error) {
  Value& root = ctx.doc();
  if (!root.is_object()) return Outcome::Unchanged;
  if (std::none_of(root.items.begin(), root.items.end(),
                   [](const Member& m) { return m.value.is_object() && !m.value.items.empty(); }))
    return Outcome::Unchanged;
  std::vector<Member> out;
  std::vector<bool> generated;
  out.reserve(root.items.size() * 2);
  for (auto& m : root.items) {
    if (m.value.is_object() && !m.value.items.empty()) {
      for (auto& inner : m.value.items)
        flatten_into(m.key + s.spec.separator + inner.key, std::move(inner.value), s.spec.separator, out, generated);
    } else {
      out.push_back(std::move(m));
      generated.push_back(false);
    }
  }
  // A flattened name that equals another name would silently lose data: a bad record instead.
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return out[a].key < out[b].key; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    std::size_t a = order[i - 1], b = order[i];
    if (out[a].key == out[b].key && (generated[a] || generated[b])) {
      error = s.prefix + "flattened name " + quoted(out[a].key) + " is also the name of another field";
      return Outcome::Fail;
    }
  }
  root.items = std::move(out);
  return Outcome::Changed;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The number a value stands for: a number's text, or a string holding a JSON number.
std::optional<std::string> numeric_text(const Value& v, std::string& reason) {
  if (v.kind == Kind::Number) return v.text;
  if (v.kind == Kind::String) {
    std::string_view t = trim(v.text);
    if (json::is_number(t)) return std::string(t);
    reason = describe(v) + " is not a number";
    return std::nullopt;
  }
  if (v.kind == Kind::Bool) return std::string(v.boolean ? "1" : "0");
  reason = "cannot cast " + a_kind(v.kind) + " " + describe(v) + " to a number";
  return std::nullopt;
}

bool cast_value(Value& v, config::CastType to, std::string& reason) {
  switch (to) {
    case config::CastType::String:
      if (v.kind == Kind::String) return true;
      if (v.kind == Kind::Number) v = Value::string(std::move(v.text));
      else if (v.kind == Kind::Bool) v = Value::string(v.boolean ? "true" : "false");
      else v = Value::string(json::to_string(v));
      return true;
    case config::CastType::Integer: {
      auto text = numeric_text(v, reason);
      if (!text) return false;
      if (json::is_integer_text(*text)) {
        v = Value::number(std::move(*text));
        return true;
      }
      auto integer = json::truncate_to_integer(*text);
      if (!integer) {
        reason = *text + " is too large for an integer";
        return false;
      }
      v = Value::number(std::move(*integer));
      return true;
    }
    case config::CastType::Float: {
      auto text = numeric_text(v, reason);
      if (!text) return false;
      if (json::is_integer_text(*text)) *text += ".0";
      v = Value::number(std::move(*text));
      return true;
    }
    case config::CastType::Boolean:
      if (v.kind == Kind::Bool) return true;
      if (v.kind == Kind::Number) {
        v = Value::from_bool(!json::is_zero(v.text));
        return true;
      }
      if (v.kind == Kind::String) {
        std::string_view t = trim(v.text);
        if (t == "true" || t == "false") {
          v = Value::from_bool(t == "true");
          return true;
        }
        reason = describe(v) + " is not true or false";
        return false;
      }
      reason = "cannot cast " + a_kind(v.kind) + " " + describe(v) + " to a boolean";
      return false;
    case config::CastType::Json: {
      if (v.kind != Kind::String) return true;
      Value parsed;
      std::string problem;
      if (!json::parse(v.text, parsed, problem)) {
        reason = describe(v) + " is not valid JSON: " + problem;
        return false;
      }
      v = std::move(parsed);
      return true;
    }
  }
  return false;
}

Outcome cast(const Step& s, Ctx& ctx, std::string& error) {
  bool changed = false;
  for (const auto& c : s.spec.casts) {
    Value* v = resolve(ctx.doc(), c.path.segments);
    if (!v || v->is_null()) continue;
    std::string reason;
    if (!cast_value(*v, c.to, reason)) {
      error = s.field_error(c.path, reason);
      return Outcome::Fail;
    }
    changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

time::Unit unit_of(config::TimeFormat f) {
  switch (f) {
    case config::TimeFormat::UnixS: return time::Unit::Seconds;
    case config::TimeFormat::UnixUs: return time::Unit::Micros;
    case config::TimeFormat::UnixNs: return time::Unit::Nanos;
    default: return time::Unit::Millis;
  }
}

std::optional<time::Instant> read_time(const Value& v, config::TimeFormat from, std::string& reason) {
  using F = config::TimeFormat;
  std::string problem;
  std::optional<time::Instant> t;
  if (v.kind != Kind::Number && v.kind != Kind::String) {
    reason = a_kind(v.kind) + " " + describe(v) + " is not a timestamp";
    return std::nullopt;
  }
  const bool numeric = v.kind == Kind::Number || json::is_number(v.text);
  if (from == F::Rfc3339 || from == F::Date || (from == F::Auto && !numeric)) {
    if (v.kind != Kind::String) {
      reason = describe(v) + " is not an RFC 3339 string";
      return std::nullopt;
    }
    t = time::parse_rfc3339(v.text, problem);
  } else {
    if (!numeric) {
      reason =
          describe(v) + " is not a number of " + std::string(from == F::Auto ? "unix_ms" : config::to_string(from));
      return std::nullopt;
    }
    t = time::from_number(v.text, unit_of(from), problem);
  }
  if (!t) reason = describe(v) + " " + problem;
  return t;
}

Outcome convert_timestamp(const Step& s, Ctx& ctx, std::string& error) {
  bool changed = false;
  for (const auto& path : s.spec.fields) {
    Value* v = resolve(ctx.doc(), path.segments);
    if (!v || v->is_null()) continue;
    std::string reason;
    auto t = read_time(*v, s.spec.from, reason);
    if (!t) {
      error = s.field_error(path, reason);
      return Outcome::Fail;
    }
    switch (s.spec.to) {
      case config::TimeFormat::Rfc3339:
      case config::TimeFormat::Auto: *v = Value::string(time::to_rfc3339(*t)); break;
      case config::TimeFormat::Date: *v = Value::string(time::to_date(*t)); break;
      default: *v = Value::number(time::to_number(*t, unit_of(s.spec.to))); break;
    }
    changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

Outcome extract_field(const Step& s, Ctx& ctx, std::string& error) {
  Value& root = ctx.doc();
  const Segments& path = s.spec.field.segments;
  Value* v = resolve(root, path);
  if (!v) {
    switch (s.spec.on_missing) {
      case config::OnMissing::Skip: return Outcome::Unchanged;
      case config::OnMissing::Drop: return Outcome::Drop;
      case config::OnMissing::Fail: error = s.field_error(s.spec.field, "is missing"); return Outcome::Fail;
    }
  }
  if (!s.spec.merge) {
    Value extracted = std::move(*v);
    root = std::move(extracted);
    return Outcome::Changed;
  }
  if (!v->is_object() || !root.is_object()) {
    error =
        s.field_error(s.spec.field, "cannot merge " + a_kind(v->kind) + " " + describe(*v) + " into " +
                                        a_kind(root.kind) + " payload: only an object's fields merge into an object");
    return Outcome::Fail;
  }
  std::optional<Value> taken = take(root, path);
  for (auto& m : taken->items) root.set(m.key, std::move(m.value));
  return Outcome::Changed;
}

}  // namespace

struct Chain::Impl {
  std::vector<Step> steps;
  ChainOptions options;
};

Chain::Chain() : impl_(std::make_unique<Impl>()) {}
Chain::~Chain() = default;
Chain::Chain(Chain&&) noexcept = default;
Chain& Chain::operator=(Chain&&) noexcept = default;

Chain::Chain(const std::vector<TransformSpec>& specs, ChainOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TransformSpec& spec = specs[i];
    Step step;
    step.spec = spec;
    std::string key = spec.key.empty() ? "transforms[" + std::to_string(i) + "]" : spec.key;
    step.prefix = key + " (" + std::string(config::to_string(spec.type)) + "): ";
    if (spec.when && spec.type != TransformType::Filter) step.when = compile(*spec.when);
    step.needs_payload = spec.touches_payload();
    auto need_paths = [&](const std::vector<config::FieldPath>& paths) {
      if (paths.empty()) throw std::invalid_argument(key + ": 'fields' is empty");
      for (const auto& p : paths)
        if (p.segments.empty()) throw std::invalid_argument(key + ": an empty field path");
    };
    switch (spec.type) {
      case TransformType::AddFields:
      case TransformType::UpdateFields:
        if (spec.assignments.empty()) throw std::invalid_argument(key + ": 'fields' is empty");
        for (const auto& a : spec.assignments) {
          if (a.path.segments.empty()) throw std::invalid_argument(key + ": an empty field path");
          Assignment c;
          c.spec = a;
          if (a.value.kind == config::ValueSource::Kind::Static) c.value = spec_json(a.value.json, key);
          if (a.value.kind == config::ValueSource::Kind::CopyFrom && a.value.from.segments.empty())
            throw std::invalid_argument(key + ": copy_from needs a path");
          if (a.when) c.when = compile(*a.when);
          step.assignments.push_back(std::move(c));
        }
        break;
      case TransformType::DeleteFields:
      case TransformType::ConvertTimestamp: need_paths(spec.fields); break;
      case TransformType::MaskFields:
        need_paths(spec.fields);
        step.replacement = spec_json(spec.replacement, key + ".replacement");
        break;
      case TransformType::KeepFields:
        need_paths(spec.fields);
        for (const auto& p : spec.fields) {
          KeepNode* node = &step.keep;
          for (const auto& seg : p.segments) {
            KeepNode* next = node->find(seg);
            if (!next) {
              node->children.push_back(KeepNode{seg, false, {}});
              next = &node->children.back();
            }
            node = next;
          }
          node->leaf = true;
        }
        break;
      case TransformType::RenameFields:
        if (spec.renames.empty()) throw std::invalid_argument(key + ": 'fields' is empty");
        for (const auto& r : spec.renames)
          if (r.from.segments.empty() || r.to.segments.empty())
            throw std::invalid_argument(key + ": an empty field path");
        break;
      case TransformType::Filter: step.filter = compile(spec.predicate); break;
      case TransformType::Flatten:
        if (spec.separator.empty()) throw std::invalid_argument(key + ": an empty separator");
        break;
      case TransformType::Cast:
        if (spec.casts.empty()) throw std::invalid_argument(key + ": 'fields' is empty");
        for (const auto& c : spec.casts)
          if (c.path.segments.empty()) throw std::invalid_argument(key + ": an empty field path");
        break;
      case TransformType::ExtractField:
        if (spec.field.segments.empty()) throw std::invalid_argument(key + ": 'field' is empty");
        break;
    }
    impl_->steps.push_back(std::move(step));
  }
}

bool Chain::empty() const { return impl_->steps.empty(); }
std::size_t Chain::size() const { return impl_->steps.size(); }

Verdict Chain::apply(const RecordMeta& meta, std::string& payload, std::string& error) const {
  if (impl_->steps.empty()) return Verdict::Keep;
  Value doc;
  bool parsed = false, changed = false;
  Ctx ctx{meta, nullptr, impl_->options.now_ms, std::nullopt, {}};
  auto ensure_parsed = [&](const Step& step) {
    if (parsed) return true;
    std::string problem;
    if (!json::parse(payload, doc, problem)) {
      error = step.prefix + "payload is not valid JSON: " + problem;
      return false;
    }
    parsed = true;
    ctx.root = &doc;
    return true;
  };
  for (const Step& step : impl_->steps) {
    if (step.when) {
      if (!step.when->metadata_only && !ensure_parsed(step)) return Verdict::Fail;
      if (!eval(*step.when, ctx)) {
        if (!ctx.problem.empty()) {
          error = step.prefix + ctx.problem;
          return Verdict::Fail;
        }
        continue;
      }
    }
    if (step.needs_payload && !ensure_parsed(step)) return Verdict::Fail;
    Outcome outcome = Outcome::Unchanged;
    switch (step.spec.type) {
      case TransformType::AddFields:
      case TransformType::UpdateFields: outcome = add_or_update(step, ctx, error); break;
      case TransformType::DeleteFields: outcome = delete_fields(step, ctx); break;
      case TransformType::RenameFields: outcome = rename_fields(step, ctx, error); break;
      case TransformType::KeepFields: outcome = keep_fields(step, ctx); break;
      case TransformType::Filter: {
        const bool matched = eval(step.filter, ctx);
        if (!ctx.problem.empty()) {
          error = step.prefix + ctx.problem;
          return Verdict::Fail;
        }
        outcome = matched != step.spec.keep_matching ? Outcome::Drop : Outcome::Unchanged;
        break;
      }
      case TransformType::MaskFields: outcome = mask_fields(step, ctx); break;
      case TransformType::Flatten: outcome = flatten(step, ctx, error); break;
      case TransformType::Cast: outcome = cast(step, ctx, error); break;
      case TransformType::ConvertTimestamp: outcome = convert_timestamp(step, ctx, error); break;
      case TransformType::ExtractField: outcome = extract_field(step, ctx, error); break;
    }
    switch (outcome) {
      case Outcome::Unchanged: break;
      case Outcome::Changed: changed = true; break;
      case Outcome::Drop: return Verdict::Drop;
      case Outcome::Fail: return Verdict::Fail;
    }
  }
  if (changed) {
    payload.clear();
    json::serialize(doc, payload);
  }
  return Verdict::Keep;
}

Verdict Chain::apply_without_payload(const RecordMeta& meta, std::string& error) const {
  Ctx ctx{meta, nullptr, impl_->options.now_ms, std::nullopt, {}};
  for (const Step& step : impl_->steps) {
    if (step.spec.type != TransformType::Filter) continue;
    const bool matched = eval(step.filter, ctx);
    if (!ctx.problem.empty()) {
      error = step.prefix + ctx.problem;
      return Verdict::Fail;
    }
    if (matched != step.spec.keep_matching) return Verdict::Drop;
  }
  return Verdict::Keep;
}

}  // namespace picomq::transform
