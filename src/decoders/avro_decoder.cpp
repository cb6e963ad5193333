#include "decoders/avro_decoder.h"

#include <avro.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "decoders/json_out.h"
#include "decoders/schema_registry.h"

namespace picomq::decoders {

namespace {

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
enum class Logical : uint8_t {
  none,
  decimal,
  uuid,
  date,
  time_millis,
  time_micros,
  timestamp_millis,
  timestamp_micros,
  local_timestamp_millis,
  local_timestamp_micros,
  duration,
};

struct Node {
  Type type = Type::null_;
  Logical logical = Logical::none;
  int scale = 0;
  size_t fixed_size = 0;
  std::string name;                   // full name of records, enums, fixed
  std::vector<const Node*> children;  // record fields, union branches, array items, map values
  std::vector<std::string> keys;      // record: "\"field\":"
  std::vector<std::string> symbols;   // enum: "\"SYMBOL\""
  bool min_zero = false;              // may be encoded in zero bytes (null, empty record, ...)
};

const std::map<std::string, Type, std::less<>>& primitives() {
  static const std::map<std::string, Type, std::less<>> p{
      {"null", Type::null_},   {"boolean", Type::boolean}, {"int", Type::int_},    {"long", Type::long_},
      {"float", Type::float_}, {"double", Type::double_},  {"bytes", Type::bytes}, {"string", Type::string}};
  return p;
}

}  // namespace

class AvroSchema {
 public:
  std::deque<Node> nodes;
  const Node* root = nullptr;
  std::string text;  // the schema's JSON as given (what a sink writing Avro files puts in its header)
};

namespace {

using nlohmann::json;

class Compiler {
 public:
  explicit Compiler(AvroSchema& out) : out_(out) {}
  std::string error;

  const Node* parse(const json& j, const std::string& ns) {
    if (!error.empty()) return nullptr;
    if (j.is_string()) return reference(j.get<std::string>(), ns);
    if (j.is_array()) {
      Node& n = add(Type::union_);
      for (const auto& branch : j) n.children.push_back(parse(branch, ns));
      return error.empty() ? &n : nullptr;
    }
    if (!j.is_object() || !j.contains("type"))
      return fail("a schema must be a name, an array (union) or an object with \"type\"");
    const json& t = j["type"];
    if (!t.is_string()) return parse(t, ns);  // {"type": {...}} / {"type": [...]}
    const std::string type = t.get<std::string>();
    if (auto it = primitives().find(type); it != primitives().end()) {
      Node& n = add(it->second);
      logical(n, j);
      return &n;
    }
    if (type == "record" || type == "error") {
      Node& n = named(Type::record, j, ns);
      const std::string inner_ns = namespace_of(n.name);
      if (!j.contains("fields") || !j["fields"].is_array())
        return fail("record '" + n.name + "' has no \"fields\" array");
      for (const auto& f : j["fields"]) {
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("type"))
          return fail("a field of record '" + n.name + "' needs \"name\" and \"type\"");
        n.keys.push_back(quoted_key(f["name"].get<std::string>()));
        n.children.push_back(parse(f["type"], inner_ns));
      }
      return error.empty() ? &n : nullptr;
    }
    if (type == "enum") {
      Node& n = named(Type::enum_, j, ns);
      if (!j.contains("symbols") || !j["symbols"].is_array())
        return fail("enum '" + n.name + "' has no \"symbols\" array");
      for (const auto& s : j["symbols"]) {
        if (!s.is_string()) return fail("enum '" + n.name + "' has a symbol that is not a string");
        JsonOut q;
        q.string(s.get<std::string>());
        n.symbols.push_back(std::move(q.str()));
      }
      return &n;
    }
    if (type == "fixed") {
      Node& n = named(Type::fixed, j, ns);
      if (!j.contains("size") || !j["size"].is_number_integer() || j["size"].get<int64_t>() < 0)
        return fail("fixed '" + n.name + "' needs a non-negative \"size\"");
      n.fixed_size = j["size"].get<size_t>();
      logical(n, j);
      return &n;
    }
    if (type == "array") {
      Node& n = add(Type::array);
      if (!j.contains("items")) return fail("array without \"items\"");
      n.children.push_back(parse(j["items"], ns));
      return error.empty() ? &n : nullptr;
    }
    if (type == "map") {
      Node& n = add(Type::map);
      if (!j.contains("values")) return fail("map without \"values\"");
      n.children.push_back(parse(j["values"], ns));
      return error.empty() ? &n : nullptr;
    }
    return reference(type, ns);
  }

