#include "s3/avro.h"

#include <avro.h>
#include <openssl/evp.h>
#include <simdjson.h>
#include <zlib.h>

#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "picomq/kit/datetime.hpp"
#include "picomq/kit/encoding.hpp"

namespace picomq::s3 {

void append_avro_long(std::string& out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out += static_cast<char>((z & 0x7F) | 0x80);
    z >>= 7;
  }
  out += static_cast<char>(z);
}

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

enum class Type : uint8_t {
  null_,
  boolean,
  int_,
  long_,
  float_,
  double_,
  bytes,
  string,
  record,
  enum_,
  array,
  map,
  union_,
  fixed
};
enum class Logical : uint8_t { none, decimal, date, time_millis, time_micros, ts_millis, ts_micros, duration };

struct Node {
  Type type = Type::null_;
  Logical logical = Logical::none;
  int scale = 0;
  size_t fixed_size = 0;
  std::string name;                                  // full name of records, enums, fixed
  std::vector<const Node*> children;                 // fields, branches, items, values
  std::vector<std::string> fields;                   // record: field names
  std::vector<std::optional<std::string>> defaults;  // record: each field's default, encoded
  std::vector<std::string> symbols;                  // enum
};

const char* type_name(Type t) {
  static constexpr const char* names[] = {"null",   "boolean", "int",  "long",  "float", "double", "bytes",
                                          "string", "record",  "enum", "array", "map",   "union",  "fixed"};
  return names[static_cast<int>(t)];
}

const char* kind(const element& v) {
  switch (v.type()) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    default: return "null";
  }
}

}  // namespace

struct AvroEncoder::Impl {
  std::string schema_text;
  std::string codec;
  std::deque<Node> nodes;
  std::map<std::string, const Node*> named;
  const Node* root = nullptr;
  simdjson::dom::parser parser, defaults_parser;
  std::string error;  // of the last encode
  std::string path;   // where in the value

  // ---- the schema
  Node& add(Type t) {
    nodes.emplace_back();
    nodes.back().type = t;
    return nodes.back();
  }
  [[noreturn]] static void bad(const std::string& m) { throw std::invalid_argument("avro_schema: " + m); }

  static std::string full_name(const nlohmann::json& j, const std::string& ns, std::string* inner_ns) {
    if (!j.contains("name") || !j["name"].is_string()) bad("a named type without a \"name\"");
    std::string name = j["name"].get<std::string>();
    std::string space = j.contains("namespace") && j["namespace"].is_string() ? j["namespace"].get<std::string>() : ns;
    std::string full = name.find('.') != std::string::npos || space.empty() ? name : space + "." + name;
    *inner_ns = full.rfind('.') == std::string::npos ? "" : full.substr(0, full.rfind('.'));
    return full;
  }

