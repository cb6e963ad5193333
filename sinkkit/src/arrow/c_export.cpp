#include "arrow/c_export.h"

#include <memory>

namespace picomq::arrow::detail {
namespace {

// Some consumers refuse a NULL pointer for a mandatory buffer even when it is empty; an empty
// buffer points here instead (aligned for any primitive type).
alignas(64) const uint8_t kEmptyBuffer[64] = {};

struct SchemaDeleter {
  void operator()(ArrowSchema* schema) const {
    if (schema->release != nullptr) schema->release(schema);  // NULL when the consumer moved it
    delete schema;
  }
};
struct ArrayDeleter {
  void operator()(ArrowArray* array) const {
    if (array->release != nullptr) array->release(array);
    delete array;
  }
};

struct SchemaData {
  std::string format;
  std::string name;
  std::string metadata;
  std::vector<std::unique_ptr<ArrowSchema, SchemaDeleter>> children;
  std::vector<ArrowSchema*> child_pointers;
};

struct ArrayData {
  std::vector<Buffer> buffers;
  std::vector<const void*> buffer_pointers;
  std::vector<std::unique_ptr<ArrowArray, ArrayDeleter>> children;
  std::vector<ArrowArray*> child_pointers;
};

// Releasing a node releases its children that were not moved out (the deleters), frees their
// structs, then marks the node released, as the specification requires.
void release_schema(ArrowSchema* schema) {
  delete static_cast<SchemaData*>(schema->private_data);
  schema->private_data = nullptr;
  schema->release = nullptr;
}

void release_array(ArrowArray* array) {
  delete static_cast<ArrayData*>(array->private_data);
  array->private_data = nullptr;
  array->release = nullptr;
}

void export_schema(const BuiltColumn& column, ArrowSchema* out) {
  auto data = std::make_unique<SchemaData>();
  data->format = column.format;
  data->name = column.name;
  data->metadata = column.metadata;
  for (const BuiltColumn& child : column.children) {
    std::unique_ptr<ArrowSchema, SchemaDeleter> exported(new ArrowSchema{});
    export_schema(child, exported.get());
    data->children.push_back(std::move(exported));
    data->child_pointers.push_back(data->children.back().get());
  }
  *out = ArrowSchema{};
  out->format = data->format.c_str();
  out->name = data->name.c_str();
  out->metadata = data->metadata.empty() ? nullptr : data->metadata.data();
  out->flags = column.flags;
  out->n_children = static_cast<int64_t>(data->child_pointers.size());
  out->children = data->child_pointers.empty() ? nullptr : data->child_pointers.data();
  out->dictionary = nullptr;
  out->release = release_schema;
  out->private_data = data.release();
}

void export_array(BuiltColumn&& column, ArrowArray* out) {
  auto data = std::make_unique<ArrayData>();
  data->buffers.reserve(column.buffers.size());
  for (std::optional<Buffer>& buffer : column.buffers) {
    if (!buffer) {
      data->buffer_pointers.push_back(nullptr);  // omitted validity bitmap: no nulls
      continue;
    }
    data->buffers.push_back(std::move(*buffer));
    const Buffer& owned = data->buffers.back();  // its bytes stay put when the vector grows
    data->buffer_pointers.push_back(owned.empty() ? kEmptyBuffer : owned.data());
  }
  for (BuiltColumn& child : column.children) {
    std::unique_ptr<ArrowArray, ArrayDeleter> exported(new ArrowArray{});
    export_array(std::move(child), exported.get());
    data->children.push_back(std::move(exported));
    data->child_pointers.push_back(data->children.back().get());
  }
  *out = ArrowArray{};
  out->length = column.length;
  out->null_count = column.null_count;
  out->offset = 0;
  out->n_buffers = static_cast<int64_t>(data->buffer_pointers.size());
  out->n_children = static_cast<int64_t>(data->child_pointers.size());
  out->buffers = data->buffer_pointers.empty() ? nullptr : data->buffer_pointers.data();
  out->children = data->child_pointers.empty() ? nullptr : data->child_pointers.data();
  out->dictionary = nullptr;
  out->release = release_array;
  out->private_data = data.release();
}

}  // namespace

void export_column(BuiltColumn&& column, ArrowSchema* schema, ArrowArray* array) {
  ArrowSchema exported_schema{};
  export_schema(column, &exported_schema);
  std::unique_ptr<ArrowSchema, void (*)(ArrowSchema*)> schema_guard(&exported_schema, release_schema);
  export_array(std::move(column), array);
  *schema = exported_schema;
  (void)schema_guard.release();  // the caller owns the schema now
}

}  // namespace picomq::arrow::detail
