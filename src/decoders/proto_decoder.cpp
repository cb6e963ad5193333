#include "decoders/proto_decoder.h"

#include <google/protobuf/any.pb.h>
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/empty.pb.h>
#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/wrappers.pb.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "decoders/json_out.h"

namespace picomq::decoders {

namespace gp = google::protobuf;
using FD = gp::FieldDescriptor;

// ------------------------------------------------------------------ decode tables

namespace {

enum class Wkt : uint8_t {
  none,
  timestamp,
  duration,
  wrapper,
  struct_,
  value,
  list_value,
  empty,
  field_mask,
  any,
};

struct EnumInfo {
  bool closed = false;      // proto2 enums: unknown values are unknown fields (as libprotobuf does)
  bool null_value = false;  // google.protobuf.NullValue: always JSON null
  std::vector<std::pair<int32_t, std::string>> names;  // sorted by number; "\"NAME\""

  const std::string* find(int32_t v) const {
    auto it = std::lower_bound(names.begin(), names.end(), v, [](const auto& e, int32_t x) { return e.first < x; });
    return it != names.end() && it->first == v ? &it->second : nullptr;
  }
};

struct MsgInfo;

struct FieldInfo {
  uint32_t number = 0;
  FD::Type type = FD::TYPE_INT32;
  uint8_t wire = 0;  // expected wire type
  bool repeated = false, packable = false, presence = false, required = false, map = false;
  int oneof = -1;    // index of its (real) oneof within the message
  std::string key;   // "\"name\":"
  std::string name;  // full name, for errors
  std::string json_name;
  const MsgInfo* msg = nullptr;   // message, group, map entry
  const EnumInfo* enm = nullptr;  // enum
};

struct MsgInfo {
  std::string full_name;
  Wkt wkt = Wkt::none;
  std::vector<FieldInfo> fields;                     // declaration order
  std::vector<int32_t> dense;                        // field number -> index + 1 (0: unknown), for small numbers
  std::vector<std::pair<uint32_t, int32_t>> sparse;  // (number, index) sorted, for the rest
  int oneofs = 0;
  bool has_required = false;

  int index_of(uint32_t number) const {
    if (number < dense.size()) return dense[number] - 1;
    auto it =
        std::lower_bound(sparse.begin(), sparse.end(), number, [](const auto& e, uint32_t n) { return e.first < n; });
    return it != sparse.end() && it->first == number ? it->second : -1;
  }
};

uint8_t wire_type_of(FD::Type t) {
  switch (t) {
    case FD::TYPE_FIXED64:
    case FD::TYPE_SFIXED64:
    case FD::TYPE_DOUBLE: return 1;
    case FD::TYPE_STRING:
    case FD::TYPE_BYTES:
    case FD::TYPE_MESSAGE: return 2;
    case FD::TYPE_GROUP: return 3;
    case FD::TYPE_FIXED32:
    case FD::TYPE_SFIXED32:
    case FD::TYPE_FLOAT: return 5;
    default: return 0;
  }
}

Wkt wkt_of(const std::string& name) {
  static const std::map<std::string, Wkt, std::less<>> known{
      {"google.protobuf.Timestamp", Wkt::timestamp},
      {"google.protobuf.Duration", Wkt::duration},
      {"google.protobuf.DoubleValue", Wkt::wrapper},
      {"google.protobuf.FloatValue", Wkt::wrapper},
      {"google.protobuf.Int64Value", Wkt::wrapper},
      {"google.protobuf.UInt64Value", Wkt::wrapper},
      {"google.protobuf.Int32Value", Wkt::wrapper},
      {"google.protobuf.UInt32Value", Wkt::wrapper},
      {"google.protobuf.BoolValue", Wkt::wrapper},
      {"google.protobuf.StringValue", Wkt::wrapper},
      {"google.protobuf.BytesValue", Wkt::wrapper},
      {"google.protobuf.Struct", Wkt::struct_},
      {"google.protobuf.Value", Wkt::value},
      {"google.protobuf.ListValue", Wkt::list_value},
      {"google.protobuf.Empty", Wkt::empty},
      {"google.protobuf.FieldMask", Wkt::field_mask},
      {"google.protobuf.Any", Wkt::any},
  };
  auto it = known.find(name);
  return it == known.end() ? Wkt::none : it->second;
}

// Collects protoc-style errors: "file:line:column: message".
class FileErrors final : public gp::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& message) override {
    if (!text.empty()) text += "; ";
    text += file;
    if (line >= 0) text += ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
    text += ": " + message;
  }
  std::string text;
};

class PoolErrors final : public gp::DescriptorPool::ErrorCollector {
 public:
  void AddError(const std::string& file, const std::string& element, const gp::Message*, ErrorLocation,
                const std::string& message) override {
    if (!text.empty()) text += "; ";
    text += file + ": " + (element.empty() ? "" : element + ": ") + message;
  }
  std::string text;
};

}  // namespace

class ProtoSchema {
 public:
  ProtoOptions options;
  // Descriptor sources, in construction order (the pool refers to them).
  std::unique_ptr<gp::DescriptorPoolDatabase> generated_db;
  std::unique_ptr<gp::compiler::DiskSourceTree> tree;
  std::unique_ptr<gp::compiler::SourceTreeDescriptorDatabase> source_db;
  std::unique_ptr<gp::SimpleDescriptorDatabase> set_db;
  std::unique_ptr<gp::MergedDescriptorDatabase> merged_db;
  std::unique_ptr<gp::DescriptorPool> pool;

  std::deque<MsgInfo> messages;
  std::deque<EnumInfo> enums;
  std::unordered_map<std::string, const MsgInfo*> by_name;  // every message of the loaded files
  const MsgInfo* root = nullptr;