  const Node* parse(const nlohmann::json& j, const std::string& ns) {
    static const std::map<std::string, Type> primitives{
        {"null", Type::null_},   {"boolean", Type::boolean}, {"int", Type::int_},    {"long", Type::long_},
        {"float", Type::float_}, {"double", Type::double_},  {"bytes", Type::bytes}, {"string", Type::string}};
    if (j.is_string()) {
      const std::string t = j.get<std::string>();
      if (auto p = primitives.find(t); p != primitives.end()) return &add(p->second);
      if (auto n = named.find(t); n != named.end()) return n->second;
      if (auto n = named.find(ns + "." + t); !ns.empty() && n != named.end()) return n->second;
      bad("unknown type '" + t + "'");
    }
    if (j.is_array()) {
      Node& u = add(Type::union_);
      for (const auto& b : j) u.children.push_back(parse(b, ns));
      return &u;
    }
    if (!j.is_object() || !j.contains("type")) bad("a schema is a name, an array (union) or an object with \"type\"");
    const auto& t = j["type"];
    if (!t.is_string()) return parse(t, ns);
    const std::string type = t.get<std::string>();
    const std::string logical =
        j.contains("logicalType") && j["logicalType"].is_string() ? j["logicalType"].get<std::string>() : "";
    if (auto p = primitives.find(type); p != primitives.end()) {
      Node& n = add(p->second);
      if (logical == "date" && n.type == Type::int_) n.logical = Logical::date;
      if (logical == "time-millis" && n.type == Type::int_) n.logical = Logical::time_millis;
      if (logical == "time-micros" && n.type == Type::long_) n.logical = Logical::time_micros;
      if ((logical == "timestamp-millis" || logical == "local-timestamp-millis") && n.type == Type::long_)
        n.logical = Logical::ts_millis;
      if ((logical == "timestamp-micros" || logical == "local-timestamp-micros") && n.type == Type::long_)
        n.logical = Logical::ts_micros;
      if (logical == "decimal" && n.type == Type::bytes) decimal(n, j);
      return &n;
    }
    if (type == "array") {
      Node& n = add(Type::array);
      if (!j.contains("items")) bad("an array without \"items\"");
      n.children.push_back(parse(j["items"], ns));
      return &n;
    }
    if (type == "map") {
      Node& n = add(Type::map);
      if (!j.contains("values")) bad("a map without \"values\"");
      n.children.push_back(parse(j["values"], ns));
      return &n;
    }
    std::string inner;
    if (type == "record" || type == "error" || type == "enum" || type == "fixed") {
      const std::string full = full_name(j, ns, &inner);
      Node& n = add(type == "enum" ? Type::enum_ : type == "fixed" ? Type::fixed : Type::record);
      n.name = full;
      named[full] = &n;
      if (n.type == Type::fixed) {
        if (!j.contains("size") || !j["size"].is_number_unsigned()) bad("fixed '" + full + "' without a \"size\"");
        n.fixed_size = j["size"].get<size_t>();
        if (logical == "decimal") decimal(n, j);
        if (logical == "duration" && n.fixed_size == 12) n.logical = Logical::duration;
      } else if (n.type == Type::enum_) {
        for (const auto& s : j.value("symbols", nlohmann::json::array())) n.symbols.push_back(s.get<std::string>());
      } else {
        if (!j.contains("fields") || !j["fields"].is_array()) bad("record '" + full + "' without \"fields\"");
        for (const auto& f : j["fields"]) {
          if (!f.contains("name") || !f.contains("type")) bad("a field of '" + full + "' without \"name\" or \"type\"");
          n.fields.push_back(f["name"].get<std::string>());
          n.children.push_back(parse(f["type"], inner));
          n.defaults.push_back(f.contains("default") ? std::optional<std::string>(f["default"].dump()) : std::nullopt);
        }
      }
      return &n;
    }
    bad("unknown type '" + type + "'");
  }

  static void decimal(Node& n, const nlohmann::json& j) {
    const int precision = j.value("precision", 0);
    const int scale = j.value("scale", 0);
    if (precision <= 0 || scale < 0 || scale > precision) return;  // not a valid decimal: the underlying type (spec)
    n.logical = Logical::decimal;
    n.scale = scale;
  }

  // Encodes the defaults (JSON text) now that every type is known; a union's default is of its first branch.
  void encode_defaults() {
    for (Node& n : nodes) {
      for (size_t i = 0; i < n.defaults.size(); ++i) {
        if (!n.defaults[i]) continue;
        element v;
        if (defaults_parser.parse(*n.defaults[i]).get(v)) bad("field '" + n.fields[i] + "': the default is not JSON");
        std::string out;
        const Node* t = n.children[i];
        path = n.fields[i];
        bool ok;
        if (t->type == Type::union_) {
          append_avro_long(out, 0);
          ok = !t->children.empty() && encode(*t->children[0], v, out);
        } else {
          ok = encode(*t, v, out);
        }
        if (!ok) bad("field '" + n.name + "." + n.fields[i] + "': the default does not fit its type (" + error + ")");
        n.defaults[i] = out;
      }
    }
  }

  // ---- values
  bool fail(const std::string& m) {
    error = "avro: " + (path.empty() ? std::string() : "field '" + path + "': ") + m;
    return false;
  }
  bool expected(const Node& n, const element& v) {
    return fail(std::string("expected ") + type_name(n.type) + ", got " + kind(v));
  }

  static bool integer(const element& v, int64_t& out) {
    if (v.is_int64()) return out = v.get_int64().value(), true;
    return false;
  }

