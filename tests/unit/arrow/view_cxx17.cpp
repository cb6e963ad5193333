#include "view_cxx17.h"

#include "picomq/arrow_view.hpp"

static_assert(__cplusplus == 201703L, "this file must be compiled as C++17");

std::string view_cxx17_describe(const ArrowSchema* schema, const ArrowArray* array, const char* column) {
  const picomq::sdk::ArrowBatchView batch(schema, array);
  const picomq::sdk::ColumnView values = batch.column(column);
  std::string out;
  for (size_t row = 0; row < batch.num_rows(); ++row) {
    if (row > 0) out += ',';
    out += values.is_null(row) ? std::string("null") : std::string(values.as_bytes(row).as_string_view());
  }
  return out;
}
