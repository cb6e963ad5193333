#include "decoders/flatbuffer_decoder.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection.h>
#include <flatbuffers/util.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "decoders/json_out.h"

namespace picomq::decoders {

namespace {

using reflection::BaseType;

struct EnumPlan {
  std::vector<std::pair<int64_t, std::string>> names;  // sorted by value; "\"NAME\""
  std::vector<int32_t> union_objects;                  // union enums: value -> object index (-1: none/other)
  std::vector<bool> union_is_string;
  const std::string* find(int64_t v) const {
    auto it = std::lower_bound(names.begin(), names.end(), v, [](const auto& e, int64_t x) { return e.first < x; });
    return it != names.end() && it->first == v ? &it->second : nullptr;
  }
};

struct FieldPlan {
  std::string key;      // "\"name\":"
  std::string name;     // for errors
  uint16_t offset = 0;  // table: vtable offset; struct: byte offset
  BaseType base = BaseType::None;
  BaseType element = BaseType::None;
  int32_t index = -1;  // object (Obj, vectors of Obj) or enum (scalars, Union, UType) index
  uint16_t fixed_length = 0;
  int64_t default_integer = 0;
  double default_real = 0;
  bool optional = false;
  bool required = false;
  std::string default_json;   // scalars: what an absent field shows (its default, or null if optional)
  std::string key_default;    // key + default_json + ',': an absent field in one append
  uint16_t utype_offset = 0;  // Union / vector of unions: the companion _type field
};

struct ObjectPlan {
  std::string name;
  bool is_struct = false;
  uint32_t bytesize = 0;
  uint32_t minalign = 1;
  std::vector<FieldPlan> fields;  // by id, deprecated ones left out
};

}  // namespace

class FlatbufferSchema {
 public:
  std::string bfbs;  // the binary schema (owned)
  const reflection::Schema* schema = nullptr;
  const reflection::Object* root = nullptr;
  int32_t root_index = -1;
  std::vector<ObjectPlan> objects;
  std::vector<EnumPlan> enums;
};

namespace {

bool read_file(const std::string& path, std::string& out, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

bool is_scalar(BaseType t) { return t >= BaseType::UType && t <= BaseType::Double; }

// The JSON of an absent scalar, rendered once.
std::string default_json(const FlatbufferSchema& s, const FieldPlan& f) {
  if (!is_scalar(f.base)) return "null";
  if (f.optional) return "null";
  JsonOut j;
  switch (f.base) {
    case BaseType::Bool: j.boolean(f.default_integer != 0); break;
    case BaseType::Float: j.real(static_cast<float>(f.default_real)); break;
    case BaseType::Double: j.real(f.default_real); break;
    default: {
      const std::string* name = f.index >= 0 ? s.enums[static_cast<size_t>(f.index)].find(f.default_integer) : nullptr;
      if (name) j.raw(*name);
      else if (f.base == BaseType::ULong) j.integer(static_cast<uint64_t>(f.default_integer));
      else j.integer(f.default_integer);
    }
  }
  return std::move(j.str());
}

void build_plans(FlatbufferSchema& s) {
  const auto* objects = s.schema->objects();
  const auto* enums = s.schema->enums();
  for (uint32_t e = 0; e < enums->size(); ++e) {
    const reflection::Enum* en = enums->Get(e);
    EnumPlan plan;
    for (const reflection::EnumVal* v : *en->values()) {
      JsonOut q;
      q.string(v->name()->str());
      plan.names.emplace_back(v->value(), std::move(q.str()));
    }
    std::stable_sort(plan.names.begin(), plan.names.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (en->is_union()) {
      int64_t max_value = 0;
      for (const reflection::EnumVal* v : *en->values()) max_value = std::max(max_value, v->value());
      if (max_value >= 0 && max_value < 256) {
        plan.union_objects.assign(static_cast<size_t>(max_value) + 1, -1);
        plan.union_is_string.assign(static_cast<size_t>(max_value) + 1, false);
        for (const reflection::EnumVal* v : *en->values()) {
          if (v->value() < 0) continue;
          const auto* ut = v->union_type();
          if (!ut) continue;
          if (ut->base_type() == BaseType::Obj) plan.union_objects[static_cast<size_t>(v->value())] = ut->index();
          else if (ut->base_type() == BaseType::String) plan.union_is_string[static_cast<size_t>(v->value())] = true;
        }
      }
    }
    s.enums.push_back(std::move(plan));
  }
  for (uint32_t o = 0; o < objects->size(); ++o) {
    const reflection::Object* obj = objects->Get(o);
    ObjectPlan plan;
    plan.name = obj->name()->str();
    plan.is_struct = obj->is_struct();
    plan.bytesize = static_cast<uint32_t>(obj->bytesize());
    plan.minalign = static_cast<uint32_t>(std::max(1, obj->minalign()));
    std::vector<const reflection::Field*> fields(obj->fields()->begin(), obj->fields()->end());
    std::sort(fields.begin(), fields.end(), [](auto* a, auto* b) { return a->id() < b->id(); });
    for (const reflection::Field* f : fields) {
      if (f->deprecated()) continue;
      FieldPlan fp;
      fp.key = quoted_key(f->name()->str());
      fp.name = plan.name + "." + f->name()->str();
      fp.offset = f->offset();
      fp.base = f->type()->base_type();
      fp.element = f->type()->element();
      fp.index = f->type()->index();
      fp.fixed_length = f->type()->fixed_length();
      fp.default_integer = f->default_integer();
      fp.default_real = f->default_real();
      fp.optional = f->optional();
      fp.required = f->required();
      if (fp.base == BaseType::Union || (fp.base == BaseType::Vector && fp.element == BaseType::Union)) {
        // The companion "<name>_type" field has the id just before.
        for (const reflection::Field* g : fields)
          if (g->id() + 1 == f->id()) fp.utype_offset = g->offset();
      }
      fp.default_json = default_json(s, fp);
      fp.key_default = fp.key + fp.default_json + ",";
      plan.fields.push_back(std::move(fp));
    }
    s.objects.push_back(std::move(plan));
  }
}

}  // namespace

std::shared_ptr<const FlatbufferSchema> compile_flatbuffer(const FlatbufferOptions& options, std::string& error) {
  auto s = std::make_shared<FlatbufferSchema>();
  std::string text;
  if (!read_file(options.schema, text, error)) return nullptr;
  const bool binary = text.size() >= 8 && std::memcmp(text.data() + 4, reflection::SchemaIdentifier(), 4) == 0;
  std::string root_name = options.root_type;
  if (binary) {
    flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    if (!reflection::VerifySchemaBuffer(v)) {
      error = "'" + options.schema + "' is not a valid binary schema (.bfbs)";
      return nullptr;
    }
    s->bfbs = std::move(text);
  } else {
    flatbuffers::IDLOptions opts;
    flatbuffers::Parser parser(opts);
    std::vector<std::string> dirs = options.include_paths;
    const std::string own_dir = flatbuffers::StripFileName(options.schema);
    dirs.push_back(own_dir.empty() ? "." : own_dir);
    std::vector<const char*> includes;
    for (const auto& d : dirs) includes.push_back(d.c_str());
    includes.push_back(nullptr);
    if (!parser.Parse(text.c_str(), includes.data(), options.schema.c_str())) {
      error = parser.error_;
      while (!error.empty() && error.back() == '\n') error.pop_back();
      return nullptr;
    }
    if (!root_name.empty() && !parser.SetRootType(root_name.c_str())) {
      error = "root type '" + root_name + "' is not a table of '" + options.schema + "'";
      return nullptr;
    }
    if (!parser.root_struct_def_) {
      error = "'" + options.schema + "' declares no root_type; set flatbuffer_root_type";
      return nullptr;
    }
    root_name = parser.root_struct_def_->defined_namespace->GetFullyQualifiedName(parser.root_struct_def_->name);
    parser.Serialize();
    s->bfbs.assign(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize());
  }
  s->schema = reflection::GetSchema(s->bfbs.data());
  const auto* objects = s->schema->objects();
  if (root_name.empty()) {
    s->root = s->schema->root_table();
    if (!s->root) {
      error = "'" + options.schema + "' declares no root_type; set flatbuffer_root_type";
      return nullptr;
    }
  } else {
    for (uint32_t i = 0; i < objects->size(); ++i) {
      const std::string name = objects->Get(i)->name()->str();
      if (name == root_name || (name.size() > root_name.size() && name.ends_with("." + root_name))) {
        s->root = objects->Get(i);
        break;
      }
    }
    if (!s->root) {
      error = "root type '" + root_name + "' is not defined in '" + options.schema + "'";
      return nullptr;
    }
  }
  if (s->root->is_struct()) {
    error = "root type '" + s->root->name()->str() + "' is a struct; a root type must be a table";
    return nullptr;
  }
  for (uint32_t i = 0; i < objects->size(); ++i)
    if (objects->Get(i) == s->root) s->root_index = static_cast<int32_t>(i);
  build_plans(*s);
  return s;
}

namespace {

class FlatbufferDecoder final : public SchemaDecoder {
 public:
  explicit FlatbufferDecoder(std::shared_ptr<const FlatbufferSchema> schema) : s_(std::move(schema)) {}

  Status decode(std::span<const uint8_t> in, std::string& out, std::string& error) override {
    const uint8_t* buf = in.data();
    // Scalars are read in place: keep them aligned as the builder laid them out.
    if (reinterpret_cast<uintptr_t>(buf) % 8 != 0) {
      aligned_.resize((in.size() + 7) / 8 + 1);
      if (!in.empty()) std::memcpy(aligned_.data(), in.data(), in.size());
      buf = reinterpret_cast<const uint8_t*>(aligned_.data());
    }
    if (!verify(buf, in.size())) {
      error = "flatbuffer: verification failed (not a valid " + s_->objects[static_cast<size_t>(s_->root_index)].name +
              " buffer of " + std::to_string(in.size()) + " bytes)";
      return Status::bad_record;
    }
    out_.clear();
    error_.clear();
    depth_ = 0;
    if (!table(s_->objects[static_cast<size_t>(s_->root_index)], flatbuffers::GetAnyRoot(buf))) {
      error = "flatbuffer: " + error_;
      return Status::bad_record;
    }
    out.swap(out_.str());
    return Status::ok;
  }

 private:
  bool fail(std::string what) {
    error_ = std::move(what);
    return false;
  }

  // ---- verification, before anything is read. Plan-driven, with flatbuffers' Verifier doing
  // every bounds, alignment, depth and table-count check. (flatbuffers 2.0.8's own reflection
  // Verify() reads past the type vector of a vector of unions shorter than the vector: the
  // fuzz target found it; here the type vector must be as long as the vector.)
  bool verify(const uint8_t* buf, size_t size) {
    if (size < sizeof(flatbuffers::uoffset_t) || size >= FLATBUFFERS_MAX_BUFFER_SIZE) return false;
    flatbuffers::Verifier v(buf, size, 64, 1000000);
    buf_ = buf;
    const flatbuffers::uoffset_t root = v.VerifyOffset(0);
    if (!root) return false;
    return verify_table(v, s_->objects[static_cast<size_t>(s_->root_index)],
                        reinterpret_cast<const flatbuffers::Table*>(buf + root));
  }

  bool verify_scalar(flatbuffers::Verifier& v, const flatbuffers::Table* t, uint16_t field, BaseType type) {
    switch (flatbuffers::GetTypeSize(type)) {
      case 1: return t->VerifyField<uint8_t>(v, field, 1);
      case 2: return t->VerifyField<uint16_t>(v, field, 2);
      case 4: return t->VerifyField<uint32_t>(v, field, 4);
      case 8: return t->VerifyField<uint64_t>(v, field, 8);
      default: return false;
    }
  }

  // `p` is where a verified offset points.
  bool verify_union_member(flatbuffers::Verifier& v, const FieldPlan& f, uint8_t type, const uint8_t* p) {
    const EnumPlan& e = s_->enums[static_cast<size_t>(f.index)];
    if (type < e.union_objects.size() && e.union_objects[type] >= 0) {
      const ObjectPlan& o = s_->objects[static_cast<size_t>(e.union_objects[type])];
      if (o.is_struct) return v.VerifyFromPointer(p, o.bytesize);
      return verify_table(v, o, reinterpret_cast<const flatbuffers::Table*>(p));
    }
    if (type < e.union_is_string.size() && e.union_is_string[type])
      return v.VerifyString(reinterpret_cast<const flatbuffers::String*>(p));
    return true;  // NONE or a type we do not know: not read
  }

  // A verified offset in the slot at `slot` (inside a verified vector): where it points, or null.
  const uint8_t* follow(flatbuffers::Verifier& v, const uint8_t* slot) {
    const flatbuffers::uoffset_t o = v.VerifyOffset(static_cast<size_t>(slot - buf_));
    return o ? slot + o : nullptr;
  }

  bool verify_table(flatbuffers::Verifier& v, const ObjectPlan& o, const flatbuffers::Table* t) {
    if (!t->VerifyTableStart(v)) return false;
    for (const FieldPlan& f : o.fields) {
      if (f.required && !t->GetOptionalFieldOffset(f.offset)) return false;
      if (is_scalar(f.base)) {
        if (!verify_scalar(v, t, f.offset, f.base)) return false;
        continue;
      }
      if (f.base == BaseType::Obj && s_->objects[static_cast<size_t>(f.index)].is_struct) {
        const ObjectPlan& st = s_->objects[static_cast<size_t>(f.index)];
        const flatbuffers::voffset_t at = t->GetOptionalFieldOffset(f.offset);
        if (at && !v.VerifyFieldStruct(reinterpret_cast<const uint8_t*>(t), at, st.bytesize, st.minalign)) return false;
        continue;
      }
      if (!t->VerifyOffset(v, f.offset)) return false;
      const uint8_t* p = reinterpret_cast<const uint8_t*>(t->GetPointer<const void*>(f.offset));
      if (!p) continue;
      switch (f.base) {
        case BaseType::String:
          if (!v.VerifyString(reinterpret_cast<const flatbuffers::String*>(p))) return false;
          break;
        case BaseType::Obj:
          if (!verify_table(v, s_->objects[static_cast<size_t>(f.index)],
                            reinterpret_cast<const flatbuffers::Table*>(p)))
            return false;
          break;
        case BaseType::Union:
          if (!verify_union_member(v, f, t->GetField<uint8_t>(f.utype_offset, 0), p)) return false;
          break;
        case BaseType::Vector:
          if (!verify_vector(v, f, t, p)) return false;
          break;
        default: return false;  // nothing else can be a table field
      }
    }
    return v.EndTable();
  }

  bool verify_vector(flatbuffers::Verifier& v, const FieldPlan& f, const flatbuffers::Table* t, const uint8_t* p) {
    const bool objects = f.element == BaseType::Obj;
    const ObjectPlan* sub = objects ? &s_->objects[static_cast<size_t>(f.index)] : nullptr;
    size_t elem_size = 4;
    if (objects && sub->is_struct) elem_size = sub->bytesize;
    else if (is_scalar(f.element)) elem_size = flatbuffers::GetTypeSize(f.element);
    if (!v.VerifyVectorOrString(p, elem_size)) return false;
    if (objects && sub->is_struct && !v.VerifyAlignment(static_cast<size_t>(p - buf_) + 4, sub->minalign)) return false;
    const auto* vec = reinterpret_cast<const flatbuffers::VectorOfAny*>(p);
    const uint8_t* data = vec->Data();
    const flatbuffers::uoffset_t n = vec->size();
    switch (f.element) {
      case BaseType::String:
        for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
          const uint8_t* e = follow(v, data + i * 4);
          if (!e || !v.VerifyString(reinterpret_cast<const flatbuffers::String*>(e))) return false;
        }
        return true;
      case BaseType::Obj:
        if (sub->is_struct) return true;
        for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
          const uint8_t* e = follow(v, data + i * 4);
          if (!e || !verify_table(v, *sub, reinterpret_cast<const flatbuffers::Table*>(e))) return false;
        }
        return true;
      case BaseType::Union: {
        if (!t->VerifyOffset(v, f.utype_offset)) return false;
        const auto* types = t->GetPointer<const flatbuffers::Vector<uint8_t>*>(f.utype_offset);
        if (!types || !v.VerifyVector(types) || types->size() != n) return false;
        for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
          const uint8_t type = types->Get(i);
          if (type == 0) continue;
          const uint8_t* e = follow(v, data + i * 4);
          if (!e || !verify_union_member(v, f, type, e)) return false;
        }
        return true;
      }
      default: return is_scalar(f.element);
    }
  }