  bool encode(const Node& n, const element& v, std::string& out) {
    switch (n.type) {
      case Type::null_:
        if (!v.is_null()) return expected(n, v);
        return true;
      case Type::boolean:
        if (!v.is_bool()) return expected(n, v);
        out += v.get_bool().value() ? '\1' : '\0';
        return true;
      case Type::int_:
      case Type::long_: return encode_integer(n, v, out);
      case Type::float_:
      case Type::double_: {
        double d;
        if (v.is_string()) {
          // JSON has no NaN or infinities: the decoder writes them as these strings (docs/decoders.md).
          const std::string_view s = v.get_string().value();
          if (s == "NaN") d = std::numeric_limits<double>::quiet_NaN();
          else if (s == "Infinity") d = std::numeric_limits<double>::infinity();
          else if (s == "-Infinity") d = -std::numeric_limits<double>::infinity();
          else return expected(n, v);
        } else if (!v.is_number()) {
          return expected(n, v);
        } else {
          d = v.is_double()  ? v.get_double().value()
              : v.is_int64() ? static_cast<double>(v.get_int64().value())
                             : static_cast<double>(v.get_uint64().value());
        }
        if (n.type == Type::float_) {
          const float f = static_cast<float>(d);
          char b[4];
          std::memcpy(b, &f, 4);
          out.append(b, 4);
        } else {
          char b[8];
          std::memcpy(b, &d, 8);
          out.append(b, 8);
        }
        return true;
      }
      case Type::string: {
        if (!v.is_string()) return expected(n, v);
        const std::string_view s = v.get_string().value();
        append_avro_long(out, static_cast<int64_t>(s.size()));
        out.append(s);
        return true;
      }
      case Type::bytes:
      case Type::fixed: return encode_bytes(n, v, out);
      case Type::enum_: {
        if (!v.is_string()) return expected(n, v);
        const std::string_view s = v.get_string().value();
        for (size_t i = 0; i < n.symbols.size(); ++i)
          if (n.symbols[i] == s) return append_avro_long(out, static_cast<int64_t>(i)), true;
        return fail("'" + std::string(s) + "' is no symbol of enum " + n.name);
      }
      case Type::array: {
        if (!v.is_array()) return expected(n, v);
        const auto a = v.get_array().value();
        if (a.size() > 0) append_avro_long(out, static_cast<int64_t>(a.size()));
        size_t i = 0;
        const size_t depth = path.size();
        for (element item : a) {
          path += "[" + std::to_string(i++) + "]";
          if (!encode(*n.children[0], item, out)) return false;
          path.resize(depth);
        }
        out += '\0';
        return true;
      }
      case Type::map: {
        if (!v.is_object()) return expected(n, v);
        const auto o = v.get_object().value();
        if (o.size() > 0) append_avro_long(out, static_cast<int64_t>(o.size()));
        const size_t depth = path.size();
        for (auto [key, value] : o) {
          append_avro_long(out, static_cast<int64_t>(key.size()));
          out.append(key);
          path += (path.empty() ? "" : ".") + std::string(key);
          if (!encode(*n.children[0], value, out)) return false;
          path.resize(depth);
        }
        out += '\0';
        return true;
      }
      case Type::record: return encode_record(n, v, out, nullptr);
      case Type::union_: {
        const size_t at = out.size();
        std::string first_error;
        for (size_t i = 0; i < n.children.size(); ++i) {
          append_avro_long(out, static_cast<int64_t>(i));
          if (encode(*n.children[i], v, out)) return true;
          if (first_error.empty()) first_error = error;
          out.resize(at);
        }
        std::string branches;
        for (const Node* c : n.children)
          branches += std::string(branches.empty() ? "" : ", ") + (c->name.empty() ? type_name(c->type) : c->name);
        return fail(std::string("no branch of the union [") + branches + "] takes " + kind(v));
      }
    }
    return false;
  }

