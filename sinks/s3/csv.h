#pragma once
// CSV objects with declared columns (RFC 4180: comma-separated, CRLF-free LF lines, a field in
// double quotes when it holds a comma, a quote, CR or LF, quotes doubled). A column is a
// metadata field (pico_topic, pico_partition, pico_offset, pico_timestamp, pico_key as base64,
// pico_headers as JSON) or a top-level field of the JSON object payload: a string as its text,
// numbers and booleans as their JSON text, objects and arrays as JSON text, null or a missing
// field as an empty cell. A record whose payload is not a JSON object cannot fill columns: it is
// refused (the bad-record policy decides), not dropped. No I/O.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "picomq/sink_abi.h"

namespace picomq::s3 {

class CsvEncoder {
 public:
  explicit CsvEncoder(std::vector<std::string> columns);
  ~CsvEncoder();
  CsvEncoder(CsvEncoder&&) noexcept;
  CsvEncoder& operator=(CsvEncoder&&) noexcept;

  // The header line (with its '\n').
  std::string header() const;
  // Appends record `r` of `batch` as one line (with its '\n'); returns why it cannot instead.
  std::optional<std::string> append(std::string& out, const pmq_batch& batch, const pmq_record& r);

 private:
  struct Parser;
  std::vector<std::string> columns_;
  std::unique_ptr<Parser> parser_;
};

// `field` as one CSV cell (quoted when it must be).
void append_csv_cell(std::string& out, std::string_view field);

}  // namespace picomq::s3
