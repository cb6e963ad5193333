#include "picomq/kit/object_key.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "picomq/kit/sanitize.hpp"

namespace picomq::kit {
namespace {

using Field = ObjectKeyTemplate::Field;

struct Named {
  std::string_view name;
  Field field;
};
constexpr Named kNames[] = {
    {"topic", Field::Topic},      {"partition", Field::Partition}, {"start_offset", Field::StartOffset},
    {"sink_key", Field::SinkKey}, {"year", Field::Year},           {"month", Field::Month},
    {"day", Field::Day},          {"hour", Field::Hour},           {"ext", Field::Ext},
};

// Finer fields rank higher.
int rank(Field f) {
  switch (f) {
    case Field::Year: return 1;
    case Field::Month: return 2;
    case Field::Day: return 3;
    case Field::Hour: return 4;
    default: return 0;
  }
}

// A topic (or one of its segments) as one safe key segment.
Result<std::string> safe_topic(std::string_view topic) {
  auto sanitized = sanitize_name(topic, NamePolicy::ObjectKey);
  if (!sanitized) return sanitized;
  std::string out;
  for (char c : sanitized.value()) {
    if (c == '/') out += "%2F";
    else out += c;
  }
  if (out.empty())
    return Result<std::string>::failure("topic '" + std::string(topic) + "' leaves an empty key segment");
  return Result<std::string>::success(std::move(out));
}

std::chrono::year_month_day civil(int64_t timestamp_ms) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds(timestamp_ms < 0 ? 0 : timestamp_ms)};
  return year_month_day(floor<days>(t));
}

std::string padded(int64_t value, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(value));
  return buf;
}

}  // namespace

Result<ObjectKeyTemplate> ObjectKeyTemplate::parse(std::string_view text) {
  using R = Result<ObjectKeyTemplate>;
  ObjectKeyTemplate t;
  t.source_ = std::string(text);
  if (text.empty()) return R::failure("the key template is empty");
  if (text.front() == '/') return R::failure("the key template may not start with '/'");
  std::string literal;
  auto flush_literal = [&] {
    if (!literal.empty()) t.parts_.push_back({Field::Literal, std::move(literal), 0});
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const std::string column = " (column " + std::to_string(i + 1) + ")";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return R::failure("control character in the key template" + column);
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        literal += '}';
        ++i;
        continue;
      }
      return R::failure("unmatched '}'" + column + "; write '}}' for a literal brace");
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      literal += '{';
      ++i;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string_view::npos) return R::failure("unclosed '{'" + column);
    const std::string_view name = text.substr(i + 1, close - i - 1);
    flush_literal();
    Part part{Field::Literal, {}, 0};
    constexpr std::string_view seg = "topic_segment[";
    if (name.substr(0, seg.size()) == seg && name.size() > seg.size() + 1 && name.back() == ']') {
      const std::string number(name.substr(seg.size(), name.size() - seg.size() - 1));
      size_t used = 0;
      int index = 0;
      try {
        index = std::stoi(number, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != number.size() || number.empty())
        return R::failure("'{" + std::string(name) + "}': the segment index must be an integer" + column);
      part.field = Field::Segment;
      part.index = index;
    } else {
      for (const Named& n : kNames)
        if (n.name == name) part.field = n.field;
      if (part.field == Field::Literal)
        return R::failure("unknown placeholder '{" + std::string(name) + "}'" + column +
                          "; known: {topic}, {topic_segment[N]}, {partition}, {start_offset}, {sink_key}, {year}, "
                          "{month}, {day}, {hour}, {ext}");
    }
    if (rank(part.field) > rank(t.finest_time_)) t.finest_time_ = part.field;
    t.parts_.push_back(std::move(part));
    i = close;
  }
  flush_literal();
  return R::success(std::move(t));
}

std::string_view ObjectKeyTemplate::name(Field field) {
  if (field == Field::Segment) return "topic_segment[N]";
  for (const Named& n : kNames)
    if (n.field == field) return n.name;
  return "";
}

std::vector<ObjectKeyTemplate::Field> ObjectKeyTemplate::after_start_offset() const {
  std::vector<Field> out;
  bool after = false;
  for (const Part& p : parts_) {
    if (after && p.field != Field::Literal) out.push_back(p.field);
    if (p.field == Field::StartOffset) after = true;
  }
  return out;
}