  bool encode_integer(const Node& n, const element& v, std::string& out) {
    int64_t x = 0;
    if (v.is_string() && n.logical != Logical::none && n.logical != Logical::decimal) {
      const std::string_view s = v.get_string().value();
      int64_t seconds = 0, days = 0;
      uint32_t nanos = 0;
      int digits = 0;
      switch (n.logical) {
        case Logical::date:
          if (!kit::parse_date(s, days)) return fail("'" + std::string(s) + "' is no date (YYYY-MM-DD)");
          x = days;
          break;
        case Logical::time_millis:
        case Logical::time_micros:
          if (!kit::parse_datetime("1970-01-01T" + std::string(s), seconds, nanos, digits) || seconds < 0 ||
              seconds >= 86400)
            return fail("'" + std::string(s) + "' is no time of day (HH:MM:SS[.fraction])");
          x = n.logical == Logical::time_millis ? seconds * 1000 + nanos / 1000000 : seconds * 1000000 + nanos / 1000;
          break;
        default:
          if (!kit::parse_datetime(s, seconds, nanos, digits))
            return fail("'" + std::string(s) + "' is no RFC 3339 date-time");
          x = n.logical == Logical::ts_millis ? seconds * 1000 + nanos / 1000000 : seconds * 1000000 + nanos / 1000;
      }
    } else if (!integer(v, x)) {
      return expected(n, v);
    }
    if (n.type == Type::int_ && (x < INT32_MIN || x > INT32_MAX))
      return fail(std::to_string(x) + " does not fit an int");
    append_avro_long(out, x);
    return true;
  }

