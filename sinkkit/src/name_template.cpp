#include "picomq/kit/name_template.hpp"

#include <charconv>
#include <cstdint>

namespace picomq::kit {

namespace {

constexpr std::string_view kSegmentPrefix = "topic_segment[";

// 1-based column of byte `pos`, counted in characters (UTF-8 continuation bytes skipped) so it
// matches what an editor shows for a non-ASCII template.
std::size_t column_of(std::string_view text, std::size_t pos) {
  std::size_t column = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) ++column;
  }
  return column;
}

std::string parse_error(std::string_view text, std::size_t pos, std::string_view problem) {
  std::string message = "name template \"";
  message.append(text);
  message.append("\": ");
  message.append(problem);
  message.append(" at column ");
  message.append(std::to_string(column_of(text, pos)));
  return message;
}

// Splits on '.': "a.b" has 2 segments, "a..b" 3 (one empty), "" one (empty).
std::vector<std::string_view> split_segments(std::string_view topic) {
  std::vector<std::string_view> segments;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = topic.find('.', start);
    if (dot == std::string_view::npos) {
      segments.push_back(topic.substr(start));
      return segments;
    }
    segments.push_back(topic.substr(start, dot - start));
    start = dot + 1;
  }
}

}  // namespace

Result<NameTemplate> NameTemplate::parse(std::string_view text) {
  using R = Result<NameTemplate>;
  if (text.empty()) return R::failure("name template is empty");

  NameTemplate tmpl;
  tmpl.source_ = std::string(text);
  std::string literal;  // pending literal text
  auto flush_literal = [&] {
    if (!literal.empty()) tmpl.parts_.push_back({Part::Kind::Literal, std::move(literal), 0});
    literal.clear();
  };

  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        literal.push_back('}');
        i += 2;
        continue;
      }
      return R::failure(parse_error(text, i, "unbalanced '}' (write '}}' for a literal brace)"));
    }
    if (c != '{') {
      literal.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      literal.push_back('{');
      i += 2;
      continue;
    }

    // A placeholder: its body runs to the next '}', and may not contain another '{'.
    const std::size_t open = i;
    const std::size_t close = text.find_first_of("{}", open + 1);
    if (close == std::string_view::npos || text[close] == '{') {
      return R::failure(parse_error(text, open, "unclosed '{': missing '}' (write '{{' for a literal brace)"));
    }
    const std::string_view body = text.substr(open + 1, close - open - 1);
    i = close + 1;

    if (body == "topic") {
      flush_literal();
      tmpl.parts_.push_back({Part::Kind::Topic, {}, 0});
      continue;
    }
    if (!body.starts_with(kSegmentPrefix)) {
      std::string problem =
          body.empty() ? std::string("empty placeholder {}") : "unknown placeholder {" + std::string(body) + "}";
      problem.append(" (expected {topic} or {topic_segment[N]})");
      return R::failure(parse_error(text, open, problem));
    }
    const std::size_t index_pos = open + 1 + kSegmentPrefix.size();  // first byte after '['
    const std::string_view rest = body.substr(kSegmentPrefix.size());
    const std::size_t bracket = rest.find(']');
    if (bracket == std::string_view::npos) {
      return R::failure(parse_error(text, close, "missing ']' in {topic_segment[N]}"));
    }
    if (bracket + 1 != rest.size()) {
      return R::failure(parse_error(text, index_pos + bracket + 1, "unexpected text after ']' in {topic_segment[N]}"));
    }
    const std::string_view digits = rest.substr(0, bracket);
    if (digits.empty()) {
      return R::failure(parse_error(text, index_pos, "empty index in {topic_segment[]}"));
    }
    int index = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc::result_out_of_range) {
      return R::failure(parse_error(text, index_pos, "segment index out of range"));
    }
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return R::failure(parse_error(text, index_pos,
                                    "malformed index '" + std::string(digits) +
                                        "' in {topic_segment[N]} (expected an "
                                        "integer: 0 is the first segment, -1 the last)"));
    }
    if (digits.starts_with("-0")) {  // -0 would silently mean the first one
      return R::failure(parse_error(
          text, index_pos,
          "malformed index '" + std::string(digits) + "' in {topic_segment[N]} (0 is the first segment, -1 the last)"));
    }
    flush_literal();
    tmpl.parts_.push_back({Part::Kind::Segment, {}, index});
  }
  flush_literal();
  return R::success(std::move(tmpl));
}

Result<std::string> NameTemplate::resolve(std::string_view topic) const {
  std::vector<std::string_view> segments;
  if (depends_on_topic()) segments = split_segments(topic);
  const auto count = static_cast<int64_t>(segments.size());

  std::string out;
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Part::Kind::Literal: out.append(part.literal); break;
      case Part::Kind::Topic: out.append(topic); break;
      case Part::Kind::Segment: {
        const int64_t at = part.index < 0 ? count + part.index : part.index;
        if (at < 0 || at >= count) {
          std::string message = "name template \"" + source_ + "\": topic \"";
          message.append(topic);
          message.append("\" has " + std::to_string(count) + (count == 1 ? " segment" : " segments") +
                         ", so {topic_segment[" + std::to_string(part.index) + "]} does not exist (valid: 0.." +
                         std::to_string(count - 1) + " or -" + std::to_string(count) + "..-1)");
          return Result<std::string>::failure(std::move(message));
        }
        out.append(segments[static_cast<std::size_t>(at)]);
        break;
      }
    }
  }
  return Result<std::string>::success(std::move(out));
}

bool NameTemplate::depends_on_topic() const {
  for (const Part& part : parts_) {
    if (part.kind != Part::Kind::Literal) return true;
  }
  return false;
}

}  // namespace picomq::kit

#include "picomq/kit/destination_cache.hpp"

namespace picomq::kit {

std::string destination_name(const NameTemplate& tmpl, NamePolicy policy, std::string_view topic,
                             std::string_view option) {
  auto resolved = tmpl.resolve(topic);
  if (!resolved)
    throw sdk::FatalError(std::string(option) + " for topic '" + std::string(topic) + "': " + resolved.error());
  auto name = sanitize_name(resolved.value(), policy);
  if (!name) throw sdk::FatalError(std::string(option) + " for topic '" + std::string(topic) + "': " + name.error());
  return std::move(name).value();
}

}  // namespace picomq::kit
