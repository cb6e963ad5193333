#include "picomq/kit/sanitize.hpp"

#include <cstdint>
#include <span>

#include "picomq/kit/encoding.hpp"

namespace picomq::kit {

namespace {

constexpr std::size_t kSqlIdentifierMax = 63;  // Postgres NAMEDATALEN - 1
constexpr std::size_t kIndexNameMax = 255;     // Elasticsearch's limit, in bytes
constexpr std::size_t kObjectKeyMax = 1024;    // S3's key limit, in bytes
constexpr std::size_t kHashSuffixBytes = 9;    // "_" + 8 hex digits

uint32_t fnv1a32(std::string_view text) {
  uint32_t hash = 2166136261u;
  for (const char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  return hash;
}

std::span<const uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

bool is_continuation(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

enum class Escapes { None, Percent };

// Largest cut <= `cut` that does not split a UTF-8 character or (with Escapes::Percent) a
// %XX escape. `name` is the output of a character rule: valid UTF-8, and under
// Escapes::Percent each '%' starts a full escape.
std::size_t safe_cut(std::string_view name, std::size_t cut, Escapes escapes) {
  while (cut > 0 && is_continuation(name[cut])) --cut;
  if (escapes == Escapes::Percent) {
    if (cut >= 1 && name[cut - 1] == '%') {
      cut -= 1;
    } else if (cut >= 2 && name[cut - 2] == '%') {
      cut -= 2;
    }
  }
  return cut;
}

// The shared "too long" rule: cut, then a hash of the uncut name keeps long names distinct.
std::string fit(std::string name, std::size_t max_bytes, Escapes escapes = Escapes::None) {
  if (name.size() <= max_bytes) return name;
  static constexpr char kHex[] = "0123456789abcdef";
  const uint32_t hash = fnv1a32(name);
  name.resize(safe_cut(name, max_bytes - kHashSuffixBytes, escapes));
  name.push_back('_');
  for (int shift = 28; shift >= 0; shift -= 4) name.push_back(kHex[(hash >> shift) & 0xF]);
  return name;
}

std::string sql_identifier_chars(std::string_view in) {
  const auto bytes = as_bytes(in);
  std::string out;
  out.reserve(in.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t c = bytes[i];
    if (c < 0x80) {
      out.push_back(c < 0x20 || c == 0x7F ? '_' : static_cast<char>(c));
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(bytes.subspan(i));
    if (n == 0) {
      out.push_back('_');  // one per invalid byte
      ++i;
    } else if (c == 0xC2 && bytes[i + 1] <= 0x9F) {
      out.push_back('_');  // C1 control, U+0080-009F
      i += n;
    } else {
      out.append(in.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string index_name_chars(std::string_view in) {
  const auto bytes = as_bytes(in);
  std::string out;
  out.reserve(in.size() + 1);
  std::size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t c = bytes[i];
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(bytes.subspan(i));
      out.push_back('_');  // one per character, or per invalid byte
      i += n == 0 ? 1 : n;
      continue;
    }
    char ch = static_cast<char>(c);
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    const bool allowed = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    out.push_back(allowed ? ch : '_');
    ++i;
  }
  // '-', '_' and '+' are refused as first character; a leading '.' makes a hidden or system
  // index (and covers the reserved "." and "..").
  if (out[0] == '-' || out[0] == '_' || out[0] == '+' || out[0] == '.') out.insert(0, 1, 'i');
  return out;
}

bool is_object_key_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '-':
    case '_':
    case '.':
    case '*':
    case '\'':
    case '(':
    case ')':
    case '/': return true;
    default: return false;
  }
}

bool is_upper_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

std::string object_key_chars(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  encoded.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (is_object_key_char(c)) {
      encoded.push_back(c);
    } else if (c == '%' && i + 2 < in.size() && is_upper_hex(in[i + 1]) && is_upper_hex(in[i + 2])) {
      encoded.append(in.substr(i, 3));  // already an escape: keep, for idempotence
      i += 2;
    } else {
      const auto b = static_cast<uint8_t>(c);
      encoded.push_back('%');
      encoded.push_back(kHex[b >> 4]);
      encoded.push_back(kHex[b & 0xF]);
    }
  }

  // No leading '/', and no "." or ".." segment: the key stays under the sink's prefix.
  const std::size_t first = encoded.find_first_not_of('/');
  if (first == std::string::npos) return {};
  std::string out;
  out.reserve(encoded.size() - first);
  std::size_t start = first;
  while (true) {
    const std::size_t slash = encoded.find('/', start);
    const std::string_view segment =
        std::string_view(encoded).substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (segment == ".") {
      out.push_back('_');
    } else if (segment == "..") {
      out.append("__");
    } else {
      out.append(segment);
    }
    if (slash == std::string::npos) break;
    out.push_back('/');
    start = slash + 1;
  }
  return out;
}

Result<std::string> empty_error(NamePolicy policy, std::string_view detail) {
  std::string message = "destination name is empty";
  message.append(detail);
  message.append(" (");
  message.append(to_string(policy));
  message.append(")");
  return Result<std::string>::failure(std::move(message));
}

}  // namespace

std::size_t max_name_bytes(NamePolicy policy) {
  switch (policy) {
    case NamePolicy::SqlIdentifier: return kSqlIdentifierMax;
    case NamePolicy::IndexName: return kIndexNameMax;
    case NamePolicy::ObjectKey: return kObjectKeyMax;
    case NamePolicy::Verbatim: return 0;
  }
  return 0;
}

std::string_view to_string(NamePolicy policy) {
  switch (policy) {
    case NamePolicy::SqlIdentifier: return "SQL identifier";
    case NamePolicy::IndexName: return "index name";
    case NamePolicy::ObjectKey: return "object key";
    case NamePolicy::Verbatim: return "verbatim name";
  }
  return "unknown policy";
}

std::string fit_name(std::string name, std::size_t max_bytes) {
  return fit(std::move(name), max_bytes < kHashSuffixBytes + 1 ? kHashSuffixBytes + 1 : max_bytes);
}

Result<std::string> sanitize_name(std::string_view resolved, NamePolicy policy) {
  if (resolved.empty()) return empty_error(policy, "");
  switch (policy) {
    case NamePolicy::SqlIdentifier:
      return Result<std::string>::success(fit(sql_identifier_chars(resolved), kSqlIdentifierMax));
    case NamePolicy::IndexName: return Result<std::string>::success(fit(index_name_chars(resolved), kIndexNameMax));
    case NamePolicy::ObjectKey: {
      std::string key = object_key_chars(resolved);
      if (key.empty()) return empty_error(policy, " once leading '/' are removed");
      return Result<std::string>::success(fit(std::move(key), kObjectKeyMax, Escapes::Percent));
    }
    case NamePolicy::Verbatim: return Result<std::string>::success(std::string(resolved));
  }
  return Result<std::string>::failure("unknown name policy");
}

}  // namespace picomq::kit