  void finish() {
    // min_zero: which types may take zero bytes (arrays of them need a cap on block counts).
    for (bool changed = true; changed;) {
      changed = false;
      for (Node& n : out_.nodes) {
        if (n.min_zero) continue;
        bool z = false;
        switch (n.type) {
          case Type::null_: z = true; break;
          case Type::fixed: z = n.fixed_size == 0; break;
          case Type::record:
            z = std::all_of(n.children.begin(), n.children.end(), [](const Node* c) { return c->min_zero; });
            break;
          default: break;
        }
        if (z) n.min_zero = changed = true;
      }
    }
  }

 private:
  Node& add(Type t) {
    Node& n = out_.nodes.emplace_back();
    n.type = t;
    return n;
  }

  const Node* fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return nullptr;
  }

  static std::string namespace_of(const std::string& full) {
    auto dot = full.rfind('.');
    return dot == std::string::npos ? "" : full.substr(0, dot);
  }

  Node& named(Type t, const json& j, const std::string& ns) {
    Node& n = add(t);
    std::string name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : "";
    std::string space = ns;
    if (j.contains("namespace") && j["namespace"].is_string()) space = j["namespace"].get<std::string>();
    n.name = name.find('.') != std::string::npos || space.empty() ? name : space + "." + name;
    names_[n.name] = &n;
    return n;
  }

  const Node* reference(const std::string& name, const std::string& ns) {
    if (auto it = primitives().find(name); it != primitives().end()) return &add(it->second);
    if (name.find('.') == std::string::npos && !ns.empty())
      if (auto it = names_.find(ns + "." + name); it != names_.end()) return it->second;
    if (auto it = names_.find(name); it != names_.end()) return it->second;
    return fail("unknown type '" + name + "'");
  }

  // Logical types the spec defines; an annotation that does not fit its type is ignored, as the
  // spec says (the value is then read and shown as the underlying type).
  void logical(Node& n, const json& j) {
    if (!j.contains("logicalType") || !j["logicalType"].is_string()) return;
    const std::string lt = j["logicalType"].get<std::string>();
    if (lt == "decimal" && (n.type == Type::bytes || n.type == Type::fixed)) {
      const int64_t precision =
          j.contains("precision") && j["precision"].is_number_integer() ? j["precision"].get<int64_t>() : 0;
      const int64_t scale = j.contains("scale") && j["scale"].is_number_integer() ? j["scale"].get<int64_t>() : 0;
      if (precision < 1 || scale < 0 || scale > precision) return;
      if (n.type == Type::fixed) {
        const double max_digits = std::floor(std::log10(2.0) * (8.0 * static_cast<double>(n.fixed_size) - 1));
        if (static_cast<double>(precision) > max_digits) return;
      }
      n.logical = Logical::decimal;
      n.scale = static_cast<int>(scale);
    } else if (lt == "uuid" && (n.type == Type::string || (n.type == Type::fixed && n.fixed_size == 16))) {
      n.logical = Logical::uuid;
    } else if (lt == "date" && n.type == Type::int_) {
      n.logical = Logical::date;
    } else if (lt == "time-millis" && n.type == Type::int_) {
      n.logical = Logical::time_millis;
    } else if (lt == "time-micros" && n.type == Type::long_) {
      n.logical = Logical::time_micros;
    } else if (lt == "timestamp-millis" && n.type == Type::long_) {
      n.logical = Logical::timestamp_millis;
    } else if (lt == "timestamp-micros" && n.type == Type::long_) {
      n.logical = Logical::timestamp_micros;
    } else if (lt == "local-timestamp-millis" && n.type == Type::long_) {
      n.logical = Logical::local_timestamp_millis;
    } else if (lt == "local-timestamp-micros" && n.type == Type::long_) {
      n.logical = Logical::local_timestamp_micros;
    } else if (lt == "duration" && n.type == Type::fixed && n.fixed_size == 12) {
      n.logical = Logical::duration;
    }
  }

  AvroSchema& out_;
  std::map<std::string, Node*> names_;
};

}  // namespace

std::shared_ptr<const AvroSchema> compile_avro(std::string_view schema_json, std::string& error) {
  // avro-c is the judge of what a valid schema is (and its message is the one users see).
  avro_schema_t parsed = nullptr;
  if (avro_schema_from_json_length(schema_json.data(), schema_json.size(), &parsed) != 0) {
    error = avro_strerror();
    while (!error.empty() && (error.back() == '\n' || error.back() == ' ')) error.pop_back();
    if (error.empty()) error = "not a valid Avro schema";
    return nullptr;
  }
  avro_schema_decref(parsed);
  auto schema = std::make_shared<AvroSchema>();
  json j = json::parse(schema_json, nullptr, false);
  if (j.is_discarded()) {
    error = "not valid JSON";
    return nullptr;
  }
  Compiler c(*schema);
  schema->root = c.parse(j, "");
  if (!schema->root) {
    error = c.error.empty() ? "not a valid Avro schema" : c.error;
    return nullptr;
  }
  c.finish();
  schema->text = schema_json;
  return schema;
}