  bool encode_bytes(const Node& n, const element& v, std::string& out) {
    std::vector<uint8_t> bytes;
    if (n.logical == Logical::duration) {
      if (!v.is_object()) return expected(n, v);
      for (const char* f : {"months", "days", "millis"}) {
        int64_t x = 0;
        element e;
        if (v.get_object().value()[f].get(e) || !integer(e, x) || x < 0 || x > UINT32_MAX)
          return fail(std::string("a duration needs \"") + f + "\" (0 to 2^32-1)");
        for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(x >> (8 * i)));
      }
    } else if (n.logical == Logical::decimal && (v.is_string() || v.is_int64())) {
      const std::string text =
          v.is_string() ? std::string(v.get_string().value()) : std::to_string(v.get_int64().value());
      if (!unscaled(text, n.scale, bytes))
        return fail("'" + text + "' is no decimal of scale " + std::to_string(n.scale));
      if (n.type == Type::fixed) {
        if (bytes.size() > n.fixed_size) return fail("'" + text + "' does not fit fixed " + n.name);
        bytes.insert(bytes.begin(), n.fixed_size - bytes.size(), (bytes[0] & 0x80) ? 0xFF : 0x00);
      }
    } else {
      if (!v.is_string()) return expected(n, v);
      auto decoded = kit::base64_decode(v.get_string().value());
      if (!decoded) return fail("expected a base64 string for " + std::string(type_name(n.type)));
      bytes = std::move(*decoded);
    }
    if (n.type == Type::fixed) {
      if (bytes.size() != n.fixed_size)
        return fail(std::to_string(bytes.size()) + " bytes for fixed " + n.name + " of " +
                    std::to_string(n.fixed_size));
    } else {
      append_avro_long(out, static_cast<int64_t>(bytes.size()));
    }
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return true;
  }

  // A decimal's unscaled value, big-endian two's complement.
  static bool unscaled(std::string_view text, int scale, std::vector<uint8_t>& out) {
    bool negative = false;
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
      negative = text[0] == '-';
      text.remove_prefix(1);
    }
    std::string digits;
    const size_t dot = text.find('.');
    const std::string_view whole = text.substr(0, dot),
                           fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
    if (whole.empty() || fraction.size() > static_cast<size_t>(scale) ||
        (dot != std::string_view::npos && fraction.empty()))
      return false;
    digits.append(whole).append(fraction).append(scale - fraction.size(), '0');
    std::vector<uint8_t> magnitude{0};  // big-endian
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      unsigned carry = static_cast<unsigned>(c - '0');
      for (size_t i = magnitude.size(); i-- > 0;) {
        const unsigned x = magnitude[i] * 10u + carry;
        magnitude[i] = static_cast<uint8_t>(x & 0xFF);
        carry = x >> 8;
      }
      if (carry) magnitude.insert(magnitude.begin(), static_cast<uint8_t>(carry));
    }
    while (magnitude.size() > 1 && magnitude[0] == 0 && !(magnitude[1] & 0x80)) magnitude.erase(magnitude.begin());
    if (magnitude[0] & 0x80) magnitude.insert(magnitude.begin(), 0);
    if (negative) {
      unsigned carry = 1;
      for (size_t i = magnitude.size(); i-- > 0;) {
        const unsigned x = static_cast<uint8_t>(~magnitude[i]) + carry;
        magnitude[i] = static_cast<uint8_t>(x & 0xFF);
        carry = x >> 8;
      }
    }
    out = std::move(magnitude);
    return true;
  }

  // The record's metadata for the top-level pico_* fields the payload leaves out.
  struct Meta {
    const pmq_batch* batch;
    const pmq_record* record;
  };

  bool encode_record(const Node& n, const element& v, std::string& out, const Meta* meta) {
    if (!v.is_object()) return expected(n, v);
    const auto o = v.get_object().value();
    const size_t depth = path.size();
    for (size_t i = 0; i < n.fields.size(); ++i) {
      path += (path.empty() ? "" : ".") + n.fields[i];
      element value;
      if (!o[n.fields[i]].get(value)) {
        if (!encode(*n.children[i], value, out)) return false;
      } else if (meta && n.fields[i].rfind("pico_", 0) == 0 && metadata(*n.children[i], n.fields[i], *meta, out)) {
      } else if (n.defaults[i]) {
        out += *n.defaults[i];
      } else if (!null_branch(*n.children[i], out)) {
        return fail("missing, and the field has no default");
      }
      path.resize(depth);
    }
    return true;
  }

  static bool null_branch(const Node& n, std::string& out) {
    if (n.type != Type::union_) return false;
    for (size_t i = 0; i < n.children.size(); ++i)
      if (n.children[i]->type == Type::null_) return append_avro_long(out, static_cast<int64_t>(i)), true;
    return false;
  }

  // pico_topic (string), pico_partition / pico_offset / pico_timestamp (int, long, timestamp), pico_key (bytes or
  // string).
  bool metadata(const Node& n, const std::string& field, const Meta& m, std::string& out) {
    if (n.type == Type::union_) {
      for (size_t i = 0; i < n.children.size(); ++i) {
        const size_t at = out.size();
        append_avro_long(out, static_cast<int64_t>(i));
        if (n.children[i]->type != Type::null_ && metadata(*n.children[i], field, m, out)) return true;
        out.resize(at);
      }
      // A record without a key or timestamp: null where the union has it.
      if ((field == "pico_key" && !m.record->key.data) || (field == "pico_timestamp" && m.record->timestamp_ms < 0))
        return null_branch(n, out);
      return false;
    }
    auto integer = [&](int64_t x) {
      if (n.type != Type::long_ && !(n.type == Type::int_ && x >= INT32_MIN && x <= INT32_MAX)) return false;
      if (n.logical == Logical::ts_micros) x *= 1000;
      append_avro_long(out, x);
      return true;
    };
    auto text = [&](std::string_view s) {
      if (n.type != Type::string && n.type != Type::bytes) return false;
      append_avro_long(out, static_cast<int64_t>(s.size()));
      out.append(s);
      return true;
    };
    if (field == "pico_topic") return text(m.batch->topic);
    if (field == "pico_partition") return integer(m.batch->partition);
    if (field == "pico_offset") return integer(m.record->offset);
    if (field == "pico_timestamp") return m.record->timestamp_ms >= 0 && integer(m.record->timestamp_ms);
    if (field == "pico_key") {
      if (!m.record->key.data) return false;
      const std::string_view k(reinterpret_cast<const char*>(m.record->key.data), m.record->key.size);
      if (n.type == Type::string && !kit::is_valid_utf8(k)) return false;
      return text(k);
    }
    return false;
  }
};