  template <typename T>
  static T read(const uint8_t* p) {
    return flatbuffers::ReadScalar<T>(p);
  }

  // A scalar at `p` (an enum value shown by name when it has one).
  void scalar(BaseType t, int32_t enum_index, const uint8_t* p) {
    int64_t i = 0;
    switch (t) {
      case BaseType::Bool: return out_.boolean(read<uint8_t>(p) != 0);
      case BaseType::Float: return out_.real(read<float>(p));
      case BaseType::Double: return out_.real(read<double>(p));
      case BaseType::Byte: i = read<int8_t>(p); break;
      case BaseType::UType:
      case BaseType::UByte: i = read<uint8_t>(p); break;
      case BaseType::Short: i = read<int16_t>(p); break;
      case BaseType::UShort: i = read<uint16_t>(p); break;
      case BaseType::Int: i = read<int32_t>(p); break;
      case BaseType::UInt: i = read<uint32_t>(p); break;
      case BaseType::Long: i = read<int64_t>(p); break;
      case BaseType::ULong: {
        const uint64_t u = read<uint64_t>(p);
        if (enum_index >= 0)
          if (const std::string* name = s_->enums[static_cast<size_t>(enum_index)].find(static_cast<int64_t>(u)))
            return out_.raw(*name);
        return out_.integer(u);
      }
      default: return out_.null();
    }
    integer(i, enum_index);
  }