  bool build_tables(const gp::Descriptor* root_descriptor);
};

bool ProtoSchema::build_tables(const gp::Descriptor* root_descriptor) {
  // Every file reachable from the root's file: Any can only name types we know.
  std::vector<const gp::FileDescriptor*> files;
  std::set<const gp::FileDescriptor*> seen;
  std::vector<const gp::FileDescriptor*> todo{root_descriptor->file()};
  while (!todo.empty()) {
    auto* f = todo.back();
    todo.pop_back();
    if (!seen.insert(f).second) continue;
    files.push_back(f);
    for (int i = 0; i < f->dependency_count(); ++i) todo.push_back(f->dependency(i));
  }
  // Well-known types are always resolvable inside Any.
  for (const gp::Descriptor* d :
       {gp::Timestamp::descriptor(), gp::Duration::descriptor(), gp::Struct::descriptor(), gp::Empty::descriptor(),
        gp::FieldMask::descriptor(), gp::Any::descriptor(), gp::DoubleValue::descriptor()}) {
    const gp::FileDescriptor* f = pool->FindFileByName(d->file()->name());
    if (f && seen.insert(f).second) files.push_back(f);
  }

  std::map<const gp::Descriptor*, MsgInfo*> msg_of;
  std::map<const gp::EnumDescriptor*, EnumInfo*> enum_of;
  std::vector<const gp::Descriptor*> all;
  auto add_enum = [&](const gp::EnumDescriptor* e) {
    EnumInfo& info = enums.emplace_back();
    info.closed = e->file()->syntax() == gp::FileDescriptor::SYNTAX_PROTO2;
    info.null_value = e->full_name() == "google.protobuf.NullValue";
    for (int i = 0; i < e->value_count(); ++i) {
      const auto* v = e->value(i);
      if (std::none_of(info.names.begin(), info.names.end(), [&](const auto& n) { return n.first == v->number(); })) {
        JsonOut s;
        s.string(v->name());
        info.names.emplace_back(v->number(), std::move(s.str()));
      }
    }
    std::stable_sort(info.names.begin(), info.names.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    enum_of[e] = &info;
  };
  std::vector<const gp::Descriptor*> stack;
  for (auto* f : files) {
    for (int i = 0; i < f->message_type_count(); ++i) stack.push_back(f->message_type(i));
    for (int i = 0; i < f->enum_type_count(); ++i) add_enum(f->enum_type(i));
  }
  while (!stack.empty()) {
    const gp::Descriptor* d = stack.back();
    stack.pop_back();
    all.push_back(d);
    MsgInfo& info = messages.emplace_back();
    info.full_name = d->full_name();
    info.wkt = wkt_of(d->full_name());
    msg_of[d] = &info;
    by_name[d->full_name()] = &info;
    for (int i = 0; i < d->nested_type_count(); ++i) stack.push_back(d->nested_type(i));
    for (int i = 0; i < d->enum_type_count(); ++i) add_enum(d->enum_type(i));
  }
  for (const gp::Descriptor* d : all) {
    MsgInfo& info = *msg_of[d];
    std::map<const gp::OneofDescriptor*, int> oneof_index;
    uint32_t max_small = 0;
    for (int i = 0; i < d->field_count(); ++i) {
      const FD* fd = d->field(i);
      FieldInfo f;
      f.number = static_cast<uint32_t>(fd->number());
      f.type = fd->type();
      f.wire = wire_type_of(f.type);
      f.repeated = fd->is_repeated();
      f.packable = fd->is_packable();
      f.presence = fd->has_presence();
      f.required = fd->is_required();
      f.map = fd->is_map();
      f.name = fd->full_name();
      f.json_name = fd->json_name();
      f.key = quoted_key(options.json_names ? fd->json_name() : fd->name());
      if (const gp::OneofDescriptor* o = fd->real_containing_oneof()) {
        auto [it, inserted] = oneof_index.emplace(o, static_cast<int>(oneof_index.size()));
        f.oneof = it->second;
      }
      if (fd->message_type()) {
        auto it = msg_of.find(fd->message_type());
        if (it == msg_of.end()) return false;  // cannot happen: every file reachable was walked
        f.msg = it->second;
      }
      if (fd->enum_type()) {
        auto it = enum_of.find(fd->enum_type());
        if (it == enum_of.end()) return false;
        f.enm = it->second;
      }
      info.has_required = info.has_required || f.required;
      if (f.number < 4096) max_small = std::max(max_small, f.number);
      info.fields.push_back(std::move(f));
    }
    info.oneofs = static_cast<int>(oneof_index.size());
    info.dense.assign(max_small + 1, 0);
    for (size_t i = 0; i < info.fields.size(); ++i) {
      const uint32_t n = info.fields[i].number;
      if (n < info.dense.size()) info.dense[n] = static_cast<int32_t>(i) + 1;
      else info.sparse.emplace_back(n, static_cast<int32_t>(i));
    }
    std::sort(info.sparse.begin(), info.sparse.end());
  }
  root = msg_of[root_descriptor];
  return root != nullptr;
}

namespace {

std::string read_whole_file(const std::string& path, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string list_messages(const gp::DescriptorPool& pool, const std::vector<std::string>& file_names) {
  std::vector<std::string> names;
  std::vector<const gp::Descriptor*> stack;
  for (const auto& name : file_names)
    if (const auto* f = pool.FindFileByName(name))
      for (int i = 0; i < f->message_type_count(); ++i) stack.push_back(f->message_type(i));
  while (!stack.empty() && names.size() < 20) {
    const auto* d = stack.back();
    stack.pop_back();
    if (!d->options().map_entry()) names.push_back(d->full_name());
    for (int i = 0; i < d->nested_type_count(); ++i) stack.push_back(d->nested_type(i));
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

std::shared_ptr<const ProtoSchema> compile_proto(const ProtoOptions& options, std::string& error) {
  // Makes sure the well-known types are registered in the generated pool (static linking).
  (void)gp::Timestamp::descriptor(), (void)gp::Duration::descriptor(), (void)gp::Struct::descriptor(),
      (void)gp::Empty::descriptor(), (void)gp::FieldMask::descriptor(), (void)gp::Any::descriptor(),
      (void)gp::DoubleValue::descriptor();
  auto schema = std::make_shared<ProtoSchema>();
  schema->options = options;
  schema->generated_db = std::make_unique<gp::DescriptorPoolDatabase>(*gp::DescriptorPool::generated_pool());
  std::vector<std::string> loaded;  // names of the files given, in the pool
  if (options.message.empty()) {
    error = "no message type given";
    return nullptr;
  }

  if (!options.descriptor_set.empty()) {
    std::string problem;
    std::string bytes = read_whole_file(options.descriptor_set, problem);
    if (!problem.empty()) {
      error = problem;
      return nullptr;
    }
    gp::FileDescriptorSet set;
    if (!set.ParseFromString(bytes) || set.file_size() == 0) {
      error = "'" + options.descriptor_set +
              "' is not a binary FileDescriptorSet (make one with protoc --descriptor_set_out=FILE --include_imports)";
      return nullptr;
    }
    schema->set_db = std::make_unique<gp::SimpleDescriptorDatabase>();
    for (const auto& file : set.file()) {
      if (!schema->set_db->Add(file)) {
        error = "'" + options.descriptor_set + "': file '" + file.name() + "' is in the set twice";
        return nullptr;
      }
      loaded.push_back(file.name());
    }
    schema->merged_db =
        std::make_unique<gp::MergedDescriptorDatabase>(schema->set_db.get(), schema->generated_db.get());
    PoolErrors errors;
    schema->pool = std::make_unique<gp::DescriptorPool>(schema->merged_db.get(), &errors);
    for (const auto& name : loaded) {
      if (!schema->pool->FindFileByName(name)) {
        error = "'" + options.descriptor_set + "': " +
                (errors.text.empty() ? "file '" + name + "' does not build (missing dependency? use --include_imports)"
                                     : errors.text);
        return nullptr;
      }
    }
  } else {
    if (options.files.empty()) {
      error = "no .proto file given";
      return nullptr;
    }
    schema->tree = std::make_unique<gp::compiler::DiskSourceTree>();
    for (const auto& dir : options.include_paths) schema->tree->MapPath("", dir);
    std::vector<std::string> virtual_names;
    for (const auto& file : options.files) {
      std::string problem;
      (void)read_whole_file(file, problem);
      if (!problem.empty()) {
        error = problem;
        return nullptr;
      }
      std::string virtual_name, shadowing;
      if (schema->tree->DiskFileToVirtualFile(file, &virtual_name, &shadowing) !=
          gp::compiler::DiskSourceTree::SUCCESS) {
        // Not under an include path: its own folder is one (as protoc does with -I.).
        const std::filesystem::path p(file);
        schema->tree->MapPath("", p.parent_path().empty() ? "." : p.parent_path().string());
        virtual_name = p.filename().string();
      }
      virtual_names.push_back(virtual_name);
    }
    schema->source_db =
        std::make_unique<gp::compiler::SourceTreeDescriptorDatabase>(schema->tree.get(), schema->generated_db.get());
    FileErrors file_errors;
    schema->source_db->RecordErrorsTo(&file_errors);
    schema->pool =
        std::make_unique<gp::DescriptorPool>(schema->source_db.get(), schema->source_db->GetValidationErrorCollector());
    for (size_t i = 0; i < virtual_names.size(); ++i) {
      if (!schema->pool->FindFileByName(virtual_names[i])) {
        error = file_errors.text.empty() ? "'" + options.files[i] + "' does not compile" : file_errors.text;
        return nullptr;
      }
      loaded.push_back(virtual_names[i]);
    }
    schema->source_db->RecordErrorsTo(nullptr);
  }

  const gp::Descriptor* root = schema->pool->FindMessageTypeByName(options.message);
  if (!root) {
    error = "message type '" + options.message + "' is not defined (messages: " + list_messages(*schema->pool, loaded) +
            ")";
    return nullptr;
  }
  if (!schema->build_tables(root)) {
    error = "internal error building decode tables for '" + options.message + "'";
    return nullptr;
  }
  return schema;
}

// ------------------------------------------------------------------ decoding

namespace {

constexpr int kMaxDepth = 100;  // libprotobuf's default recursion limit

struct Occ {
  const uint8_t* ptr;  // LEN / group: the bytes
  uint64_t v;          // varint / fixed value, or LEN length
  uint32_t field;      // index in MsgInfo::fields
  uint32_t seq;        // order on the wire within the message
  uint8_t wire;
};

struct Span {
  const uint8_t* ptr;
  size_t len;
};

struct OneofState {
  int32_t field = -1;  // the member set last
  uint32_t since = 0;  // seq at which it became the member (earlier occurrences were cleared)
};

inline int32_t zigzag32(uint32_t n) { return static_cast<int32_t>((n >> 1) ^ (~(n & 1) + 1)); }
inline int64_t zigzag64(uint64_t n) { return static_cast<int64_t>((n >> 1) ^ (~(n & 1) + 1)); }

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// libprotobuf's varint rules: at most 10 bytes, bits past 64 dropped.
inline bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
  if (p < end && *p < 0x80) [[likely]] {
    out = *p++;
    return true;
  }
  uint64_t result = 0;
  for (int i = 0; i < 10; ++i) {
    if (p >= end) return false;
    const uint8_t b = *p++;
    result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      out = result;
      return true;
    }
  }
  return false;
}

// Tags: at most 5 bytes, wrapping to 32 bits (as libprotobuf reads them).
inline bool read_tag(const uint8_t*& p, const uint8_t* end, uint32_t& out) {
  uint32_t result = 0;
  for (int i = 0; i < 5; ++i) {
    if (p >= end) return false;
    const uint8_t b = *p++;
    result |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      out = result;
      return true;
    }
  }
  return false;
}

// Lengths: at most 5 bytes and below 2^31.
inline bool read_length(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
  uint64_t result = 0;
  for (int i = 0; i < 5; ++i) {
    if (p >= end) return false;
    const uint8_t b = *p++;
    result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      if (result > 0x7fffffff) return false;
      out = result;
      return true;
    }
  }
  return false;
}

class ProtoDecoder final : public SchemaDecoder {
 public:
  explicit ProtoDecoder(std::shared_ptr<const ProtoSchema> schema) : schema_(std::move(schema)) {}

  Status decode(std::span<const uint8_t> in, std::string& out, std::string& error) override {
    base_ = in.data();
    out_.clear();
    error_.clear();
    occ_.clear();
    sorted_.clear();
    starts_.clear();
    oneof_.clear();
    spans_.clear();
    spans_.push_back({in.data(), in.size()});
    if (!message(*schema_->root, 0, 1, 0)) {
      error = "proto: " + error_;
      return Status::bad_record;
    }
    out.swap(out_.str());
    return Status::ok;
  }

 private:
  struct Level {
    size_t occ_base;     // first occurrence in sorted_
    size_t starts_base;  // per field: [starts_[starts_base+i], starts_[starts_base+i+1]) relative to occ_base
    size_t oneof_base;
  };

  size_t at(const uint8_t* p) const { return static_cast<size_t>(p - base_); }

  bool fail(const uint8_t* where, std::string what) {
    error_ = std::move(what);
    if (where) error_ += " at byte " + std::to_string(at(where));
    return false;
  }

  // Skips a group whose start tag (field `number`) was just read; `content_end` is where its
  // end tag starts.
  bool skip_group(const uint8_t*& p, const uint8_t* end, uint32_t number, int depth, const uint8_t*& content_end) {
    if (depth > kMaxDepth) return fail(p, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    while (true) {
      const uint8_t* tag_at = p;
      if (p >= end) return fail(tag_at, "group of field " + std::to_string(number) + " has no end-group tag");
      uint32_t tag;
      if (!read_tag(p, end, tag)) return fail(tag_at, "truncated or overlong tag");
      const uint32_t n = tag >> 3;
      const uint8_t wt = tag & 7;
      if (n == 0) return fail(tag_at, "field number 0");
      switch (wt) {
        case 0: {
          uint64_t v;
          if (!read_varint(p, end, v)) return fail(tag_at, "truncated varint of field " + std::to_string(n));
          break;
        }
        case 1:
          if (end - p < 8) return fail(tag_at, "truncated fixed64 of field " + std::to_string(n));
          p += 8;
          break;
        case 5:
          if (end - p < 4) return fail(tag_at, "truncated fixed32 of field " + std::to_string(n));
          p += 4;
          break;
        case 2: {
          uint64_t len;
          const uint8_t* len_at = p;
          if (!read_length(p, end, len)) return fail(len_at, "bad length of field " + std::to_string(n));
          if (len > static_cast<uint64_t>(end - p))
            return fail(len_at, "length " + std::to_string(len) + " of field " + std::to_string(n) + " exceeds the " +
                                    std::to_string(end - p) + " bytes left");
          p += len;
          break;
        }
        case 3: {
          const uint8_t* inner_end;
          if (!skip_group(p, end, n, depth + 1, inner_end)) return false;
          break;
        }
        case 4:
          if (n != number)
            return fail(tag_at, "end-group tag of field " + std::to_string(n) + " closes the group of field " +
                                    std::to_string(number));
          content_end = tag_at;
          return true;
        default: return fail(tag_at, "invalid wire type " + std::to_string(wt) + " (field " + std::to_string(n) + ")");
      }
    }
  }

  // Reads the fields of one span of a message into occ_.
  bool scan(const MsgInfo& m, const uint8_t* p, const uint8_t* end, size_t oneof_base, uint32_t& seq, int depth) {
    while (p < end) {
      const uint8_t* tag_at = p;
      uint32_t tag;
      if (!read_tag(p, end, tag)) return fail(tag_at, "truncated or overlong tag");
      const uint32_t number = tag >> 3;
      const uint8_t wt = tag & 7;
      if (number == 0) return fail(tag_at, "field number 0");
      Occ o{nullptr, 0, 0, 0, wt};
      const uint8_t* value_at = p;
      switch (wt) {
        case 0:
          if (!read_varint(p, end, o.v))
            return fail(value_at, std::string(p >= end ? "truncated" : "overlong") + " varint of field " +
                                      std::to_string(number));
          break;
        case 1:
          if (end - p < 8) return fail(value_at, "truncated fixed64 of field " + std::to_string(number));
          o.v = load_le64(p);
          p += 8;
          break;
        case 5:
          if (end - p < 4) return fail(value_at, "truncated fixed32 of field " + std::to_string(number));
          o.v = load_le32(p);
          p += 4;
          break;
        case 2: {
          const uint8_t* len_at = p;
          if (!read_length(p, end, o.v)) return fail(len_at, "bad length of field " + std::to_string(number));
          if (o.v > static_cast<uint64_t>(end - p))
            return fail(len_at, "length " + std::to_string(o.v) + " of field " + std::to_string(number) +
                                    " exceeds the " + std::to_string(end - p) + " bytes left");
          o.ptr = p;
          p += o.v;
          break;
        }
        case 3: {
          const uint8_t* content_end;
          o.ptr = p;
          if (!skip_group(p, end, number, depth + 1, content_end)) return false;
          o.v = static_cast<uint64_t>(content_end - o.ptr);
          break;
        }
        case 4: return fail(tag_at, "end-group tag of field " + std::to_string(number) + " outside a group");
        default:
          return fail(tag_at, "invalid wire type " + std::to_string(wt) + " (field " + std::to_string(number) + ")");
      }
      const int idx = m.index_of(number);
      if (idx < 0) continue;  // unknown field
      const FieldInfo& f = m.fields[static_cast<size_t>(idx)];
      if (wt != f.wire && !(wt == 2 && f.packable)) continue;  // wire type mismatch: an unknown field to libprotobuf
      if (f.enm && f.enm->closed && wt == 0 && !f.enm->find(static_cast<int32_t>(o.v))) continue;
      if (f.type == FD::TYPE_STRING && !valid_utf8(reinterpret_cast<const char*>(o.ptr), o.v))
        return fail(o.ptr, "invalid UTF-8 in string field '" + f.name + "'");
      o.field = static_cast<uint32_t>(idx);
      o.seq = seq++;
      if (f.oneof >= 0) {
        OneofState& st = oneof_[oneof_base + static_cast<size_t>(f.oneof)];
        if (st.field != idx) {
          st.field = idx;
          st.since = o.seq;
        }
      }
      occ_.push_back(o);
    }
    return true;
  }

  // Decodes the message made of spans_[span_begin, span_end) (several spans merge, as on the
  // wire) and writes it as JSON.
  bool message(const MsgInfo& m, size_t span_begin, size_t span_end, int depth) {
    if (depth > kMaxDepth) return fail(nullptr, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    Level lv;
    const size_t scan_base = occ_.size();
    lv.oneof_base = oneof_.size();
    oneof_.resize(lv.oneof_base + static_cast<size_t>(m.oneofs));
    uint32_t seq = 0;
    for (size_t s = span_begin; s < span_end; ++s) {
      const Span sp = spans_[s];
      if (!scan(m, sp.ptr, sp.ptr + sp.len, lv.oneof_base, seq, depth)) return false;
    }
    // Stable counting sort of the occurrences by field: each field's occurrences in wire order.
    const size_t n = occ_.size() - scan_base;
    const size_t nf = m.fields.size();
    lv.starts_base = starts_.size();
    starts_.resize(lv.starts_base + nf + 1, 0);
    for (size_t i = 0; i < n; ++i) ++starts_[lv.starts_base + occ_[scan_base + i].field + 1];
    for (size_t f = 0; f < nf; ++f) starts_[lv.starts_base + f + 1] += starts_[lv.starts_base + f];
    lv.occ_base = sorted_.size();
    sorted_.resize(lv.occ_base + n);
    {
      std::vector<uint32_t>& fill = fill_;
      fill.assign(starts_.begin() + static_cast<std::ptrdiff_t>(lv.starts_base),
                  starts_.begin() + static_cast<std::ptrdiff_t>(lv.starts_base + nf));
      for (size_t i = 0; i < n; ++i) {
        const Occ& o = occ_[scan_base + i];
        sorted_[lv.occ_base + fill[o.field]++] = o;
      }
    }
    occ_.resize(scan_base);

    bool ok;
    if (m.wkt != Wkt::none) {
      ok = well_known(m, lv, depth);
    } else {
      out_.ch('{');
      ok = members(m, lv, depth);
      out_.close('}');
    }
    sorted_.resize(lv.occ_base);
    starts_.resize(lv.starts_base);
    oneof_.resize(lv.oneof_base);
    return ok;
  }

  size_t first_occ(const Level& lv, size_t f) const { return lv.occ_base + starts_[lv.starts_base + f]; }
  size_t end_occ(const Level& lv, size_t f) const { return lv.occ_base + starts_[lv.starts_base + f + 1]; }

  bool members(const MsgInfo& m, const Level& lv, int depth) {
    for (size_t fi = 0; fi < m.fields.size(); ++fi) {
      const FieldInfo& f = m.fields[fi];
      size_t a = first_occ(lv, fi);
      const size_t b = end_occ(lv, fi);
      if (f.oneof >= 0) {
        const OneofState st = oneof_[lv.oneof_base + static_cast<size_t>(f.oneof)];
        if (st.field != static_cast<int32_t>(fi)) {
          // Not the member that is set: libprotobuf still parsed what the wire held.
          if (a != b && (f.type == FD::TYPE_MESSAGE || f.type == FD::TYPE_GROUP) && !validate_only(f, a, b, depth))
            return false;
          continue;
        }
        // Occurrences before it became the member were cleared by the other member.
        size_t first_kept = a;
        while (first_kept < b && sorted_[first_kept].seq < st.since) ++first_kept;
        if (first_kept != a && (f.type == FD::TYPE_MESSAGE || f.type == FD::TYPE_GROUP) &&
            !validate_only(f, a, first_kept, depth))
          return false;
        a = first_kept;
      }
      if (f.required && a == b) return fail(nullptr, "missing required field '" + f.name + "'");
      out_.key(f.key);
      if (!field_value(f, a, b, depth)) return false;
      out_.ch(',');
    }
    return true;
  }

  // Decodes occurrences [a, b) of a message field for their errors only.
  bool validate_only(const FieldInfo& f, size_t a, size_t b, int depth) {
    const size_t mark = out_.str().size();
    const bool ok = message_from(*f.msg, a, b, depth + 1);
    out_.str().resize(mark);
    return ok;
  }

  // The message made of the occurrences [a, b) (merged).
  bool message_from(const MsgInfo& m, size_t a, size_t b, int depth) {
    const size_t sb = spans_.size();
    for (size_t i = a; i < b; ++i) spans_.push_back({sorted_[i].ptr, static_cast<size_t>(sorted_[i].v)});
    const bool ok = message(m, sb, spans_.size(), depth);
    spans_.resize(sb);
    return ok;
  }

  bool field_value(const FieldInfo& f, size_t a, size_t b, int depth) {
    if (f.map) return map_value(f, a, b, depth);
    if (f.repeated) {
      out_.ch('[');
      for (size_t i = a; i < b; ++i) {
        const Occ o = sorted_[i];
        if (f.type == FD::TYPE_MESSAGE || f.type == FD::TYPE_GROUP) {
          if (!message_from(*f.msg, i, i + 1, depth + 1)) return false;
          out_.ch(',');
        } else if (o.wire == 2 && f.packable) {
          if (!packed(f, o)) return false;
        } else {
          scalar(f, o.v, o.ptr);
          out_.ch(',');
        }
      }
      out_.close(']');
      return true;
    }
    if (f.type == FD::TYPE_MESSAGE || f.type == FD::TYPE_GROUP) {
      if (a == b) {
        out_.null();
        return true;
      }
      return message_from(*f.msg, a, b, depth + 1);
    }
    if (a == b) {
      if (f.presence) out_.null();
      else default_value(f);
      return true;
    }
    const Occ o = sorted_[b - 1];  // last one wins
    scalar(f, o.v, o.ptr);
    return true;
  }

  bool packed(const FieldInfo& f, const Occ& o) {
    const uint8_t* p = o.ptr;
    const uint8_t* end = p + o.v;
    switch (f.wire) {
      case 0:
        while (p < end) {
          const uint8_t* at_ = p;
          uint64_t v;
          if (!read_varint(p, end, v)) return fail(at_, "truncated varint in packed field '" + f.name + "'");
          if (f.enm && f.enm->closed && !f.enm->find(static_cast<int32_t>(v))) continue;
          scalar(f, v, nullptr);
          out_.ch(',');
        }
        return true;
      case 1:
        if (o.v % 8) return fail(o.ptr, "packed field '" + f.name + "' is not a whole number of 8-byte values");
        for (; p < end; p += 8) {
          scalar(f, load_le64(p), nullptr);
          out_.ch(',');
        }
        return true;
      case 5:
        if (o.v % 4) return fail(o.ptr, "packed field '" + f.name + "' is not a whole number of 4-byte values");
        for (; p < end; p += 4) {
          scalar(f, load_le32(p), nullptr);
          out_.ch(',');
        }
        return true;
      default: return fail(o.ptr, "field '" + f.name + "' cannot be packed");
    }
  }

  template <typename T>
  void int64_value(T v) {
    if (schema_->options.int64_as_string) out_.quoted_integer(v);
    else out_.integer(v);
  }

  void enum_value(const EnumInfo& e, int32_t v) {
    if (e.null_value) return out_.null();
    if (const std::string* name = e.find(v)) out_.raw(*name);
    else out_.integer(v);
  }

  // One scalar value; `ptr` + `v` (length) for strings and bytes.
  void scalar(const FieldInfo& f, uint64_t v, const uint8_t* ptr) {
    switch (f.type) {
      case FD::TYPE_INT32:
      case FD::TYPE_SFIXED32: return out_.integer(static_cast<int32_t>(static_cast<uint32_t>(v)));
      case FD::TYPE_UINT32:
      case FD::TYPE_FIXED32: return out_.integer(static_cast<uint32_t>(v));
      case FD::TYPE_SINT32: return out_.integer(zigzag32(static_cast<uint32_t>(v)));
      case FD::TYPE_INT64:
      case FD::TYPE_SFIXED64: return int64_value(static_cast<int64_t>(v));
      case FD::TYPE_UINT64:
      case FD::TYPE_FIXED64: return int64_value(v);
      case FD::TYPE_SINT64: return int64_value(zigzag64(v));
      case FD::TYPE_BOOL: return out_.boolean(v != 0);
      case FD::TYPE_FLOAT: return out_.real(std::bit_cast<float>(static_cast<uint32_t>(v)));
      case FD::TYPE_DOUBLE: return out_.real(std::bit_cast<double>(v));
      case FD::TYPE_ENUM: return enum_value(*f.enm, static_cast<int32_t>(v));
      case FD::TYPE_STRING: return out_.string({reinterpret_cast<const char*>(ptr), static_cast<size_t>(v)});
      case FD::TYPE_BYTES: return out_.quoted_base64(ptr, static_cast<size_t>(v));
      case FD::TYPE_MESSAGE:
      case FD::TYPE_GROUP: return out_.null();  // not a scalar; never reached
    }
  }

  void default_value(const FieldInfo& f) {
    switch (f.type) {
      case FD::TYPE_STRING:
      case FD::TYPE_BYTES: return out_.raw("\"\"");
      case FD::TYPE_BOOL: return out_.boolean(false);
      case FD::TYPE_ENUM: return enum_value(*f.enm, 0);
      case FD::TYPE_INT64:
      case FD::TYPE_SFIXED64:
      case FD::TYPE_SINT64:
      case FD::TYPE_UINT64:
      case FD::TYPE_FIXED64: return int64_value(0);
      default: return out_.integer(0);
    }
  }

  // A map key as a JSON member name: strings as they are, numbers and booleans as text.
  void map_key(const FieldInfo& k, const Occ* o) {
    out_.ch('"');
    const uint64_t v = o ? o->v : 0;
    switch (k.type) {
      case FD::TYPE_STRING:
        if (o) out_.escaped({reinterpret_cast<const char*>(o->ptr), static_cast<size_t>(o->v)});
        break;
      case FD::TYPE_BOOL: out_.boolean(v != 0); break;
      case FD::TYPE_INT32:
      case FD::TYPE_SFIXED32: out_.integer(static_cast<int32_t>(static_cast<uint32_t>(v))); break;
      case FD::TYPE_UINT32:
      case FD::TYPE_FIXED32: out_.integer(static_cast<uint32_t>(v)); break;
      case FD::TYPE_SINT32: out_.integer(zigzag32(static_cast<uint32_t>(v))); break;
      case FD::TYPE_INT64:
      case FD::TYPE_SFIXED64: out_.integer(static_cast<int64_t>(v)); break;
      case FD::TYPE_SINT64: out_.integer(zigzag64(v)); break;
      default: out_.integer(v); break;  // uint64, fixed64
    }
    out_.raw("\":");
  }

  bool map_value(const FieldInfo& f, size_t a, size_t b, int depth) {
    out_.ch('{');
    struct Piece {
      size_t begin, key_end, end;
    };
    std::vector<Piece> pieces;
    if (b - a > 1) pieces.reserve(b - a);
    const MsgInfo& entry = *f.msg;
    for (size_t i = a; i < b; ++i) {
      const Occ o = sorted_[i];
      if (depth + 1 > kMaxDepth) return fail(nullptr, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      // Scan the entry like a message, then write "key":value.
      Level lv;
      const size_t scan_base = occ_.size();
      lv.oneof_base = oneof_.size();
      uint32_t seq = 0;
      if (!scan(entry, o.ptr, o.ptr + o.v, lv.oneof_base, seq, depth + 1)) return false;
      const size_t n = occ_.size() - scan_base;
      lv.starts_base = starts_.size();
      starts_.resize(lv.starts_base + 3, 0);
      lv.occ_base = sorted_.size();
      sorted_.resize(lv.occ_base + n);
      size_t nk = 0;
      for (size_t j = 0; j < n; ++j) nk += occ_[scan_base + j].field == 0;
      starts_[lv.starts_base + 1] = static_cast<uint32_t>(nk);
      starts_[lv.starts_base + 2] = static_cast<uint32_t>(n);
      size_t ki = 0, vi = nk;
      for (size_t j = 0; j < n; ++j) {
        const Occ& e = occ_[scan_base + j];
        sorted_[lv.occ_base + (e.field == 0 ? ki++ : vi++)] = e;
      }
      occ_.resize(scan_base);
      const size_t piece_begin = out_.str().size();
      const Occ* key = nk ? &sorted_[lv.occ_base + nk - 1] : nullptr;
      const Occ key_copy = key ? *key : Occ{};
      map_key(entry.fields[0], key ? &key_copy : nullptr);
      const size_t key_end = out_.str().size();
      bool ok = field_value(entry.fields[1], first_occ(lv, 1), end_occ(lv, 1), depth + 1);
      sorted_.resize(lv.occ_base);
      starts_.resize(lv.starts_base);
      if (!ok) return false;
      out_.ch(',');
      if (b - a > 1) pieces.push_back({piece_begin, key_end, out_.str().size()});
    }
    if (pieces.size() > 1) dedupe_map(pieces);
    out_.close('}');
    return true;
  }

  // A key given twice in one map: the last entry wins (as in libprotobuf), in its place.
  template <typename Piece>
  void dedupe_map(const std::vector<Piece>& pieces) {
    std::string& s = out_.str();
    std::unordered_map<std::string_view, size_t> last;
    for (size_t i = 0; i < pieces.size(); ++i)
      last[std::string_view(s).substr(pieces[i].begin, pieces[i].key_end - pieces[i].begin)] = i;
    if (last.size() == pieces.size()) return;
    std::string kept;
    for (size_t i = 0; i < pieces.size(); ++i) {
      auto k = std::string_view(s).substr(pieces[i].begin, pieces[i].key_end - pieces[i].begin);
      if (last[k] == i) kept.append(s, pieces[i].begin, pieces[i].end - pieces[i].begin);
    }
    s.resize(pieces.front().begin);
    s += kept;
  }

  // ---- well-known types

  const Occ* last(const Level& lv, size_t f) const {
    const size_t a = first_occ(lv, f), b = end_occ(lv, f);
    return a == b ? nullptr : &sorted_[b - 1];
  }

  bool well_known(const MsgInfo& m, const Level& lv, int depth) {
    switch (m.wkt) {
      case Wkt::timestamp: {
        const Occ* s = last(lv, 0);
        const Occ* n = last(lv, 1);
        const int64_t seconds = s ? static_cast<int64_t>(s->v) : 0;
        const int32_t nanos = n ? static_cast<int32_t>(static_cast<uint32_t>(n->v)) : 0;
        if (nanos < 0 || nanos > 999999999)
          return fail(nullptr, "Timestamp nanos " + std::to_string(nanos) + " out of range 0..999999999");
        out_.ch('"');
        if (!format_timestamp(seconds, static_cast<uint32_t>(nanos),
                              canonical_fraction_digits(static_cast<uint32_t>(nanos)), true, out_.str()))
          return fail(nullptr, "Timestamp seconds " + std::to_string(seconds) + " outside years 0001..9999");
        out_.ch('"');
        return true;
      }
      case Wkt::duration: {
        const Occ* s = last(lv, 0);
        const Occ* n = last(lv, 1);
        const int64_t seconds = s ? static_cast<int64_t>(s->v) : 0;
        const int32_t nanos = n ? static_cast<int32_t>(static_cast<uint32_t>(n->v)) : 0;
        if (seconds < -315576000000 || seconds > 315576000000 || nanos < -999999999 || nanos > 999999999 ||
            (seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0))
          return fail(nullptr,
                      "Duration " + std::to_string(seconds) + "s " + std::to_string(nanos) + "ns out of range");
        out_.ch('"');
        if (seconds < 0 || nanos < 0) out_.ch('-');
        out_.integer(seconds < 0 ? -static_cast<uint64_t>(seconds) : static_cast<uint64_t>(seconds));
        const uint32_t abs_nanos = static_cast<uint32_t>(nanos < 0 ? -nanos : nanos);
        if (const int digits = canonical_fraction_digits(abs_nanos)) {
          std::string frac = std::to_string(abs_nanos);
          frac.insert(0, 9 - frac.size(), '0');
          out_.ch('.');
          out_.raw(std::string_view(frac).substr(0, static_cast<size_t>(digits)));
        }
        out_.raw("s\"");
        return true;
      }
      case Wkt::wrapper: return field_value(m.fields[0], first_occ(lv, 0), end_occ(lv, 0), depth);
      case Wkt::struct_: return field_value(m.fields[0], first_occ(lv, 0), end_occ(lv, 0), depth);
      case Wkt::list_value: return field_value(m.fields[0], first_occ(lv, 0), end_occ(lv, 0), depth);
      case Wkt::empty: out_.raw("{}"); return true;
      case Wkt::value: {
        // oneof kind: the member set last; none set is null. Members set before it were parsed
        // (and checked) by libprotobuf too: check them first, then write the one that counts.
        const OneofState st = m.oneofs ? oneof_[lv.oneof_base] : OneofState{};
        size_t active_from = 0, active_to = 0;
        for (size_t fi = 0; fi < m.fields.size(); ++fi) {
          const FieldInfo& f = m.fields[fi];
          const size_t a = first_occ(lv, fi), b = end_occ(lv, fi);
          size_t kept = a;
          if (static_cast<int32_t>(fi) == st.field) {
            while (kept < b && sorted_[kept].seq < st.since) ++kept;
            active_from = kept;
            active_to = b;
          } else {
            kept = b;
          }
          if (kept != a && f.type == FD::TYPE_MESSAGE && !validate_only(f, a, kept, depth)) return false;
        }
        if (st.field < 0) {
          out_.null();
          return true;
        }
        return field_value(m.fields[static_cast<size_t>(st.field)], active_from, active_to, depth);
      }
      case Wkt::field_mask: {
        out_.ch('"');
        const size_t a = first_occ(lv, 0), b = end_occ(lv, 0);
        for (size_t i = a; i < b; ++i) {
          if (i != a) out_.ch(',');
          std::string_view path(reinterpret_cast<const char*>(sorted_[i].ptr), static_cast<size_t>(sorted_[i].v));
          if (!schema_->options.json_names) {
            out_.escaped(path);
            continue;
          }
          std::string camel;
          bool up = false;
          for (char c : path) {
            if (c == '_') up = true;
            else {
              camel.push_back(up && c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
              up = false;
            }
          }
          out_.escaped(camel);
        }
        out_.ch('"');
        return true;
      }
      case Wkt::any: return any(lv, depth);
      case Wkt::none: break;
    }
    return false;
  }

  bool any(const Level& lv, int depth) {
    const Occ* url = last(lv, 0);
    const Occ* value = last(lv, 1);
    std::string_view type_url = url ? std::string_view(reinterpret_cast<const char*>(url->ptr), url->v) : "";
    const uint8_t* vptr = value ? value->ptr : nullptr;
    const size_t vlen = value ? static_cast<size_t>(value->v) : 0;
    if (type_url.empty() && vlen == 0) {
      out_.raw("{}");
      return true;
    }
    out_.raw("{\"@type\":");
    out_.string(type_url);
    out_.ch(',');
    const std::string name(type_url.substr(type_url.rfind('/') + 1));
    auto it = schema_->by_name.find(name);
    if (it == schema_->by_name.end()) {
      out_.raw("\"value\":");
      out_.quoted_base64(vptr, vlen);
      out_.ch('}');
      return true;
    }
    const MsgInfo& packed_type = *it->second;
    const size_t sb = spans_.size();
    spans_.push_back({vptr, vlen});
    bool ok;
    if (packed_type.wkt != Wkt::none) {
      out_.raw("\"value\":");
      ok = message(packed_type, sb, sb + 1, depth + 1);
      out_.ch('}');
    } else {
      // The packed message's members follow "@type" in the same object.
      const size_t mark = out_.str().size();
      ok = message(packed_type, sb, sb + 1, depth + 1);
      if (ok) {
        std::string& s = out_.str();
        s.erase(mark, 1);                                      // its '{'
        if (s[s.size() - 2] == ',') s.erase(s.size() - 2, 1);  // no members: drop the ',' after "@type"
      }
    }
    spans_.resize(sb);
    // libprotobuf does not parse an Any's value while parsing; we do, to write it: say where.
    if (!ok) error_ = "in the value of an Any of type '" + packed_type.full_name + "': " + error_;
    return ok;
  }

  std::shared_ptr<const ProtoSchema> schema_;
  const uint8_t* base_ = nullptr;
  JsonOut out_;
  std::string error_;
  std::vector<Occ> occ_, sorted_;
  std::vector<uint32_t> starts_, fill_;
  std::vector<OneofState> oneof_;
  std::vector<Span> spans_;
};

}  // namespace

std::unique_ptr<SchemaDecoder> make_proto_decoder(std::shared_ptr<const ProtoSchema> schema) {
  return std::make_unique<ProtoDecoder>(std::move(schema));
}

}  // namespace picomq::decoders
