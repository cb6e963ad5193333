#pragma once
// format = "parquet": each object is one Parquet file of its records, columns from the kit's
// Arrow exporter (kit/arrow_export.hpp: the same columns as the Arrow plane, inferred from the object's
// records or declared in parquet_columns), written by the kit's Parquet writer
// (kit::write_parquet, arrow-rs). A Parquet file cannot grow record by record, so an object keeps
// its records (a compact copy: offset, timestamp, key, headers, payload) until it is sealed, and
// the file is made from them then: what the file holds depends on the object's records alone,
// so a replay writes the same bytes under the same key.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "picomq/kit/arrow_export.hpp"
#include "picomq/kit/parquet.hpp"
#include "picomq/sink_abi.h"

namespace picomq::s3 {

class ParquetEncoder {
 public:
  ParquetEncoder(kit::ParquetOptions options, std::optional<std::vector<arrow::DeclaredColumn>> declared,
                 bool include_metadata);

  // The records of `batch` an object's file could not hold (index -> the exporter's reason): a
  // payload that does not convert to a declared column, a field colliding with a metadata column,
  // a header name that is not UTF-8... Throws sdk::FatalError when the batch cannot be exported
  // at all (a declared schema the exporter refuses).
  std::unordered_map<size_t, std::string> refusals(const pmq_batch& batch) const;

  // What an object keeps of a record (appended to `out`), and the schema key objects are cut by
  // (records of another payload format or [[topics]] schema start a new object).
  void append(std::string& out, const pmq_record& record) const;
  static std::string schema_key(const pmq_batch& batch);

  // The Parquet file of `records` records kept by append() in `kept`, of a batch with
  // schema_key() `schema`. Throws std::runtime_error (the writer's failure) or sdk::FatalError (a
  // record the exporter refuses now that it did not refuse in its batch).
  std::string file(std::string_view kept, uint64_t records, const std::string& topic, int32_t partition,
                   const std::string& schema) const;

 private:
  kit::ParquetOptions options_;
  arrow::ExportOptions export_;
};

}  // namespace picomq::s3