  void integer(int64_t i, int32_t enum_index) {
    if (enum_index >= 0)
      if (const std::string* name = s_->enums[static_cast<size_t>(enum_index)].find(i)) return out_.raw(*name);
    out_.integer(i);
  }

  bool string(const flatbuffers::String* s, const std::string& field) {
    if (!valid_utf8(s->c_str(), s->size())) return fail("invalid UTF-8 in string field '" + field + "'");
    out_.string({s->c_str(), s->size()});
    return true;
  }

  bool object(int32_t index, const uint8_t* p, bool is_struct) {
    const ObjectPlan& o = s_->objects[static_cast<size_t>(index)];
    if (is_struct) return structure(o, p);
    return table(o, reinterpret_cast<const flatbuffers::Table*>(p));
  }

  bool structure(const ObjectPlan& o, const uint8_t* p) {
    out_.ch('{');
    for (const FieldPlan& f : o.fields) {
      out_.key(f.key);
      const uint8_t* at = p + f.offset;
      if (f.base == BaseType::Obj) {
        if (!structure(s_->objects[static_cast<size_t>(f.index)], at)) return false;
      } else if (f.base == BaseType::Array) {
        out_.ch('[');
        const bool objs = f.element == BaseType::Obj;
        const size_t size =
            objs ? s_->objects[static_cast<size_t>(f.index)].bytesize : flatbuffers::GetTypeSize(f.element);
        for (uint16_t i = 0; i < f.fixed_length; ++i) {
          if (objs) {
            if (!structure(s_->objects[static_cast<size_t>(f.index)], at + i * size)) return false;
          } else {
            scalar(f.element, f.index, at + i * size);
          }
          out_.ch(',');
        }
        out_.close(']');
      } else {
        scalar(f.base, f.index, at);
      }
      out_.ch(',');
    }
    out_.close('}');
    return true;
  }

