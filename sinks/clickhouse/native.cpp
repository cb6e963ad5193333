#include "clickhouse/native.h"

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace picomq::clickhouse {
namespace {

struct Truncated : std::runtime_error {
  Truncated() : std::runtime_error("the RowBinary rows end early") {}
};

// Reads RowBinary; throws Truncated past the end.
struct Reader {
  const char* at;
  const char* end;
  std::string_view take(size_t n) {
    if (static_cast<size_t>(end - at) < n) throw Truncated();
    std::string_view bytes(at, n);
    at += n;
    return bytes;
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = static_cast<uint8_t>(take(1)[0]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw Truncated();
  }
};

// One column being built from the rows: read() takes one value of a row, fill() puts the
// default where a Nullable row is NULL, write() appends the column's Native bytes.
class ColumnBuilder {
 public:
  virtual ~ColumnBuilder() = default;
  virtual void read(Reader& in) = 0;
  virtual void fill() = 0;
  virtual void write(std::string& out) const = 0;
};

class FixedColumn final : public ColumnBuilder {
 public:
  explicit FixedColumn(size_t width) : width_(width) {}
  void read(Reader& in) override { data_ += in.take(width_); }
  void fill() override { data_.append(width_, '\0'); }
  void write(std::string& out) const override { out += data_; }

 private:
  size_t width_;
  std::string data_;
};

// Strings are the same bytes in both formats: length + bytes, row after row.
class StringColumn final : public ColumnBuilder {
 public:
  void read(Reader& in) override {
    const char* start = in.at;
    const uint64_t n = in.varint();
    in.take(n);
    data_.append(start, in.at);
  }
  void fill() override { data_ += '\0'; }
  void write(std::string& out) const override { out += data_; }

 private:
  std::string data_;
};

std::unique_ptr<ColumnBuilder> builder_for(const Type& type);

class NullableColumn final : public ColumnBuilder {
 public:
  explicit NullableColumn(const Type& inner) : inner_(builder_for(inner)) {}
  void read(Reader& in) override {
    const char is_null = in.take(1)[0];
    nulls_ += is_null ? '\1' : '\0';
    if (is_null) inner_->fill();
    else inner_->read(in);
  }
  void fill() override {  // Nullable(Nullable) does not exist; kept total
    nulls_ += '\1';
    inner_->fill();
  }
  void write(std::string& out) const override {
    out += nulls_;
    inner_->write(out);
  }

 private:
  std::unique_ptr<ColumnBuilder> inner_;
  std::string nulls_;
};

class ArrayColumn final : public ColumnBuilder {
 public:
  explicit ArrayColumn(const Type& inner) : inner_(builder_for(inner)) {}
  void read(Reader& in) override {
    const uint64_t n = in.varint();
    for (uint64_t i = 0; i < n; ++i) inner_->read(in);
    end_ += n;
    push_end();
  }
  void fill() override { push_end(); }  // an empty array
  void write(std::string& out) const override {
    out += offsets_;
    inner_->write(out);
  }

 private:
  void push_end() {
    for (int i = 0; i < 8; ++i) offsets_ += static_cast<char>((end_ >> (8 * i)) & 0xff);  // UInt64 LE
  }
  std::unique_ptr<ColumnBuilder> inner_;
  uint64_t end_ = 0;
  std::string offsets_;
};

std::unique_ptr<ColumnBuilder> builder_for(const Type& type) {
  switch (type.kind) {
    case Kind::String: return std::make_unique<StringColumn>();
    case Kind::FixedString: return std::make_unique<FixedColumn>(type.size);
    case Kind::Int8:
    case Kind::UInt8:
    case Kind::Bool: return std::make_unique<FixedColumn>(1);
    case Kind::Int16:
    case Kind::UInt16:
    case Kind::Date: return std::make_unique<FixedColumn>(2);
    case Kind::Int32:
    case Kind::UInt32:
    case Kind::Float32:
    case Kind::DateTime: return std::make_unique<FixedColumn>(4);
    case Kind::Int64:
    case Kind::UInt64:
    case Kind::Float64:
    case Kind::DateTime64: return std::make_unique<FixedColumn>(8);
    case Kind::UUID: return std::make_unique<FixedColumn>(16);
    case Kind::Nullable: return std::make_unique<NullableColumn>(*type.inner);
    case Kind::Array: return std::make_unique<ArrayColumn>(*type.inner);
    case Kind::LowCardinality: break;
  }
  throw std::logic_error(type.name() + " has no Native column here");
}

bool has_low_cardinality(const Type& type) {
  if (type.kind == Kind::LowCardinality) return true;
  return type.inner && has_low_cardinality(*type.inner);
}

}  // namespace

std::string native_unsupported(const std::vector<Column>& columns) {
  for (const Column& c : columns)
    if (has_low_cardinality(c.type))
      return "column '" + c.name + "' is " + c.type.name() + " (LowCardinality is a dictionary in Native)";
  return "";
}

kit::Result<std::string> native_block(const std::vector<Column>& columns, std::string_view row_binary, size_t rows) {
  using R = kit::Result<std::string>;
  if (std::string why = native_unsupported(columns); !why.empty()) return R::failure(why);
  std::vector<std::unique_ptr<ColumnBuilder>> builders;
  builders.reserve(columns.size());
  for (const Column& c : columns) builders.push_back(builder_for(c.type));
  Reader in{row_binary.data(), row_binary.data() + row_binary.size()};
  try {
    for (size_t r = 0; r < rows; ++r)
      for (auto& b : builders) b->read(in);
  } catch (const Truncated& e) {
    return R::failure(e.what());
  }
  if (in.at != in.end) return R::failure("bytes left after the last RowBinary row");
  std::string out;
  out.reserve(row_binary.size() + rows * columns.size() + 64 * columns.size());
  append_varint(out, columns.size());
  append_varint(out, rows);
  for (size_t i = 0; i < columns.size(); ++i) {
    append_sized(out, columns[i].name);
    append_sized(out, columns[i].type.name());
    builders[i]->write(out);
  }
  return R::success(std::move(out));
}

std::string append_native_column(const Type& type, std::string_view row_binary, size_t rows, std::string& out) {
  if (has_low_cardinality(type)) return type.name() + " is a dictionary in Native";
  auto builder = builder_for(type);
  Reader in{row_binary.data(), row_binary.data() + row_binary.size()};
  try {
    for (size_t r = 0; r < rows; ++r) builder->read(in);
  } catch (const Truncated& e) {
    return e.what();
  }
  if (in.at != in.end) return "bytes left after the last RowBinary value";
  builder->write(out);
  return {};
}

}  // namespace picomq::clickhouse
