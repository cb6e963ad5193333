#pragma once
// ClickHouse's Native format (`INSERT ... FORMAT Native`), made from the sink's RowBinary rows:
// one block, its columns one after another (ClickHouse docs, "Formats: Native"):
//   varint column count, varint row count, then per column: its name and type as strings
//   (varint length + bytes) and its values — fixed-size values back to back, strings as varint
//   length + bytes, Nullable as a byte per row (1: NULL) before the inner column (a default
//   where NULL), Array as cumulative UInt64 end offsets before the column of all elements.
// RowBinary stays what a segment holds (rows are cut by byte range for a bisection); the block is
// made per request. Pure: no server.
#include <string>
#include <string_view>
#include <vector>

#include "clickhouse/row_binary.h"
#include "picomq/kit/result.hpp"

namespace picomq::clickhouse {

// Why `columns` cannot be sent as Native ("" when they can): LowCardinality is serialised as
// a dictionary in Native, which the sink does not write (its inserts stay RowBinary).
std::string native_unsupported(const std::vector<Column>& columns);

// The `rows` RowBinary rows of `columns` in `row_binary`, as one Native block. Fails on bytes
// that are not `rows` such rows (a bug, not bad input: the sink encoded them).
kit::Result<std::string> native_block(const std::vector<Column>& columns, std::string_view row_binary, size_t rows);

// One column's values, `rows` RowBinary values of `type` back to back, appended to `out` as
// that column's Native data (no name or type). The reason it fails, or "".
std::string append_native_column(const Type& type, std::string_view row_binary, size_t rows, std::string& out);

}  // namespace picomq::clickhouse