  bool union_value(const FieldPlan& f, uint8_t type, const uint8_t* p) {
    const EnumPlan& e = s_->enums[static_cast<size_t>(f.index)];
    if (type == 0 || !p) {
      out_.null();
      return true;
    }
    if (type < e.union_objects.size() && e.union_objects[type] >= 0) {
      const int32_t oi = e.union_objects[type];
      return object(oi, p, s_->objects[static_cast<size_t>(oi)].is_struct);
    }
    if (type < e.union_is_string.size() && e.union_is_string[type])
      return string(reinterpret_cast<const flatbuffers::String*>(p), f.name);
    out_.null();  // a union type this schema does not know
    return true;
  }

  bool table(const ObjectPlan& o, const flatbuffers::Table* t) {
    if (++depth_ > 64) return fail("nesting deeper than 64 tables");
    out_.ch('{');
    for (const FieldPlan& f : o.fields) {
      const uint8_t* at = t->GetAddressOf(f.offset);
      if (!at) {  // absent: its default (scalars) or null, pre-rendered with the key
        out_.raw(f.key_default);
        continue;
      }
      out_.key(f.key);
      if (is_scalar(f.base)) {
        scalar(f.base, f.index, at);
      } else {
        switch (f.base) {
          case BaseType::String:
            if (!string(t->GetPointer<const flatbuffers::String*>(f.offset), f.name)) return false;
            break;
          case BaseType::Obj: {
            const bool is_struct = s_->objects[static_cast<size_t>(f.index)].is_struct;
            const uint8_t* p =
                is_struct ? at : reinterpret_cast<const uint8_t*>(t->GetPointer<const flatbuffers::Table*>(f.offset));
            if (!object(f.index, p, is_struct)) return false;
            break;
          }
          case BaseType::Union: {
            const uint8_t type = t->GetField<uint8_t>(f.utype_offset, 0);
            if (!union_value(f, type, reinterpret_cast<const uint8_t*>(t->GetPointer<const void*>(f.offset))))
              return false;
            break;
          }
          case BaseType::Vector:
            if (!vector(f, t)) return false;
            break;
          default: out_.null(); break;
        }
      }
      out_.ch(',');
    }
    out_.close('}');
    --depth_;
    return true;
  }

