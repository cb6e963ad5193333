#pragma once
// Destination name templates ("events_{topic_segment[-1]}"), parsed once from the sink's
// config and resolved once per topic. Syntax:
//   {topic}               the whole topic name
//   {topic_segment[N]}    segment N of the topic split on '.'; 0 is the first, -1 the last
//   {{  }}                a literal '{' or '}'
//   anything else         literal text
// Parse errors are configuration errors and name the problem and its column (1-based,
// counted in characters). The resolved name is not sanitised: see sanitize.h.
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/result.hpp"

namespace picomq::kit {

class NameTemplate {
 public:
  static Result<NameTemplate> parse(std::string_view text);

  // Fails only when a {topic_segment[N]} does not exist in `topic`. The result may be empty
  // (e.g. "{topic_segment[1]}" on "a..b"); sanitize_name rejects empty names.
  Result<std::string> resolve(std::string_view topic) const;

  // The template text as written in the config, for messages.
  std::string_view source() const { return source_; }

  // False for a constant template such as "events": every topic resolves to the same name.
  bool depends_on_topic() const;

 private:
  struct Part {
    enum class Kind { Literal, Topic, Segment };
    Kind kind;
    std::string literal;  // Kind::Literal: braces already unescaped
    int index = 0;        // Kind::Segment
  };

  NameTemplate() = default;

  std::string source_;
  std::vector<Part> parts_;
};

}  // namespace picomq::kit