namespace {

constexpr int kMaxDepth = 200;
constexpr uint64_t kMaxZeroSizeItems = 1u << 20;  // items of a zero-byte type per payload

class Reader {
 public:
  Reader(JsonOut& out, std::string& error) : out_(out), error_(error) {}

  bool datum(const Node& root, const uint8_t* data, size_t size, size_t base_offset) {
    base_ = data - base_offset;
    p_ = data;
    end_ = data + size;
    zero_items_ = 0;
    if (!value(root, 0)) return false;
    if (p_ != end_) return fail(p_, std::to_string(end_ - p_) + " bytes left after the value");
    return true;
  }

 private:
  bool fail(const uint8_t* where, std::string what) {
    error_ = "avro: " + std::move(what) + " at byte " + std::to_string(where - base_);
    return false;
  }

  bool read_long(int64_t& v) {
    const uint8_t* at = p_;
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ >= end_) return fail(at, "truncated varint");
      const uint8_t b = *p_++;
      if (shift == 63 && b > 1) return fail(at, "varint longer than 64 bits");
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) {
        v = static_cast<int64_t>((result >> 1) ^ (~(result & 1) + 1));
        return true;
      }
    }
    return fail(at, "varint longer than 10 bytes");
  }

  bool read_int(int32_t& v) {
    const uint8_t* at = p_;
    int64_t l;
    if (!read_long(l)) return false;
    if (l < INT32_MIN || l > INT32_MAX) return fail(at, "int " + std::to_string(l) + " out of 32-bit range");
    v = static_cast<int32_t>(l);
    return true;
  }

  bool take(size_t n, const uint8_t*& data) {
    if (static_cast<size_t>(end_ - p_) < n)
      return fail(p_, "needs " + std::to_string(n) + " bytes, " + std::to_string(end_ - p_) + " left");
    data = p_;
    p_ += n;
    return true;
  }

  // An IEEE 754 value, stored as its bits in little-endian order (the host's order here).
  template <class Real, class Bits>
  bool real() {
    const uint8_t* d;
    if (!take(sizeof(Bits), d)) return false;
    Bits bits;
    std::memcpy(&bits, d, sizeof bits);
    out_.real(std::bit_cast<Real>(bits));
    return true;
  }

  bool length(size_t& n) {
    const uint8_t* at = p_;
    int64_t l;
    if (!read_long(l)) return false;
    if (l < 0) return fail(at, "negative length " + std::to_string(l));
    if (static_cast<uint64_t>(l) > static_cast<uint64_t>(end_ - p_))
      return fail(at, "length " + std::to_string(l) + " exceeds the " + std::to_string(end_ - p_) + " bytes left");
    n = static_cast<size_t>(l);
    return true;
  }

  // Block count of an array or map: 0 ends; a negative count is followed by the block's size.
  bool block_count(const Node& item, int64_t& count) {
    const uint8_t* at = p_;
    if (!read_long(count)) return false;
    if (count < 0) {
      if (count == INT64_MIN) return fail(at, "block count out of range");
      count = -count;
      int64_t bytes;
      if (!read_long(bytes)) return false;
      if (bytes < 0) return fail(at, "negative block size");
    }
    if (item.min_zero) {
      zero_items_ += static_cast<uint64_t>(count);
      if (zero_items_ > kMaxZeroSizeItems)
        return fail(at, "more than " + std::to_string(kMaxZeroSizeItems) + " items of a zero-byte type");
    } else if (static_cast<uint64_t>(count) > static_cast<uint64_t>(end_ - p_)) {
      return fail(
          at, "block of " + std::to_string(count) + " items exceeds the " + std::to_string(end_ - p_) + " bytes left");
    }
    return true;
  }

  void uuid_from_bytes(const uint8_t* d) {
    static constexpr char hex[] = "0123456789abcdef";
    char buf[38];
    size_t k = 0;
    buf[k++] = '"';
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) buf[k++] = '-';
      buf[k++] = hex[d[i] >> 4];
      buf[k++] = hex[d[i] & 15];
    }
    buf[k++] = '"';
    out_.raw({buf, k});
  }

  bool timestamp(int64_t v, int64_t per_second, int digits, bool zulu) {
    int64_t secs = v / per_second, frac = v % per_second;
    if (frac < 0) {
      frac += per_second;
      secs -= 1;
    }
    const uint32_t nanos = static_cast<uint32_t>(frac * (1000000000 / per_second));
    const size_t mark = out_.str().size();
    out_.ch('"');
    if (!format_timestamp(secs, nanos, digits, zulu, out_.str())) {
      out_.str().resize(mark);  // outside years 0001..9999: the number itself
      out_.integer(v);
      return true;
    }
    out_.ch('"');
    return true;
  }

  bool value(const Node& n, int depth) {
    if (depth > kMaxDepth) return fail(p_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    switch (n.type) {
      case Type::null_: out_.null(); return true;
      case Type::boolean: {
        const uint8_t* d;
        if (!take(1, d)) return false;
        if (*d > 1) return fail(d, "boolean byte " + std::to_string(*d) + " is neither 0 nor 1");
        out_.boolean(*d == 1);
        return true;
      }
      case Type::int_: {
        int32_t v;
        if (!read_int(v)) return false;
        if (n.logical == Logical::date) {
          const size_t mark = out_.str().size();
          out_.ch('"');
          if (format_date(v, out_.str())) out_.ch('"');
          else {
            out_.str().resize(mark);
            out_.integer(v);
          }
        } else if (n.logical == Logical::time_millis && v >= 0 && v < 86400000) {
          out_.ch('"');
          format_time_of_day(v, 3, out_.str());
          out_.ch('"');
        } else {
          out_.integer(v);
        }
        return true;
      }
      case Type::long_: {
        int64_t v;
        if (!read_long(v)) return false;
        switch (n.logical) {
          case Logical::time_micros:
            if (v >= 0 && v < 86400000000) {
              out_.ch('"');
              format_time_of_day(v, 6, out_.str());
              out_.ch('"');
              return true;
            }
            break;
          case Logical::timestamp_millis: return timestamp(v, 1000, 3, true);
          case Logical::timestamp_micros: return timestamp(v, 1000000, 6, true);
          case Logical::local_timestamp_millis: return timestamp(v, 1000, 3, false);
          case Logical::local_timestamp_micros: return timestamp(v, 1000000, 6, false);
          default: break;
        }
        out_.integer(v);
        return true;
      }
      case Type::float_: return real<float, uint32_t>();
      case Type::double_: return real<double, uint64_t>();
      case Type::bytes: {
        size_t len;
        const uint8_t* d;
        if (!length(len) || !take(len, d)) return false;
        if (n.logical == Logical::decimal) out_.string(decimal_from_twos_complement(d, len, n.scale));
        else out_.quoted_base64(d, len);
        return true;
      }
      case Type::string: {
        size_t len;
        const uint8_t* d;
        if (!length(len) || !take(len, d)) return false;
        if (!valid_utf8(reinterpret_cast<const char*>(d), len)) return fail(d, "invalid UTF-8 in a string");
        out_.string({reinterpret_cast<const char*>(d), len});
        return true;
      }
      case Type::fixed: {
        const uint8_t* d;
        if (!take(n.fixed_size, d)) return false;
        if (n.logical == Logical::decimal) {
          out_.string(decimal_from_twos_complement(d, n.fixed_size, n.scale));
        } else if (n.logical == Logical::uuid) {
          uuid_from_bytes(d);
        } else if (n.logical == Logical::duration) {
          uint32_t v[3];
          std::memcpy(v, d, 12);
          out_.raw("{\"months\":");
          out_.integer(v[0]);
          out_.raw(",\"days\":");
          out_.integer(v[1]);
          out_.raw(",\"millis\":");
          out_.integer(v[2]);
          out_.ch('}');
        } else {
          out_.quoted_base64(d, n.fixed_size);
        }
        return true;
      }
      case Type::record:
        out_.ch('{');
        for (size_t i = 0; i < n.children.size(); ++i) {
          out_.key(n.keys[i]);
          if (!value(*n.children[i], depth + 1)) return false;
          out_.ch(',');
        }
        out_.close('}');
        return true;
      case Type::enum_: {
        const uint8_t* at = p_;
        int32_t i;
        if (!read_int(i)) return false;
        if (i < 0 || static_cast<size_t>(i) >= n.symbols.size())
          return fail(at, "enum index " + std::to_string(i) + " out of range (" + std::to_string(n.symbols.size()) +
                              " symbols in " + n.name + ")");
        out_.raw(n.symbols[static_cast<size_t>(i)]);
        return true;
      }
      case Type::array: {
        out_.ch('[');
        const Node& item = *n.children[0];
        for (;;) {
          int64_t count;
          if (!block_count(item, count)) return false;
          if (count == 0) break;
          for (int64_t i = 0; i < count; ++i) {
            if (!value(item, depth + 1)) return false;
            out_.ch(',');
          }
        }
        out_.close(']');
        return true;
      }
      case Type::map: {
        out_.ch('{');
        const Node& item = *n.children[0];
        for (;;) {
          int64_t count;
          if (!block_count(item, count)) return false;
          if (count == 0) break;
          for (int64_t i = 0; i < count; ++i) {
            size_t len;
            const uint8_t* d;
            if (!length(len) || !take(len, d)) return false;
            if (!valid_utf8(reinterpret_cast<const char*>(d), len)) return fail(d, "invalid UTF-8 in a map key");
            out_.string({reinterpret_cast<const char*>(d), len});
            out_.ch(':');
            if (!value(item, depth + 1)) return false;
            out_.ch(',');
          }
        }
        out_.close('}');
        return true;
      }
      case Type::union_: {
        const uint8_t* at = p_;
        int64_t branch;
        if (!read_long(branch)) return false;
        if (branch < 0 || static_cast<uint64_t>(branch) >= n.children.size())
          return fail(at, "union branch " + std::to_string(branch) + " out of range (" +
                              std::to_string(n.children.size()) + " branches)");
        return value(*n.children[static_cast<size_t>(branch)], depth + 1);
      }
    }
    return fail(p_, "unknown type");
  }

  JsonOut& out_;
  std::string& error_;
  const uint8_t* base_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t zero_items_ = 0;
};

