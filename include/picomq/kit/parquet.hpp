#pragma once
// Parquet files from Arrow batches for C++ sinks, by the sinks' one Parquet writer:
// libpicomq_parquet.so (sinkkit/parquet, arrow-rs), loaded on first use from the directory of the
// plugin that uses it (then the loader's search path). It is a heavy artifact of its own
// (`cmake --install build --component parquet`): a light image without it still runs every
// other format, and a sink asked for Parquet says what is missing.
//
//   kit::ParquetOptions o{.codec = kit::ParquetCodec::Zstd};
//   if (auto problem = kit::parquet_available()) ...;        // validate(): the library is there
//   std::string file = kit::write_parquet(o, &schema, &array);  // moves the structs in
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "picomq/arrow_c_data.h"

namespace picomq::kit {

enum class ParquetCodec { None, Snappy, Zstd };

struct ParquetOptions {
  ParquetCodec codec = ParquetCodec::Zstd;
  int level = 0;                          // zstd 1-22; 0: its default
  uint64_t row_group_records = 1u << 20;  // rows per row group at most
  bool dictionary = true;
  bool statistics = true;
};

// "none", "snappy", "zstd".
std::optional<ParquetCodec> parse_parquet_codec(std::string_view name);

// nullopt when the writer library loads (and has this API's major version); else why not, with
// the paths tried and what to install.
std::optional<std::string> parquet_available();

// One Parquet file of `array`'s rows (a struct array). `schema` and `array` are moved in: released
// whatever happens. Throws std::runtime_error with the writer's message (or parquet_available()'s).
std::string write_parquet(const ParquetOptions& options, ArrowSchema* schema, ArrowArray* array);

}  // namespace picomq::kit