  bool vector(const FieldPlan& f, const flatbuffers::Table* t) {
    const auto* v = t->GetPointer<const flatbuffers::VectorOfAny*>(f.offset);
    const uint8_t* data = v->Data();
    const uint32_t n = v->size();
    out_.ch('[');
    switch (f.element) {
      case BaseType::String:
        for (uint32_t i = 0; i < n; ++i) {
          const uint8_t* slot = data + i * 4;
          if (!string(reinterpret_cast<const flatbuffers::String*>(slot + read<uint32_t>(slot)), f.name)) return false;
          out_.ch(',');
        }
        break;
      case BaseType::Obj: {
        const ObjectPlan& o = s_->objects[static_cast<size_t>(f.index)];
        for (uint32_t i = 0; i < n; ++i) {
          if (o.is_struct) {
            if (!structure(o, data + i * o.bytesize)) return false;
          } else {
            const uint8_t* slot = data + i * 4;
            if (!table(o, reinterpret_cast<const flatbuffers::Table*>(slot + read<uint32_t>(slot)))) return false;
          }
          out_.ch(',');
        }
        break;
      }
      case BaseType::Union: {
        const auto* types = t->GetPointer<const flatbuffers::Vector<uint8_t>*>(f.utype_offset);
        for (uint32_t i = 0; i < n; ++i) {
          const uint8_t type = types && i < types->size() ? types->Get(i) : 0;
          const uint8_t* slot = data + i * 4;
          if (!union_value(f, type, slot + read<uint32_t>(slot))) return false;
          out_.ch(',');
        }
        break;
      }
      default: {
        const size_t size = flatbuffers::GetTypeSize(f.element);
        for (uint32_t i = 0; i < n; ++i) {
          scalar(f.element, f.index, data + i * size);
          out_.ch(',');
        }
      }
    }
    out_.close(']');
    return true;
  }

  std::shared_ptr<const FlatbufferSchema> s_;
  JsonOut out_;
  std::string error_;
  std::vector<uint64_t> aligned_;
  const uint8_t* buf_ = nullptr;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<SchemaDecoder> make_flatbuffer_decoder(std::shared_ptr<const FlatbufferSchema> schema) {
  return std::make_unique<FlatbufferDecoder>(std::move(schema));
}

}  // namespace picomq::decoders