std::optional<std::string> ObjectKeyTemplate::topics_problem(const std::vector<Subscription>& blocks) const {
  std::vector<std::string> topics;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].pattern && !uses(Field::Topic))
      return "holds no {topic}, and [[topics]] block " + std::to_string(i) + " subscribes by pattern '" +
             *blocks[i].pattern + "': the objects of two topics it matches could get the same key, and one topic's " +
             "object be taken for the other's records. Add {topic}";
    for (const auto& t : blocks[i].topics)
      if (std::find(topics.begin(), topics.end(), t) == topics.end()) topics.push_back(t);
  }
  std::map<std::string, std::string> seen;  // a key every topic resolves (partition 0, offset 0) -> its topic
  for (const auto& t : topics) {
    auto key = resolve({.topic = t, .partition = 0, .start_offset = 0, .timestamp_ms = 0, .sink_key = "k", .ext = "x"});
    if (!key) return key.error();
    if (uses(Field::Topic)) continue;
    auto [it, fresh] = seen.emplace(key.value(), t);
    if (!fresh)
      return "holds no {topic}, and topics '" + it->second + "' and '" + t +
             "' of the [[topics]] blocks resolve to the same keys: one topic's object would be taken for the " +
             "other's records. Add {topic}";
  }
  return std::nullopt;
}

bool ObjectKeyTemplate::uses(Field field) const {
  for (const Part& p : parts_)
    if (p.field == field) return true;
  return false;
}

int64_t ObjectKeyTemplate::time_bucket(int64_t timestamp_ms) const {
  const int64_t ts = timestamp_ms < 0 ? 0 : timestamp_ms;
  switch (finest_time_) {
    case Field::Hour: return ts / 3'600'000;
    case Field::Day: return ts / 86'400'000;
    case Field::Month: {
      const auto d = civil(ts);
      return int64_t{int(d.year())} * 12 + unsigned(d.month());
    }
    case Field::Year: return int(civil(ts).year());
    default: return 0;
  }
}

Result<std::string> ObjectKeyTemplate::resolve(const ObjectKeyFields& f) const { return resolve_parts(f, false); }
Result<std::string> ObjectKeyTemplate::resolve_prefix(const ObjectKeyFields& f) const { return resolve_parts(f, true); }

Result<std::string> ObjectKeyTemplate::resolve_parts(const ObjectKeyFields& f, bool until_start_offset) const {
  using R = Result<std::string>;
  std::string out;
  const auto date = civil(f.timestamp_ms);
  for (const Part& p : parts_) {
    if (until_start_offset && p.field == Field::StartOffset) break;
    switch (p.field) {
      case Field::Literal: out += p.literal; break;
      case Field::Topic: {
        auto t = safe_topic(f.topic);
        if (!t) return t;
        out += t.value();
        break;
      }
      case Field::Segment: {
        std::vector<std::string_view> segments;
        size_t start = 0;
        for (size_t i = 0; i <= f.topic.size(); ++i)
          if (i == f.topic.size() || f.topic[i] == '.') {
            segments.push_back(f.topic.substr(start, i - start));
            start = i + 1;
          }
        const int n = static_cast<int>(segments.size());
        const int index = p.index < 0 ? n + p.index : p.index;
        if (index < 0 || index >= n)
          return R::failure("topic '" + std::string(f.topic) + "' has no segment " + std::to_string(p.index) +
                            " (key template '" + source_ + "')");
        auto t = safe_topic(segments[static_cast<size_t>(index)]);
        if (!t) return t;
        out += t.value();
        break;
      }
      case Field::Partition: out += std::to_string(f.partition); break;
      case Field::StartOffset: out += padded(f.start_offset, 20); break;
      case Field::SinkKey: {
        auto t = safe_topic(f.sink_key);
        if (!t) return t;
        out += t.value();
        break;
      }
      case Field::Year: out += padded(int(date.year()), 4); break;
      case Field::Month: out += padded(unsigned(date.month()), 2); break;
      case Field::Day: out += padded(unsigned(date.day()), 2); break;
      case Field::Hour: out += padded(((f.timestamp_ms < 0 ? 0 : f.timestamp_ms) / 3'600'000) % 24, 2); break;
      case Field::Ext: out += f.ext; break;
    }
  }
  if (out.size() > 1024) return R::failure("the key is longer than 1024 bytes: " + out.substr(0, 80) + "...");
  return R::success(std::move(out));
}

}  // namespace picomq::kit
