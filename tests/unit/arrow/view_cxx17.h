#pragma once
// Built as C++17 (see CMakeLists.txt): proves the view header stays usable by C++17 sinks.
#include <string>

#include "picomq/arrow_c_data.h"

// One column's values as text joined by ',' ("null" for nulls), read through the view.
std::string view_cxx17_describe(const ArrowSchema* schema, const ArrowArray* array, const char* column);