class AvroDecoder final : public SchemaDecoder {
 public:
  explicit AvroDecoder(std::shared_ptr<const AvroSchema> schema)
      : schema_(std::move(schema)), text_(schema_, &schema_->text) {}
  const std::shared_ptr<const std::string>& writer_schema() const override { return text_; }

  Status decode(std::span<const uint8_t> in, std::string& out, std::string& error) override {
    out_.clear();
    Reader r(out_, error);
    if (!r.datum(*schema_->root, in.data(), in.size(), 0)) return Status::bad_record;
    out.swap(out_.str());
    return Status::ok;
  }

 private:
  std::shared_ptr<const AvroSchema> schema_;
  std::shared_ptr<const std::string> text_;  // shares schema_'s ownership
  JsonOut out_;
};

class AvroRegistryDecoder final : public SchemaDecoder {
 public:
  explicit AvroRegistryDecoder(std::shared_ptr<SchemaRegistry> registry) : registry_(std::move(registry)) {}

  Status decode(std::span<const uint8_t> in, std::string& out, std::string& error) override {
    if (in.size() < 5) {
      error = "avro: a schema-registry framed payload has at least 5 bytes (magic byte 0 + schema id), this one " +
              std::to_string(in.size());
      return Status::bad_record;
    }
    if (in[0] != 0) {
      error = "avro: first byte is " + std::to_string(in[0]) + ", not the schema-registry magic byte 0";
      return Status::bad_record;
    }
    const uint32_t id = (uint32_t{in[1]} << 24) | (uint32_t{in[2]} << 16) | (uint32_t{in[3]} << 8) | in[4];
    if (!last_schema_ || id != last_id_) {
      std::shared_ptr<const AvroSchema> schema;
      const Status s = registry_->lookup(id, schema, error);
      if (s != Status::ok) return s;
      last_id_ = id;
      last_schema_ = std::move(schema);
      last_text_ = std::shared_ptr<const std::string>(last_schema_, &last_schema_->text);
    }
    out_.clear();
    Reader r(out_, error);
    if (!r.datum(*last_schema_->root, in.data() + 5, in.size() - 5, 5)) {
      error += " (schema id " + std::to_string(id) + ")";
      return Status::bad_record;
    }
    out.swap(out_.str());
    return Status::ok;
  }
  const std::shared_ptr<const std::string>& writer_schema() const override { return last_text_; }

 private:
  std::shared_ptr<SchemaRegistry> registry_;
  uint32_t last_id_ = 0;
  std::shared_ptr<const AvroSchema> last_schema_;
  std::shared_ptr<const std::string> last_text_;
  JsonOut out_;
};

}  // namespace

std::unique_ptr<SchemaDecoder> make_avro_decoder(std::shared_ptr<const AvroSchema> schema) {
  return std::make_unique<AvroDecoder>(std::move(schema));
}

std::unique_ptr<SchemaDecoder> make_avro_registry_decoder(std::shared_ptr<SchemaRegistry> registry) {
  return std::make_unique<AvroRegistryDecoder>(std::move(registry));
}

}  // namespace picomq::decoders