AvroEncoder::AvroEncoder(std::string_view schema_json, kit::Compression codec) : impl_(std::make_unique<Impl>()) {
  avro_schema_t parsed = nullptr;
  if (avro_schema_from_json_length(schema_json.data(), schema_json.size(), &parsed) != 0) {
    std::string e = avro_strerror();
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
    throw std::invalid_argument("avro_schema: invalid Avro schema: " + e);
  }
  avro_schema_decref(parsed);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(schema_json);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("avro_schema: not JSON: ") + e.what());
  }
  impl_->schema_text = std::string(schema_json);
  impl_->codec = codec == kit::Compression::Gzip ? "deflate" : codec == kit::Compression::Zstd ? "zstandard" : "null";
  impl_->root = impl_->parse(j, "");
  impl_->encode_defaults();
  impl_->path.clear();
}

AvroEncoder::~AvroEncoder() = default;
AvroEncoder::AvroEncoder(AvroEncoder&&) noexcept = default;
AvroEncoder& AvroEncoder::operator=(AvroEncoder&&) noexcept = default;

std::string AvroEncoder::sync_marker(std::string_view object_key) {
  const std::string seed = "picomq-avro-sync:" + std::string(object_key);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(seed.data(), seed.size(), digest, &size, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), 16);
}

std::string AvroEncoder::header(std::string_view object_key) const {
  std::string out = "Obj\x01";
  auto put = [&](std::string_view s) {
    append_avro_long(out, static_cast<int64_t>(s.size()));
    out.append(s);
  };
  append_avro_long(out, 2);
  put("avro.codec");
  put(impl_->codec);
  put("avro.schema");
  put(impl_->schema_text);
  out += '\0';
  out += sync_marker(object_key);
  return out;
}

std::optional<std::string> AvroEncoder::append(std::string& out, const pmq_batch& batch, const pmq_record& r) {
  Impl& m = *impl_;
  if (batch.payload_format != PMQ_PAYLOAD_JSON)
    return "avro: the payload is not JSON (the topic's schema is '" + std::string(batch.schema ? batch.schema : "") +
           "'; use json, or a decoded schema such as avro)";
  element v;
  const bool bad = r.payload.data
                       ? bool(m.parser.parse(reinterpret_cast<const char*>(r.payload.data), r.payload.size).get(v))
                       : bool(m.parser.parse("null", 4).get(v));
  if (bad) return "avro: the payload is not JSON";
  m.path.clear();
  const size_t at = out.size();
  const Impl::Meta meta{&batch, &r};
  const bool ok = m.root->type == Type::record ? (r.payload.data ? m.encode_record(*m.root, v, out, &meta)
                                                                 : m.fail("a tombstone (null payload) is no record"))
                                               : m.encode(*m.root, v, out);
  if (ok) return std::nullopt;
  out.resize(at);
  return m.error;
}

struct AvroBlocks::Deflate {
  z_stream z{};
  explicit Deflate(int level) {
    if (deflateInit2(&z, level == 0 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("avro: deflateInit2 failed");
  }
  ~Deflate() { deflateEnd(&z); }
  std::string raw(std::string_view in) {
    deflateReset(&z);
    std::string out(deflateBound(&z, in.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("avro: deflate failed");
    out.resize(z.total_out);
    return out;
  }
};

AvroBlocks::AvroBlocks(kit::Compression codec, int level) : codec_(codec), level_(level) {
  if (codec == kit::Compression::Zstd) zstd_.emplace(codec, level);
  if (codec == kit::Compression::Gzip) deflate_ = std::make_unique<Deflate>(level);
}
AvroBlocks::~AvroBlocks() = default;
AvroBlocks::AvroBlocks(AvroBlocks&&) noexcept = default;
AvroBlocks& AvroBlocks::operator=(AvroBlocks&&) noexcept = default;

std::string AvroBlocks::block(std::string_view data, uint64_t records, std::string_view sync) {
  std::string packed;
  std::string_view body = data;
  if (deflate_) body = packed = deflate_->raw(data);
  else if (zstd_) body = packed = zstd_->compress(data);
  std::string out;
  append_avro_long(out, static_cast<int64_t>(records));
  append_avro_long(out, static_cast<int64_t>(body.size()));
  out.append(body);
  out.append(sync);
  return out;
}

}  // namespace picomq::s3
