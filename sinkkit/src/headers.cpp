#include "picomq/kit/headers.hpp"

#include <array>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "picomq/kit/encoding.hpp"

namespace picomq::kit {

namespace {

std::span<const uint8_t> bytes_of(const pmq_bytes& b) { return {b.data, b.size}; }

std::string_view text_of(const pmq_bytes& b) {
  return b.size ? std::string_view(reinterpret_cast<const char*>(b.data), b.size) : std::string_view();
}

void append_value(std::string& out, const pmq_bytes& value) {
  if (!value.data) {
    out += "null";
  } else if (is_valid_utf8(bytes_of(value))) {
    append_json_escaped(out, text_of(value));
  } else {
    out += '"';
    append_base64(out, bytes_of(value));  // the base64 alphabet needs no escaping
    out += '"';
  }
}

// A buffer of `n` elements, on the stack for the usual handful of headers.
template <class T, std::size_t N>
class Scratch {
 public:
  explicit Scratch(std::size_t n) : heap_(n > N ? std::make_unique<T[]>(n) : nullptr) {}
  T& operator[](std::size_t i) { return heap_ ? heap_[i] : stack_[i]; }

 private:
  std::array<T, N> stack_{};
  std::unique_ptr<T[]> heap_;
};

constexpr std::size_t kStackHeaders = 16;

}  // namespace

void append_headers_json(std::string& out, std::span<const pmq_header> headers) {
  const std::size_t n = headers.size();
  out += '{';
  if (n == 1) {
    append_json_escaped(out, header_value_as_string(bytes_of(headers[0].name)));
    out += ':';
    append_value(out, headers[0].value);
    out += '}';
    return;
  }
  // The usual case, a few headers with distinct names that are valid UTF-8: each renders as
  // "name":value, in order, with no grouping (distinct valid names render distinctly).
  if (n <= 8) {
    bool simple = true;
    for (std::size_t i = 0; i < n && simple; ++i) {
      simple = is_valid_utf8(bytes_of(headers[i].name));
      for (std::size_t j = 0; j < i && simple; ++j) simple = text_of(headers[i].name) != text_of(headers[j].name);
    }
    if (simple) {
      for (std::size_t i = 0; i < n; ++i) {
        if (i) out += ',';
        append_json_escaped(out, text_of(headers[i].name));
        out += ':';
        append_value(out, headers[i].value);
      }
      out += '}';
      return;
    }
  }
  // Each name as it is rendered (a view of the bytes when they are valid UTF-8, else of its
  // base64 in `encoded`, reserved up front so the views stay put).
  Scratch<std::string_view, kStackHeaders> names(n);
  std::vector<std::string> encoded;
  for (std::size_t i = 0; i < n; ++i) {
    const pmq_bytes& name = headers[i].name;
    if (is_valid_utf8(bytes_of(name))) {
      names[i] = text_of(name);
    } else {
      if (encoded.empty()) encoded.reserve(n);
      encoded.push_back(base64_encode(bytes_of(name)));
      names[i] = encoded.back();
    }
  }
  // Groups of equal names: next[i] is the following header with header i's name (n: none),
  // first[i] whether header i is its name's first appearance.
  Scratch<std::size_t, kStackHeaders> next(n), last(n);
  Scratch<bool, kStackHeaders> first(n);
  std::unordered_map<std::string_view, std::size_t> seen;  // name -> first index, for many headers
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = n;
    std::size_t head = n;
    if (n <= kStackHeaders) {
      for (std::size_t j = 0; j < i; ++j)
        if (first[j] && names[j] == names[i]) {
          head = j;
          break;
        }
    } else if (auto [it, inserted] = seen.emplace(names[i], i); !inserted) {
      head = it->second;
    }
    first[i] = head == n;
    if (first[i]) {
      last[i] = i;
    } else {
      next[last[head]] = i;
      last[head] = i;
    }
  }
  bool comma = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (!first[i]) continue;
    if (comma) out += ',';
    comma = true;
    append_json_escaped(out, names[i]);
    out += ':';
    if (next[i] == n) {
      append_value(out, headers[i].value);
      continue;
    }
    out += '[';
    for (std::size_t j = i; j < n; j = next[j]) {
      if (j != i) out += ',';
      append_value(out, headers[j].value);
    }
    out += ']';
  }
  out += '}';
}

}  // namespace picomq::kit
