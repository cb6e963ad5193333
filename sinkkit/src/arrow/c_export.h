#pragma once
// Hands a built column tree over as C Data Interface structs. Every ArrowSchema and ArrowArray
// of the tree (children included) owns its own private data and has its own release callback,
// so a consumer may move any child out and release it independently of its parent.
#include "arrow/array_builder.h"
#include "picomq/arrow_c_data.h"

namespace picomq::arrow::detail {

// Fills *schema and *array from `column`. On an exception neither is touched and nothing leaks.
void export_column(BuiltColumn&& column, ArrowSchema* schema, ArrowArray* array);

}  // namespace picomq::arrow::detail
